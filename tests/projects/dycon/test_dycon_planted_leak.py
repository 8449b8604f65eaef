"""Planted leak (issue 41): DyCon's layer probes are fitted on the training rows only.

``layer_probe_r2`` fits each layer's ridge probe (and its centring) on the ``train`` rows and
scores R² on the others. A channel planted to equal the target on the held-out rows and 0 on
the training rows is constant where the probe is fitted, gets weight 0, and no layer's R² moves
(tolerance 1e-9: float64 solves of the same problem). A probe fitted on every row (the leak,
rebuilt here with the same ridge) reads the answer off that channel and its R² jumps.
"""

import numpy as np

from fidia_jax.metrics import r2_score, ridge_fit, ridge_predict
from fidia_jax.projects.dycon.probes import layer_probe_r2


def _data():
    rng = np.random.default_rng(0)
    n, k, c = 80, 3, 5
    x = rng.normal(size=(n, k, c))
    y = x[:, :, 0].sum(1) * 0.3 + rng.normal(size=n)
    train = np.arange(n) % 4 != 0
    plant = np.where(train, 0.0, y)[:, None, None] * np.ones((1, k, 1))
    return x, y, train, np.concatenate([x, plant], axis=2)


def test_a_channel_planted_in_the_held_out_rows_moves_no_probe():
    x, y, train, planted = _data()
    clean, leak = layer_probe_r2(x, y, train), layer_probe_r2(planted, y, train)
    np.testing.assert_allclose(leak.r2, clean.r2, atol=1e-9)
    np.testing.assert_allclose(leak.r2_shuffled, clean.r2_shuffled, atol=1e-9)


def test_a_probe_fitted_on_every_row_would_move():
    x, y, train, planted = _data()
    r2_clean = layer_probe_r2(x, y, train).r2[0]
    fit = ridge_fit(planted[:, 0], y, alpha=1.0)  # the leak: every row, held-out ones too
    leaky = float(r2_score(y[~train], ridge_predict(fit, planted[~train, 0])))
    assert leaky > r2_clean + 0.3
