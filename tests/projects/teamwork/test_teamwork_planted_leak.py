"""Planted leak (issue 41): a TeamWork detector is fitted on the training series only.

``fit_detector`` standardises with the training series' mean / std and fits its model
(here PCA T2+Q, whose normalising quantiles also come from the training scores) on it, and a
step's score depends only on that fit and the step's smoothing neighbourhood. So the scores of
the first half of a test series, and the SKAB UCL threshold (a quantile of the training
scores), do not move when the held-out second half is shifted by 50 standard deviations
(exactly equal: no fitted number sees the test steps). A detector fitted on the
training + test steps (the leak, rebuilt here) moves them. The ``ratio``
threshold (top ``anomaly_ratio`` of each test series: the field's protocol, label-free) is a
statistic of the held-out scores by design, and the test shows it moves: ``skab_ucl`` is the
training-only rule.
"""

import dataclasses

import numpy as np

from fidia_jax.projects import teamwork
from fidia_jax.projects.teamwork import data
from fidia_jax.projects.teamwork.train import evaluate_scores, fit_detector


def _setup():
    config = dataclasses.replace(teamwork.get_config("tiny"), smooth=1)
    syn = data.make_synthetic(0, train_length=400, test_length=400, n_anomalies=4)
    shifted = syn.test.copy()
    half = len(shifted) // 2
    shifted[half:] += 50.0 * syn.train.std(0)
    return config, syn, shifted, half


def test_held_out_shift_moves_no_training_fitted_number():
    config, syn, shifted, half = _setup()
    det = fit_detector("pca", syn.train, config)
    clean, moved = det.score(syn.test), det.score(shifted)
    w = config.smooth  # the moving average reaches back, never forward, by < smooth steps
    np.testing.assert_array_equal(moved[: half - w], clean[: half - w])
    train_scores = det.score(syn.train)
    r_clean = evaluate_scores([(clean, syn.labels, train_scores)], config.anomaly_ratio)
    labels_first = syn.labels.copy()
    r_first = evaluate_scores(
        [(clean[:half], labels_first[:half], train_scores)], config.anomaly_ratio
    )
    r_first_moved = evaluate_scores(
        [(moved[:half], labels_first[:half], train_scores)], config.anomaly_ratio
    )
    assert r_first_moved["skab_ucl"] == r_first["skab_ucl"]
    assert set(r_clean) == {"ratio", "oracle", "skab_ucl"}
    # the field's ratio threshold is a statistic of the held-out scores: it moves
    thr_clean = np.quantile(clean, 1 - config.anomaly_ratio)
    thr_moved = np.quantile(moved, 1 - config.anomaly_ratio)
    assert thr_moved > 10 * thr_clean


def test_a_detector_fitted_on_training_and_test_steps_would_move_the_scores():
    config, syn, shifted, half = _setup()

    def leaky_scores(test):  # the leak: scaler + PCA fitted on the training and test steps
        return fit_detector("pca", np.concatenate([syn.train, test]), config).score(test)

    a, b = leaky_scores(syn.test), leaky_scores(shifted)
    w = config.smooth
    assert np.max(np.abs(a[: half - w] - b[: half - w])) > 1e-2 * np.abs(a).max()
