"""Pallas kernels for Attn-QAT: FP4 forward, D preprocessing, dK/dV and dQ backward passes.

Same semantics as :mod:`fidia_jax.kernels.attn_qat.reference` (see its docstring):

* forward (grid ``(B, H, T / block_q)``): online softmax over key tiles of ``block_k``; ``P``
  fake-quantised per query row in 16-key groups; denominator from the high-precision ``P``;
  writes ``O`` (FP4 ``P``), ``O_hp``, ``lse`` and the running max after each key tile
  (``(B, H, S / block_k, T)``, the authors' saved "dV statistics");
* ``D`` preprocessing (grid ``(B, H, T / block_q)``): ``D = rowsum(dO ∘ O_hp)`` (Attn-QAT) or
  ``rowsum(dO ∘ O)`` (drop-in);
* dK/dV (grid ``(B, H, S / block_k)``, loop over query tiles) and dQ (grid
  ``(B, H, T / block_q)``, loop over key tiles), FlashAttention-2 style, recomputing ``P`` from
  the (quantised, for Attn-QAT) ``Q, K`` and ``lse``; for Attn-QAT ``dV`` uses the forward's own
  FP4 weights ``FQ(exp(S - m_j))·exp(m_j - lse)`` (``dv_weights="forward"``, default; the dK/dV
  kernel's key tile is the forward's tile ``j``) or ``FQ(P)`` of the normalised ``P``
  (``dv_weights="requantized"``).

Q, K, V are fake-quantised by a jnp pass before the kernels (one elementwise pass; a fused
kernel would quantise on load). Causal masking is applied elementwise on every tile (fully
masked tiles are not skipped yet). Tested in Pallas interpret mode on CPU; the
kernels lower through Pallas' Triton backend for CUDA (``tests/kernels/test_triton_lowering.py``,
on CPU). On one H200 the forward ran (two orders of magnitude slower than bf16 cuDNN) and the
backward's compile outlasted the time available (``docs/benchmarks.md``). ``api.py`` keeps the
reference as the CPU default.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from fidia_jax.kernels._dispatch import triton_params
from fidia_jax.kernels._fp4 import fake_quant_nvfp4
from fidia_jax.kernels.attn_qat.reference import (
    VARIANTS,
    check_options,
    check_qkv,
    quantize_qkv,
    safe_operands,
    visible_nonfinite,
)

__all__ = ["BlockSizes", "attn_qat_pallas", "attn_qat_forward_pallas"]

_HI = jax.lax.Precision.HIGHEST


@dataclasses.dataclass(frozen=True)
class BlockSizes:
    """Tile sizes of the Attn-QAT kernels.

    Attributes:
      block_q: query rows per program (multiple of 16).
      block_k: keys per inner tile (multiple of 16: P is quantised in 16-key groups). Default 32,
        the authors' ``BLOCK_N``: it sets which running max each ``P`` group is quantised with,
        so it changes the output (not only the speed).
    """

    block_q: int = 64
    block_k: int = 32

    def __post_init__(self):
        for name in ("block_q", "block_k"):
            val = getattr(self, name)
            if val < 16 or val % 16:
                raise ValueError(f"{name} must be a positive multiple of 16, got {val}")


def _iota(n):
    return jax.lax.broadcasted_iota(jnp.int32, (n,), 0)


def _fwd_kernel(
    q_ref,
    k_ref,
    v_ref,
    o_ref,
    ohp_ref,
    lse_ref,
    mx_ref,
    *,
    block_k,
    scale,
    causal,
    offset,
    quantize_p,
    rounding,
):
    i = pl.program_id(2)
    q = q_ref[0, :, 0, :].astype(jnp.float32)
    bq, d = q.shape
    q_pos = i * bq + _iota(bq) + offset
    nk = k_ref.shape[1] // block_k

    def body(j, carry):
        m, ell, acc, acc_hp = carry
        k = k_ref[0, pl.ds(j * block_k, block_k), 0, :].astype(jnp.float32)
        v = v_ref[0, pl.ds(j * block_k, block_k), 0, :].astype(jnp.float32)
        s = jnp.dot(q, k.T, precision=_HI) * scale
        if causal:
            mask = (j * block_k + _iota(block_k))[None, :] <= q_pos[:, None]
        else:
            mask = jnp.ones((bq, block_k), bool)
        s = jnp.where(mask, s, -jnp.inf)
        m_new = jnp.maximum(m, jnp.max(s, axis=-1))
        m_safe = jnp.where(jnp.isfinite(m_new), m_new, 0.0)
        alpha = jnp.exp(jnp.where(jnp.isfinite(m), m, -jnp.inf) - m_safe)
        p = jnp.where(mask, jnp.exp(s - m_safe[:, None]), 0.0)
        p_q = fake_quant_nvfp4(p, axis=-1, rounding=rounding) if quantize_p else p
        ell = alpha * ell + jnp.sum(p, axis=-1)
        acc = alpha[:, None] * acc + jnp.dot(p_q, v, precision=_HI)
        acc_hp = alpha[:, None] * acc_hp + jnp.dot(p, v, precision=_HI)
        mx_ref[0, 0, j, :] = m_new
        return m_new, ell, acc, acc_hp

    init = (
        jnp.full((bq,), -jnp.inf, jnp.float32),
        jnp.zeros((bq,), jnp.float32),
        jnp.zeros((bq, d), jnp.float32),
        jnp.zeros((bq, d), jnp.float32),
    )
    m, ell, acc, acc_hp = jax.lax.fori_loop(0, nk, body, init)
    ell_safe = jnp.where(ell > 0, ell, 1.0)
    o_ref[0, :, 0, :] = acc / ell_safe[:, None]
    ohp_ref[0, :, 0, :] = acc_hp / ell_safe[:, None]
    lse_ref[0, 0, :] = jnp.where(ell > 0, m + jnp.log(ell_safe), -jnp.inf)


def attn_qat_forward_pallas(
    qh,
    kh,
    vh,
    *,
    causal,
    block_sizes: BlockSizes,
    scale,
    interpret,
    quantize_p=True,
    rounding="reciprocal",
    return_maxima=False,
):
    """Forward kernel on already quantised ``qh (B,T,H,D)``, ``kh, vh (B,S,H,D)`` (float32).

    Returns ``(o, o_hp, lse)`` like ``reference.attn_qat_forward_reference`` (and, with
    ``return_maxima``, the running maxima ``(S / block_k, B, H, T)`` in the reference's layout).
    """
    b, t, h, d = qh.shape
    s_len = kh.shape[1]
    bq, bk = block_sizes.block_q, block_sizes.block_k
    nk = s_len // bk
    kernel = functools.partial(
        _fwd_kernel,
        block_k=bk,
        scale=scale,
        causal=causal,
        offset=s_len - t,
        quantize_p=quantize_p,
        rounding=rounding,
    )
    o, o_hp, lse, mx = pl.pallas_call(
        kernel,
        out_shape=(
            jax.ShapeDtypeStruct((b, t, h, d), jnp.float32),
            jax.ShapeDtypeStruct((b, t, h, d), jnp.float32),
            jax.ShapeDtypeStruct((b, h, t), jnp.float32),
            jax.ShapeDtypeStruct((b, h, nk, t), jnp.float32),
        ),
        grid=(b, h, t // bq),
        in_specs=[
            pl.BlockSpec((1, bq, 1, d), lambda i, j, n: (i, n, j, 0)),
            pl.BlockSpec((1, s_len, 1, d), lambda i, j, n: (i, 0, j, 0)),
            pl.BlockSpec((1, s_len, 1, d), lambda i, j, n: (i, 0, j, 0)),
        ],
        out_specs=(
            pl.BlockSpec((1, bq, 1, d), lambda i, j, n: (i, n, j, 0)),
            pl.BlockSpec((1, bq, 1, d), lambda i, j, n: (i, n, j, 0)),
            pl.BlockSpec((1, 1, bq), lambda i, j, n: (i, j, n)),
            pl.BlockSpec((1, 1, nk, bq), lambda i, j, n: (i, j, 0, n)),
        ),
        interpret=interpret,
        compiler_params=triton_params(),
        name="attn_qat_fwd",
    )(qh, kh, vh)
    if return_maxima:
        return o, o_hp, lse, mx.transpose(2, 0, 1, 3)
    return o, o_hp, lse


def _delta_kernel(do_ref, o_ref, delta_ref):
    do = do_ref[0, :, 0, :].astype(jnp.float32)
    o = o_ref[0, :, 0, :].astype(jnp.float32)
    delta_ref[0, 0, :] = jnp.sum(do * o, axis=-1)


def _p_tile(q, k, lse, q_pos, k_pos, scale, causal):
    s = jnp.dot(q, k.T, precision=_HI) * scale
    lse_safe = jnp.where(jnp.isfinite(lse), lse, 0.0)
    p = jnp.exp(s - lse_safe[:, None])
    if causal:
        p = jnp.where(k_pos[None, :] <= q_pos[:, None], p, 0.0)
    return p


def _dkdv_kernel(
    q_ref,
    k_ref,
    v_ref,
    do_ref,
    lse_ref,
    delta_ref,
    mx_ref,
    dk_ref,
    dv_ref,
    *,
    block_q,
    scale,
    causal,
    offset,
    dv_mode,
    rounding,
):
    n = pl.program_id(2)
    k = k_ref[0, :, 0, :].astype(jnp.float32)
    v = v_ref[0, :, 0, :].astype(jnp.float32)
    bk, d = k.shape
    k_pos = n * bk + _iota(bk)
    nq = q_ref.shape[1] // block_q

    def body(j, carry):
        dk, dv = carry
        sl = pl.ds(j * block_q, block_q)
        q = q_ref[0, sl, 0, :].astype(jnp.float32)
        do = do_ref[0, sl, 0, :].astype(jnp.float32)
        lse = lse_ref[0, 0, sl]
        delta = delta_ref[0, 0, sl]
        q_pos = j * block_q + _iota(block_q) + offset
        p = _p_tile(q, k, lse, q_pos, k_pos, scale, causal)
        if dv_mode == "plain":
            p_v = p
        elif dv_mode == "requantized":
            p_v = fake_quant_nvfp4(p, axis=-1, rounding=rounding)
        else:  # the forward's own weights: P of this tile with the forward's running max
            m = mx_ref[0, 0, 0, sl]
            fin = jnp.isfinite(m)
            m_safe = jnp.where(fin, m, 0.0)
            p_f = _p_tile(q, k, m_safe, q_pos, k_pos, scale, causal)
            ok = fin & jnp.isfinite(lse)
            factor = jnp.where(ok, jnp.exp(jnp.where(ok, m_safe - lse, 0.0)), 0.0)
            p_v = fake_quant_nvfp4(p_f, axis=-1, rounding=rounding) * factor[:, None]
        dv = dv + jnp.dot(p_v.T, do, precision=_HI)
        dp = jnp.dot(do, v.T, precision=_HI)
        ds = p * (dp - delta[:, None])
        dk = dk + jnp.dot(ds.T, q, precision=_HI) * scale
        return dk, dv

    zeros = jnp.zeros((bk, d), jnp.float32)
    dk, dv = jax.lax.fori_loop(0, nq, body, (zeros, zeros))
    dk_ref[0, :, 0, :] = dk
    dv_ref[0, :, 0, :] = dv


def _dq_kernel(
    q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dq_ref, *, block_k, scale, causal, offset
):
    i = pl.program_id(2)
    q = q_ref[0, :, 0, :].astype(jnp.float32)
    do = do_ref[0, :, 0, :].astype(jnp.float32)
    lse = lse_ref[0, 0, :]
    delta = delta_ref[0, 0, :]
    bq, d = q.shape
    q_pos = i * bq + _iota(bq) + offset
    nk = k_ref.shape[1] // block_k

    def body(j, dq):
        sl = pl.ds(j * block_k, block_k)
        k = k_ref[0, sl, 0, :].astype(jnp.float32)
        v = v_ref[0, sl, 0, :].astype(jnp.float32)
        p = _p_tile(q, k, lse, q_pos, j * block_k + _iota(block_k), scale, causal)
        ds = p * (jnp.dot(do, v.T, precision=_HI) - delta[:, None])
        return dq + jnp.dot(ds, k, precision=_HI) * scale

    dq_ref[0, :, 0, :] = jax.lax.fori_loop(0, nk, body, jnp.zeros((bq, d), jnp.float32))


def _backward(
    qx, kx, vx, o_delta, lse, mx, do, *, causal, block_sizes, scale, interpret, dv_mode, rounding
):
    b, t, h, d = qx.shape
    s_len = kx.shape[1]
    bq, bk = block_sizes.block_q, block_sizes.block_k
    offset = s_len - t
    row_q = pl.BlockSpec((1, bq, 1, d), lambda i, j, n: (i, n, j, 0))
    full_q = pl.BlockSpec((1, t, 1, d), lambda i, j, n: (i, 0, j, 0))
    full_k = pl.BlockSpec((1, s_len, 1, d), lambda i, j, n: (i, 0, j, 0))
    row_k = pl.BlockSpec((1, bk, 1, d), lambda i, j, n: (i, n, j, 0))
    vec_q = pl.BlockSpec((1, 1, bq), lambda i, j, n: (i, j, n))
    vec_full = pl.BlockSpec((1, 1, t), lambda i, j, n: (i, j, 0))
    mx_tile = pl.BlockSpec((1, 1, 1, t), lambda i, j, n: (i, j, n, 0))
    delta = pl.pallas_call(
        _delta_kernel,
        out_shape=jax.ShapeDtypeStruct((b, h, t), jnp.float32),
        grid=(b, h, t // bq),
        in_specs=[row_q, row_q],
        out_specs=vec_q,
        interpret=interpret,
        compiler_params=triton_params(),
        name="attn_qat_bwd_delta",
    )(do, o_delta)
    dk, dv = pl.pallas_call(
        functools.partial(
            _dkdv_kernel,
            block_q=bq,
            scale=scale,
            causal=causal,
            offset=offset,
            dv_mode=dv_mode,
            rounding=rounding,
        ),
        out_shape=(
            jax.ShapeDtypeStruct((b, s_len, h, d), jnp.float32),
            jax.ShapeDtypeStruct((b, s_len, h, d), jnp.float32),
        ),
        grid=(b, h, s_len // bk),
        in_specs=[full_q, row_k, row_k, full_q, vec_full, vec_full, mx_tile],
        out_specs=(row_k, row_k),
        interpret=interpret,
        compiler_params=triton_params(),
        name="attn_qat_bwd_dkdv",
    )(qx, kx, vx, do, lse, delta, mx)
    dq = pl.pallas_call(
        functools.partial(_dq_kernel, block_k=bk, scale=scale, causal=causal, offset=offset),
        out_shape=jax.ShapeDtypeStruct((b, t, h, d), jnp.float32),
        grid=(b, h, t // bq),
        in_specs=[row_q, full_k, full_k, row_q, vec_q, vec_q],
        out_specs=row_q,
        interpret=interpret,
        compiler_params=triton_params(),
        name="attn_qat_bwd_dq",
    )(qx, kx, vx, do, lse, delta)
    return dq, dk, dv


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5, 6, 7, 8, 9))
def _attn_qat_pallas(q, k, v, causal, variant, block_sizes, scale, interpret, rounding, dv_weights):
    return _fwd(q, k, v, causal, variant, block_sizes, scale, interpret, rounding, dv_weights)[0]


def _fwd(q, k, v, causal, variant, block_sizes, scale, interpret, rounding, dv_weights):
    qh, kh, vh = quantize_qkv(q, k, v, rounding)
    if causal:  # masked slots are never read (as the reference): drop non-finite V, re-mark
        bad = visible_nonfinite(vh, q.shape[1], causal)
        (vh,) = safe_operands(vh)
    o, o_hp, lse, mx = attn_qat_forward_pallas(
        qh,
        kh,
        vh,
        causal=causal,
        block_sizes=block_sizes,
        scale=scale,
        interpret=interpret,
        rounding=rounding,
        return_maxima=True,
    )
    if causal:
        o, o_hp = (jnp.where(bad, jnp.nan, x) for x in (o, o_hp))
    return o.astype(q.dtype), (q, k, v, o, o_hp, lse, mx.transpose(1, 2, 0, 3))


def _bwd(causal, variant, block_sizes, scale, interpret, rounding, dv_weights, res, do):
    q, k, v, o, o_hp, lse, mx = res
    if variant == "attn_qat":
        qx, kx, vx = quantize_qkv(q, k, v, rounding)
        o_delta, dv_mode = o_hp, dv_weights
    else:
        qx, kx, vx = (x.astype(jnp.float32) for x in (q, k, v))
        o_delta, dv_mode = o, "plain"
    if causal:  # masked (query, key) pairs are never read (as the reference)
        qx, kx, vx = safe_operands(qx, kx, vx)
    dq, dk, dv = _backward(
        qx,
        kx,
        vx,
        o_delta,
        lse,
        mx,
        do.astype(jnp.float32),
        causal=causal,
        block_sizes=block_sizes,
        scale=scale,
        interpret=interpret,
        dv_mode=dv_mode,
        rounding=rounding,
    )
    return dq.astype(q.dtype), dk.astype(k.dtype), dv.astype(v.dtype)


_attn_qat_pallas.defvjp(_fwd, _bwd)


@functools.partial(
    jax.jit,
    static_argnames=(
        "causal",
        "variant",
        "block_sizes",
        "scale",
        "interpret",
        "rounding",
        "dv_weights",
    ),
)
def attn_qat_pallas(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    *,
    causal: bool,
    variant: str = "attn_qat",
    block_sizes: BlockSizes = BlockSizes(),
    scale: float | None = None,
    interpret: bool = False,
    rounding: str = "reciprocal",
    dv_weights: str = "forward",
) -> jax.Array:
    """FP4 attention (Pallas forward + Pallas backward) as a ``jax.custom_vjp``.

    Same contract as ``reference.attn_qat_reference`` (``rounding`` and ``dv_weights`` as
    there); ``T % block_q == 0``, ``S % block_k == 0``, ``D % 16 == 0``.

    Raises:
      ValueError: bad shapes (each mismatch named: batch, query/kv head counts, which must be
        equal here, head dim, head dim not a multiple of 16, blocks), unknown variant, rounding
        or dv_weights.
    """
    check_qkv(q, k, v, where="attn_qat_pallas")
    b, t, h, d = q.shape
    if t % block_sizes.block_q or k.shape[1] % block_sizes.block_k:
        raise ValueError(
            f"T={t} and S={k.shape[1]} must be multiples of block_q={block_sizes.block_q} "
            f"and block_k={block_sizes.block_k}"
        )
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; expected one of {VARIANTS}")
    check_options(rounding, dv_weights)
    scale = d**-0.5 if scale is None else scale
    return _attn_qat_pallas(
        q, k, v, causal, variant, block_sizes, scale, interpret, rounding, dv_weights
    )
