"""Poincaré-ball operations with curvature ``-c`` (``c > 0``), numerically safe at the edge.

The ball is ``B_c = {x in R^D : c ||x||^2 < 1}`` (radius ``1/sqrt(c)``); the last axis of every
array is the ball's coordinate axis, leading axes are batch axes. Formulas are the gyrovector
ones of Ganea, Bécigneul, Hofmann, "Hyperbolic Neural Networks", NeurIPS 2018 (eqs. 2-5, 7, 9,
22): Möbius addition, scalar and matrix-vector multiplication, exponential and logarithmic maps,
geodesic distance; the gyration and parallel transport follow Ungar (2008) in the closed form
geoopt also uses. As ``c -> 0`` every operation tends to its Euclidean counterpart (tested).

Numerical safety (each case is a test in ``tests/layers/test_poincare.py``):
  * norms are clamped below at ``1e-15`` so a zero vector gives finite values *and* gradients
    (the clamp has zero gradient, the factor ``tanh(s)/s`` is then ~1: ``expmap0`` has Jacobian
    ``I`` at 0, as it should);
  * ``artanh`` arguments are clipped to ``1 - eps`` (``eps`` 1e-7 in float32, 1e-15 in float64);
  * ``arccosh`` arguments that round below 1 are clamped to ``1 + eps`` (:func:`safe_arccosh`);
  * results of maps that can reach the boundary in floating point (``tanh -> 1``) are projected
    to norm ``(1 - eps_ball) / sqrt(c)`` with ``eps_ball`` = 4e-3 in float32 and 1e-5 in float64
    (geoopt's ``PoincareBall`` margins) by :func:`project`.

The operations need only jax (``fidia_jax.optim``'s Riemannian optimisers use them without
importing flax); the Flax NNX layer built on them, :class:`~fidia_jax.layers.HypLinear`, is in
``_hyp_linear.py``.

Curvature: ``c`` is a Python float or a scalar array; a concrete ``c <= 0`` (or NaN) raises
``ValueError`` naming it; a traced ``c`` (under ``jit``) is not checked.

References:
  Ganea, Bécigneul, Hofmann, "Hyperbolic Neural Networks", NeurIPS 2018, arXiv:1805.09112.
  Khrulkov et al., "Hyperbolic Image Embeddings", CVPR 2020 (``hyptorch``: ``expmap0`` feature
  map, hyperbolic prototypes). Kochurov, Karimov, Kozlukov, geoopt (conventions: ``c > 0`` is
  minus the curvature, ball margins, gyration formula).
"""

from __future__ import annotations

import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "check_curvature",
    "conformal_factor",
    "expmap",
    "expmap0",
    "gyration",
    "logmap",
    "logmap0",
    "mobius_add",
    "mobius_matvec",
    "mobius_scalar_mul",
    "parallel_transport",
    "poincare_distance",
    "poincare_distance_matrix",
    "project_to_ball",
    "prototype_logits",
    "safe_arccosh",
    "safe_artanh",
]

_MIN_NORM = 1e-15


def check_curvature(c) -> None:
    """Raises ``ValueError`` if a concrete curvature ``c`` is not ``> 0`` (or not finite).

    Traced values (inside ``jit``/``grad``) pass unchecked.
    """
    if isinstance(c, jax.core.Tracer):
        return
    try:
        value = float(c)
    except TypeError as exc:  # arrays with more than one element
        raise ValueError(
            f"curvature c must be a positive scalar, got shape {jnp.shape(c)}"
        ) from exc
    if not (value > 0.0 and math.isfinite(value)):
        raise ValueError(f"curvature c must be > 0 (the ball has curvature -c), got c={value!r}")


def _check_in_ball(c, where: str, **points) -> None:
    """Raises ``ValueError`` if a concrete point lies outside the open ball ``c ||x||^2 < 1``
    (the formulas then return finite numbers that mean nothing); traced values pass."""
    if isinstance(c, jax.core.Tracer):
        return
    for name, x in points.items():
        if isinstance(x, jax.core.Tracer):
            continue
        v = np.asarray(x, np.float64)
        if v.size == 0:
            continue
        r2 = float(c) * np.sum(v * v, axis=-1)
        if not np.all(r2 < 1.0):  # also catches NaN
            worst = (
                float(np.sqrt(np.nanmax(r2) / float(c))) if np.any(np.isfinite(r2)) else math.nan
            )
            raise ValueError(
                f"{where}: {name} must lie inside the Poincaré ball of radius "
                f"1/sqrt(c) = {1.0 / math.sqrt(float(c)):.6g}, got a point of norm {worst:.6g}"
                f"{' (or a non-finite one)' if np.isnan(r2).any() else ''}; map Euclidean "
                "vectors with expmap0 or clip with project_to_ball"
            )


