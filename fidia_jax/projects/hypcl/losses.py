"""Class-incremental objectives of the HypCL reconstruction.

* :func:`masked_cross_entropy`: softmax cross-entropy over the classes seen so far only (the
  logits of classes not yet met are excluded from the normaliser).
* :func:`embedding_distillation`: mean squared distance between the current adapter's embedding
  and the previous task's (frozen) adapter's embedding of the same inputs, measured in the
  model's geometry (geodesic on the ball, Euclidean otherwise) - a feature-distillation term
  (as in PODNet/LUCIR-style methods) that the abstract does not spell out: **reconstruction**.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from fidia_jax import _checks
from fidia_jax.projects.hypcl.model import embedding_distance

__all__ = ["embedding_distillation", "masked_cross_entropy"]


def masked_cross_entropy(
    logits_BxK: jax.Array, labels_B: jax.Array, seen_K: jax.Array
) -> jax.Array:
    """Mean cross-entropy with the softmax restricted to ``seen_K`` (bool ``(K,)``).

    Args:
      logits_BxK: float logits.
      labels_B: int labels in ``[0, K)``; each must be a seen class.
      seen_K: bool mask of the classes in the softmax.

    Returns:
      Scalar mean loss. Traced contract (inside ``jit``, where values cannot be checked): a
      label outside ``[0, K)`` makes the loss NaN (never a wrapped index), an unseen label
      makes it ``inf``, and NaN logits give NaN (NaN in, NaN out); a training step stops on a
      non-finite loss.

    Raises:
      ValueError: (concrete ``labels_B``) a label outside ``[0, K)``, naming ``labels_B``.
    """
    k = logits_BxK.shape[-1]
    if _checks.is_concrete(labels_B):
        lab = np.asarray(labels_B)
        if lab.size and (lab.min() < 0 or lab.max() >= k):
            raise ValueError(
                f"masked_cross_entropy: labels_B must lie in [0, {k}), got values in "
                f"[{lab.min()}, {lab.max()}]"
            )
    masked = jnp.where(seen_K[None, :], logits_BxK, -jnp.inf)
    logp = jax.nn.log_softmax(masked, axis=-1)
    picked = jnp.take_along_axis(logp, labels_B[:, None], axis=1)[:, 0]
    picked = jnp.where((labels_B < 0) | (labels_B >= k), jnp.nan, picked)
    return -jnp.mean(picked)


def embedding_distillation(
    z_new_BxD: jax.Array, z_old_BxD: jax.Array, geometry: str, c: float = 1.0
) -> jax.Array:
    """``mean_b dist(z_new_b, z_old_b)^2`` in ``geometry`` (``"poincare"`` or ``"euclidean"``)."""
    d = embedding_distance(z_new_BxD, jax.lax.stop_gradient(z_old_BxD), geometry, c)
    return jnp.mean(d * d)
