"""The classical and neural peers of TeamWork, fitted on the standardised training series: PCA
T2 + Q, SKAB's Conv-AE (with the covering-window minimum of its scores) and scikit-learn's
Isolation Forest. Each returns a :class:`~fidia_jax.projects.teamwork._detector.Detector`;
:func:`fidia_jax.projects.teamwork.train.fit_detector` dispatches to them.
"""

from __future__ import annotations

import functools
import time
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from fidia_jax import parallel, train
from fidia_jax.errors import DataError
from fidia_jax.projects.teamwork import model
from fidia_jax.projects.teamwork._detector import Detector, _adam, _moving_average
from fidia_jax.projects.teamwork.configs import TeamWorkConfig

__all__ = ["covering_minimum"]


def _fit_pca(z: np.ndarray, standardise, config: TeamWorkConfig, t0: float) -> Detector:
    """PCA T2 + Q: components explaining 90 % of the variance; score = T2/q99 + Q/q99 (train)."""
    cov = np.cov(z, rowvar=False)
    lam, vec = np.linalg.eigh(cov)
    lam, vec = lam[::-1], vec[:, ::-1]
    k = int(np.searchsorted(np.cumsum(lam) / lam.sum(), 0.9) + 1)
    k = min(k, z.shape[1] - 1) if z.shape[1] > 1 else 1
    p, lam_k = vec[:, :k], np.maximum(lam[:k], 1e-12)

    def raw(s_z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        t = s_z @ p
        t2 = np.sum(t**2 / lam_k, axis=1)
        q = np.sum((s_z - t @ p.T) ** 2, axis=1)
        return t2, q

    t2_tr, q_tr = raw(z)
    c_t2, c_q = np.quantile(t2_tr, 0.99) + 1e-12, np.quantile(q_tr, 0.99) + 1e-12

    def score(v: Any) -> np.ndarray:
        t2, q = raw(standardise(v, "series to score"))
        return _moving_average(t2 / c_t2 + q / c_q, config.smooth)

    return Detector("pca", score, {"components": k, "fit_s": time.time() - t0})


def covering_minimum(window_scores: np.ndarray, window: int) -> np.ndarray:
    """Per step, the smallest score of the stride-1 windows that cover it.

    Args:
      window_scores: ``(N,)``, window ``j`` covering steps ``j .. j + window - 1``.
      window: the window length.

    Returns:
      ``(N + window - 1,)`` float64: step ``t`` gets ``min(window_scores[max(0, t - window + 1)
      : min(t, N - 1) + 1])``.
    """
    r = np.asarray(window_scores, np.float64)
    pad = np.full(window - 1, np.inf)
    view = np.lib.stride_tricks.sliding_window_view(np.concatenate([pad, r, pad]), window)
    return view.min(axis=1)


@functools.cache
def _convae_step(graphdef: nnx.GraphDef, mesh=None, param_sharding: str = "replicated"):
    """Conv-AE's jitted step (MSE, Adam 1e-3 as in SKAB's notebook), one compile per shape;
    with ``mesh`` data-parallel (every batch leaf split along its leading axis)."""

    def loss_fn(params, batch):
        x_BxLxC, keep1, keep2 = batch
        recon = train.merge_model(graphdef, params)(x_BxLxC, keep1, keep2)
        return jnp.mean((recon - x_BxLxC) ** 2)

    return train.make_train_step(loss_fn, _adam(1e-3), mesh=mesh, param_sharding=param_sharding)


@partial(jax.jit, static_argnums=0)
def _convae_window_scores(graphdef, params, x_NxLxC):
    """``(N,)`` SKAB's window residual: sum over channels of the mean absolute error in time."""
    recon = nnx.merge(graphdef, params)(x_NxLxC)
    return jnp.sum(jnp.mean(jnp.abs(x_NxLxC - recon), axis=1), axis=-1)


def _fit_convae(
    z: np.ndarray, standardise, config: TeamWorkConfig, t0: float, *, workdir, run: str,
    mesh=None,
) -> Detector:  # fmt: skip
    """SKAB's Conv-AE baseline: windows of ``convae_window`` steps (stride 1), fixed Adam steps.

    Score of a step: the smallest residual of the windows that cover it, so that a threshold
    flags a step exactly when every window covering it is above it (the rule of SKAB's
    notebook, which flags a point when all windows ending at the points before it are
    anomalous). Differences from the notebook (declared in docs/teamwork.md): a fixed number of
    steps instead of 100 epochs with early stopping on a 10 % validation split.
    """
    win = config.convae_window
    if z.shape[0] < win:
        raise DataError(f"Conv-AE window {win} is longer than the series ({z.shape[0]} steps)")
    net = model.init_convae(z.shape[1], win, seed=config.seed)
    graphdef, params, _ = train.split_model(net)
    state = train.init_train_state(
        params, _adam(1e-3), mesh=mesh, param_sharding=config.param_sharding
    )
    offsets = np.arange(win)
    n_win = z.shape[0] - win + 1

    def batches():
        rng = np.random.default_rng(config.seed)
        b = config.batch_size
        while True:
            idx = rng.integers(0, n_win, b)
            keep1 = (rng.random((b, win // 2, 32)) >= 0.2) / 0.8
            keep2 = (rng.random((b, win // 2, 16)) >= 0.2) / 0.8
            yield (
                jnp.asarray(z[idx[:, None] + offsets[None, :]]),
                jnp.asarray(keep1, jnp.float32),
                jnp.asarray(keep2, jnp.float32),
            )

    res = train.fit(
        state,
        _convae_step(graphdef, mesh, config.param_sharding),
        batches(),
        num_steps=config.convae_steps,
        workdir=workdir,
        run=run,
        fingerprint=train.config_fingerprint(
            config, ignore=("convae_steps", "steps", "num_devices")
        ),
        mesh=mesh,
        param_sharding=config.param_sharding,
    )
    params = parallel.to_host(res.state.params)  # scoring: every process, from a host copy
    chunk = 64

    def score(v: Any) -> np.ndarray:
        s_z = standardise(v, "series to score")
        t_len = s_z.shape[0]
        if t_len < win:
            raise DataError(f"Conv-AE window {win} is longer than the series ({t_len} steps)")
        wins = s_z[np.arange(t_len - win + 1)[:, None] + offsets[None, :]]
        pad = (-len(wins)) % chunk
        wins_p = np.concatenate([wins, np.zeros((pad, *wins.shape[1:]), np.float32)])
        r = np.concatenate(
            [
                np.asarray(
                    _convae_window_scores(graphdef, params, jnp.asarray(wins_p[i : i + chunk]))
                )
                for i in range(0, len(wins_p), chunk)
            ]
        )[: len(wins)]
        return covering_minimum(r, win)

    step_losses = [h["loss"] for h in res.history if "loss" in h]
    info = {
        "final_loss": float(np.mean(np.asarray(step_losses[-10:], np.float32))),
        "fit_s": time.time() - t0,
    }
    return Detector("convae", score, info)


def _fit_iforest(z: np.ndarray, standardise, config: TeamWorkConfig, t0: float) -> Detector:
    """scikit-learn Isolation Forest (100 trees) on standardised points; score = -score_samples."""
    from sklearn.ensemble import IsolationForest

    with train.limit_threads():  # the run's cores, not every core of a shared machine
        forest = IsolationForest(n_estimators=100, random_state=config.seed).fit(z)

    def score(v: Any) -> np.ndarray:
        return _moving_average(
            -forest.score_samples(standardise(v, "series to score")), config.smooth
        )

    return Detector("iforest", score, {"fit_s": time.time() - t0})