def _warn_round_trip_clips(c, y, where: str) -> None:
    """Warns if a concrete point lies beyond the projection radius ``(1 - eps_ball) / sqrt(c)``
    of its dtype: ``expmap0(logmap0(y))`` then returns it at that radius, not at its own norm."""
    if isinstance(c, jax.core.Tracer) or isinstance(y, jax.core.Tracer):
        return
    v = np.asarray(y, np.float64)
    if v.size == 0:
        return
    radius = (1.0 - _ball_eps(jnp.asarray(y).dtype)) / math.sqrt(float(c))
    norms = np.sqrt(np.sum(v * v, axis=-1))
    beyond = norms > radius * (1.0 + 1e-7)
    if np.any(beyond):
        warnings.warn(
            f"{where}: {int(beyond.sum())} point(s) of norm up to {float(norms.max()):.6g} lie "
            f"beyond the projection radius (1 - eps)/sqrt(c) = {radius:.6g} of "
            f"{jnp.asarray(y).dtype}; expmap0 of the result clips them to that radius (the "
            "exp/log round trip is exact only inside it; use float64 for a radius 1 - 1e-5)",
            stacklevel=3,
        )


def _artanh_eps(dtype) -> float:
    return 1e-15 if jnp.dtype(dtype) == jnp.float64 else 1e-7


def _ball_eps(dtype) -> float:
    return 1e-5 if jnp.dtype(dtype) == jnp.float64 else 4e-3


def _norm(x: jax.Array) -> jax.Array:
    """``||x||`` over the last axis (keepdims), clamped below at 1e-15 (finite gradient at 0).

    The clamp acts on the squared norm, before the square root, whose derivative at 0 is
    infinite (``jnp.linalg.norm`` has a NaN gradient at 0).
    """
    return jnp.sqrt(jnp.maximum(jnp.sum(x * x, axis=-1, keepdims=True), _MIN_NORM * _MIN_NORM))


def _sq(x: jax.Array) -> jax.Array:
    return jnp.sum(x * x, axis=-1, keepdims=True)


def _dot(x: jax.Array, y: jax.Array) -> jax.Array:
    return jnp.sum(x * y, axis=-1, keepdims=True)


def safe_artanh(x: jax.Array) -> jax.Array:
    """``artanh(x)`` with ``x`` clipped to ``[-(1 - eps), 1 - eps]`` (finite value and gradient)."""
    eps = _artanh_eps(x.dtype)
    return jnp.arctanh(jnp.clip(x, -1.0 + eps, 1.0 - eps))


def safe_arccosh(z: jax.Array) -> jax.Array:
    """``arccosh(z)`` with ``z`` clamped to ``>= 1 + eps``: arguments that rounded below 1
    (cancellation in ``1 + 2c||x-y||^2/...``) give ~0, never NaN, and a finite gradient."""
    eps = _artanh_eps(z.dtype)
    return jnp.arccosh(jnp.maximum(z, 1.0 + eps))


def project_to_ball(x: jax.Array, c=1.0, eps: float | None = None) -> jax.Array:
    """Radially shrinks points with ``||x|| > (1 - eps) / sqrt(c)`` onto that sphere.

    Args:
      x: ``(..., D)`` points (float32/float64).
      c: curvature magnitude ``> 0``.
      eps: margin; default 4e-3 (float32) / 1e-5 (float64).

    Returns:
      ``(..., D)``, same dtype; points inside the margin are returned unchanged.
    """
    check_curvature(c)
    eps = _ball_eps(x.dtype) if eps is None else eps
    max_norm = (1.0 - eps) / jnp.sqrt(c)
    n = _norm(x)
    return jnp.where(n > max_norm, x / n * max_norm, x)


def conformal_factor(x: jax.Array, c=1.0) -> jax.Array:
    """``lambda_x = 2 / (1 - c ||x||^2)``, shape ``(..., 1)`` (Ganea et al. 2018, eq. 3)."""
    check_curvature(c)
    return 2.0 / jnp.maximum(1.0 - c * _sq(x), _MIN_NORM)


def mobius_add(x: jax.Array, y: jax.Array, c=1.0) -> jax.Array:
    """Möbius addition ``x (+)_c y`` (Ganea et al. 2018, eq. 2); ``(..., D)`` broadcast.

    ``((1 + 2c<x,y> + c||y||^2) x + (1 - c||x||^2) y) / (1 + 2c<x,y> + c^2 ||x||^2 ||y||^2)``.
    Not projected (identities such as ``(-x) (+) x = 0`` hold exactly up to rounding).
    """
    check_curvature(c)
    _check_in_ball(c, "mobius_add", x=x, y=y)
    xy, x2, y2 = _dot(x, y), _sq(x), _sq(y)
    num = (1.0 + 2.0 * c * xy + c * y2) * x + (1.0 - c * x2) * y
    den = 1.0 + 2.0 * c * xy + c * c * x2 * y2
    return num / jnp.maximum(den, _MIN_NORM)


