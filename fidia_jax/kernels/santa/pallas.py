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
VMEM. These kernels have been run in interpret mode on CPU only; GPU lowering is untested.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from fidia_jax.kernels.santa import reference as ref

__all__ = ["BlockSizes", "flash_decode_pallas", "santa_decode_pallas"]


@dataclasses.dataclass(frozen=True)
class BlockSizes:
    """Tile sizes of the decode kernels.

    Attributes:
      block_k: keys per tile (one program per tile); a multiple of 8, at least 8.
    """

    block_k: int = 64

    def __post_init__(self):
        if self.block_k < 8 or self.block_k % 8:
            raise ValueError(f"block_k must be a positive multiple of 8, got {self.block_k}")


def _kernel(*refs, block_k, scale, mode, samples_per_tile, method):
    if mode == "flash":
        len_ref, q_ref, k_ref, v_ref, m_ref, ell_ref, acc_ref = refs
        unif_ref = None
    else:
        len_ref, q_ref, k_ref, v_ref, unif_ref, m_ref, ell_ref, acc_ref = refs
    t = pl.program_id(2)
    pos = t * block_k + jax.lax.broadcasted_iota(jnp.int32, (block_k,), 0)
    valid = pos < len_ref[0]
    q = q_ref[0, 0].astype(jnp.float32)  # (G, D)
    k = k_ref[0, :, 0, :].astype(jnp.float32)  # (bk, D)
    m, u, ell = ref.tile_scores(q, k, valid, scale)
    if mode == "santa_gather":
        g = q.shape[0]
        unif = unif_ref[0, 0, 0]
        if method == "systematic":
            unif = jnp.broadcast_to(unif, (g, samples_per_tile))
        idx, ok = ref._tile_sample_indices(
            u, ell, unif, samples_per_tile=samples_per_tile, method=method
        )
        # gather only the sampled V rows of the tile (row indices within the block)
        rows = v_ref[0, idx.reshape(-1), 0, :].astype(jnp.float32)
        rows = rows.reshape(g, samples_per_tile, rows.shape[-1])
        acc = jnp.sum(jnp.where(ok[..., None], rows, 0.0), axis=1)
    else:
        v = v_ref[0, :, 0, :].astype(jnp.float32)
        if mode == "flash":
            w = u
        else:
            w = ref._tile_counts(
                u, ell, unif_ref[0, 0, 0], samples_per_tile=samples_per_tile, method=method
            )
        acc = jnp.dot(w, v, precision=jax.lax.Precision.HIGHEST)
    m_ref[0, 0, 0, :] = m
    ell_ref[0, 0, 0, :] = ell
    acc_ref[0, 0, 0, :, :] = acc


