"""Random Markov reward processes and the scan-based TD(0) runners of the TD experiments."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from fidia_jax import _checks, rl

__all__ = ["linear_td0_path", "random_linear_mrp", "run_linear_td0"]


def random_linear_mrp(
    key: jax.Array,
    n_states: int = 20,
    n_features: int = 5,
    discount: float = 0.9,
    *,
    sparsity: float = 0.0,
) -> rl.LinearMRP:
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
      :class:`fidia_jax.rl.LinearMRP`.

    Raises:
      ValueError: ``n_features > n_states``, discount outside ``[0, 1)`` or sparsity outside
        ``[0, 1)``.
    """
    if n_features > n_states:
        raise ValueError(f"n_features={n_features} must be <= n_states={n_states}")
    if not 0.0 <= discount < 1.0:
        raise ValueError(f"discount must be in [0, 1), got {discount}")
    if not 0.0 <= sparsity < 1.0:
        raise ValueError(f"random_linear_mrp: sparsity must be in [0, 1), got {sparsity}")
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
    return rl.LinearMRP(p, r, phi, jnp.asarray(discount, jnp.float32))


def _td0_step(key, mrp, schedule, mu, *, markovian, l2_reg):
    """``step((theta, s), t) -> (theta, s_next)``: one TD(0) update on transition ``t``."""

    def step(carry, t):
        theta, s = carry
        k = jax.random.fold_in(key, t)
        if markovian:
            _, s_next, phi_tm1, r, phi_t = rl.sample_transition_markov(k, mrp, s)
        else:
            _, s_next, phi_tm1, r, phi_t = rl.sample_transition_iid(k, mrp, mu)
        theta = rl.linear_td0_update(theta, phi_tm1, r, mrp.discount, phi_t, schedule(t), l2_reg)
        return theta, s_next

    return step


def _td0_start(key, mrp, theta0):
    """``(theta, s0, mu, key)``: the initial weights and state, the stationary distribution."""
    d = mrp.features.shape[1]
    if theta0 is not None:
        _checks.assert_shape(theta0, (d,), "theta0", where="run_linear_td0 / linear_td0_path")
    theta = jnp.zeros((d,), jnp.float32) if theta0 is None else theta0
    mu = rl.stationary_distribution(mrp.transition)
    k0, key = jax.random.split(key)
    s0 = jax.random.categorical(k0, jnp.log(mu))
    return theta, s0, mu, key


def run_linear_td0(
    key: jax.Array,
    mrp: rl.LinearMRP,
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
      theta0: ``(d,)`` initial weights (shape checked, also under ``jit``; values are not:
        NaN in, NaN out).

    Returns:
      ``(d,)`` last iterate ``theta_T``. A chain without a unique stationary distribution (so
      no unique TD fixed point) gives all ``nan`` under ``jit`` / ``vmap``, never a finite
      ``theta`` that would look converged.

    Raises:
      ValueError: (concrete ``mrp``) a chain without a unique stationary distribution (see
        :func:`fidia_jax.rl.stationary_distribution`); ``theta0`` not of shape ``(d,)``.
    """
    theta, s0, mu, key = _td0_start(key, mrp, theta0)
    step = _td0_step(key, mrp, schedule, mu, markovian=markovian, l2_reg=l2_reg)
    (theta, _), _ = jax.lax.scan(
        lambda c, t: (step(c, t), None), (theta, s0), jnp.arange(num_steps)
    )
    # mu is all nan when the stationary distribution is not unique (traced input): the sampled
    # states would be arbitrary, so the iterate must not come back finite.
    return jnp.where(jnp.all(jnp.isfinite(mu)), theta, jnp.full_like(theta, jnp.nan))


def linear_td0_path(
    key: jax.Array,
    mrp: rl.LinearMRP,
    schedule: Callable[[jax.Array], jax.Array],
    num_steps: int,
    record_at: Sequence[int],
    *,
    markovian: bool = False,
    l2_reg: float | jax.Array = 0.0,
    theta0: jax.Array | None = None,
) -> jax.Array:
    """The iterates of :func:`run_linear_td0`'s trajectory after the steps in ``record_at``.

    Same transitions as :func:`run_linear_td0` with the same arguments (so the iterate after
    ``num_steps`` steps is that function's result); one ``lax.scan`` that keeps a ``(K, d)``
    buffer, so memory does not grow with ``num_steps``.

    Args:
      key, mrp, schedule, num_steps, markovian, l2_reg, theta0: as :func:`run_linear_td0`.
      record_at: ``K`` strictly increasing step counts in ``[1, num_steps]`` (static).

    Returns:
      ``(K, d)``: row ``i`` is ``theta`` after ``record_at[i]`` updates (all ``nan`` for a chain
      without a unique stationary distribution, as :func:`run_linear_td0`).

    Raises:
      ValueError: ``record_at`` not strictly increasing in ``[1, num_steps]``; a chain without a
        unique stationary distribution (concrete ``mrp``).
    """
    marks = np.asarray(record_at, np.int64)
    if (
        marks.ndim != 1
        or marks.size == 0
        or marks[0] < 1
        or marks[-1] > num_steps
        or np.any(np.diff(marks) <= 0)
    ):
        raise ValueError(
            f"record_at must be strictly increasing steps in [1, {num_steps}], got {record_at}"
        )
    theta, s0, mu, key = _td0_start(key, mrp, theta0)
    step = _td0_step(key, mrp, schedule, mu, markovian=markovian, l2_reg=l2_reg)
    marks_j = jnp.asarray(np.append(marks, -1), jnp.int32)  # -1: nothing left to record

    def body(carry, t):
        theta, s, buf, j = carry
        theta, s = step((theta, s), t)
        hit = t + 1 == marks_j[j]
        buf = jnp.where(hit, jax.lax.dynamic_update_index_in_dim(buf, theta, j, 0), buf)
        return (theta, s, buf, j + hit.astype(jnp.int32)), None

    buf0 = jnp.zeros((marks.size, theta.shape[0]), theta.dtype)
    (_, _, buf, _), _ = jax.lax.scan(
        body, (theta, s0, buf0, jnp.int32(0)), jnp.arange(int(marks[-1]))
    )
    return jnp.where(jnp.all(jnp.isfinite(mu)), buf, jnp.full_like(buf, jnp.nan))
