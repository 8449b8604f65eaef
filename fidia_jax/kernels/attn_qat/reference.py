"""Pure-jnp reference of Attn-QAT: FP4 (NVFP4-style) attention with a matched backward.

Forward (what a 4-bit attention kernel computes, emulated by fake quantisation):

* ``Q̂, K̂, V̂ = FQ(Q), FQ(K), FQ(V)``, per token in 16-element groups along the head dim;
* online softmax over key tiles of ``block_k`` keys: with running max ``m``,
  ``P = exp(S - m)`` (unnormalised, in ``[0, 1]``) is fake-quantised per query row in
  16-key groups, ``P̂ = FQ(P)``; the output accumulator uses ``P̂ V̂``;
* the softmax denominator ``ℓ`` uses the high-precision ``P``;
* a second accumulator ``O_hp = P V̂ / ℓ`` (high-precision ``P``) is kept for the backward.

``FQ`` is :func:`fidia_jax.kernels.fake_quant_nvfp4` (E2M1 values, E4M3 scale ``amax / 6``;
``rounding="reciprocal"`` by default, see :mod:`fidia_jax.kernels._fp4`). The key tile is 32 by
default, as in the authors' kernels (``BLOCK_N = 32``); the tile matters because ``P`` is
quantised with the running max of its tile (a tile of 64 moves the output by a few percent).

Backward (``jax.custom_vjp``; ``variant="attn_qat"``): recompute ``P = exp(Q̂ K̂ᵀ·scale - lse)``
from the quantised operands (matching the forward's precision), then

* ``dV = Wᵀ dO`` with the forward's own FP4 weights (``dv_weights="forward"``, default):
  ``W = FQ(exp(S - m_j)) · exp(m_j - lse)``, where ``m_j`` is the running max the forward used
  for key tile ``j`` (saved by the forward), i.e. exactly the matrix the forward multiplied
  ``V̂`` by. This is the authors' "forward-consistent dV" (their torch reference
  ``forward_reference`` differentiates ``V`` through the frozen online quantised weights; their
  Triton ``_attn_bwd_dv_forward_weights`` at 20e4f7d3, used there for non-causal calls on
  SM121). ``dv_weights="requantized"`` is our earlier rule and the authors' legacy Triton
  backward (every other GPU and causal call, and HEAD 2f3d4074): ``dV = FQ(P)ᵀ dO`` on the
  *normalised* ``P``. Its E4M3 group scale rounds to 0 when a 16-key group's largest normalised
  probability is at most ``6·2^-10`` (e.g. uniform attention over 256 or more keys), which
  zeroes ``dV`` there (the authors' kernel comment calls this out);
* ``dP = dO V̂ᵀ``, ``D = rowsum(dO ∘ O_hp)``, ``dS = P ∘ (dP - D)``,
* ``dQ = dS K̂ · scale``, ``dK = dSᵀ Q̂ · scale``;

and straight-through for the three input quantisers. Because ``rowsum(P ∘ dP) =
rowsum(dO ∘ P V̂) = rowsum(dO ∘ O_hp)``, ``rowsum(dS) = 0`` exactly as for the softmax Jacobian;
using the FP4 output ``O`` in ``D`` (as a stock flash backward does) breaks that identity.
``dQ`` and ``dK`` therefore equal the autodiff of the high-precision-``P`` path
``softmax(Q̂ K̂ᵀ·scale) V̂`` (with straight-through quantisers).

``variant="dropin"``: the same FP4 forward with a plain flash-attention backward, as one gets by
dropping an FP4 forward kernel into an existing training stack: ``P`` recomputed from the
*unquantised* ``Q, K`` with the forward's ``lse``, ``dV = Pᵀ dO``, ``D = rowsum(dO ∘ O)`` with
the FP4 output. This pairing is our reconstruction of the paper's "drop-in" baseline.

Checked against the authors' code (fixture ``tests/data/attn_qat/``, from hao-ai-lab/FastVideo
``fastvideo-kernel/tests/qat_forward_reference.py`` at commit 20e4f7d3): ``P`` groups are
quantised with the running max of the tile in which they are produced; the NVFP4 per-tensor
FP32 scale is not used (``use_global_sf_qkv = use_global_sf_p = False`` in their backend).
Their forward sums the denominator from bf16-rounded ``P`` and emits bf16; ours stays in
float32 (a precision difference within the fixture test's stated bound). Their torch reference
has no ``dQ``/``dK`` and no causal mask; our ``dQ``/``dK`` follow their Triton backward's
formulas (``p = exp2(qk·scale - M)``, ``D = rowsum(dO ∘ O_hp)`` with ``use_high_prec_o=True``),
read but not run (no GPU): those are to be checked on a GPU.

Masked slots never contribute (``causal=True``): a key/value that a query may not attend is
never read into that query's output, nor into the gradients (``jnp.where``, not a zero weight).
Non-finite entries of ``Q̂, K̂, V̂`` are replaced by 0 before the products (:func:`safe_operands`),
and an output coordinate whose *visible* value rows hold a non-finite entry is set to NaN
afterwards (:func:`visible_nonfinite`); so a NaN or Inf in a future token's value row leaves the
earlier queries' outputs finite, while a visible one shows as NaN (an Inf becomes NaN too).
Without a mask every slot is visible and the operands are used as they are. A query row with no
visible key (``T > S``, causal) returns zeros.

References:
  Attn-QAT: 4-bit attention quantisation-aware training. ICML 2026. Authors' code:
  hao-ai-lab/FastVideo, ``fastvideo-kernel/python/fastvideo_kernel/triton_kernels/
  attn_qat_train.py``, ``nvfp4_utils.py`` (HEAD 2f3d4074 and 20e4f7d3) and
  ``fastvideo-kernel/tests/qat_forward_reference.py`` (20e4f7d3).
  T. Dao. FlashAttention-2, 2023 (the D = rowsum(dO ∘ O) backward).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from fidia_jax import _checks
from fidia_jax.kernels._fp4 import ROUNDINGS, fake_quant_nvfp4

__all__ = [
    "VARIANTS",
    "DV_WEIGHTS",
    "quantize_qkv",
    "attn_qat_forward_reference",
    "attn_qat_backward_reference",
    "attn_qat_reference",
    "hp_path_reference",
]

VARIANTS: tuple[str, ...] = ("attn_qat", "dropin")
#: ``dV`` rules of the matched backward: the forward's own FP4 weights (default) or FQ of the
#: normalised ``P`` (our earlier rule; the authors' legacy Triton backward).
DV_WEIGHTS: tuple[str, ...] = ("forward", "requantized")
_HI = jax.lax.Precision.HIGHEST


def check_qkv(q, k, v, *, where: str, heads: str = "equal") -> None:
    """Validates ``q (B, T, Hq, D)``, ``k = v (B, S, Hkv, D)``; each mismatch named on its own.

    Args:
      heads: ``"equal"`` (kernels: heads already repeated, ``Hq == Hkv``) or ``"gqa"``
        (``Hq % Hkv == 0``).

    Raises:
      ValueError: wrong ranks, ``v.shape != k.shape``, different batch sizes, head counts (as
        ``heads`` requires) or head dims, or a head dim that is not a multiple of 16.
    """
    if q.ndim != 4 or k.ndim != 4 or v.shape != k.shape:
        raise ValueError(
            f"{where}: expected q (B,T,H,D), k=v (B,S,H,D); got {q.shape}, {k.shape}, {v.shape}"
        )
    _checks.assert_attention_dims(
        q,
        k,
        heads_axis=2,
        where=where,
        equal_heads=heads == "equal",
        hint="repeat the kv heads first (fidia_jax.kernels.attn_qat.attn_qat does it for GQA)",
    )
    d = q.shape[-1]
    if d % 16:
        raise ValueError(f"{where}: head dim {d} must be a multiple of 16 (NVFP4 groups)")


def safe_operands(*xs: jax.Array) -> tuple[jax.Array, ...]:
    """Each array with its non-finite entries replaced by 0 (``jnp.where``)."""
    return tuple(jnp.where(jnp.isfinite(x), x, 0.0) for x in xs)


def visible_nonfinite(vh: jax.Array, t: int, causal: bool) -> jax.Array:
    """``(B, T, H, D)`` bool: output coordinates whose visible value rows hold a non-finite entry.

    Args:
      vh: ``(B, S, H, D)`` (quantised) values; t: number of queries; causal: the mask.
    """
    mask_TxS = _mask(t, vh.shape[1], causal).astype(jnp.float32)
    bad = (~jnp.isfinite(vh)).astype(jnp.float32)
    return jnp.einsum("ts,bshd->bthd", mask_TxS, bad, precision=_HI) > 0


def check_options(rounding: str, dv_weights: str = "forward") -> None:
    """Raises ``ValueError`` for an unknown ``rounding`` or ``dv_weights``."""
    if rounding not in ROUNDINGS:
        raise ValueError(f"unknown rounding {rounding!r}; expected one of {ROUNDINGS}")
    if dv_weights not in DV_WEIGHTS:
        raise ValueError(f"unknown dv_weights {dv_weights!r}; expected one of {DV_WEIGHTS}")


def _validate(q, k, v, block_k, where="attn_qat_reference"):
    check_qkv(q, k, v, where=where)
    if block_k % 16 or k.shape[1] % block_k:
        raise ValueError(
            f"block_k={block_k} must be a multiple of 16 and divide the key length {k.shape[1]}"
        )


def quantize_qkv(q, k, v, rounding: str = "reciprocal"):
    """Per-token NVFP4 fake quantisation of Q, K, V along the head dim (float32 out)."""
    return tuple(
        fake_quant_nvfp4(x.astype(jnp.float32), axis=-1, rounding=rounding) for x in (q, k, v)
    )


def tile_weights(s, maxima, lse, mask, rounding="reciprocal"):
    """The forward's FP4 weights ``W = FQ(exp(S - m_j)) · exp(m_j - lse)`` (``dV = Wᵀ dO``).

    Args:
      s: ``(B, H, T, S)`` scaled scores; maxima: ``(nb, B, H, T)`` running maxima per key tile
        (``-inf`` before a row's first visible key); lse: ``(B, H, T)``; mask: ``(T, S)`` bool.

    Returns:
      ``(B, H, T, S)`` float32 weights (0 at masked slots).
    """
    nb = maxima.shape[0]
    b, h, t, s_len = s.shape
    m_full = jnp.broadcast_to(
        maxima.transpose(1, 2, 3, 0)[..., None], (b, h, t, nb, s_len // nb)
    ).reshape(b, h, t, s_len)
    finite = jnp.isfinite(m_full)
    m_safe = jnp.where(finite, m_full, 0.0)
    p = jnp.where(mask[None, None], jnp.exp(s - m_safe), 0.0)
    lse_b = jnp.broadcast_to(lse[..., None], s.shape)
    ok = finite & jnp.isfinite(lse_b)
    factor = jnp.where(ok, jnp.exp(jnp.where(ok, m_safe - lse_b, 0.0)), 0.0)
    return fake_quant_nvfp4(p, axis=-1, rounding=rounding) * factor


def _mask(t, s, causal):
    if not causal:
        return jnp.ones((t, s), bool)
    return jnp.arange(s)[None, :] <= jnp.arange(t)[:, None] + (s - t)


@functools.partial(
    jax.jit,
    static_argnames=("causal", "block_k", "scale", "quantize_p", "rounding", "return_maxima"),
)
def attn_qat_forward_reference(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    *,
    causal: bool,
    block_k: int = 32,
    scale: float | None = None,
    quantize_p: bool = True,
    rounding: str = "reciprocal",
    return_maxima: bool = False,
):
    """FP4 attention forward with online softmax over key tiles.

    Args:
      q: ``(B, T, H, D)`` float queries; ``D % 16 == 0``.
      k, v: ``(B, S, H, D)`` float keys/values (heads already repeated for GQA);
        ``S % block_k == 0``.
      causal: bottom-right aligned causal mask (``key j <= query i + S - T``).
      block_k: key tile length (multiple of 16); ``P`` is quantised per tile.
      scale: softmax scale (default ``D ** -0.5``).
      quantize_p: quantise ``P`` (``False`` gives ``O == O_hp``).
      rounding: element rounding of every quantiser (``"reciprocal"`` or ``"exact"``).
      return_maxima: also return the running maxima.

    Returns:
      ``(o, o_hp, lse)``: float32 ``(B, T, H, D)`` FP4-``P`` output, float32 high-precision-``P``
      output and float32 ``(B, H, T)`` log-sum-exp of the scaled scores; with
      ``return_maxima`` also ``maxima`` ``(S / block_k, B, H, T)``: the running max after each
      key tile (the one its ``P`` was quantised with; ``-inf`` before a row's first visible key).

    Raises:
      ValueError: bad shapes (see :func:`attn_qat_reference`), unknown ``rounding``.
    """
    _validate(q, k, v, block_k, "attn_qat_forward_reference")
    check_options(rounding)
    b, t, h, d = q.shape
    s_len = k.shape[1]
    scale = d**-0.5 if scale is None else scale
    qh, kh, vh = quantize_qkv(q, k, v, rounding)
    if causal:  # masked slots must not be read: drop non-finite V, re-mark the visible ones
        bad_BxTxHxD = visible_nonfinite(vh, t, causal)
        (vh,) = safe_operands(vh)
    nb = s_len // block_k
    k_blocks = kh.reshape(b, nb, block_k, h, d).transpose(1, 0, 3, 2, 4)  # (nb,B,H,bk,D)
    v_blocks = vh.reshape(b, nb, block_k, h, d).transpose(1, 0, 3, 2, 4)
    mask_blocks = _mask(t, s_len, causal).reshape(t, nb, block_k).transpose(1, 0, 2)
    q_BxHxTxD = qh.transpose(0, 2, 1, 3)

    def step(carry, xs):
        m, ell, acc, acc_hp = carry
        k_j, v_j, mask_j = xs
        s = jnp.einsum("bhtd,bhnd->bhtn", q_BxHxTxD, k_j, precision=_HI) * scale
        s = jnp.where(mask_j[None, None], s, -jnp.inf)
        m_new = jnp.maximum(m, jnp.max(s, axis=-1))
        m_safe = jnp.where(jnp.isfinite(m_new), m_new, 0.0)
        alpha = jnp.exp(jnp.where(jnp.isfinite(m), m, -jnp.inf) - m_safe)
        p = jnp.where(mask_j[None, None], jnp.exp(s - m_safe[..., None]), 0.0)
        p_q = fake_quant_nvfp4(p, axis=-1, rounding=rounding) if quantize_p else p
        ell = alpha * ell + jnp.sum(p, axis=-1)
        acc = alpha[..., None] * acc + jnp.einsum("bhtn,bhnd->bhtd", p_q, v_j, precision=_HI)
        acc_hp = alpha[..., None] * acc_hp + jnp.einsum("bhtn,bhnd->bhtd", p, v_j, precision=_HI)
        return (m_new, ell, acc, acc_hp), m_new

    init = (
        jnp.full((b, h, t), -jnp.inf, jnp.float32),
        jnp.zeros((b, h, t), jnp.float32),
        jnp.zeros((b, h, t, d), jnp.float32),
        jnp.zeros((b, h, t, d), jnp.float32),
    )
    (m, ell, acc, acc_hp), maxima = jax.lax.scan(step, init, (k_blocks, v_blocks, mask_blocks))
    ell_safe = jnp.where(ell > 0, ell, 1.0)
    o = (acc / ell_safe[..., None]).transpose(0, 2, 1, 3)
    o_hp = (acc_hp / ell_safe[..., None]).transpose(0, 2, 1, 3)
    if causal:
        o, o_hp = (jnp.where(bad_BxTxHxD, jnp.nan, x) for x in (o, o_hp))
    lse = jnp.where(ell > 0, m + jnp.log(ell_safe), -jnp.inf)
    if return_maxima:
        return o, o_hp, lse, maxima
    return o, o_hp, lse


@functools.partial(
    jax.jit, static_argnames=("causal", "scale", "variant", "return_ds", "dv_weights", "rounding")
)
def attn_qat_backward_reference(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    o: jax.Array,
    o_hp: jax.Array,
    lse: jax.Array,
    do: jax.Array,
    *,
    causal: bool,
    scale: float | None = None,
    variant: str = "attn_qat",
    return_ds: bool = False,
    maxima: jax.Array | None = None,
    dv_weights: str = "forward",
    rounding: str = "reciprocal",
):
    """Backward of :func:`attn_qat_reference` given the forward's outputs (non-tiled).

    Args:
      q, k, v: the *unquantised* inputs ``(B, T|S, H, D)``.
      o, o_hp, lse: outputs of :func:`attn_qat_forward_reference`.
      do: ``(B, T, H, D)`` cotangent of ``o``.
      causal, scale: as in the forward.
      variant: ``"attn_qat"`` (matched backward) or ``"dropin"`` (plain flash backward),
        see the module docstring. ``"attn_qat_fp4_delta"`` is the matched backward with
        ``D = rowsum(dO ∘ O)`` (FP4 output) instead of ``O_hp``; it exists for the test that
        shows why ``O_hp`` is needed.
      return_ds: also return ``dS`` ``(B, H, T, S)``.
      maxima: ``(S / block_k, B, H, T)`` running maxima of the forward
        (``attn_qat_forward_reference(..., return_maxima=True)``); needed for
        ``dv_weights="forward"`` with the matched variants.
      dv_weights: ``"forward"`` (default: ``dV = Wᵀ dO`` with the forward's FP4 weights, see
        :func:`tile_weights`) or ``"requantized"`` (``dV = FQ(P)ᵀ dO`` on the normalised ``P``).
      rounding: element rounding of the quantisers, as in the forward.

    Returns:
      float32 ``(dq, dk, dv)`` (and ``ds`` if requested).

    Raises:
      ValueError: unknown variant, ``dv_weights`` or ``rounding``; ``maxima`` missing for
        ``dv_weights="forward"``.
    """
    check_options(rounding, dv_weights)
    b, t, h, d = q.shape
    scale = d**-0.5 if scale is None else scale
    if variant == "dropin":
        qx, kx, vx = (x.astype(jnp.float32) for x in (q, k, v))
        o_delta = o
    elif variant in ("attn_qat", "attn_qat_fp4_delta"):
        qx, kx, vx = quantize_qkv(q, k, v, rounding)
        o_delta = o_hp if variant == "attn_qat" else o
    else:
        raise ValueError(f"unknown variant {variant!r}; expected one of {VARIANTS}")
    if causal:  # masked (query, key) pairs are never read: no NaN from a slot a query can't see
        qx, kx, vx = safe_operands(qx, kx, vx)
    do = do.astype(jnp.float32)
    mask_TxS = _mask(t, k.shape[1], causal)
    mask = mask_TxS[None, None]
    s = jnp.einsum("bthd,bshd->bhts", qx, kx, precision=_HI) * scale
    p = jnp.where(mask, jnp.exp(s - jnp.where(jnp.isfinite(lse), lse, 0.0)[..., None]), 0.0)
    if variant == "dropin":
        p_v = p
    elif dv_weights == "requantized":
        p_v = fake_quant_nvfp4(p, axis=-1, rounding=rounding)
    else:
        if maxima is None:
            raise ValueError(
                'dv_weights="forward" needs the forward\'s maxima (return_maxima=True)'
            )
        p_v = tile_weights(s, maxima, lse, mask_TxS, rounding)
    dv = jnp.einsum("bhts,bthd->bshd", p_v, do, precision=_HI)
    dp = jnp.einsum("bthd,bshd->bhts", do, vx, precision=_HI)
    delta = jnp.sum(do * o_delta, axis=-1).transpose(0, 2, 1)  # (B,H,T)
    ds = p * (dp - delta[..., None])
    dq = jnp.einsum("bhts,bshd->bthd", ds, kx, precision=_HI) * scale
    dk = jnp.einsum("bhts,bthd->bshd", ds, qx, precision=_HI) * scale
    if return_ds:
        return dq, dk, dv, ds
    return dq, dk, dv


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5, 6, 7, 8))
def _attn_qat(q, k, v, causal, block_k, scale, variant, rounding, dv_weights):
    o, _, _ = attn_qat_forward_reference(
        q, k, v, causal=causal, block_k=block_k, scale=scale, rounding=rounding
    )
    return o.astype(q.dtype)


def _attn_qat_fwd(q, k, v, causal, block_k, scale, variant, rounding, dv_weights):
    o, o_hp, lse, maxima = attn_qat_forward_reference(
        q, k, v, causal=causal, block_k=block_k, scale=scale, rounding=rounding, return_maxima=True
    )
    return o.astype(q.dtype), (q, k, v, o, o_hp, lse, maxima)


def _attn_qat_bwd(causal, block_k, scale, variant, rounding, dv_weights, res, do):
    q, k, v, o, o_hp, lse, maxima = res
    dq, dk, dv = attn_qat_backward_reference(
        q,
        k,
        v,
        o,
        o_hp,
        lse,
        do,
        causal=causal,
        scale=scale,
        variant=variant,
        maxima=maxima,
        dv_weights=dv_weights,
        rounding=rounding,
    )
    return dq.astype(q.dtype), dk.astype(k.dtype), dv.astype(v.dtype)


_attn_qat.defvjp(_attn_qat_fwd, _attn_qat_bwd)


def attn_qat_reference(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    *,
    causal: bool,
    block_k: int = 32,
    scale: float | None = None,
    variant: str = "attn_qat",
    rounding: str = "reciprocal",
    dv_weights: str = "forward",
) -> jax.Array:
    """FP4 attention with the Attn-QAT (or drop-in) backward, as a ``jax.custom_vjp``.

    Args:
      q: ``(B, T, H, D)`` float queries, ``D % 16 == 0``.
      k, v: ``(B, S, H, D)`` (heads repeated for GQA by the caller), ``S % block_k == 0``.
      causal: bottom-right aligned causal mask.
      block_k: key tile of the online softmax (multiple of 16; default 32 as the authors').
      scale: softmax scale (default ``D ** -0.5``).
      variant: ``"attn_qat"`` or ``"dropin"``.
      rounding: quantiser element rounding, ``"reciprocal"`` (default, the authors':
        ``x * float32(1/scale)``) or ``"exact"`` (our earlier choice: the exact quotient).
      dv_weights: ``"forward"`` (default, the forward's own FP4 weights; the authors'
        forward-consistent dV) or ``"requantized"`` (FQ of the normalised ``P``; our earlier
        rule and the authors' legacy Triton backward, which zeroes dV for groups of small
        probabilities). Ignored by ``variant="dropin"``.

    Returns:
      ``(B, T, H, D)`` in ``q.dtype``.

    Raises:
      ValueError: bad shapes, ``D`` or ``block_k`` not multiples of 16, ``block_k`` not dividing
        ``S``, unknown variant, rounding or dv_weights.
    """
    _validate(q, k, v, block_k)
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; expected one of {VARIANTS}")
    check_options(rounding, dv_weights)
    return _attn_qat(q, k, v, causal, block_k, scale, variant, rounding, dv_weights)


@functools.partial(jax.jit, static_argnames=("causal", "scale", "rounding"))
def hp_path_reference(
    q, k, v, *, causal: bool, scale: float | None = None, rounding: str = "reciprocal"
) -> jax.Array:
    """``softmax(Q̂ K̂ᵀ·scale) V̂`` with straight-through quantisers, differentiated by autodiff.

    The Attn-QAT ``dQ``/``dK`` equal this function's gradients (tested).
    """
    d = q.shape[-1]
    scale = d**-0.5 if scale is None else scale

    def ste(x):
        x = x.astype(jnp.float32)
        return x + jax.lax.stop_gradient(fake_quant_nvfp4(x, axis=-1, rounding=rounding) - x)

    qx, kx, vx = ste(q), ste(k), ste(v)
    if causal:
        bad = visible_nonfinite(vx, q.shape[1], causal)
        qx, kx, vx = safe_operands(qx, kx, vx)
    s = jnp.einsum("bthd,bshd->bhts", qx, kx, precision=_HI) * scale
    s = jnp.where(_mask(q.shape[1], k.shape[1], causal)[None, None], s, -jnp.inf)
    p = jax.nn.softmax(s, axis=-1)
    o = jnp.einsum("bhts,bshd->bthd", p, vx, precision=_HI)
    return jnp.where(bad, jnp.nan, o) if causal else o
