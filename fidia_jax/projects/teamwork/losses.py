"""TeamWork's training losses: the Gaussian NLL of the masked steps (and plain masked MSE).

Reconstruction from the abstract (see :mod:`fidia_jax.projects.teamwork.model`): the model
predicts a mean and a variance per masked step; the role-free baseline predicts the mean only.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["gaussian_nll", "masked_mse"]


def gaussian_nll(x: jax.Array, mean: jax.Array, var: jax.Array, mask: jax.Array) -> jax.Array:
    """Mean over masked entries of ``0.5 (log var + (x - mean)^2 / var)``.

    Args:
      x, mean, var: ``(B, L, C)`` float (``var > 0``).
      mask: ``(B, L, C)`` bool, True where the step was masked (the entries scored).

    Returns:
      ``()`` float; ``0`` when nothing is masked.
    """
    m = mask.astype(x.dtype)
    nll = 0.5 * (jnp.log(var) + (x - mean) ** 2 / var)
    return jnp.sum(nll * m) / jnp.maximum(jnp.sum(m), 1.0)


def masked_mse(x: jax.Array, mean: jax.Array, mask: jax.Array) -> jax.Array:
    """Mean over masked entries of ``(x - mean)^2`` (the mean-only baseline's loss).

    Args:
      x, mean: ``(B, L, C)`` float.
      mask: ``(B, L, C)`` bool, True where the step was masked.

    Returns:
      ``()`` float; ``0`` when nothing is masked.
    """
    w = mask.astype(x.dtype)
    return jnp.sum((x - mean) ** 2 * w) / jnp.maximum(jnp.sum(w), 1.0)
