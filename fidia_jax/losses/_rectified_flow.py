"""Rectified-flow (flow-matching) training objective, for fresh pairs and for reflow pairs.

Convention (the StreamFlow driver's U-Net and samplers use it too): an image ``x`` and a noise
``z`` are joined by the straight line ``x_t = t z + (1 - t) x``, ``t`` in ``[0, 1]`` (``t = 1``
noise, ``t = 0`` image); its velocity is ``d x_t / dt = z - x``. The network ``v(x_t, t)``
regresses that velocity:

    L = mean_{b, pixels} (v(x_t, t) - (z - x))^2                (Liu et al. 2023, eq. 1; paper)

With ``z`` drawn independently of ``x`` it is conditional flow matching (Lipman et al. 2023);
with *reflow pairs* -- ``z`` a noise and ``x`` the image the current model's sampler makes from
it -- the same loss straightens the flow so that few Euler steps suffice (Liu et al. 2023, §2.2:
"reflow"). StreamFlow serves such models; this objective is standard, not StreamFlow's own.

References:
  Liu, Gong, Liu, "Flow Straight and Fast: Learning to Generate and Transfer Data with
  Rectified Flow", ICLR 2023, https://arxiv.org/abs/2209.03003.
  Lipman, Chen, Ben-Hamu, Nickel, Le, "Flow Matching for Generative Modeling", ICLR 2023.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from fidia_jax import _checks

__all__ = ["rectified_flow_interpolate", "rectified_flow_loss"]


def _check(images, noise, t_B, where: str) -> None:
    if images.ndim != 4:
        raise ValueError(f"{where}: images must be rank 4 (B, H, W, C), got shape {images.shape}")
    if noise.shape != images.shape:
        raise ValueError(
            f"{where}: noise shape {noise.shape} must equal images shape {images.shape}"
        )
    if t_B.shape != images.shape[:1]:
        raise ValueError(f"{where}: t must have shape (B,)=({images.shape[0]},), got {t_B.shape}")
    if _checks.is_concrete(t_B):
        t = np.asarray(t_B, np.float64)
        if not (np.isfinite(t).all() and (t >= 0).all() and (t <= 1).all()):
            raise ValueError(
                f"{where}: t must lie in [0, 1] (a point on the segment from data to noise), "
                f"got values in [{np.nanmin(t):.4g}, {np.nanmax(t):.4g}]"
            )


def rectified_flow_interpolate(images_BxHxWxC, noise_BxHxWxC, t_B):
    """The point ``x_t = t z + (1 - t) x`` on each straight line and its velocity ``z - x``.

    Args:
      images_BxHxWxC: data ``x`` (float).
      noise_BxHxWxC: noise ``z`` (same shape).
      t_B: ``(B,)`` times in ``[0, 1]``.

    Returns:
      ``(x_t, velocity)``, both ``(B, H, W, C)``.

    Raises:
      ValueError: images not rank 4, noise of another shape, or ``t`` not ``(B,)``.
    """
    _check(images_BxHxWxC, noise_BxHxWxC, t_B, "rectified_flow_interpolate")
    t = t_B[:, None, None, None].astype(images_BxHxWxC.dtype)
    return t * noise_BxHxWxC + (1.0 - t) * images_BxHxWxC, noise_BxHxWxC - images_BxHxWxC


def rectified_flow_loss(
    velocity_fn: Callable[[jax.Array, jax.Array], jax.Array],
    images_BxHxWxC: jax.Array,
    noise_BxHxWxC: jax.Array,
    t_B: jax.Array,
) -> jax.Array:
    """Mean squared error between ``v(x_t, t)`` and the straight-line velocity ``z - x``.

    Args:
      velocity_fn: ``v(x_t_BxHxWxC, t_B) -> (B, H, W, C)`` (e.g. a ``StreamFlowUNet``).
      images_BxHxWxC: data (or, for reflow, the images the sampler made from ``noise``).
      noise_BxHxWxC: noise (or, for reflow, the noise the images were sampled from).
      t_B: ``(B,)`` times, usually ``Uniform(0, 1)``.

    Returns:
      Scalar float32: the mean over batch and pixels.

    Raises:
      ValueError: as :func:`rectified_flow_interpolate`, or ``v`` of the wrong shape.
    """
    x_t, target = rectified_flow_interpolate(images_BxHxWxC, noise_BxHxWxC, t_B)
    v = velocity_fn(x_t, t_B)
    if v.shape != target.shape:
        raise ValueError(
            f"rectified_flow_loss: velocity shape {v.shape} != images shape {target.shape}"
        )
    return jnp.mean(jnp.square(v.astype(jnp.float32) - target.astype(jnp.float32)))
