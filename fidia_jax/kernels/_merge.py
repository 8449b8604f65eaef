"""The log-sum-exp merge of attention partials computed over disjoint key sets (flash-decoding).

A partial over key set ``K_t`` is ``(m_t, ℓ_t, acc_t)``: the largest logit ``m_t = max_k s_k``,
the shifted mass ``ℓ_t = Σ_k exp(s_k - m_t)`` and either the unnormalised output
``acc_t = Σ_k exp(s_k - m_t) v_k`` or (``normalised``) an estimate of the normalised output
``acc_t ≈ Σ_k exp(s_k - m_t) v_k / ℓ_t``. With ``m* = max_t m_t`` and
``e_t = exp(m_t - m*)`` the softmax output over all keys is

    unnormalised:  Σ_t e_t acc_t       / (Σ_t e_t ℓ_t)
    normalised:    Σ_t e_t ℓ_t acc_t   / (Σ_t e_t ℓ_t · denom_scale)

(Dao et al., "Flash-Decoding for long-context inference", 2023; Milakov & Gimelshein, "Online
normalizer calculation for softmax", 2018). ``denom_scale`` divides the result once more (SANTA's
samples per tile). Used by the SANTA reference and Pallas decoders and by HiST's window union.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["merge_attention_partials"]


def merge_attention_partials(
    m: jax.Array,
    ell: jax.Array,
    acc: jax.Array,
    *,
    axis: int,
    normalised: bool = False,
    denom_scale: float | jax.Array = 1.0,
) -> jax.Array:
    """Softmax attention output over the union of disjoint key sets, from their partials.

    Args:
      m: ``(..., T, ...)`` float32 largest logit of each partial (``-inf``: no key).
      ell: ``m``'s shape: shifted mass ``Σ exp(s - m)`` of each partial (``0``: no key).
      acc: ``m.shape + (D,)``: each partial's output (unnormalised, or normalised, see the
        module).
      axis: the partials' axis of ``m`` (``T``; negative counts from ``m``'s end).
      normalised: ``acc`` holds normalised outputs (weights ``e_t ℓ_t``), not sums (``e_t``).
      denom_scale: a further divisor of the result (``> 0``).

    Returns:
      ``m.shape`` without ``axis``, plus ``(D,)``. A query with no key in any partial gets zeros
      (never NaN); a partial with ``ℓ = 0`` is left out, not multiplied by 0, so a NaN or an
      infinity in its ``acc`` does not reach the result.

    Raises:
      ValueError: ``ell`` or ``acc`` of the wrong shape.

    Example:
      >>> import jax.numpy as jnp
      >>> s, v = jnp.array([0.0, 1.0, 2.0]), jnp.array([[1.0], [2.0], [3.0]])
      >>> m = jnp.array([1.0, 2.0]); ell = jnp.array([jnp.exp(-1.0) + 1, 1.0])
      >>> acc = jnp.stack([jnp.exp(s[:2] - 1) @ v[:2], v[2]])
      >>> out = merge_attention_partials(m, ell, acc, axis=0)
      >>> bool(jnp.allclose(out, jax.nn.softmax(s) @ v))
      True
    """
    if ell.shape != m.shape or acc.shape[:-1] != m.shape:
        raise ValueError(
            f"merge_attention_partials: ell must have m's shape {m.shape} and acc m's shape plus "
            f"(D,), got {ell.shape} and {acc.shape}"
        )
    axis = axis % m.ndim
    m_star = jnp.max(m, axis=axis, keepdims=True)
    m_star = jnp.where(jnp.isfinite(m_star), m_star, 0.0)
    live = ell > 0
    if normalised:  # weights e_t ℓ_t
        w = jnp.where(live, jnp.exp(m - m_star) * ell, 0.0)
        z = jnp.sum(w, axis=axis)
    else:  # weights e_t
        w = jnp.where(live, jnp.exp(m - m_star), 0.0)
        z = jnp.sum(w * ell, axis=axis)
    num = jnp.sum(jnp.where(live[..., None], w[..., None] * acc, 0.0), axis=axis)
    denom = z * denom_scale
    return jnp.where(z[..., None] > 0, num / jnp.where(denom > 0, denom, 1.0)[..., None], 0.0)
