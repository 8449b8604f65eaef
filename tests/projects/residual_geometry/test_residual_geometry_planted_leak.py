"""Planted leak (issue 41): the MixIG probes of residual_geometry are fitted on the fit
sequences only.

``mixing_information_gain`` fits both ridge regressions on ``train_fraction`` of the sequences
and scores them on the rest. When the held-out sequences' updates are a planted exact linear
function of their residuals (``dx = 3 x``) while the fit sequences' updates are noise, the
fitted probes know nothing of it: the held-out R² is exactly that of a ridge fitted on the fit
sequences alone (rebuilt here; tolerance 1e-9, float64 solves) and stays below 0.05. A ridge
fitted on every sequence (the leak, rebuilt the same way) explains most of the held-out
variance, so the test can fail.
"""

import numpy as np

from fidia_jax.metrics import ridge_fit, ridge_predict
from fidia_jax.projects.residual_geometry.geometry import mixing_information_gain

B, T, C = 12, 6, 4


def _data(plant: bool):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(B, T, C))
    dx = rng.normal(size=(B, T, C))
    w = np.tril(rng.random(size=(B, T, T)) + 0.1)
    w /= w.sum(-1, keepdims=True)
    perm = np.random.default_rng(0).permutation(B)  # the function's split (seed 0)
    held = perm[int(round(0.5 * B)) :]
    if plant:
        dx[held] = 3.0 * x[held] / np.sqrt(np.mean(x[held] ** 2, -1, keepdims=True))
    return x, dx, w, held


ALPHA = 1e-3


def _r2_self(x, dx, rows_fit, rows_score):
    xh = x / np.sqrt(np.mean(x * x, -1, keepdims=True))
    n_fit = len(rows_fit) * T
    f = ridge_fit(xh[rows_fit].reshape(-1, C), dx[rows_fit].reshape(-1, C), alpha=ALPHA * n_fit)
    y = dx[rows_score].reshape(-1, C)
    pred = np.asarray(ridge_predict(f, xh[rows_score].reshape(-1, C)))
    return 1 - np.sum((y - pred) ** 2) / np.sum((y - y.mean(0)) ** 2)


def test_held_out_updates_planted_from_their_residuals_do_not_reach_the_probe():
    x, dx, w, held = _data(True)
    fit = np.setdiff1d(np.arange(B), held)
    got = mixing_information_gain(x, dx, w, alpha=ALPHA, train_fraction=0.5, seed=0)
    assert abs(got["r2_self"] - _r2_self(x, dx, fit, held)) < 1e-9
    assert got["r2_self"] < 0.05


def test_a_probe_fitted_on_every_sequence_would_read_it():
    x, dx, _, held = _data(True)
    assert _r2_self(x, dx, np.arange(B), held) > 0.5  # the leak
