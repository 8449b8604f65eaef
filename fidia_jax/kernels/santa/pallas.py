"""Pallas kernels: SANTA decode attention and dense flash-decoding (split-K + LSE merge).

One program per (batch row, kv head, key tile): it scores the tile for the ``G`` query heads
that share the kv head, writes the tile max ``m_t``, the tile sum ``ℓ_t`` and a ``(G, D)``
partial (``Σ_r u_r v_r`` for flash-decoding, ``Σ_r c_r v_r`` with the sampled counts for SANTA);
a small jnp pass merges the tiles with the flash-decoding weights (the authors' "finalize"
kernel). The per-tile maths is the same code as the reference (``reference._tile_*``), so the
kernel differs from the reference only in layout, blocking and masking.

Value stage: ``value_stage="gather"`` (default) computes the row index of every sample in the
tile and gathers only those V rows from the tile's block (``v_ref[0, idx, 0, :]``), then adds
them; ``"counts"`` forms ``c @ V_tile`` and so loads every V row of the tile. With Pallas on GPU
(Triton) blocks are not staged, so the gather reads only the sampled rows (where the bandwidth
saving of the authors' CUDA kernel comes from); on TPU the whole block would still be copied to
VMEM. The kernels match the reference in interpret mode on CPU, lower through Pallas' Triton
backend for CUDA (``tests/kernels/test_triton_lowering.py``, on CPU), and compiled, ran and matched
the reference on one H200; there they are correct but far slower than XLA's fused attention
(``docs/benchmarks.md``).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pl_triton

from fidia_jax.kernels._dispatch import triton_params
from fidia_jax.kernels._merge import merge_attention_partials
from fidia_jax.kernels.santa import reference as ref

__all__ = ["BlockSizes", "flash_decode_pallas", "santa_decode_pallas"]


@dataclasses.dataclass(frozen=True)
class BlockSizes:
    """Tile sizes of the decode kernels.

    Attributes:
      block_k: keys per tile (one program per tile); a power of two >= 16 (Triton arrays
        have power-of-two sizes, and ``tl.dot`` operands at least 16 along every axis).
      min_query_rows: the ``G`` query heads of a kv head are padded with zero rows to
        ``max(min_query_rows, next_power_of_two(G))`` so that the score and value dots have at
        least 16 rows (GQA decode has ``G = 4`` for Llama-3-8B); Triton kernels for GQA decode
        pad the same way. Padded rows are masked: they draw no samples and read no value rows.
    """

    block_k: int = 64
    min_query_rows: int = 16

    def __post_init__(self):
        if self.block_k < 16 or self.block_k & (self.block_k - 1):
            raise ValueError(f"block_k must be a power of two >= 16, got {self.block_k}")
        if self.min_query_rows < 1 or self.min_query_rows & (self.min_query_rows - 1):
            raise ValueError(f"min_query_rows must be a power of two, got {self.min_query_rows}")


def _kernel(*refs, block_k, scale, mode, samples_per_tile, num_slots, method, num_rows, interpret):
    if mode == "flash":
        len_ref, q_ref, k_ref, v_ref, m_ref, ell_ref, acc_ref = refs
        unif_ref = None
    else:
        len_ref, q_ref, k_ref, v_ref, unif_ref, m_ref, ell_ref, acc_ref = refs
    t = pl.program_id(2)
    pos = t * block_k + jax.lax.broadcasted_iota(jnp.int32, (block_k,), 0)
    valid = pos < len_ref[0]
    q = q_ref[0, 0].astype(jnp.float32)  # (Gp, D), rows >= num_rows are padding
    k = k_ref[0, :, 0, :].astype(jnp.float32)  # (bk, D)
    m, u, ell = ref.tile_scores(q, k, valid, scale)
    gp = q.shape[0]
    real = jax.lax.broadcasted_iota(jnp.int32, (gp,), 0) < num_rows
    u = jnp.where(real[:, None], u, 0.0)  # padded rows: empty distribution, no samples
    ell = jnp.where(real, ell, 0.0)
    if mode == "santa_gather":
        idx, ok = ref._tile_sample_indices(
            u,
            ell,
            unif_ref[0, 0, 0],
            samples_per_tile=samples_per_tile,
            method=method,
            num_slots=num_slots,
        )
        flat_idx, flat_ok = idx.reshape(-1), ok.reshape(-1)
        if interpret:  # interpret mode has no masked gather; the where below does the masking
            rows = v_ref[0, flat_idx, 0, :]
        else:  # masked load: dropped samples and padded rows read no memory
            rows = pl_triton.load(v_ref.at[0, flat_idx, 0, :], mask=flat_ok[:, None], other=0.0)
        rows = rows.astype(jnp.float32).reshape(gp, num_slots, rows.shape[-1])
        acc = jnp.sum(jnp.where(ok[..., None], rows, 0.0), axis=1)
    else:
        # slots past kv_lengths are removed (where), not weighted by 0: NaN there stays out
        v = jnp.where(valid[:, None], v_ref[0, :, 0, :].astype(jnp.float32), 0.0)
        if mode == "flash":
            w = u
        else:
            w = ref._tile_counts(
                u,
                ell,
                unif_ref[0, 0, 0],
                samples_per_tile=samples_per_tile,
                method=method,
                num_slots=num_slots,
            )
        acc = jnp.dot(w, v, precision=jax.lax.Precision.HIGHEST)
    m_ref[0, 0, 0, :] = m
    ell_ref[0, 0, 0, :] = ell
    acc_ref[0, 0, 0, :, :] = acc


def _run(
    q, k, v, kv_lengths, uniforms, *, mode, block_sizes, scale, samples_per_tile, method, interpret
):
    b, hq, d = q.shape
    _, n, hkv, _ = k.shape
    g = hq // hkv
    block_k = block_sizes.block_k
    gp = max(block_sizes.min_query_rows, pl.next_power_of_2(g))
    num_slots = pl.next_power_of_2(max(samples_per_tile, 1))
    nt = ref.num_tiles(n, block_k)
    pad = nt * block_k - n
    if pad:
        k = jnp.pad(k, ((0, 0), (0, pad), (0, 0), (0, 0)))
        v = jnp.pad(v, ((0, 0), (0, pad), (0, 0), (0, 0)))
    if kv_lengths is None:
        kv_lengths = jnp.full((b,), n, jnp.int32)
    kv_lengths = jnp.asarray(kv_lengths, jnp.int32).reshape(b)
    scale = d**-0.5 if scale is None else scale
    q4 = jnp.pad(q.reshape(b, hkv, g, d), ((0, 0), (0, 0), (0, gp - g), (0, 0)))
    in_specs = [
        pl.BlockSpec((1,), lambda i, j, t: (i,)),
        pl.BlockSpec((1, 1, gp, d), lambda i, j, t: (i, j, 0, 0)),
        pl.BlockSpec((1, block_k, 1, d), lambda i, j, t: (i, t, j, 0)),
        pl.BlockSpec((1, block_k, 1, d), lambda i, j, t: (i, t, j, 0)),
    ]
    args = [kv_lengths, q4, k, v]
    if mode != "flash":
        s = uniforms.shape[-1]
        unif = uniforms.astype(jnp.float32).reshape(b, hkv, g, nt, s).transpose(0, 1, 3, 2, 4)
        # pad query rows to gp and (iid/stratified) the sample axis to a power of two: Triton
        # arrays have power-of-two sizes; the padding slots are masked inside the kernel
        s_pad = 1 if s == 1 else num_slots
        unif = jnp.pad(unif, ((0, 0), (0, 0), (0, 0), (0, gp - g), (0, s_pad - s)))
        s = s_pad
        in_specs.append(pl.BlockSpec((1, 1, 1, gp, s), lambda i, j, t: (i, j, t, 0, 0)))
        args.append(unif)
    out_shape = (
        jax.ShapeDtypeStruct((b, hkv, nt, gp), jnp.float32),
        jax.ShapeDtypeStruct((b, hkv, nt, gp), jnp.float32),
        jax.ShapeDtypeStruct((b, hkv, nt, gp, d), jnp.float32),
    )
    out_specs = (
        pl.BlockSpec((1, 1, 1, gp), lambda i, j, t: (i, j, t, 0)),
        pl.BlockSpec((1, 1, 1, gp), lambda i, j, t: (i, j, t, 0)),
        pl.BlockSpec((1, 1, 1, gp, d), lambda i, j, t: (i, j, t, 0, 0)),
    )
    kernel = functools.partial(
        _kernel,
        block_k=block_k,
        scale=scale,
        mode=mode,
        samples_per_tile=samples_per_tile,
        num_slots=num_slots,
        method=method,
        num_rows=g,
        interpret=bool(interpret),
    )
    m, ell, acc = pl.pallas_call(
        kernel,
        out_shape=out_shape,
        grid=(b, hkv, nt),
        in_specs=in_specs,
        out_specs=out_specs,
        interpret=interpret,
        compiler_params=triton_params(),
        name=f"{mode}_decode",
    )(*args)
    m, ell, acc = m[..., :g], ell[..., :g], acc[..., :g, :]  # drop the padded query rows
    return (
        _merge(
            m,
            ell,
            acc,
            mode="flash" if mode == "flash" else "santa",
            samples_per_tile=samples_per_tile,
        )
        .reshape(b, hq, d)
        .astype(q.dtype)
    )


def _merge(m, ell, acc, *, mode, samples_per_tile):
    """Merges tile partials ``(B, Hkv, T, G[, D])`` over the tile axis (log-sum-exp weights)."""
    if mode == "flash":
        return merge_attention_partials(m, ell, acc, axis=2)
    return merge_attention_partials(
        m, ell, acc, axis=2, normalised=True, denom_scale=samples_per_tile
    )


def flash_decode_pallas(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    kv_lengths: jax.Array | None = None,
    *,
    block_sizes: BlockSizes = BlockSizes(),
    scale: float | None = None,
    interpret: bool = False,
) -> jax.Array:
    """Exact decode attention by flash-decoding (Pallas). Same contract as
    :func:`fidia_jax.kernels.santa.reference.flash_decode_reference`.

    Args:
      q: ``(B, Hq, D)``; k, v: ``(B, N, Hkv, D)``; kv_lengths: ``(B,)`` int32 or ``None``.
      block_sizes: tile sizes; scale: softmax scale (default ``D ** -0.5``).
      interpret: run the kernel in Pallas interpret mode (CPU).

    Returns:
      ``(B, Hq, D)`` in ``q.dtype``.

    Raises:
      ValueError: incompatible shapes; ``kv_lengths`` of the wrong shape or dtype, or (when
        concrete) outside ``[0, N]``.
    """
    ref.check_decode_shapes(q, k, v, where="flash_decode_pallas")
    ref.check_kv_lengths(kv_lengths, k, where="flash_decode_pallas")
    return _flash_decode(
        q, k, v, kv_lengths, block_sizes=block_sizes, scale=scale, interpret=interpret
    )


@functools.partial(jax.jit, static_argnames=("block_sizes", "scale", "interpret"))
def _flash_decode(q, k, v, kv_lengths, *, block_sizes, scale, interpret):
    return _run(
        q,
        k,
        v,
        kv_lengths,
        None,
        mode="flash",
        block_sizes=block_sizes,
        scale=scale,
        samples_per_tile=0,
        method="systematic",
        interpret=interpret,
    )


def santa_decode_pallas(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    uniforms: jax.Array,
    kv_lengths: jax.Array | None = None,
    *,
    samples_per_tile: int,
    method: str = "systematic",
    block_sizes: BlockSizes = BlockSizes(),
    scale: float | None = None,
    interpret: bool = False,
    value_stage: str = "gather",
) -> jax.Array:
    """SANTA decode estimate (Pallas). Same contract as
    :func:`fidia_jax.kernels.santa.reference.santa_decode_reference`, with ``block_k`` taken
    from ``block_sizes``.

    ``value_stage="gather"`` (default) loads only the sampled V rows of each tile (a row gather
    from the tile's block; on GPU the block is not staged, so only those rows are read);
    ``"counts"`` multiplies the count vector with the whole V tile.

    Raises:
      ValueError: incompatible shapes, unknown method or value stage, ``samples_per_tile < 1``,
        wrong uniforms shape (:func:`fidia_jax.kernels.santa.reference.check_santa_args`),
        ``kv_lengths`` of the wrong shape or dtype, or (when concrete) outside ``[0, N]``.
    """
    ref.check_santa_args(
        q,
        k,
        v,
        uniforms,
        samples_per_tile=samples_per_tile,
        method=method,
        block_k=block_sizes.block_k,
        value_stage=value_stage,
        where="santa_decode_pallas",
    )
    ref.check_kv_lengths(kv_lengths, k, where="santa_decode_pallas")
    return _santa_decode(
        q,
        k,
        v,
        uniforms,
        kv_lengths,
        samples_per_tile=samples_per_tile,
        method=method,
        block_sizes=block_sizes,
        scale=scale,
        interpret=interpret,
        value_stage=value_stage,
    )


@functools.partial(
    jax.jit,
    static_argnames=(
        "samples_per_tile",
        "method",
        "block_sizes",
        "scale",
        "interpret",
        "value_stage",
    ),
)
def _santa_decode(
    q,
    k,
    v,
    uniforms,
    kv_lengths,
    *,
    samples_per_tile,
    method,
    block_sizes,
    scale,
    interpret,
    value_stage,
):
    return _run(
        q,
        k,
        v,
        kv_lengths,
        uniforms,
        mode="santa" if value_stage == "counts" else "santa_gather",
        block_sizes=block_sizes,
        scale=scale,
        samples_per_tile=samples_per_tile,
        method=method,
        interpret=interpret,
    )
