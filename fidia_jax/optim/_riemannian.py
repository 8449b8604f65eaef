"""Riemannian SGD and Adam on (products of) Poincaré balls, as optax transforms.

Every parameter leaf given to these transforms is a stack of points of the Poincaré ball
``{x : c||x||^2 < 1}`` along its **last axis** (a ``(K, D)`` array is ``K`` points of ``B^D``).
Mix them with Euclidean parameters through ``optax.partition`` / ``optax.multi_transform``
(labels by parameter path or ``nnx`` variable type) - these transforms never look at the rest.

The Riemannian gradient of the ball's metric ``lambda_x^2 I`` (``lambda_x = 2/(1 - c||x||^2)``)
is the Euclidean one rescaled by ``1/lambda_x^2 = (1 - c||x||^2)^2 / 4`` (Nickel & Kiela 2017,
eq. 5; Ganea et al. 2018). A step ``v`` (a tangent vector at ``x``) is then *retracted*:
``exp_x(v)`` (the exact exponential map, default) or ``project(x + v)`` (first-order retraction).

**How the retraction fits optax's update/apply split.** optax applies updates as
``params + updates`` (:func:`optax.apply_updates`). The retraction is therefore the *last*
transform of the chain and returns ``updates = R_x(v) - x``, so that ``optax.apply_updates``
lands on the retracted point ``R_x(v)`` (up to one rounding of the float addition; the retracted
point is kept ``eps`` inside the ball, so that rounding never leaves it - tested). Do not chain
anything after :func:`poincare_retract` (a learning-rate scale after it would scale a chord, not a
tangent vector): put the learning rate before it, as :func:`riemannian_sgd` does.

**Low-precision parameters** (bfloat16, float16). Every transform computes in float32 (the
point, the gradient, the metric, the retraction) and casts only the returned updates to the
gradient's dtype; :func:`riemannian_adam` keeps its moments ``mu``, ``nu`` and its bias
corrections in float32 whatever the params' dtype (in bfloat16 ``0.999`` rounds to ``1.0``, so a
bias correction ``1 - b2**t`` computed there is 0 and the step is 0 or NaN). Points of a
low-precision leaf are retracted to norm ``(1 - m) / sqrt(c)`` with the wider margin
``m = max(eps_ball, 8 * finfo(dtype).eps)`` (0.0625 for bfloat16), so that rounding the new
point to the leaf's dtype can never land on or outside the boundary (tested).

References:
  Bonnabel, "Stochastic gradient descent on Riemannian manifolds", IEEE TAC 2013 (RSGD).
  Nickel, Kiela, "Poincaré Embeddings for Learning Hierarchical Representations", NeurIPS 2017.
  Bécigneul, Ganea, "Riemannian Adaptive Optimization Methods", ICLR 2019 (RAdam: per-point
  second moment of the Riemannian gradient norm, first moment parallel-transported).
  optax has no Riemannian transforms (its ``optax.projections`` project onto convex sets); geoopt
  (PyTorch) implements RiemannianSGD/RiemannianAdam with the same rescaling and retraction.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from fidia_jax.errors import ConfigError
from fidia_jax.layers import (
    check_curvature,
    conformal_factor,
    expmap,
    parallel_transport,
    project_to_ball,
)
from fidia_jax.optim._schedules import ScalarOrSchedule

__all__ = [
    "RiemannianAdamState",
    "poincare_retract",
    "riemannian_adam",
    "riemannian_sgd",
    "scale_by_poincare_metric",
]

_RETRACTIONS = ("expmap", "project")


def _check(c, retraction: str | None = None) -> None:
    try:
        check_curvature(c)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    if retraction is not None and retraction not in _RETRACTIONS:
        raise ConfigError(f"retraction must be one of {_RETRACTIONS}, got {retraction!r}")


def _need_params(params, name: str) -> None:
    if params is None:
        raise ValueError(f"{name} needs the current params (the points on the ball)")


def _inv_metric(x: jax.Array, c) -> jax.Array:
    """``1 / lambda_x^2 = (1 - c||x||^2)^2 / 4``, shape ``(..., 1)``."""
    return jnp.square(1.0 / conformal_factor(x, c))


def _f32(a: jax.Array) -> jax.Array:
    """Upcasts bfloat16 / float16 (and integers) to float32; float32 and float64 are kept."""
    a = jnp.asarray(a)
    return a if a.dtype in (jnp.float32, jnp.float64) else a.astype(jnp.float32)


def _margin(dtype) -> float | None:
    """Ball margin for points stored in ``dtype``: ``None`` (the default of
    :func:`~fidia_jax.layers.project_to_ball`) for float32/64, else ``max(4e-3, 8 eps)``."""
    dtype = jnp.dtype(dtype)
    if dtype in (jnp.float32, jnp.float64) or not jnp.issubdtype(dtype, jnp.floating):
        return None
    return max(4e-3, 8.0 * float(jnp.finfo(dtype).eps))


def _retract(x: jax.Array, v: jax.Array, c, retraction: str, store_dtype=None) -> jax.Array:
    """``R_x(v)`` in the precision of ``x``; with a low-precision ``store_dtype`` the result is
    projected inside the wider margin :func:`_margin` (see the module docstring)."""
    new = expmap(x, v, c) if retraction == "expmap" else project_to_ball(x + v, c)
    margin = None if store_dtype is None else _margin(store_dtype)
    return new if margin is None else project_to_ball(new, c, eps=margin)


def scale_by_poincare_metric(c=1.0) -> optax.GradientTransformation:
    """Euclidean gradient -> Riemannian gradient: multiplies by ``(1 - c||x||^2)^2 / 4``.

    Args:
      c: curvature magnitude ``> 0`` (float or scalar array).

    Returns:
      A stateless ``GradientTransformation`` whose ``update`` needs ``params``.

    Raises:
      ConfigError: ``c <= 0``. ValueError: ``update`` called without params.
    """
    _check(c)

    def update_fn(updates, state, params=None):
        _need_params(params, "scale_by_poincare_metric")
        new = jax.tree.map(
            lambda g, x: (_f32(g) * _inv_metric(_f32(x), c)).astype(g.dtype), updates, params
        )
        return new, state

    return optax.GradientTransformation(lambda params: optax.EmptyState(), update_fn)


def poincare_retract(c=1.0, retraction: str = "expmap") -> optax.GradientTransformation:
    """Turns a tangent step ``v`` at ``x`` into ``updates = R_x(v) - x`` (last in a chain).

    With ``optax.apply_updates(x, updates)`` the new params are the retracted point
    ``R_x(v)``: ``exp_x(v)`` for ``retraction="expmap"``, ``project(x + v)`` for ``"project"``.

    Raises:
      ConfigError: ``c <= 0`` or an unknown retraction.
    """
    _check(c, retraction)

    def update_fn(updates, state, params=None):
        _need_params(params, "poincare_retract")

        def leaf(v, x):
            x32 = _f32(x)
            return (_retract(x32, _f32(v), c, retraction, x.dtype) - x32).astype(v.dtype)

        return jax.tree.map(leaf, updates, params), state

    return optax.GradientTransformation(lambda params: optax.EmptyState(), update_fn)


def riemannian_sgd(
    learning_rate: ScalarOrSchedule, c=1.0, retraction: str = "expmap"
) -> optax.GradientTransformation:
    """Riemannian SGD on the Poincaré ball: ``x <- R_x(-lr * grad_E f(x) / lambda_x^2)``.

    ``optax.chain(scale_by_poincare_metric(c), optax.scale_by_learning_rate(lr),
    poincare_retract(c, retraction))``.

    Example:
      >>> import jax.numpy as jnp, optax
      >>> from fidia_jax import optim
      >>> opt = optim.riemannian_sgd(0.1)
      >>> x = jnp.array([[0.5, 0.0]])
      >>> u, _ = opt.update(jnp.array([[1.0, 0.0]]), opt.init(x), x)
      >>> bool(optax.apply_updates(x, u)[0, 0] < 0.5)
      True
    """
    return optax.chain(
        scale_by_poincare_metric(c),
        optax.scale_by_learning_rate(learning_rate),
        poincare_retract(c, retraction),
    )


class RiemannianAdamState(NamedTuple):
    """State of :func:`riemannian_adam`: step count, first moments (tangent vectors at the
    current points, same shapes as params) and second moments (one per point, ``(..., 1)``);
    the moments are float32 for bfloat16 / float16 params (float64 params keep float64)."""

    count: jax.Array
    mu: Any
    nu: Any


def riemannian_adam(
    learning_rate: ScalarOrSchedule,
    c=1.0,
    b1: float = 0.9,
    b2: float = 0.999,
    eps: float = 1e-8,
    retraction: str = "expmap",
) -> optax.GradientTransformation:
    """Riemannian Adam on products of Poincaré balls (Bécigneul & Ganea 2019, Alg. 1).

    Per point ``x`` (last axis): ``g = grad_E / lambda_x^2``; ``m = b1 tau + (1-b1) g``
    (``tau``: the previous ``m`` transported to ``x``); ``v = b2 v + (1-b2) lambda_x^2 ||g||^2``
    (the squared Riemannian norm, one scalar per point); ``x' = R_x(-lr m_hat / (sqrt(v_hat) +
    eps))`` with bias corrections ``m_hat = m/(1-b1^t)``, ``v_hat = v/(1-b2^t)``; then ``m`` is
    parallel-transported from ``x`` to ``x'`` and stored. Returns ``updates = x' - x``
    (module docstring: the retraction inside optax's update/apply split).

    Args:
      learning_rate: float or schedule of the step count.
      c: curvature magnitude ``> 0``.
      b1, b2, eps: Adam constants.
      retraction: ``"expmap"`` or ``"project"``.

    Precision: the moments, the bias corrections and the step are computed and stored in
    float32 for bfloat16 / float16 params (module docstring); only the returned updates have the
    gradients' dtype. Works inside ``optax.MultiSteps`` (tested in bfloat16).

    Raises:
      ConfigError: ``c <= 0``, an unknown retraction. ValueError: ``update`` without params.
    """
    _check(c, retraction)

    def init_fn(params):
        mu = jax.tree.map(lambda x: jnp.zeros(x.shape, _f32(x[..., :0]).dtype), params)
        nu = jax.tree.map(lambda x: jnp.zeros((*x.shape[:-1], 1), _f32(x[..., :0]).dtype), params)
        return RiemannianAdamState(jnp.zeros([], jnp.int32), mu, nu)

    def update_fn(updates, state, params=None):
        _need_params(params, "riemannian_adam")
        count = optax.safe_increment(state.count)
        lr = learning_rate(state.count) if callable(learning_rate) else learning_rate

        def leaf(g, x, m, v):
            x32, g32 = _f32(x), _f32(g)  # float32 (float64 kept) whatever the params' dtype
            t = count.astype(m.dtype)
            lam2 = jnp.square(conformal_factor(x32, c))
            rg = g32 / lam2
            m = b1 * m + (1.0 - b1) * rg
            v = b2 * v + (1.0 - b2) * lam2 * jnp.sum(rg * rg, axis=-1, keepdims=True)
            m_hat = m / (1.0 - b1**t)
            v_hat = v / (1.0 - b2**t)
            step = -lr * m_hat / (jnp.sqrt(v_hat) + eps)
            new_x = _retract(x32, step, c, retraction, x.dtype)
            m = parallel_transport(x32, new_x, m, c)
            return ((new_x - x32).astype(g.dtype), m.astype(v.dtype), v)

        out = jax.tree.map(leaf, updates, params, state.mu, state.nu)
        treedef = jax.tree.structure(updates)
        flat = treedef.flatten_up_to(out)
        new_updates = treedef.unflatten([o[0] for o in flat])
        mu = treedef.unflatten([o[1] for o in flat])
        nu = treedef.unflatten([o[2] for o in flat])
        return new_updates, RiemannianAdamState(count, mu, nu)

    return optax.GradientTransformation(init_fn, update_fn)
