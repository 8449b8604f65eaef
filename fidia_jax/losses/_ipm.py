"""Integral probability metrics (IPMs) between *weighted* samples of one point cloud.

A sample is the whole cloud with a weight vector (for a treatment arm: ``1/n_k`` on the arm's
units and ``0`` elsewhere). Fixed shapes keep everything inside ``jit``; the price is that one
IPM evaluation costs ``O(N^2)`` whatever the sample sizes. Textbook IPMs with closed-form tests
(``tests/losses/test_ipm.py``): the squared MMD with a linear or RBF kernel and the entropic
Wasserstein-1 distance (Sinkhorn, ``ott-jax``), as CFR uses them; the treatment-effect driver
(:mod:`fidia_jax.projects.causal`) builds its balancing schemes on them.

References:
  Shalit, Johansson, Sontag, "Estimating individual treatment effect: generalization bounds and
  algorithms" (CFR, TARNet), ICML 2017, https://arxiv.org/abs/1606.03976.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from fidia_jax import _checks
from fidia_jax.errors import needs_extra

__all__ = ["IPMS", "ipm", "mmd2_linear", "mmd2_rbf", "wasserstein1_sinkhorn"]

#: IPM names accepted by :func:`ipm`.
IPMS = ("mmd_rbf", "mmd_linear", "wasserstein")


def _check_cloud(x_NxD, a_N, b_N, name):
    if x_NxD.ndim != 2:
        raise ValueError(f"{name}: points must be (N, D), got shape {x_NxD.shape}")
    n = x_NxD.shape[0]
    if a_N.shape != (n,) or b_N.shape != (n,):
        raise ValueError(
            f"{name}: weights must be ({n},) like the points, got {a_N.shape} and {b_N.shape}"
        )
    for w_name, w in (("a_N", a_N), ("b_N", b_N)):
        if not _checks.is_concrete(w):
            continue  # traced (a training step): the caller builds the weights
        v = np.asarray(w, np.float64)
        empty = not v.any()  # an absent sample (a treatment arm missing from a batch)
        if not np.isfinite(v).all() or (v < 0).any() or (abs(v.sum() - 1.0) > 1e-4 and not empty):
            raise ValueError(
                f"{name}: {w_name} must be finite non-negative weights summing to 1 (a "
                f"probability vector; all zeros for an empty sample), got min {v.min():.4g}, "
                f"sum {v.sum():.6g}"
            )


def mmd2_linear(x_NxD: jax.Array, a_N: jax.Array, b_N: jax.Array) -> jax.Array:
    """Squared MMD with the linear kernel: ``||sum_i a_i x_i - sum_i b_i x_i||^2``.

    Args:
      x_NxD: ``(N, D)`` float points (one cloud for both distributions).
      a_N, b_N: ``(N,)`` nonnegative weights, each summing to 1 (zeros drop a point).

    Returns:
      Scalar ``>= 0``. Source: CFR (Shalit et al. 2017), ``mmd2_lin`` (paper).

    Raises:
      ValueError: shapes that do not match; (concrete weights) a weight vector that is not
        finite, non-negative and summing to 1 (within 1e-4) or all zero (an empty sample).
    """
    _check_cloud(x_NxD, a_N, b_N, "mmd2_linear")
    diff_D = (a_N - b_N) @ x_NxD
    return jnp.sum(diff_D**2)


def mmd2_rbf(
    x_NxD: jax.Array, a_N: jax.Array, b_N: jax.Array, *, bandwidth: float | None = 1.0
) -> jax.Array:
    """Squared MMD with the RBF kernel ``k(x, y) = exp(-||x - y||^2 / (2 bandwidth^2))``.

    ``MMD^2 = (a - b)^T K (a - b)`` (the biased V-statistic of weighted samples).

    Args:
      x_NxD: ``(N, D)`` points; a_N, b_N: ``(N,)`` weights summing to 1.
      bandwidth: kernel width ``sigma > 0``; ``None``: the median heuristic
        ``2 sigma^2 = median_ij ||x_i - x_j||^2`` over the whole cloud (held constant in the
        gradient), which keeps the kernel informative in a wide representation.

    Returns:
      Scalar ``>= 0`` (clipped at 0 against round-off).

    Raises:
      ValueError: shapes that do not match, or ``bandwidth <= 0``.
    """
    _check_cloud(x_NxD, a_N, b_N, "mmd2_rbf")
    if bandwidth is not None and not bandwidth > 0:
        raise ValueError(f"mmd2_rbf: bandwidth must be > 0, got {bandwidth}")
    sq_NxN = jnp.sum((x_NxD[:, None, :] - x_NxD[None, :, :]) ** 2, axis=-1)
    if bandwidth is None:  # median heuristic: 2 sigma^2 = median squared distance (constant)
        two_s2 = jax.lax.stop_gradient(jnp.maximum(jnp.median(sq_NxN), 1e-12))
    else:
        two_s2 = 2.0 * bandwidth**2
    k_NxN = jnp.exp(-sq_NxN / two_s2)
    w_N = a_N - b_N
    return jnp.maximum(w_N @ k_NxN @ w_N, 0.0)


def wasserstein1_sinkhorn(
    x_NxD: jax.Array,
    a_N: jax.Array,
    b_N: jax.Array,
    *,
    epsilon: float = 0.05,
    max_iterations: int = 200,
) -> jax.Array:
    """Entropic approximation of the Wasserstein-1 distance, solved by Sinkhorn (``ott-jax``).

    Cost ``c(x, y) = ||x - y||_2`` (Euclidean, not squared: W1); the value returned is the
    transport cost ``<P, C>`` of the entropic plan ``P`` (not the regularised objective), which
    tends to ``W1`` as ``epsilon -> 0``. Gradients flow through the cost only, the plan held
    fixed (CFR's code does the same). Source: CFR-Wass (Shalit et al. 2017) uses the same
    Sinkhorn approximation (paper).

    Args:
      x_NxD: ``(N, D)`` points; a_N, b_N: ``(N,)`` weights summing to 1.
      epsilon: entropic regularisation, relative to the mean cost (``ott``'s ``relative_epsilon``).
      max_iterations: Sinkhorn iterations at most.

    Returns:
      Scalar ``>= 0``.

    Raises:
      ValueError: shapes that do not match; (concrete weights) a weight vector that is not
        finite, non-negative and summing to 1 (within 1e-4) or all zero (an empty sample).
    """
    _check_cloud(x_NxD, a_N, b_N, "wasserstein1_sinkhorn")
    sq_NxN = jnp.sum((x_NxD[:, None, :] - x_NxD[None, :, :]) ** 2, axis=-1)
    cost_NxN = jnp.sqrt(jnp.maximum(sq_NxN, 1e-12))  # finite gradient on the diagonal
    # The plan is computed on a constant copy of the cost (as CFR's code, which stops the
    # gradient at the transport matrix): d<P, C>/dx = <P, dC/dx>, with no gradient through the
    # Sinkhorn iterations.
    # ott-jax is imported here: it takes seconds, and most users of fidia_jax.losses never call this
    with needs_extra("sciml", "wasserstein1_sinkhorn"):
        from ott.geometry import geometry
        from ott.problems.linear import linear_problem
        from ott.solvers.linear import sinkhorn

    geom = geometry.Geometry(
        cost_matrix=jax.lax.stop_gradient(cost_NxN), epsilon=epsilon, relative_epsilon="mean"
    )
    problem = linear_problem.LinearProblem(
        geom, a=jax.lax.stop_gradient(a_N), b=jax.lax.stop_gradient(b_N)
    )
    # ott broadcasts ranks internally; our tests run with jax_numpy_rank_promotion="raise".
    with jax.numpy_rank_promotion("allow"):
        plan_NxN = sinkhorn.Sinkhorn(max_iterations=max_iterations)(problem).matrix
    return jnp.sum(jax.lax.stop_gradient(plan_NxN) * cost_NxN)


def ipm(
    name: str, x_NxD: jax.Array, a_N: jax.Array, b_N: jax.Array, *, bandwidth: float | None = None
) -> jax.Array:
    """Dispatches to one IPM: ``"mmd_rbf"``, ``"mmd_linear"`` (squared MMDs) or ``"wasserstein"``.

    Raises:
      ValueError: an unknown ``name`` (lists :data:`IPMS`).
    """
    if name == "mmd_rbf":
        return mmd2_rbf(x_NxD, a_N, b_N, bandwidth=bandwidth)
    if name == "mmd_linear":
        return mmd2_linear(x_NxD, a_N, b_N)
    if name == "wasserstein":
        return wasserstein1_sinkhorn(x_NxD, a_N, b_N)
    raise ValueError(f"unknown IPM {name!r}; expected one of {IPMS}")
