"""Dispatching entry point for Attn-QAT (Pallas on GPU, jnp reference elsewhere), and the
``attention_impl`` adapters ``"attn_qat"`` / ``"attn_qat_dropin"`` of the small LLaMA
(training / prefill only: ``kv_lengths`` must be ``None``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from fidia_jax.kernels._dispatch import resolve_backend
from fidia_jax.kernels.attn_qat import pallas as _pallas
from fidia_jax.kernels.attn_qat import reference as _ref

__all__ = ["attn_qat", "attn_qat_attention", "attn_qat_dropin_attention", "pick_block"]


def pick_block(n: int, preferred: int = 64) -> int:
    """Largest of ``preferred, preferred/2, ..., 16`` that divides ``n``.

    Raises:
      ValueError: ``n`` is not a multiple of 16.
    """
    b = preferred
    while b >= 16:
        if n % b == 0:
            return b
        b //= 2
    raise ValueError(f"sequence length {n} must be a multiple of 16 for FP4 attention tiles")


def attn_qat(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    *,
    causal: bool,
    variant: str = "attn_qat",
    block_q: int | None = None,
    block_k: int | None = None,
    scale: float | None = None,
    backend: str = "auto",
    rounding: str = "reciprocal",
    dv_weights: str = "forward",
) -> jax.Array:
    """FP4 attention with the Attn-QAT (or ``"dropin"``) backward; GQA by repeating kv heads.

    Args:
      q: ``(B, T, Hq, D)``; k, v: ``(B, S, Hkv, D)`` with ``Hq % Hkv == 0``, ``D % 16 == 0``,
        ``T`` and ``S`` multiples of 16.
      causal: bottom-right aligned causal mask.
      variant: ``"attn_qat"`` or ``"dropin"``.
      block_q, block_k: tile sizes (default: the largest of 64/32/16 dividing ``T`` for
        ``block_q``, and of 32/16 dividing ``S`` for ``block_k``: 32 is the authors' key tile;
        the key tile changes the output because each ``P`` group is quantised with its tile's
        running max; ``block_q`` only changes the speed).
      scale: softmax scale (default ``D ** -0.5``).
      backend: ``"auto"``, ``"pallas"``, ``"pallas_interpret"`` or ``"reference"``.
      rounding: quantiser rounding, ``"reciprocal"`` (default, the authors') or ``"exact"``.
      dv_weights: ``"forward"`` (default, the authors' forward-consistent dV) or
        ``"requantized"`` (FQ of the normalised ``P``); see
        :func:`fidia_jax.kernels.attn_qat.reference.attn_qat_reference`.

    Returns:
      ``(B, T, Hq, D)`` in ``q.dtype``; differentiable (custom VJP).

    Raises:
      ValueError: incompatible shapes (the message names the batch sizes, head counts or head
        dims that disagree), unknown variant/backend/rounding/dv_weights.
    """
    _ref.check_qkv(q, k, v, where="attn_qat", heads="gqa")
    hq, hkv = q.shape[2], k.shape[2]
    if hq != hkv:
        k = jnp.repeat(k, hq // hkv, axis=2)
        v = jnp.repeat(v, hq // hkv, axis=2)
    bq = block_q or pick_block(q.shape[1])
    bk = block_k or pick_block(k.shape[1], preferred=32)
    be = resolve_backend(backend)
    if be == "reference":
        return _ref.attn_qat_reference(
            q,
            k,
            v,
            causal=causal,
            block_k=bk,
            scale=scale,
            variant=variant,
            rounding=rounding,
            dv_weights=dv_weights,
        )
    return _pallas.attn_qat_pallas(
        q,
        k,
        v,
        causal=causal,
        variant=variant,
        block_sizes=_pallas.BlockSizes(bq, bk),
        scale=scale,
        interpret=be == "pallas_interpret",
        rounding=rounding,
        dv_weights=dv_weights,
    )


def _adapter(variant):
    def fn(q, k, v, *, causal, kv_lengths=None, rng=None):
        del rng
        if kv_lengths is not None:
            raise ValueError(
                f"attention_impl {variant!r} is for training/prefill (kv_lengths=None); "
                "decode with a cache is not supported"
            )
        return attn_qat(q, k, v, causal=causal, variant=variant)

    fn.__name__ = f"{variant}_attention"
    fn.__doc__ = f"``attention_impl`` adapter: FP4 attention, {variant!r} backward."
    return fn


attn_qat_attention = _adapter("attn_qat")
attn_qat_dropin_attention = _adapter("dropin")
