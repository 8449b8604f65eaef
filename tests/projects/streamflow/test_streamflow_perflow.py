"""PeRFlow's per-window eps-to-velocity conversion (the authors' scheduler) as a parameterisation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax.projects.streamflow import perflow, serving

W = perflow.PerflowWindows()
# jitted once per shape (eager op-by-op dispatch compiles every primitive: slow on a busy CPU)
EPS_TO_V = jax.jit(perflow.eps_to_velocity, static_argnums=3)
V_TO_EPS = jax.jit(perflow.velocity_to_eps, static_argnums=3)


def test_windows_and_gammas_from_the_scaled_linear_schedule():
    np.testing.assert_array_equal(W.starts, [1.0, 0.75, 0.5, 0.25])
    np.testing.assert_array_equal(W.ends, [0.75, 0.5, 0.25, 0.0])
    betas = np.linspace(0.00085**0.5, 0.012**0.5, 1000) ** 2
    abar = np.cumprod(1 - betas)
    want = np.sqrt(abar[[999, 749, 499, 249]] / abar[[749, 499, 249, 0]])
    np.testing.assert_allclose(W.gammas, want, rtol=1e-6)
    assert np.all(W.gammas < 1)
    # lookup (authors' get_window): a window start belongs to the window it starts
    t = jnp.asarray([1.0, 0.76, 0.75, 0.5, 0.3, 0.001], jnp.float32)
    k = np.asarray(jax.jit(perflow._window, static_argnums=1)(t, W))
    np.testing.assert_array_equal(W.starts[k], [1.0, 1.0, 0.75, 0.5, 0.5, 0.25])
    np.testing.assert_array_equal(W.ends[k], [0.75, 0.75, 0.5, 0.25, 0.25, 0.0])


@pytest.mark.parametrize("t", [1.0, 0.9, 0.75, 0.6, 0.31, 0.05])
def test_a_step_to_the_window_end_lands_on_the_diffusion_window_end(t):
    """diff_eps semantics: the window start is the end point noised by the window's own eps,
    ``x_s = gamma x_e + sqrt(1 - gamma^2) eps``, and the trajectory inside is the straight line;
    feeding that eps at any ``t`` of the window gives the line's velocity, so an Euler step of
    size ``t - t_e`` lands on ``x_e`` (derived independently of the lambda / eta formulas)."""
    rng = np.random.default_rng(0)
    x_e = rng.normal(size=(1, 3, 3, 2))
    eps = rng.normal(size=(1, 3, 3, 2))
    k = int(np.argmax(W.ends < t - 1e-4))
    s, e, g = float(W.starts[k]), float(W.ends[k]), float(W.gammas[k])
    x_s = g * x_e + np.sqrt(1 - g * g) * eps
    x_t = ((t - e) * x_s + (s - t) * x_e) / (s - e)
    v = EPS_TO_V(jnp.asarray(eps, jnp.float32), jnp.asarray(x_t, jnp.float32), jnp.asarray([t]), W)
    np.testing.assert_allclose(np.asarray(v), (x_s - x_e) / (s - e), rtol=2e-4, atol=2e-4)
    np.testing.assert_allclose(x_t - (t - e) * np.asarray(v), x_e, atol=2e-4)


def test_velocity_to_eps_inverts_eps_to_velocity():
    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.normal(size=(5, 2, 2, 1)), jnp.float32)
    v = jnp.asarray(rng.normal(size=(5, 2, 2, 1)), jnp.float32)
    t = jnp.asarray([0.99, 0.75, 0.6, 0.25, 0.02], jnp.float32)
    back = EPS_TO_V(V_TO_EPS(v, x, t, W), x, t, W)
    np.testing.assert_allclose(np.asarray(back), np.asarray(v), atol=2e-4)


def test_perflow_timesteps_follow_the_authors_split():
    np.testing.assert_array_equal(perflow.perflow_timesteps(4), [1.0, 0.75, 0.5, 0.25, 0.0])
    np.testing.assert_allclose(
        perflow.perflow_timesteps(6), [1.0, 0.875, 0.75, 0.625, 0.5, 0.25, 0.0]
    )
    with pytest.raises(ValueError, match="num_steps >= num_windows=4"):
        perflow.perflow_timesteps(3, strict=True)


def test_exact_eps_network_samples_the_point_through_the_stream_batcher():
    """An eps-network that is exact for a single data point ``x*`` (the eps of the velocity
    ``(x - x*) / t``): the PeRFlow-parameterised sampler lands on ``x*`` across the four
    windows, in the stream batch and the sequential sampler alike."""
    x_star = jnp.asarray(np.random.default_rng(2).normal(size=(4, 4, 1)), jnp.float32)

    def eps_net(params, x, t):
        return perflow.velocity_to_eps((x - x_star[None]) / t[:, None, None, None], x, t, W)

    apply_fn = perflow.perflow_apply(eps_net, W)
    noise = np.random.default_rng(3).normal(size=(3, 4, 4, 1)).astype(np.float32)
    b = serving.StreamBatcher(apply_fn, None, (4, 4, 1), buckets=(4,), aot=False)
    scheds = [
        perflow.perflow_timesteps(4),
        perflow.perflow_timesteps(7),
        serving.linear_timesteps(5),
    ]
    for i in range(3):
        b.submit(noise[i], scheds[i], i)
    out = b.drain()
    for i in range(3):
        np.testing.assert_allclose(out[i], np.asarray(x_star), atol=1e-4)
        ref = serving.sample_euler(apply_fn, None, noise[i : i + 1], scheds[i])
        np.testing.assert_allclose(out[i], ref[0], atol=1e-5)


@pytest.mark.integration  # compiles the tiny U-Net twice (tens of seconds on a busy CPU)
def test_driver_parameterisation_wraps_the_network_output_as_eps():
    from fidia_jax.errors import ConfigError
    from fidia_jax.projects import streamflow

    f_v, params = streamflow.init_flow(streamflow.get_config("tiny"))
    f_e, params_e = streamflow.init_flow(
        streamflow.get_config("tiny", parameterisation="perflow_eps")
    )
    x = jnp.asarray(np.random.default_rng(4).normal(size=(2, 8, 8, 1)), jnp.float32)
    t = jnp.asarray([0.9, 0.3], jnp.float32)
    raw = jax.jit(f_v)(params, x, t)  # same seed: the same network, read as an eps
    want = EPS_TO_V(raw, x, t, W)
    np.testing.assert_allclose(np.asarray(jax.jit(f_e)(params_e, x, t)), want, atol=1e-5)
    with pytest.raises(ConfigError, match="parameterisation"):
        streamflow.get_config("tiny", parameterisation="eps")