def mobius_scalar_mul(r, x: jax.Array, c=1.0) -> jax.Array:
    """``r (x)_c x = tanh(r artanh(sqrt(c)||x||)) x / (sqrt(c)||x||)`` (eq. 4), projected."""
    check_curvature(c)
    _check_in_ball(c, "mobius_scalar_mul", x=x)
    sc = jnp.sqrt(c)
    n = _norm(x)
    return project_to_ball(jnp.tanh(r * safe_artanh(sc * n)) * x / (sc * n), c)


def mobius_matvec(kernel: jax.Array, x: jax.Array, c=1.0) -> jax.Array:
    """Möbius matrix-vector product ``M (x)_c x`` for a flax-layout kernel ``(D_in, D_out)``.

    ``tanh(||xW|| / ||x|| artanh(sqrt(c)||x||)) xW / (sqrt(c)||xW||)`` (Ganea et al. 2018,
    eq. 5, with ``M x`` written ``x @ W``); ``xW = 0`` gives 0. ``x``: ``(..., D_in)``; returns
    ``(..., D_out)``, projected.
    """
    check_curvature(c)
    if jnp.ndim(kernel) != 2 or jnp.shape(x)[-1:] != jnp.shape(kernel)[:1]:
        raise ValueError(
            f"mobius_matvec: kernel must be (D_in, D_out) with D_in = x's last axis, got kernel "
            f"{jnp.shape(kernel)} and x {jnp.shape(x)}"
        )
    _check_in_ball(c, "mobius_matvec", x=x)
    sc = jnp.sqrt(c)
    mx = x @ kernel
    nx, nmx = _norm(x), _norm(mx)
    return project_to_ball(jnp.tanh(nmx / nx * safe_artanh(sc * nx)) * mx / (sc * nmx), c)


def expmap0(v: jax.Array, c=1.0) -> jax.Array:
    """``exp_0(v) = tanh(sqrt(c)||v||) v / (sqrt(c)||v||)``: tangent vectors at 0 -> ball.

    The result is projected to norm at most ``(1 - eps) / sqrt(c)`` (:func:`project_to_ball`;
    0.996 for ``c = 1`` in float32), so ``expmap0(logmap0(y))`` returns ``y`` only for points
    inside that radius; :func:`logmap0` warns for concrete points beyond it.
    """
    check_curvature(c)
    sc = jnp.sqrt(c)
    n = _norm(v)
    return project_to_ball(jnp.tanh(sc * n) * v / (sc * n), c)


def logmap0(y: jax.Array, c=1.0) -> jax.Array:
    """``log_0(y) = artanh(sqrt(c)||y||) y / (sqrt(c)||y||)``, the inverse of :func:`expmap0`.

    Raises ``ValueError`` for a concrete point outside the ball; warns (``UserWarning``) for a
    concrete point between the projection radius ``(1 - eps) / sqrt(c)`` and the boundary,
    where the round trip through :func:`expmap0` clips. Traced values are not checked.
    """
    check_curvature(c)
    _check_in_ball(c, "logmap0", y=y)
    _warn_round_trip_clips(c, y, "logmap0")
    sc = jnp.sqrt(c)
    n = _norm(y)
    return safe_artanh(sc * n) * y / (sc * n)


def expmap(x: jax.Array, v: jax.Array, c=1.0) -> jax.Array:
    """``exp_x(v) = x (+) tanh(sqrt(c) lambda_x ||v|| / 2) v / (sqrt(c)||v||)`` (eq. 7), projected."""
    check_curvature(c)
    _check_in_ball(c, "expmap", x=x)
    sc = jnp.sqrt(c)
    n = _norm(v)
    second = jnp.tanh(sc * conformal_factor(x, c) * n / 2.0) * v / (sc * n)
    return project_to_ball(mobius_add(x, second, c), c)


def logmap(x: jax.Array, y: jax.Array, c=1.0) -> jax.Array:
    """``log_x(y) = 2/(sqrt(c) lambda_x) artanh(sqrt(c)||u||) u/||u||``, ``u = (-x) (+) y``."""
    check_curvature(c)
    _check_in_ball(c, "logmap", x=x, y=y)
    sc = jnp.sqrt(c)
    u = mobius_add(-x, y, c)
    n = _norm(u)
    return 2.0 / (sc * conformal_factor(x, c)) * safe_artanh(sc * n) * u / n


