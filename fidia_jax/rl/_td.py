"""TD(0) with linear function approximation: pure single-transition functions (rlax style), a
finite Markov reward process with its transition samplers, and the exact TD fixed point.

Value estimate ``V(s) = phi(s) @ theta``. For a transition ``(s_tm1, r_t, s_t)``::

    delta = r_t + discount_t * phi_t @ theta - phi_tm1 @ theta
    theta <- theta + eta_t * (delta * phi_tm1 - l2_reg * theta)

``l2_reg = 0`` is standard TD(0); ``l2_reg > 0`` is the regularised TD(0) proposed for
Markovian sampling (``l2_reg ~ 1 / sqrt(T)``; the exact constant is reconstructed from the
abstract, not the paper's theorem). The step sizes come from any ``optax`` schedule, e.g.
``fidia_jax.optim.exponential_horizon_schedule`` (``eta_0 * T ** (-t / T)``).

The TD fixed point solves ``A theta = b`` with ``A = Phi^T D (Phi - gamma P Phi)``,
``b = Phi^T D r_bar`` (``D = diag(mu)``, ``mu`` the stationary distribution); the regularised
one solves ``(A + l2_reg I) theta = b``.

The random-MRP generator and the scan-based experiment runner of the exponential-step TD(0)
paper live in its driver, :mod:`fidia_jax.projects.td`.

References:
  Sutton, "Learning to predict by the methods of temporal differences", Mach. Learn. 1988.
  Tsitsiklis & Van Roy, "An analysis of temporal-difference learning with function
  approximation", IEEE TAC 1997.
  Li, Schmidt, Babanezhad, Vaswani, "Towards Parameter-Free Temporal Difference Learning",
  arXiv:2603.02577 (2026).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from fidia_jax import _checks

__all__ = [
    "LinearMRP",
    "linear_td0_error",
    "linear_td0_direction",
    "linear_td0_update",
    "td_fixed_point",
    "td_linear_system",
    "stationary_distribution",
    "sample_transition_iid",
    "sample_transition_markov",
    "td_param_error",
]


def linear_td0_error(
    theta: jax.Array, phi_tm1: jax.Array, r_t: jax.Array, discount_t: jax.Array, phi_t: jax.Array
) -> jax.Array:
    """TD error ``delta = r_t + discount_t * phi_t @ theta - phi_tm1 @ theta``.

    Args:
      theta: ``(d,)`` weights.
      phi_tm1: ``(d,)`` features of the source state.
      r_t: ``()`` reward.
      discount_t: ``()`` discount (0 at episode ends).
      phi_t: ``(d,)`` features of the next state.

    Returns:
      ``()`` TD error.

    Raises:
      ValueError: wrong ranks.

    Example:
      >>> from fidia_jax import rl
      >>> theta, phi_tm1, phi_t = jnp.array([1.0, -2.0]), jnp.array([0.5, 0.5]), jnp.eye(2)[0]
      >>> r_t, discount_t = jnp.float32(2.0), jnp.float32(0.9)
      >>> print(rl.linear_td0_error(theta, phi_tm1, r_t, discount_t, phi_t))  # 2 + .9 + .5
      3.4
      >>> print(rl.linear_td0_update(theta, phi_tm1, r_t, discount_t, phi_t, 0.1))
      [ 1.17 -1.83]
    """
    for name, x, nd in (
        ("theta", theta, 1),
        ("phi_tm1", phi_tm1, 1),
        ("phi_t", phi_t, 1),
        ("r_t", r_t, 0),
        ("discount_t", discount_t, 0),
    ):
        _checks.assert_rank(x, nd, name, where="linear_td0_error")
    return r_t + discount_t * jnp.dot(phi_t, theta) - jnp.dot(phi_tm1, theta)


def linear_td0_direction(
    theta: jax.Array,
    phi_tm1: jax.Array,
    r_t: jax.Array,
    discount_t: jax.Array,
    phi_t: jax.Array,
    l2_reg: float | jax.Array = 0.0,
) -> jax.Array:
    """The (regularised) TD(0) semi-gradient *descent* direction ``-(delta phi_tm1) + l2_reg theta``.

    Feed it to ``optax.sgd(schedule)`` as the "gradient" to run TD(0) with any optax
    schedule; :func:`linear_td0_update` applies one step directly.

    Returns:
      ``(d,)`` array.
    """
    delta = linear_td0_error(theta, phi_tm1, r_t, discount_t, phi_t)
    return -delta * phi_tm1 + l2_reg * theta


def linear_td0_update(
    theta: jax.Array,
    phi_tm1: jax.Array,
    r_t: jax.Array,
    discount_t: jax.Array,
    phi_t: jax.Array,
    step_size: float | jax.Array,
    l2_reg: float | jax.Array = 0.0,
) -> jax.Array:
    """One step ``theta + step_size * (delta * phi_tm1 - l2_reg * theta)``; returns ``(d,)``."""
    return theta - step_size * linear_td0_direction(theta, phi_tm1, r_t, discount_t, phi_t, l2_reg)


class LinearMRP(NamedTuple):
    """A finite Markov reward process (an MDP under a fixed policy) with linear features.

    Attributes:
      transition: ``(S, S)`` row-stochastic ``P[s, s']``.
      rewards: ``(S, S)`` reward ``R[s, s']`` of the transition ``s -> s'``.
      features: ``(S, d)`` feature matrix ``Phi`` (rows of norm <= 1).
      discount: ``()`` ``gamma`` in ``[0, 1)``.

    Example (two states, tabular features; the generator of random ones is
    :func:`fidia_jax.projects.td.random_linear_mrp`):

      >>> from fidia_jax import rl
      >>> mrp = rl.LinearMRP(transition=jnp.full((2, 2), 0.5),
      ...                    rewards=jnp.array([[1.0, 1.0], [0.0, 0.0]]),
      ...                    features=jnp.eye(2), discount=jnp.float32(0.5))
      >>> print(rl.stationary_distribution(mrp.transition))
      [0.5 0.5]
      >>> print(rl.td_fixed_point(mrp))  # tabular: the true values V = r_bar + gamma P V
      [1.5 0.5]
    """

    transition: jax.Array
    rewards: jax.Array
    features: jax.Array
    discount: jax.Array


def _closed_class(transition: jax.Array) -> jax.Array:
    """``(S,)`` bool: the states reachable from every state (support of ``P`` only).

    A finite chain has a unique stationary distribution exactly when it has one closed
    communicating class, i.e. when some state can be reached from every state; that class is
    the returned set (empty when there are several closed classes). Reachability is the
    transitive closure of ``P > 0`` by ``ceil(log2 S)`` boolean squarings (static).
    """
    s = transition.shape[0]
    reach = ((transition > 0) | jnp.eye(s, dtype=bool)).astype(jnp.float32)
    for _ in range(max(1, (s - 1).bit_length())):
        reach = (reach @ reach > 0).astype(jnp.float32)
    return jnp.all(reach > 0, axis=0)


def _gth(p: jax.Array) -> jax.Array:
    """Stationary distribution by Grassmann-Taksar-Heyman state reduction (no subtraction).

    Every quantity is a sum or product of non-negative numbers, so each ``mu_i`` comes out with
    a small relative error however close the chain is to reducible (the linear solve of
    ``(I - P^T) mu = 0`` loses everything once ``1 - P_ii`` rounds: a switching probability of
    ``1e-7`` in float32). Needs state 0 in the closed class (then every eliminated state still
    leads to a lower one, and no divisor is 0 in exact arithmetic).
    """
    s = p.shape[0]
    idx = jnp.arange(s)

    def reduce(i, a):
        n = s - 1 - i
        lower = idx < n
        row = jnp.where(lower, a[n], 0.0)
        col = jnp.where(lower, a[:, n], 0.0) / jnp.sum(row)
        a = a.at[:, n].set(jnp.where(lower, col, a[:, n]))
        return a + jnp.where(lower[:, None] & lower[None, :], col[:, None] * row[None, :], 0.0)

    a = jax.lax.fori_loop(0, s - 1, reduce, p)

    def back(n, pi):
        return pi.at[n].set(jnp.sum(jnp.where(idx < n, pi * a[:, n], 0.0)))

    pi = jax.lax.fori_loop(1, s, back, jnp.zeros((s,), p.dtype).at[0].set(1.0))
    return pi / jnp.sum(pi)


def stationary_distribution(transition: jax.Array) -> jax.Array:
    """``mu`` with ``mu @ P = mu``, ``sum(mu) = 1`` (``(S,)``).

    The solution is unique exactly when the chain has a single closed class of states (e.g. an
    irreducible chain); it is decided exactly, from the support ``P > 0`` (some state must be
    reachable from every state). A chain with several closed classes (the ``2 x 2`` identity,
    two absorbing states, ...) has a family of stationary distributions, and then TD's fixed
    point and the value error are not defined either.

    It is computed by the Grassmann-Taksar-Heyman algorithm (state reduction without
    subtraction; Grassmann, Taksar & Heyman, Operations Research 1985), which reads only the
    off-diagonal probabilities: each ``mu_i`` has a relative error of a few ulps of the working
    dtype however close the chain is to reducible. A symmetric 2-state chain with switching
    probability ``1e-7`` gives ``[0.5, 0.5]`` (a float32 linear solve of ``(I - P^T) mu = 0``
    gave ``[0.456, 0.544]``: ``1 - 1e-7`` rounds in float32). The working dtype is the input's
    floating dtype as jax holds it (float64 input is float32 unless ``jax_enable_x64``), which
    costs only that dtype's relative rounding of each entry.

    Args:
      transition: ``(S, S)`` row-stochastic matrix of a chain with one closed class.

    Returns:
      ``(S,)`` floating (float32 for integer input), zero on transient states. Under ``jit`` /
      ``vmap`` (where nothing can be raised) a chain without a unique stationary distribution
      gives all ``nan``, which propagates to :func:`td_linear_system`, :func:`td_fixed_point`
      and :func:`td_param_error`; so does a probability that underflows to 0 on the way.

    Raises:
      ValueError: ``transition`` not square, or (concrete input) a chain without a unique
        stationary distribution.

    Example:
      >>> from fidia_jax import rl
      >>> print(rl.stationary_distribution(jnp.array([[0.5, 0.5], [0.0, 1.0]])))  # absorbing
      [0. 1.]
    """
    transition = jnp.asarray(transition)
    _checks.assert_rank(transition, 2, "transition", where="stationary_distribution")
    s = transition.shape[0]
    _checks.assert_shape(transition, (s, s), "transition", where="stationary_distribution")
    if not jnp.issubdtype(transition.dtype, jnp.floating):
        transition = transition.astype(jnp.float32)
    closed = _closed_class(transition)
    unique = jnp.any(closed)
    if _checks.is_concrete(unique) and not bool(unique):  # a jit closure constant is traced
        raise ValueError(
            "stationary_distribution: the chain has no unique stationary distribution (no "
            "state is reachable from every state: it has several closed classes, e.g. two "
            "absorbing states); TD's fixed point is then not unique either."
        )
    # put a state of the closed class first (a swap, its own inverse), reduce, swap back
    first = jnp.argmax(closed)
    perm = jnp.arange(s).at[0].set(first).at[first].set(0)
    mu = _gth(transition[perm][:, perm])[perm]
    return jnp.where(unique, mu, jnp.full_like(mu, jnp.nan))


def td_linear_system(mrp: LinearMRP) -> tuple[jax.Array, jax.Array]:
    """``(A, b)`` of the expected TD(0) update ``E[delta phi_tm1] = b - A theta``.

    ``A = Phi^T D (Phi - gamma P Phi)``, ``b = Phi^T D r_bar`` with ``D = diag(mu)`` (``mu`` the
    stationary distribution) and ``r_bar[s] = sum_s' P[s, s'] R[s, s']``. The smallest
    eigenvalue of ``(A + A^T) / 2`` is the ``omega`` that ``1/t`` step-size theory needs.

    Returns:
      ``(A (d, d), b (d,))`` float32.
    """
    p, r, phi, gamma = mrp
    mu = stationary_distribution(p)
    r_bar = jnp.sum(p * r, axis=1)
    d_phi = phi * mu[:, None]
    a = d_phi.T @ (phi - gamma * (p @ phi))
    b = d_phi.T @ r_bar
    return a, b


def td_fixed_point(mrp: LinearMRP, l2_reg: float | jax.Array = 0.0) -> jax.Array:
    """The (regularised) TD(0) fixed point: solves ``(A + l2_reg I) theta = b``.

    Args:
      mrp: the process.
      l2_reg: regulariser ``lambda``.

    Returns:
      ``(d,)`` ``theta*`` (float32); all ``nan`` under ``jit`` / ``vmap`` for a chain without a
      unique stationary distribution.

    Raises:
      ValueError: (concrete input) a chain without a unique stationary distribution (see
        :func:`stationary_distribution`).
    """
    a, b = td_linear_system(mrp)
    return jnp.linalg.solve(a + l2_reg * jnp.eye(mrp.features.shape[1]), b)


def td_param_error(mrp: LinearMRP, theta: jax.Array, theta_star: jax.Array) -> jax.Array:
    """``||Phi (theta - theta*)||_D^2`` (stationary-distribution-weighted value error); ``()``."""
    mu = stationary_distribution(mrp.transition)
    diff = mrp.features @ (theta - theta_star)
    return jnp.sum(mu * diff * diff)


def sample_transition_iid(key: jax.Array, mrp: LinearMRP, mu: jax.Array):
    """``s ~ mu``, ``s' ~ P[s]``; returns ``(s, s', phi_tm1, r_t, phi_t)``.

    Args:
      key: PRNG key (two draws: the state, then its successor).
      mrp: the process.
      mu: ``(S,)`` state distribution (usually :func:`stationary_distribution`).
    """
    k1, k2 = jax.random.split(key)
    s = jax.random.categorical(k1, jnp.log(mu))
    return _step_from(k2, mrp, s)


def sample_transition_markov(key: jax.Array, mrp: LinearMRP, s: jax.Array):
    """``s' ~ P[s]`` from the current state ``s``; returns ``(s, s', phi_tm1, r_t, phi_t)``."""
    return _step_from(key, mrp, s)


def _step_from(key, mrp, s):
    s_next = jax.random.categorical(key, jnp.log(mrp.transition[s]))
    return s, s_next, mrp.features[s], mrp.rewards[s, s_next], mrp.features[s_next]
