"""TD(0) with linear function approximation: pure single-transition functions (rlax style),
a random Markov-reward-process generator, the exact TD fixed point and a scan-based runner.

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

References:
  Sutton, "Learning to predict by the methods of temporal differences", Mach. Learn. 1988.
  Tsitsiklis & Van Roy, "An analysis of temporal-difference learning with function
  approximation", IEEE TAC 1997.
  Li, Schmidt, Babanezhad, Vaswani, "Towards Parameter-Free Temporal Difference Learning",
  arXiv:2603.02577 (2026).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

__all__ = [
    "LinearMRP",
    "linear_td0_error",
    "linear_td0_direction",
    "linear_td0_update",
    "random_linear_mrp",
    "td_fixed_point",
    "stationary_distribution",
    "sample_transition_iid",
    "sample_transition_markov",
    "run_linear_td0",
    "td_param_error",
]


def _check_vec(name, x, ndim):
    if jnp.ndim(x) != ndim:
        raise ValueError(f"{name} must have rank {ndim}, got shape {jnp.shape(x)}")


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
    """
    for name, x, nd in (
        ("theta", theta, 1),
        ("phi_tm1", phi_tm1, 1),
        ("phi_t", phi_t, 1),
        ("r_t", r_t, 0),
        ("discount_t", discount_t, 0),
    ):
        _check_vec(name, x, nd)
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
    """

    transition: jax.Array
    rewards: jax.Array
    features: jax.Array
    discount: jax.Array


def random_linear_mrp(
    key: jax.Array,
    n_states: int = 20,
    n_features: int = 5,
    discount: float = 0.9,
    *,
    sparsity: float = 0.0,
) -> LinearMRP:
    """A random MRP: Dirichlet(1) transition rows, uniform rewards in ``[0, 1]``, Gaussian
    features with rows normalised to unit norm (full column rank with probability 1).

    Args:
      key: PRNG key (vmap over keys for a batch of MRPs).
      n_states: ``S``.
      n_features: ``d <= S``.
      discount: ``gamma``.
      sparsity: fraction of transition entries zeroed before renormalising (each row keeps
        its self-loop, so the chain stays aperiodic); slower mixing for Markovian tests.

    Returns:
      :class:`LinearMRP`.

    Raises:
      ValueError: ``n_features > n_states`` or discount outside ``[0, 1)``.
    """
    if n_features > n_states:
        raise ValueError(f"n_features={n_features} must be <= n_states={n_states}")
    if not 0.0 <= discount < 1.0:
        raise ValueError(f"discount must be in [0, 1), got {discount}")
    kp, kr, kf, ks = jax.random.split(key, 4)
    p = jax.random.dirichlet(kp, jnp.ones((n_states,)), (n_states,))
    if sparsity > 0:
        keep = jax.random.uniform(ks, (n_states, n_states)) >= sparsity
        keep = keep | jnp.eye(n_states, dtype=bool)
        p = jnp.where(keep, p + 1e-3, 0.0)
        p = p / jnp.sum(p, axis=1, keepdims=True)
    r = jax.random.uniform(kr, (n_states, n_states))
    phi = jax.random.normal(kf, (n_states, n_features))
    phi = phi / jnp.linalg.norm(phi, axis=1, keepdims=True)
    return LinearMRP(p, r, phi, jnp.asarray(discount, jnp.float32))


def stationary_distribution(transition: jax.Array) -> jax.Array:
    """``mu`` with ``mu @ P = mu``, ``sum(mu) = 1`` (linear solve; ``(S,)``)."""
    s = transition.shape[0]
    # Replace one balance equation by the normalisation constraint.
    a = (jnp.eye(s) - transition.T).at[-1].set(1.0)
    rhs = jnp.zeros((s,)).at[-1].set(1.0)
    return jnp.linalg.solve(a, rhs)


def td_fixed_point(mrp: LinearMRP, l2_reg: float | jax.Array = 0.0) -> jax.Array:
    """The (regularised) TD(0) fixed point: solves ``(A + l2_reg I) theta = b``.

    Args:
      mrp: the process.
      l2_reg: regulariser ``lambda``.

    Returns:
      ``(d,)`` ``theta*`` (float32).
    """
    p, r, phi, gamma = mrp
    mu = stationary_distribution(p)
    r_bar = jnp.sum(p * r, axis=1)
    d_phi = phi * mu[:, None]
    a = d_phi.T @ (phi - gamma * (p @ phi))
    b = d_phi.T @ r_bar
    return jnp.linalg.solve(a + l2_reg * jnp.eye(phi.shape[1]), b)


def td_param_error(mrp: LinearMRP, theta: jax.Array, theta_star: jax.Array) -> jax.Array:
    """``||Phi (theta - theta*)||_D^2`` (stationary-distribution-weighted value error)."""
    mu = stationary_distribution(mrp.transition)
    diff = mrp.features @ (theta - theta_star)
    return jnp.sum(mu * diff * diff)


def sample_transition_iid(key: jax.Array, mrp: LinearMRP, mu: jax.Array):
    """``s ~ mu``, ``s' ~ P[s]``; returns ``(s, s', phi_tm1, r_t, phi_t)``."""
    k1, k2 = jax.random.split(key)
    s = jax.random.categorical(k1, jnp.log(mu))
    return _step_from(k2, mrp, s)


def sample_transition_markov(key: jax.Array, mrp: LinearMRP, s: jax.Array):
    """``s' ~ P[s]`` from the current state ``s``; returns ``(s, s', phi_tm1, r_t, phi_t)``."""
    return _step_from(key, mrp, s)


def _step_from(key, mrp, s):
    s_next = jax.random.categorical(key, jnp.log(mrp.transition[s]))
    return s, s_next, mrp.features[s], mrp.rewards[s, s_next], mrp.features[s_next]


def run_linear_td0(
    key: jax.Array,
    mrp: LinearMRP,
    schedule: Callable[[jax.Array], jax.Array],
    num_steps: int,
    *,
    markovian: bool = False,
    l2_reg: float | jax.Array = 0.0,
    theta0: jax.Array | None = None,
) -> jax.Array:
    """Runs ``num_steps`` TD(0) updates from ``theta0`` (default zeros) with ``lax.scan``.

    Args:
      key: PRNG key for sampling.
      mrp: the process (vmap over keys and MRPs for batches).
      schedule: ``t -> eta_t`` (any optax schedule), evaluated at ``t = 0 .. num_steps - 1``.
      num_steps: ``T`` (static).
      markovian: sample one trajectory (started from the stationary distribution) instead of
        i.i.d. transitions from ``mu``.
      l2_reg: regulariser ``lambda`` of the regularised TD(0).
      theta0: ``(d,)`` initial weights.

    Returns:
      ``(d,)`` last iterate ``theta_T``.
    """
    d = mrp.features.shape[1]
    theta = jnp.zeros((d,), jnp.float32) if theta0 is None else theta0
    mu = stationary_distribution(mrp.transition)
    k0, key = jax.random.split(key)
    s0 = jax.random.categorical(k0, jnp.log(mu))

    def body(carry, t):
        theta, s = carry
        k = jax.random.fold_in(key, t)
        if markovian:
            _, s_next, phi_tm1, r, phi_t = sample_transition_markov(k, mrp, s)
        else:
            _, s_next, phi_tm1, r, phi_t = sample_transition_iid(k, mrp, mu)
        theta = linear_td0_update(theta, phi_tm1, r, mrp.discount, phi_t, schedule(t), l2_reg)
        return (theta, s_next), None

    (theta, _), _ = jax.lax.scan(body, (theta, s0), jnp.arange(num_steps))
    return theta