def poincare_distance(x: jax.Array, y: jax.Array, c=1.0) -> jax.Array:
    """Geodesic distance ``(2/sqrt(c)) artanh(sqrt(c) ||(-x) (+) y||)`` (eq. 9), shape ``(...)``.

    ``d(0, x) = (2/sqrt(c)) artanh(sqrt(c)||x||)``; finite gradient at ``x = y`` (zero).
    """
    check_curvature(c)
    if jnp.shape(x)[-1:] != jnp.shape(y)[-1:]:
        raise ValueError(
            f"poincare_distance: x {jnp.shape(x)} and y {jnp.shape(y)} must share the last "
            "(coordinate) axis"
        )
    _check_in_ball(c, "poincare_distance", x=x, y=y)
    sc = jnp.sqrt(c)
    n = _norm(mobius_add(-x, y, c))
    return (2.0 / sc * safe_artanh(sc * n))[..., 0]


def poincare_distance_matrix(x_NxD: jax.Array, y_KxD: jax.Array, c=1.0) -> jax.Array:
    """All pairwise distances ``(N, K)`` via ``arccosh(1 + 2c||x-y||^2 / ((1-c||x||^2)(1-c||y||^2))) / sqrt(c)``.

    The same distance as :func:`poincare_distance` in ``O(NKD)`` matmul form; the squared
    difference is clamped at 0 and the ``arccosh`` argument at ``1 + eps`` (:func:`safe_arccosh`),
    so points that coincide give ~0, never NaN.
    """
    check_curvature(c)
    if x_NxD.ndim != 2 or y_KxD.ndim != 2 or x_NxD.shape[1] != y_KxD.shape[1]:
        raise ValueError(
            f"poincare_distance_matrix wants (N, D) and (K, D), got {x_NxD.shape} and {y_KxD.shape}"
        )
    _check_in_ball(c, "poincare_distance_matrix", x_NxD=x_NxD, y_KxD=y_KxD)
    x2 = jnp.sum(x_NxD * x_NxD, axis=1)[:, None]
    y2 = jnp.sum(y_KxD * y_KxD, axis=1)[None, :]
    diff2 = jnp.maximum(x2 + y2 - 2.0 * x_NxD @ y_KxD.T, 0.0)
    den = jnp.maximum((1.0 - c * x2) * (1.0 - c * y2), _MIN_NORM)
    return safe_arccosh(1.0 + 2.0 * c * diff2 / den) / jnp.sqrt(c)


def gyration(u: jax.Array, v: jax.Array, w: jax.Array, c=1.0) -> jax.Array:
    """``gyr[u, v] w = (-(u (+) v)) (+) (u (+) (v (+) w))`` in closed form (Ungar 2008).

    ``w + 2 (a u + b v) / d`` with ``a = -c^2<u,w>||v||^2 + c<v,w> + 2c^2<u,v><v,w>``,
    ``b = -c^2<v,w>||u||^2 - c<u,w>``, ``d = 1 + 2c<u,v> + c^2||u||^2||v||^2``.
    """
    check_curvature(c)
    u2, v2 = _sq(u), _sq(v)
    uv, uw, vw = _dot(u, v), _dot(u, w), _dot(v, w)
    a = -c * c * uw * v2 + c * vw + 2.0 * c * c * uv * vw
    b = -c * c * vw * u2 - c * uw
    d = 1.0 + 2.0 * c * uv + c * c * u2 * v2
    return w + 2.0 * (a * u + b * v) / jnp.maximum(d, _MIN_NORM)


def parallel_transport(x: jax.Array, y: jax.Array, v: jax.Array, c=1.0) -> jax.Array:
    """Transports the tangent vector ``v`` at ``x`` to ``y``: ``(lambda_x/lambda_y) gyr[y, -x] v``.

    Preserves the Riemannian norm ``lambda ||v||`` (tested).
    """
    return gyration(y, -x, v, c) * conformal_factor(x, c) / conformal_factor(y, c)


def prototype_logits(
    z_NxD: jax.Array, prototypes_KxD: jax.Array, c=1.0, temperature=1.0, squared: bool = True
) -> jax.Array:
    """Logits ``-d_c(z, p_k)^2 / temperature`` (``squared=False``: ``-d_c / temperature``).

    ``z``: ``(N, D)`` embeddings in the ball; ``prototypes``: ``(K, D)`` points in the ball.
    Returns ``(N, K)``.
    """
    d = poincare_distance_matrix(z_NxD, prototypes_KxD, c)
    return -(d * d if squared else d) / temperature
