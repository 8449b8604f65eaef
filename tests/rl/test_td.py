"""TD(0) with linear features: closed forms, brute-force fixed point, convergence."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from fidia_jax import optim, rl
from fidia_jax.errors import ConfigError


@pytest.fixture(scope="module")
def mrp():
    return rl.random_linear_mrp(jax.random.key(0), n_states=8, n_features=3, discount=0.8)


def test_td_error_and_update_closed_form():
    theta = jnp.array([1.0, -2.0])
    phi_tm1, phi_t = jnp.array([0.5, 0.5]), jnp.array([1.0, 0.0])
    delta = rl.linear_td0_error(theta, phi_tm1, jnp.float32(2.0), jnp.float32(0.9), phi_t)
    np.testing.assert_allclose(delta, 2.0 + 0.9 * 1.0 - (-0.5), rtol=1e-6)
    new = rl.linear_td0_update(
        theta, phi_tm1, jnp.float32(2.0), jnp.float32(0.9), phi_t, 0.1, l2_reg=0.5
    )
    np.testing.assert_allclose(new, theta + 0.1 * (3.4 * phi_tm1 - 0.5 * theta), rtol=1e-6)
    with pytest.raises(ValueError, match="rank"):
        rl.linear_td0_error(theta, phi_tm1, jnp.ones(2), jnp.float32(0.9), phi_t)


def brute_force_mean_direction(mrp, theta, l2_reg=0.0):
    """E_{s~mu, s'~P}[delta phi(s)] - l2_reg theta, enumerating all transitions (float64)."""
    p, r, phi = (np.asarray(x, np.float64) for x in mrp[:3])
    gamma = float(mrp.discount)
    w, v = np.linalg.eig(p.T)
    mu = np.real(v[:, np.argmin(np.abs(w - 1))])
    mu = mu / mu.sum()
    theta = np.asarray(theta, np.float64)
    total = np.zeros_like(theta)
    for s in range(p.shape[0]):
        for s2 in range(p.shape[0]):
            delta = r[s, s2] + gamma * phi[s2] @ theta - phi[s] @ theta
            total += mu[s] * p[s, s2] * delta * phi[s]
    return total - l2_reg * theta, mu


@pytest.mark.parametrize("l2_reg", [0.0, 0.3])
def test_fixed_point_zeroes_expected_update(mrp, l2_reg):
    theta_star = rl.td_fixed_point(mrp, l2_reg)
    direction, mu = brute_force_mean_direction(mrp, theta_star, l2_reg)
    np.testing.assert_allclose(direction, 0.0, atol=2e-5)
    np.testing.assert_allclose(rl.stationary_distribution(mrp.transition), mu, atol=1e-5)
    # Not trivially zero elsewhere.
    assert np.abs(brute_force_mean_direction(mrp, theta_star + 0.1, l2_reg)[0]).max() > 1e-3


def test_exponential_schedule_values():
    sch = optim.exponential_horizon_schedule(0.5, 100)
    np.testing.assert_allclose([sch(0), sch(50), sch(100)], [0.5, 0.5 / 10, 0.5 / 100], rtol=1e-5)
    inv = optim.inverse_time_schedule(0.5, 10.0)
    np.testing.assert_allclose([inv(0), inv(10)], [0.5, 0.25], rtol=1e-6)
    with pytest.raises(ConfigError):
        optim.exponential_horizon_schedule(0.5, 0)


def test_td0_converges_to_fixed_point(mrp):
    theta_star = rl.td_fixed_point(mrp)
    keys = jax.random.split(jax.random.key(1), 4)

    def final_error(num_steps):
        sch = optim.exponential_horizon_schedule(1.0, num_steps)
        run = jax.vmap(lambda k: rl.run_linear_td0(k, mrp, sch, num_steps))
        thetas = run(keys)
        return float(jnp.mean(jnp.linalg.norm(thetas - theta_star[None], axis=1)))

    scale_ = float(jnp.linalg.norm(theta_star))
    e_short, e_long = final_error(300), final_error(20_000)
    assert e_long < 0.05 * scale_, (e_long, scale_)
    assert e_long < 0.5 * e_short


def test_regularised_markovian_td_converges(mrp):
    lam = 0.05
    theta_star = rl.td_fixed_point(mrp, lam)
    n = 20_000
    sch = optim.exponential_horizon_schedule(1.0, n)
    thetas = jax.vmap(lambda k: rl.run_linear_td0(k, mrp, sch, n, markovian=True, l2_reg=lam))(
        jax.random.split(jax.random.key(2), 4)
    )
    err = float(jnp.mean(jnp.linalg.norm(thetas - theta_star[None], axis=1)))
    # 10x below the initial error ||0 - theta*|| (Markovian noise is correlated).
    assert err < 0.1 * float(jnp.linalg.norm(theta_star))
    # ...and that fixed point differs from the unregularised one by more than the error.
    assert float(jnp.linalg.norm(theta_star - rl.td_fixed_point(mrp))) > 2 * err


def test_direction_with_optax_sgd_matches_runner(mrp):
    """TD(0) through optax.sgd(schedule) on the same transitions equals the direct update."""
    sch = optim.exponential_horizon_schedule(0.8, 50)
    opt = optax.sgd(sch)
    mu = rl.stationary_distribution(mrp.transition)
    theta_a = theta_b = jnp.zeros(3)
    state = opt.init(theta_a)
    for t in range(5):
        _, _, phi_tm1, r, phi_t = rl.sample_transition_iid(jax.random.key(t), mrp, mu)
        g = rl.linear_td0_direction(theta_a, phi_tm1, r, mrp.discount, phi_t)
        u, state = opt.update(g, state)
        theta_a = optax.apply_updates(theta_a, u)
        theta_b = rl.linear_td0_update(theta_b, phi_tm1, r, mrp.discount, phi_t, sch(t))
    np.testing.assert_allclose(theta_a, theta_b, rtol=1e-6)
    assert float(jnp.abs(theta_a).max()) > 0


def test_public_api():
    for name in (
        "linear_td0_error",
        "linear_td0_update",
        "random_linear_mrp",
        "td_fixed_point",
        "run_linear_td0",
        "LinearMRP",
    ):
        assert name in rl.__all__ and hasattr(rl, name)
