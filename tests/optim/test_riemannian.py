"""Riemannian SGD / Adam on the Poincaré ball: closed-form steps, convergence, the retraction."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from fidia_jax import layers, optim
from fidia_jax.errors import ConfigError

C = 0.5
P = np.array([[0.6, -0.3, 0.2], [-0.6, 0.5, 0.1]]) / np.sqrt(C)  # targets (2 points in B^3)
X0 = np.array([[-0.5, 0.4, 0.0], [0.2, -0.7, 0.6]]) / np.sqrt(C)


def _loss(x, p):
    return jnp.sum(layers.poincare_distance(x, p, C) ** 2)


def _run(opt, num_steps, dtype):
    p, x0 = jnp.asarray(P, dtype), jnp.asarray(X0, dtype)

    def body(carry, _):
        x, s = carry
        u, s = opt.update(jax.grad(_loss)(x, p), s, x)
        x_new = optax.apply_updates(x, u)
        return (x_new, s), (layers.poincare_distance(x_new, p, C), jnp.linalg.norm(x_new, axis=1))

    (x, _), (dist, norms) = jax.lax.scan(body, (x0, opt.init(x0)), None, length=num_steps)
    return x, dist, norms


def _jit_run(opt, num_steps, dtype=jnp.float32):
    return jax.tree.map(np.asarray, jax.jit(lambda: _run(opt, num_steps, dtype))())


def test_rsgd_step_is_a_geodesic_fraction_float64():
    # grad_R d(x, p)^2 = -2 log_x(p), so one RSGD step with lr eta (exp retraction) moves the
    # fraction 2*eta of the geodesic: d(x1, p) = (1 - 2 eta) d(x0, p), exactly.
    with jax.enable_x64(True):
        x1, dist, _ = _jit_run(optim.riemannian_sgd(0.2, c=C), 1, jnp.float64)
        d0 = np.asarray(layers.poincare_distance(jnp.asarray(X0), jnp.asarray(P), C))
        d01 = np.asarray(layers.poincare_distance(jnp.asarray(X0), jnp.asarray(x1), C))
    np.testing.assert_allclose(dist[0], 0.6 * d0, rtol=1e-9)
    np.testing.assert_allclose(d01, 0.4 * d0, rtol=1e-9)


@pytest.mark.parametrize("retraction", ["expmap", pytest.param("project", marks=pytest.mark.slow)])
def test_rsgd_converges_and_stays_in_ball(retraction):
    x, dist, norms = _jit_run(optim.riemannian_sgd(0.1, c=C, retraction=retraction), 60)
    np.testing.assert_allclose(x, P, atol=1e-4)
    assert np.all(norms < 1 / np.sqrt(C)) and np.all(np.isfinite(dist))
    # expmap: contraction 0.8 per step from the start; projection: still monotone.
    assert np.all(np.diff(dist, axis=0) <= 1e-6)


def test_radam_first_step_has_riemannian_length_lr_and_converges():
    lr = 0.05
    with jax.enable_x64(True):
        x1, dist1, _ = _jit_run(optim.riemannian_adam(lr, c=C, eps=0.0), 1, jnp.float64)
        d01 = np.asarray(layers.poincare_distance(jnp.asarray(X0), jnp.asarray(x1), C))
        d0 = np.asarray(layers.poincare_distance(jnp.asarray(X0), jnp.asarray(P), C))
    # m_hat = g_R, v_hat = lambda^2 ||g_R||^2: the step is a geodesic of length lr toward p.
    np.testing.assert_allclose(d01, lr, rtol=1e-9)
    np.testing.assert_allclose(dist1[0], d0 - lr, rtol=1e-9)
    x, dist, norms = _jit_run(
        optim.riemannian_adam(optax.exponential_decay(0.3, 300, 0.01), c=C), 300
    )
    np.testing.assert_allclose(x, P, atol=2e-3)
    assert np.all(norms < 1 / np.sqrt(C))


def test_updates_land_on_the_retracted_point_at_the_edge():
    # params + updates == exp_x(-lr grad_R): the split into optax's update/apply is exact up to
    # one float rounding, also for a point at the float32 edge of the ball.
    x = layers.project_to_ball(jnp.array([[1.0, 0.0], [0.3, 0.4]], jnp.float32) / np.sqrt(C), C)
    g = jnp.array([[-5.0, 1.0], [1.0, 2.0]], jnp.float32)
    opt = optim.riemannian_sgd(0.5, c=C)
    u, _ = opt.update(g, opt.init(x), x)
    new = optax.apply_updates(x, u)
    lam = layers.conformal_factor(x, C)
    ref = layers.expmap(x, -0.5 * g / lam**2, C)
    np.testing.assert_allclose(new, ref, atol=1e-6)
    assert np.all(np.sqrt(C) * np.linalg.norm(np.asarray(new), axis=1) < 1.0)


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ConfigError, match="curvature c must be > 0"):
        optim.riemannian_sgd(0.1, c=0.0)
    with pytest.raises(ConfigError, match="curvature c must be > 0"):
        optim.riemannian_adam(0.1, c=-1.0)
    with pytest.raises(ConfigError, match="retraction"):
        optim.riemannian_adam(0.1, retraction="cayley")
    opt = optim.scale_by_poincare_metric(1.0)
    with pytest.raises(ValueError, match="needs the current params"):
        opt.update(jnp.ones((1, 2)), opt.init(None))
