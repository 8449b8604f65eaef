"""TD(0) primitives with linear features: closed forms and the brute-force fixed point.

The random-MRP generator and the scan runner are the TD driver's (tests/projects/td/).
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from fidia_jax import optim, rl
from fidia_jax.errors import ConfigError


@pytest.fixture(scope="module")
def mrp():
    """8 states, 3 unit-norm features, gamma 0.8, Dirichlet(1) rows, uniform rewards."""
    rng = np.random.default_rng(0)
    phi = rng.normal(size=(8, 3))
    phi /= np.linalg.norm(phi, axis=1, keepdims=True)
    return rl.LinearMRP(
        jnp.asarray(rng.dirichlet(np.ones(8), size=8), jnp.float32),
        jnp.asarray(rng.uniform(size=(8, 8)), jnp.float32),
        jnp.asarray(phi, jnp.float32),
        jnp.float32(0.8),
    )


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


def test_linear_system_matches_expected_update(mrp):
    """E[delta phi_tm1] = b - A theta at two arbitrary thetas (brute-force enumeration)."""
    a, b = rl.td_linear_system(mrp)
    for theta in (np.zeros(3), np.array([0.5, -1.0, 2.0])):
        direction, _ = brute_force_mean_direction(mrp, theta)
        np.testing.assert_allclose(b - a @ jnp.asarray(theta, jnp.float32), direction, atol=1e-5)


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
        "td_fixed_point",
        "td_linear_system",
        "LinearMRP",
    ):
        assert name in rl.__all__ and hasattr(rl, name)
    # The generator and the runner moved to the TD driver (fidia_jax.projects.td).
    assert not hasattr(rl, "random_linear_mrp") and not hasattr(rl, "run_linear_td0")


REDUCIBLE = {
    "identity": np.eye(2),
    "two_absorbing": np.array([[1.0, 0.0, 0.0], [0.3, 0.4, 0.3], [0.0, 0.0, 1.0]]),
    "two_blocks": np.kron(np.eye(2), np.full((2, 2), 0.5)),
}


@pytest.mark.parametrize("name", sorted(REDUCIBLE))
def test_no_unique_stationary_distribution_is_an_error_or_nan(name):
    """Issue 17 item 14: the 2x2 identity gave nan without an error (and a finite TD theta)."""
    p = jnp.asarray(REDUCIBLE[name], jnp.float32)
    s = p.shape[0]
    mrp = rl.LinearMRP(p, jnp.ones((s, s)), jnp.eye(s), jnp.float32(0.5))
    for fn in (
        rl.stationary_distribution,
        lambda p_: rl.td_fixed_point(mrp._replace(transition=p_)),
    ):
        with pytest.raises(ValueError, match="no unique stationary distribution"):
            fn(p)
        assert np.all(np.isnan(np.asarray(jax.jit(fn)(p))))  # traced: cannot raise, all nan
        # a closure constant under jit is traced too (it raised TracerBoolConversionError)
        assert np.all(np.isnan(np.asarray(jax.jit(lambda fn=fn: fn(p))())))
    theta = jax.jit(rl.td_param_error)(mrp, jnp.zeros(s), jnp.ones(s))
    assert np.isnan(float(theta))


def test_unique_stationary_distribution_of_reducible_but_single_class_chains():
    """Transient states are fine: one closed class means one stationary distribution."""
    absorbing = jnp.array([[0.5, 0.5, 0.0], [0.0, 0.5, 0.5], [0.0, 0.0, 1.0]])
    np.testing.assert_allclose(rl.stationary_distribution(absorbing), [0.0, 0.0, 1.0], atol=1e-6)
    periodic = jnp.array([[0.0, 1.0], [1.0, 0.0]])
    np.testing.assert_allclose(jax.jit(rl.stationary_distribution)(periodic), [0.5, 0.5])
    np.testing.assert_allclose(jax.jit(lambda: rl.stationary_distribution(periodic))(), [0.5, 0.5])
    with pytest.raises(ValueError, match="transition must have shape"):
        rl.stationary_distribution(jnp.ones((2, 3)) / 3)


@pytest.mark.parametrize(
    ("p01", "p10", "want"),
    [(1e-7, 1e-7, [0.5, 0.5]), (1e-7, 3e-7, [0.75, 0.25]), (1e-30, 1e-30, [0.5, 0.5])],
)
def test_stationary_distribution_of_nearly_reducible_chains(p01, p10, want):
    """Issue 29 item 6: a float64 chain with switching probability 1e-7 gave [0.456, 0.544]
    (a float32 linear solve; 1 - 1e-7 rounds). The exact answer is p10 / (p01 + p10)."""
    chain = np.array([[1 - p01, p01], [p10, 1 - p10]], np.float64)
    got = np.asarray(rl.stationary_distribution(chain))
    np.testing.assert_allclose(got, want, rtol=1e-6)
    jitted = np.asarray(jax.jit(rl.stationary_distribution)(jnp.asarray(chain)))
    np.testing.assert_allclose(jitted, want, rtol=1e-6)


def test_stationary_distribution_matches_float64_eigenvector():
    rng = np.random.default_rng(3)
    chains = rng.random((4, 7, 7)) ** 4  # uneven rows
    chains[1, :, 3] *= 1e-6  # a state that is hard to reach
    chains /= chains.sum(-1, keepdims=True)
    got = np.asarray(jax.vmap(rl.stationary_distribution)(jnp.asarray(chains, jnp.float32)))
    for p, mu in zip(chains, got, strict=True):
        w, v = np.linalg.eig(p.T)
        ref = np.real(v[:, np.argmin(np.abs(w - 1))])
        np.testing.assert_allclose(mu, ref / ref.sum(), rtol=2e-5)  # componentwise
