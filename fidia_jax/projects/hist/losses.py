"""HiST's training loss: the mean squared error over the active spots of a padded section."""

from __future__ import annotations

import jax.numpy as jnp

__all__ = ["masked_mse"]


def masked_mse(pred_NxG, target_NxG, mask_N):
    """Mean squared error over the active spots only: ``sum_i m_i |p_i - y_i|^2 / (G sum_i m_i)``.

    Args:
      pred_NxG: ``(n, G)`` float predictions (padding rows may hold anything, even NaN).
      target_NxG: ``(n, G)`` float targets (log1p expression).
      mask_N: ``(n,)`` bool, the active spots.

    Returns:
      ``()`` float, the mean over the active spots and the ``G`` genes; ``0`` when no spot is
      active. Padded or dropped spots (``mask_N == False``) contribute nothing, whatever their
      (possibly non-finite) predictions or targets hold.
    """
    m = jnp.asarray(mask_N, bool)
    diff = jnp.where(m[:, None], pred_NxG - target_NxG, 0.0)
    denom = jnp.maximum(jnp.sum(m.astype(diff.dtype)), 1.0) * pred_NxG.shape[1]
    return jnp.sum(jnp.square(diff)) / denom
