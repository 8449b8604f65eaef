"""Fidelity of the PeRFlow scheduler to the authors' code (StreamFlow @ b5135a8,
``src/scheduler_perflow.py``, ``src/perflow_batch_scheduler.py``): the fixture
``tests/data/streamflow/perflow_scheduler.npz`` is made by ``tools/streamflow_make_fixture.py``,
which runs their functions in a throwaway torch venv."""

import json
import pathlib
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax.errors import ConfigError
from fidia_jax.projects.streamflow import perflow, serving

DATA = pathlib.Path(__file__).resolve().parents[2] / "data" / "streamflow"
REF = dict(np.load(DATA / "perflow_scheduler.npz"))
META = json.loads((DATA / "perflow_scheduler.json").read_text())
WINDOW = jax.jit(perflow._window, static_argnums=1)
EPS_TO_V = jax.jit(perflow.eps_to_velocity, static_argnums=3)
F32_EPS = float(np.finfo(np.float32).eps)


def _schedule(n, w):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # n < K: the authors' raise-to-K
        return perflow.perflow_timesteps(n, w)


def test_fixture_is_from_the_recorded_commit():
    assert META["commit"] == "b5135a88d37be351438b1dc737ac5abacfce173d"
    assert set(META["files"]) == {"src/scheduler_perflow.py", "src/perflow_batch_scheduler.py"}


@pytest.mark.parametrize("key", sorted(k for k in REF if k.startswith("ts/")))
def test_set_timesteps_matches_the_authors_exactly(key):
    """Every ``(K, N, n)`` of the fixture, including ``n < K`` (raised to ``K``) and ``K`` that
    do not divide 1 in binary (3, 7, 10): the integer timesteps are equal, and the float32
    ``t`` is ``timestep / N``."""
    k, n_train, n = (int(p[1:]) for p in key[3:].split("_"))
    ours = _schedule(n, perflow.PerflowWindows(k, n_train))
    want = REF[key]
    assert ours.shape == (len(want) + 1,) and ours[-1] == 0.0
    np.testing.assert_array_equal(np.rint(ours[:-1].astype(np.float64) * n_train), want)
    np.testing.assert_array_equal(ours[:-1], (want / n_train).astype(np.float32))


def test_too_few_steps_warn_by_default_and_raise_when_strict():
    w = perflow.PerflowWindows()
    with pytest.warns(UserWarning, match="num_steps=2 < num_windows=4"):
        ts = perflow.perflow_timesteps(2, w)
    np.testing.assert_array_equal(ts[:-1] * 1000, REF["ts/K4_N1000_n3"])  # authors: n -> K
    with pytest.raises(ConfigError, match="num_steps >= num_windows=4"):
        perflow.perflow_timesteps(2, w, strict=True)
    with pytest.raises(ConfigError, match="integer >= 1"):
        perflow.perflow_timesteps(0, w)
    with pytest.raises(ConfigError, match="grid points"):  # 251 steps in a window of 250
        perflow.perflow_timesteps(1004, w)


@pytest.mark.parametrize("case", ["K3_N1000", "K4_N1000", "K10_N1000", "K4_N500"])
def test_window_lookup_at_and_near_the_edges(case):
    """Probes: every boundary and its threshold ``b + 0.1/N`` with 1 and 2 float32 ulp either
    side, ``t = 1``, ``1/N`` and ``0.1/N``. Windows equal exactly (a float32 comparison, no
    tolerance); ``gamma`` to 1e-6 relative (ours: float64 ``abar``, the authors': float32
    ``cumprod`` of N = 1000 factors, whose rounding is ~1e-6 here, bound N * eps_f32 / 2)."""
    k, n_train = (int(p[1:]) for p in case.split("_"))
    w = perflow.PerflowWindows(k, n_train)
    key = f"lookup/{case}"
    t = REF[f"{key}/t"]
    idx = np.asarray(WINDOW(jnp.asarray(t), w))
    start, end = w.starts[idx], w.ends[idx]
    raised = np.isnan(REF[f"{key}/start"])  # the authors' IndexError: t <= 0.1 / N
    np.testing.assert_array_equal(raised, t <= np.float32(0.1 / n_train))
    assert raised.sum() == 3 and np.all(idx[raised] == k - 1)  # ours: the last window
    np.testing.assert_array_equal(start[~raised], REF[f"{key}/start"][~raised])
    np.testing.assert_array_equal(end[~raised], REF[f"{key}/end"][~raised])
    np.testing.assert_allclose(w.gammas[idx][~raised], REF[f"{key}/gamma"][~raised], rtol=1e-6)
    # the edge is the threshold: t - 0.1/N (float32) above the window end
    thr = REF[f"{key}/t_minus_thr"]
    np.testing.assert_array_equal(thr[~raised] > end[~raised], True)
    np.testing.assert_array_equal(
        thr[~raised & (idx > 0)] <= w.ends[np.maximum(idx - 1, 0)][~raised & (idx > 0)], True
    )
    # probes exist on both sides of every threshold (the fixture exercises the edge)
    for b in w.ends[:-1]:
        i = np.flatnonzero(w.ends == b)[0]
        assert np.any(idx == i) and np.any(idx == i + 1)


