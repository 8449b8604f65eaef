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


@pytest.mark.integration  # four 20-step compiled runs: 10-20 s each on the loaded 2 cores
@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16])
@pytest.mark.parametrize("make", [optim.riemannian_adam, optim.riemannian_sgd])
def test_low_precision_params_move_like_float32(make, dtype):
    # bf16(0.999) == 1.0: a bias correction computed in bfloat16 is 0 and the point never
    # moved. The statistics are float32 now: 20 steps in low precision follow the float32 run
    # to the params' rounding, and the points get closer to their targets.
    opt = make(0.05, c=C)
    x_lo, dist_lo, norms_lo = _jit_run(opt, 20, dtype)
    x_32, dist_32, _ = _jit_run(opt, 20, jnp.float32)
    assert x_lo.dtype == jnp.dtype(dtype)
    d0 = np.asarray(layers.poincare_distance(jnp.asarray(X0), jnp.asarray(P), C))
    assert np.all(dist_lo[-1] < d0 - 0.5)  # moved toward the target (Adam: 0.05 a step)
    np.testing.assert_allclose(np.asarray(x_lo, np.float32), x_32, atol=0.03)
    assert np.all(np.asarray(norms_lo, np.float32) < 1 / np.sqrt(C))
    if make is optim.riemannian_adam:
        state = opt.init(jnp.asarray(X0, dtype))
        assert state.mu.dtype == jnp.float32 and state.nu.dtype == jnp.float32


def test_low_precision_points_stay_inside_after_rounding():
    # A huge step pushes bfloat16 points to the boundary: the retraction keeps the wider margin
    # 8 * eps(bf16), so rounding the new point to bfloat16 stays strictly inside the ball.
    x = jnp.asarray([[0.9, 0.0], [0.0, -0.9], [0.6, 0.6]], jnp.bfloat16)
    g = jnp.asarray([[-1e3, 0.0], [0.0, 1e3], [-1e3, -1e3]], jnp.bfloat16)
    for opt in (optim.riemannian_sgd(10.0), optim.riemannian_adam(10.0)):
        # under jit (the eager ball checks would refuse tanh's rounding to 1 inside expmap)
        new = jax.jit(
            lambda x, g, opt=opt: optax.apply_updates(x, opt.update(g, opt.init(x), x)[0])
        )(x, g)
        norms = np.linalg.norm(np.asarray(new, np.float32), axis=1)
        assert new.dtype == jnp.bfloat16 and np.all(norms < 1.0) and np.all(norms > 0.9)


@pytest.mark.integration  # MultiSteps compiles both branches: ~20 s on the loaded 2 cores
def test_radam_inside_multisteps_is_finite_and_equals_one_big_batch():
    # MultiSteps(k=2) with the two half-gradients g/2 + g/2 takes the step of the plain
    # optimiser on g (every second call), finite in bfloat16 too, also with a zero gradient.
    dtype = jnp.bfloat16
    x = jnp.asarray(X0, dtype)
    g = jax.grad(_loss)(jnp.asarray(X0, jnp.float32), jnp.asarray(P, jnp.float32)).astype(dtype)
    ms = optax.MultiSteps(optim.riemannian_adam(0.05, c=C), every_k_schedule=2)
    plain = optim.riemannian_adam(0.05, c=C)
    s, p = ms.init(x), x
    sp, pp = plain.init(x), x
    ms_update, plain_update = jax.jit(ms.update), jax.jit(plain.update)
    for k in range(3):
        for grad in (g, g) if k < 2 else (jnp.zeros_like(g), jnp.zeros_like(g)):
            u, s = ms_update(grad, s, p)
            assert np.all(np.isfinite(np.asarray(u, np.float32)))
            p = optax.apply_updates(p, u)
        up, sp = plain_update(g if k < 2 else jnp.zeros_like(g), sp, pp)
        pp = optax.apply_updates(pp, up)
        np.testing.assert_allclose(np.asarray(p, np.float32), np.asarray(pp, np.float32), atol=1e-6)
    assert np.abs(np.asarray(p, np.float32) - X0).max() > 0.02  # it moved (2 steps of 0.05)
