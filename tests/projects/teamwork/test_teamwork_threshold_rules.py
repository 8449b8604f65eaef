"""The ``ratio_train`` threshold rule (issue 41): fitted on the training scores only.

``ratio`` (the field's protocol, the headline rule) flags the top ``anomaly_ratio`` of each test
series' own scores, so a shift planted in one part of a test series moves the flags of the
untouched part; ``ratio_train`` thresholds at the ``1 - anomaly_ratio`` quantile of the training
scores, so the untouched part's flags do not move. The flags are read from the calls
``evaluate_scores`` makes to ``metrics.point_f1`` (one per rule and series, in rule order).
"""

import dataclasses

import numpy as np
import pytest

from fidia_jax.projects import teamwork
from fidia_jax.projects.teamwork import train as tw_train

RATIO = 0.1


def _scores(seed=0, t=400, t_train=300):
    rng = np.random.default_rng(seed)
    train_s = rng.gamma(2.0, 1.0, t_train)
    test_s = rng.gamma(2.0, 1.0, t)
    labels = np.zeros(t, dtype=np.int64)
    labels[50:60] = 1
    test_s[50:60] += 4.0  # a labelled anomaly in the untouched first half
    return train_s, test_s, labels


def _flags(monkeypatch, runs):
    """Rule -> the plain (unadjusted) predictions ``evaluate_scores`` scored, per series."""
    seen = []
    real = tw_train.metrics.point_f1

    def spy(pred, y, adjust=False):
        if not adjust:
            seen.append(np.asarray(pred).copy())
        return real(pred, y, adjust=adjust)

    monkeypatch.setattr(tw_train.metrics, "point_f1", spy)
    out = tw_train.evaluate_scores(runs, RATIO, ratio_train=True, skab_rule=False)
    monkeypatch.undo()
    rules = list(out)
    assert rules == ["ratio", "ratio_train", "oracle"]
    n = len(runs)
    return out, {r: seen[i * n : (i + 1) * n] for i, r in enumerate(rules)}


def test_planted_shift_moves_ratio_not_ratio_train(monkeypatch):
    train_s, clean, labels = _scores()
    half = len(clean) // 2
    moved = clean.copy()
    moved[half:] += 50.0  # the planted shift: the held-out second half only
    _, f_clean = _flags(monkeypatch, [(clean, labels, train_s)])
    _, f_moved = _flags(monkeypatch, [(moved, labels, train_s)])
    # ratio_train: brute force, and the untouched half's flags do not move
    thr = np.quantile(train_s, 1 - RATIO)
    np.testing.assert_array_equal(f_clean["ratio_train"][0], clean >= thr)
    np.testing.assert_array_equal(f_moved["ratio_train"][0], moved >= thr)
    np.testing.assert_array_equal(
        f_moved["ratio_train"][0][:half], f_clean["ratio_train"][0][:half]
    )
    # ratio: a statistic of the test series itself; the shift takes every flag to the second half
    assert f_clean["ratio"][0][:half].sum() > 0
    assert f_moved["ratio"][0][:half].sum() == 0
    assert f_moved["ratio"][0].sum() == int(np.ceil(RATIO * len(clean)))


def test_ratio_train_metrics_match_brute_force_over_two_series():
    train_a, test_a, y_a = _scores(1)
    train_b, test_b, y_b = _scores(2, t=250, t_train=200)
    out = tw_train.evaluate_scores(
        [(test_a, y_a, train_a), (test_b, y_b, train_b)], RATIO, ratio_train=True
    )
    assert list(out) == ["ratio", "ratio_train", "oracle", "skab_ucl"]
    tp = fp = fn = 0
    for s, y, tr in ((test_a, y_a, train_a), (test_b, y_b, train_b)):
        pred = s >= np.quantile(tr, 1 - RATIO)  # each series' own training scores
        tp += int(np.sum(pred & (y == 1)))
        fp += int(np.sum(pred & (y == 0)))
        fn += int(np.sum(~pred & (y == 1)))
    assert out["ratio_train"]["f1"] == pytest.approx(2 * tp / (2 * tp + fp + fn), rel=1e-12)
    assert out["ratio_train"]["far"] == pytest.approx(100 * fp / (len(y_a) + len(y_b) - 20))


def test_ratio_train_needs_training_scores_and_rejects_bad_ones():
    _, test_s, y = _scores()
    assert "ratio_train" not in tw_train.evaluate_scores(
        [(test_s, y, None)], RATIO, ratio_train=True
    )
    # off by default: direct callers keep the earlier rule set
    assert "ratio_train" not in tw_train.evaluate_scores([(test_s, y, test_s)], RATIO)
    with pytest.raises(ValueError, match="train_scores"):
        tw_train.evaluate_scores([(test_s, y, np.array([1.0, np.nan]))], RATIO, ratio_train=True)


def test_compare_methods_reports_ratio_train_on_synthetic_data():
    cfg = dataclasses.replace(teamwork.get_config("tiny"), methods=("pca",))
    results = tw_train.compare_methods(cfg)
    row = results["rows"][teamwork.METHODS["pca"]]
    assert set(row) == {"ratio", "ratio_train", "oracle"}  # no SKAB rule off SKAB
    assert "f1 [ratio_train]" in tw_train.format_table(results)