@pytest.mark.parametrize("case", ["K3_N1000", "K4_N1000", "K10_N1000", "K4_N500"])
def test_the_authors_batched_lookup_is_the_last_window(case):
    """Recorded, not followed: ``get_window_alpha_batch`` overwrites its mask window by window,
    so every ``t > 0.1/N`` ends in the last window (and ``t <= 0.1/N`` in none: zeros)."""
    k, n_train = (int(p[1:]) for p in case.split("_"))
    key = f"lookup/{case}"
    t = REF[f"{key}/t"]
    live = t > np.float32(1.0 / k) + np.float32(0.1 / n_train)  # not in the last window anyway
    assert live.sum() > 10
    np.testing.assert_array_equal(REF[f"{key}/batch_start"][live], np.float32(1.0 / k))
    np.testing.assert_array_equal(REF[f"{key}/batch_end"][live], 0.0)
    assert not np.array_equal(REF[f"{key}/batch_start"][live], REF[f"{key}/start"][live])
    assert META["step_batch"].startswith("NameError")


def test_the_window_index_is_computed_in_float32_as_torch_does():
    """``(t * N - 1).long()`` on a float32 tensor: float32(0.7) * 1000 rounds to 700 in float32
    (index 699) but is 699.99998... in float64 (index 698); K = 10 has a window at 0.7."""
    w = perflow.PerflowWindows(10)
    assert w._train_index(np.asarray([0.7], np.float32))[0] == 699
    assert int(np.float64(np.float32(0.7)) * 1000 - 1) == 698
    abar = w.alphas_cumprod
    k = int(np.flatnonzero(w.starts == np.float32(0.7))[0])
    np.testing.assert_allclose(w.gammas[k], np.sqrt(abar[699] / abar[599]), rtol=1e-6)


def _eps_net(m, beta):
    m, beta = jnp.asarray(m), jnp.asarray(beta)

    def eps(params, x, t):  # the fixture's eps = M x + beta t, channels last
        return (
            jnp.einsum("cd,bhwd->bhwc", m, x) + beta[None, None, None, :] * t[:, None, None, None]
        )

    return eps


@pytest.mark.parametrize("case", [c[0] for c in META["traj_cases"]])
def test_sampling_trajectory_matches_the_authors(case):
    """Whole trajectories of ``PeRFlowScheduler.step`` with the fixed linear eps-predictor.

    Tolerances, relative to the largest latent of the trajectory: one step from the authors'
    own ``x_k`` 1e-5 (about ten float32 operations on values amplified up to ``lambda_s,
    |eta_s| < 10`` by the window coefficients: 10 * 10 * eps_f32 / 2 ~ 6e-6, plus ``gamma``'s
    ~1e-6 from the float32 ``abar``); the whole trajectory from the noise through
    :func:`sample_euler`, where those errors carry through up to 12 steps: 1e-4."""
    name, k, n_train, n, pred = next(c for c in META["traj_cases"] if c[0] == case)
    w = perflow.PerflowWindows(k, n_train, prediction_type=pred)
    key = f"traj/{case}"
    xs, t_ref = REF[f"{key}/x"], REF[f"{key}/t"]
    ts = _schedule(n, w)
    np.testing.assert_array_equal(ts[:-1], t_ref)  # the t the authors' step saw
    eps = _eps_net(REF["model/M"], REF["model/beta"])
    scale = float(np.abs(xs).max())
    for j in range(len(t_ref)):
        x = jnp.asarray(xs[j])
        tb = jnp.full((x.shape[0],), ts[j], jnp.float32)
        v = EPS_TO_V(eps(None, x, tb), x, tb, w)
        step = np.asarray(x - (ts[j] - ts[j + 1]) * v)
        np.testing.assert_allclose(step, xs[j + 1], rtol=0, atol=1e-5 * scale, err_msg=f"{j}")
    out = serving.sample_euler(perflow.perflow_apply(eps, w), None, xs[0], ts)
    np.testing.assert_allclose(out, xs[-1], rtol=0, atol=1e-4 * scale)


def test_trajectories_differ_between_prediction_types():
    """``ddim_eps`` is a different field (only ``eta_s`` differs): the fixture's ddim case is
    not reproduced with ``diff_eps``, so the option is load-bearing."""
    xs = REF["traj/K4_n6_ddim/x"]
    w = perflow.PerflowWindows(prediction_type="diff_eps")
    eps = _eps_net(REF["model/M"], REF["model/beta"])
    out = serving.sample_euler(perflow.perflow_apply(eps, w), None, xs[0], _schedule(6, w))
    assert np.abs(out - xs[-1]).max() > 1e-2 * np.abs(xs).max()
    with pytest.raises(ConfigError, match="prediction_type"):
        perflow.PerflowWindows(prediction_type="velocity")
