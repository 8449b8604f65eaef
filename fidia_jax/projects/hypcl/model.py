"""HypCL prototype adapters: frozen features -> small adapter -> prototype-distance logits.

Reconstruction from the HypCL abstract ("adapt a frozen pretrained encoder in hyperbolic space
for class-incremental learning; hyperbolic prototypes keep old classes separable as new ones
arrive"); the layer sizes, the feature clipping and the squared-distance logits are our choices.

``geometry="poincare"`` (HypCL)::

    h = W1 x + b1                       (Euclidean projection of the frozen feature, D_in -> D)
    z = HypLinear(exp_0(clip_r(h)))     (into the ball of curvature -c, then a Möbius layer)
    logits_k = -d_c(z, p_k)^2 / tau     (p_k: one prototype per class, a point of the ball)

``geometry="euclidean"`` (the baseline with the same prototypes and head): ``z = W2 h + b2``,
``logits_k = -||z - p_k||^2 / tau``. Same parameter count.

``clip_r`` bounds ``||h||`` before ``exp_0`` (Guo, Wang, Chen, Yu, "Clipped Hyperbolic
Classifiers Are Super-Hyperbolic Classifiers", CVPR 2022), which keeps embeddings off the
boundary where gradients vanish. Hyperbolic prototypes are :class:`BallParam` variables so a
driver can give them a Riemannian optimiser (``nnx.split(model, BallParam, ...)``).

**Points given by a caller** (embeddings or prototypes passed to
:meth:`PrototypeAdapter.logits_from_embedding`, :func:`embedding_distance`) must lie inside the
ball ``c||x||^2 < 1``: a concrete point on or outside it raises ``ValueError`` naming its norm
(:mod:`fidia_jax.layers`' check); a traced one (under ``jit``) cannot raise, so its row of
logits / its distance is NaN instead of a finite number that means nothing (the formulas clamp
``artanh``/``arccosh`` arguments, so a point of norm 1.5 would otherwise get the distance of a
point at the boundary); a NaN reaching the loss stops training with ``TrainingError``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from fidia_jax.layers import (
    HypLinear,
    check_curvature,
    expmap0,
    poincare_distance,
    prototype_logits,
)

__all__ = ["BallParam", "PrototypeAdapter", "embedding_distance", "nan_outside_ball"]

GEOMETRIES = ("poincare", "euclidean")


class BallParam(nnx.Param):
    """A parameter whose rows (last axis) are points of a Poincaré ball (train it with
    :func:`fidia_jax.optim.riemannian_adam` / :func:`~fidia_jax.optim.riemannian_sgd`)."""


def _clip_norm(h: jax.Array, r: float) -> jax.Array:
    n = jnp.sqrt(jnp.maximum(jnp.sum(h * h, axis=-1, keepdims=True), 1e-30))
    return h * jnp.minimum(1.0, r / n)


def nan_outside_ball(x: jax.Array, c: float = 1.0, name: str = "point") -> jax.Array:
    """Checks points of the ball ``c||x||^2 < 1`` (last axis): concrete ones raise, traced
    ones outside become NaN rows.

    Args:
      x: ``(..., D)`` points; c: curvature magnitude ``> 0``; name: for the error message.

    Returns:
      ``x`` unchanged where inside; rows of norm ``>= 1/sqrt(c)`` (or non-finite) are NaN (only
      possible for traced ``x``): NaN flows into the logits and the loss, where the training
      step stops with ``TrainingError``, instead of a clamped finite value.

    Raises:
      ValueError: a concrete row on or outside the ball, or non-finite (its norm named).
    """
    if not isinstance(x, jax.core.Tracer):
        v = np.asarray(x, np.float64)
        r2 = c * np.sum(v * v, axis=-1)
        if v.size and not np.all(r2 < 1.0):  # NaN fails too
            bad = ~(r2 < 1.0)
            finite = r2[np.isfinite(r2)]
            largest = float(np.sqrt(finite.max() / c)) if finite.size else float("nan")
            raise ValueError(
                f"{name}: {int(bad.sum())} row(s) on or outside the Poincaré ball of radius "
                f"1/sqrt(c) = {1.0 / np.sqrt(c):.6g} (largest norm {largest:.6g}"
                f"{', or non-finite' if np.isnan(r2).any() else ''}); map Euclidean vectors "
                "into the ball with layers.expmap0"
            )
        return x
    inside = c * jnp.sum(x * x, axis=-1, keepdims=True) < 1.0
    return jnp.where(inside, x, jnp.nan)


def embedding_distance(z1: jax.Array, z2: jax.Array, geometry: str, c: float = 1.0) -> jax.Array:
    """Row-wise distance ``(N,)`` of two ``(N, D)`` embeddings: geodesic (``"poincare"``) or
    Euclidean (``"euclidean"``).

    Raises:
      ValueError: an unknown geometry; a concrete point outside the ball (``"poincare"``; traced
        ones give NaN, module docstring).
    """
    if geometry == "poincare":
        return poincare_distance(
            nan_outside_ball(z1, c, "embedding_distance z1"),
            nan_outside_ball(z2, c, "embedding_distance z2"),
            c,
        )
    if geometry == "euclidean":
        return jnp.sqrt(jnp.maximum(jnp.sum((z1 - z2) ** 2, axis=-1), 1e-30))
    raise ValueError(f"geometry must be one of {GEOMETRIES}, got {geometry!r}")


class PrototypeAdapter(nnx.Module):
    """Adapter on frozen features with one prototype per class (module docstring).

    Args:
      in_features: frozen feature width ``D_in`` (256 for AlexNet conv5).
      dim: embedding width ``D``.
      num_classes: ``K`` prototypes (all classes of the whole stream; a driver masks the unseen).
      geometry: ``"poincare"`` (HypCL) or ``"euclidean"``.
      c: curvature magnitude ``> 0`` (poincare only).
      clip_r: feature clipping radius before ``exp_0`` (poincare only), ``> 0``.
      temperature: logits are ``-d^2 / temperature``.
      prototype_scale: scale of the random prototype initialisation (tangent-space norm ~ this).
      rngs: ``nnx.Rngs`` with ``params``.

    Call: ``model(x_BxF) -> logits_BxK``; ``model.embed(x_BxF) -> z_BxD``.

    Raises:
      ValueError: unknown geometry, ``c <= 0``, ``clip_r <= 0`` or ``temperature <= 0``.
    """

    def __init__(
        self,
        in_features: int,
        dim: int,
        num_classes: int,
        *,
        geometry: str = "poincare",
        c: float = 1.0,
        clip_r: float = 2.0,
        temperature: float = 1.0,
        prototype_scale: float = 1.0,
        rngs: nnx.Rngs,
    ):
        if geometry not in GEOMETRIES:
            raise ValueError(f"geometry must be one of {GEOMETRIES}, got {geometry!r}")
        check_curvature(c)
        if clip_r <= 0 or temperature <= 0:
            raise ValueError(f"clip_r and temperature must be > 0, got {clip_r}, {temperature}")
        self.geometry, self.c = geometry, float(c)
        self.clip_r, self.temperature = float(clip_r), float(temperature)
        self.proj = nnx.Linear(in_features, dim, rngs=rngs)
        tangent = (
            prototype_scale * jax.random.normal(rngs.params(), (num_classes, dim)) / jnp.sqrt(dim)
        )
        if geometry == "poincare":
            self.head = HypLinear(dim, dim, c=c, rngs=rngs)
            self.prototypes = BallParam(expmap0(tangent, c))
        else:
            self.head = nnx.Linear(dim, dim, rngs=rngs)
            self.prototypes = nnx.Param(tangent)

    def embed(self, x_BxF: jax.Array) -> jax.Array:
        h_BxD = self.proj(x_BxF)
        if self.geometry == "poincare":
            return self.head(expmap0(_clip_norm(h_BxD, self.clip_r), self.c))
        return self.head(h_BxD)

    def logits_from_embedding(self, z_BxD: jax.Array, prototypes_KxD=None) -> jax.Array:
        """Logits ``(B, K)`` of embeddings ``z``; ``prototypes_KxD`` overrides the stored ones
        (a driver passes them with old rows under ``stop_gradient`` to freeze them).

        Raises:
          ValueError: (poincare) a concrete ``z`` or prototype on or outside the ball; traced
            ones give NaN logits in their row / column (module docstring).
        """
        p_KxD = self.prototypes[...] if prototypes_KxD is None else prototypes_KxD
        if self.geometry == "poincare":
            return prototype_logits(
                nan_outside_ball(z_BxD, self.c, "logits_from_embedding: z_BxD"),
                nan_outside_ball(p_KxD, self.c, "logits_from_embedding: prototypes_KxD"),
                self.c,
                self.temperature,
            )
        d2_BxK = (
            jnp.sum(z_BxD * z_BxD, axis=1)[:, None]
            + jnp.sum(p_KxD * p_KxD, axis=1)[None, :]
            - 2.0 * z_BxD @ p_KxD.T
        )
        return -jnp.maximum(d2_BxK, 0.0) / self.temperature

    def __call__(self, x_BxF: jax.Array) -> jax.Array:
        return self.logits_from_embedding(self.embed(x_BxF))