def _run(
    q, k, v, kv_lengths, uniforms, *, mode, block_k, scale, samples_per_tile, method, interpret
):
    if q.ndim != 3 or k.ndim != 4 or v.shape != k.shape:
        raise ValueError(
            f"expected q (B,Hq,D), k=v (B,N,Hkv,D); got {q.shape}, {k.shape}, {v.shape}"
        )
    b, hq, d = q.shape
    _, n, hkv, _ = k.shape
    if k.shape[0] != b or k.shape[3] != d or hq % hkv:
        raise ValueError(f"incompatible q {q.shape} and k {k.shape} (need Hq % Hkv == 0)")
    g = hq // hkv
    nt = ref.num_tiles(n, block_k)
    pad = nt * block_k - n
    if pad:
        k = jnp.pad(k, ((0, 0), (0, pad), (0, 0), (0, 0)))
        v = jnp.pad(v, ((0, 0), (0, pad), (0, 0), (0, 0)))
    if kv_lengths is None:
        kv_lengths = jnp.full((b,), n, jnp.int32)
    kv_lengths = jnp.asarray(kv_lengths, jnp.int32).reshape(b)
    scale = d**-0.5 if scale is None else scale
    q4 = q.reshape(b, hkv, g, d)
    in_specs = [
        pl.BlockSpec((1,), lambda i, j, t: (i,)),
        pl.BlockSpec((1, 1, g, d), lambda i, j, t: (i, j, 0, 0)),
        pl.BlockSpec((1, block_k, 1, d), lambda i, j, t: (i, t, j, 0)),
        pl.BlockSpec((1, block_k, 1, d), lambda i, j, t: (i, t, j, 0)),
    ]
    args = [kv_lengths, q4, k, v]
    if mode != "flash":
        s = uniforms.shape[-1]
        unif = uniforms.astype(jnp.float32).reshape(b, hkv, g, nt, s).transpose(0, 1, 3, 2, 4)
        in_specs.append(pl.BlockSpec((1, 1, 1, g, s), lambda i, j, t: (i, j, t, 0, 0)))
        args.append(unif)
    out_shape = (
        jax.ShapeDtypeStruct((b, hkv, nt, g), jnp.float32),
        jax.ShapeDtypeStruct((b, hkv, nt, g), jnp.float32),
        jax.ShapeDtypeStruct((b, hkv, nt, g, d), jnp.float32),
    )
    out_specs = (
        pl.BlockSpec((1, 1, 1, g), lambda i, j, t: (i, j, t, 0)),
        pl.BlockSpec((1, 1, 1, g), lambda i, j, t: (i, j, t, 0)),
        pl.BlockSpec((1, 1, 1, g, d), lambda i, j, t: (i, j, t, 0, 0)),
    )
    kernel = functools.partial(
        _kernel,
        block_k=block_k,
        scale=scale,
        mode=mode,
        samples_per_tile=samples_per_tile,
        method=method,
    )
    m, ell, acc = pl.pallas_call(
        kernel,
        out_shape=out_shape,
        grid=(b, hkv, nt),
        in_specs=in_specs,
        out_specs=out_specs,
        interpret=interpret,
        name=f"{mode}_decode",
    )(*args)
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
    m_star = jnp.max(m, axis=2, keepdims=True)
    m_star = jnp.where(jnp.isfinite(m_star), m_star, 0.0)
    e = jnp.where(ell > 0, jnp.exp(m - m_star), 0.0)
    z = jnp.sum(e * ell, axis=2)
    if mode == "flash":
        num = jnp.sum(e[..., None] * acc, axis=2)
        denom = z
    else:
        num = jnp.sum((e * ell)[..., None] * acc, axis=2)
        denom = z * samples_per_tile
    return jnp.where(z[..., None] > 0, num / jnp.where(denom > 0, denom, 1.0)[..., None], 0.0)


@functools.partial(jax.jit, static_argnames=("block_sizes", "scale", "interpret"))
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
      ValueError: incompatible shapes.
    """
    return _run(
        q,
        k,
        v,
        kv_lengths,
        None,
        mode="flash",
        block_k=block_sizes.block_k,
        scale=scale,
        samples_per_tile=0,
        method="systematic",
        interpret=interpret,
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
      ValueError: incompatible shapes, unknown method, wrong uniforms shape.
    """
    if method not in ref.METHODS:
        raise ValueError(f"unknown sampling method {method!r}; expected one of {ref.METHODS}")
    if value_stage not in ("counts", "gather"):
        raise ValueError(f"value_stage must be 'counts' or 'gather', got {value_stage!r}")
    b, hq, _ = q.shape
    want = ref.uniform_shape(
        b,
        hq,
        k.shape[1],
        block_k=block_sizes.block_k,
        samples_per_tile=samples_per_tile,
        method=method,
    )
    if uniforms.shape != want:
        raise ValueError(f"uniforms must have shape {want}, got {uniforms.shape}")
    return _run(
        q,
        k,
        v,
        kv_lengths,
        uniforms,
        mode="santa" if value_stage == "counts" else "santa_gather",
        block_k=block_sizes.block_k,
        scale=scale,
        samples_per_tile=samples_per_tile,
        method=method,
        interpret=interpret,
    )
