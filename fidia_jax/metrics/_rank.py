"""Effective rank of a representation (Roy & Vetterli, 2007)."""

from __future__ import annotations

import jax.numpy as jnp

from fidia_jax import _checks

__all__ = ["effective_rank"]


def effective_rank(x, *, center: bool = False, eps: float = 1e-12):
    """Effective rank ``exp(H(p))`` with ``p_i = s_i / sum(s)`` over the singular values ``s``.

    It is ``1`` for a rank-one matrix and ``min(N, D)`` when every singular value is equal, and
    it varies continuously in between; a representation that collapses shows a falling effective
    rank long before its numerical rank drops.

    Args:
      x: ``(N, D)`` matrix (rows are samples or tokens), any real dtype; computed in the input's
        precision (pass float64 for the residual-geometry metrics).
      center: subtract the column means first (the rank of the covariance, not of the raw
        second moment).
      eps: singular values are divided by ``max(sum(s), eps)``; zero singular values contribute
        ``0 * log 0 = 0``.

    Returns:
      A scalar in ``[1, min(N, D)]``; ``0`` for an all-zero matrix (no direction at all).

    Raises:
      ValueError: ``x`` is not 2-D, or (concrete input) holds NaN / inf (the SVD of such a
        matrix returned 0.0, a valid-looking rank). Under ``jit`` such input gives NaN.

    References:
      Roy, Vetterli, "The effective rank: a measure of effective dimensionality", EUSIPCO 2007.
    """
    x = jnp.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"effective_rank: x must be 2-D (N, D), got shape {x.shape}")
    x = x.astype(jnp.result_type(x.dtype, jnp.float32))
    finite = jnp.all(jnp.isfinite(x))
    if _checks.is_concrete(finite) and not bool(finite):
        raise ValueError(
            f"effective_rank: x holds {int(jnp.sum(~jnp.isfinite(x)))} non-finite value(s)"
        )
    if center:
        x = x - jnp.mean(x, axis=0, keepdims=True)
    s = jnp.linalg.svd(x, compute_uv=False)
    total = jnp.sum(s)
    p = s / jnp.maximum(total, eps)
    entropy = -jnp.sum(jnp.where(p > 0, p * jnp.log(jnp.where(p > 0, p, 1.0)), 0.0))
    return jnp.where(finite, jnp.where(total > 0, jnp.exp(entropy), 0.0), jnp.nan)
