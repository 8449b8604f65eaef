"""Anomaly metrics: hand counts, the affiliation paper's worked examples, scikit-learn's AP."""

import math

import numpy as np
import pytest

from fidia_jax import metrics
from fidia_jax.metrics._anomaly import _affiliation_events


def test_events_touching_both_ends():
    y = np.array([1, 1, 0, 0, 1, 0, 1, 1])
    np.testing.assert_array_equal(metrics.anomaly_events(y), [[0, 2], [4, 5], [6, 8]])
    assert metrics.anomaly_events(np.zeros(5, int)).shape == (0, 2)


def test_point_adjust_segments_at_index_0_and_last_point():
    y = np.array([1, 1, 1, 0, 0, 0, 0, 1, 1, 1])
    pred = np.array([0, 0, 1, 0, 1, 0, 0, 0, 0, 1])
    adj = metrics.point_adjust(pred, y)
    np.testing.assert_array_equal(adj, [1, 1, 1, 0, 1, 0, 0, 1, 1, 1])
    # Hand counts. Plain: TP=2 (idx 2, 9), FP=1 (idx 4), FN=4 -> F1 = 4 / (4 + 1 + 4).
    plain = metrics.point_f1(pred, y)
    assert (plain["tp"], plain["fp"], plain["fn"], plain["tn"]) == (2, 1, 4, 3)
    assert plain["f1"] == pytest.approx(4 / 9)
    # Adjusted: TP=6, FP=1, FN=0 -> F1 = 12 / 13 (inflated).
    pa = metrics.point_f1(pred, y, adjust=True)
    assert (pa["tp"], pa["fp"], pa["fn"]) == (6, 1, 0)
    assert pa["f1"] == pytest.approx(12 / 13)
    # A segment that is missed stays missed.
    assert not metrics.point_adjust(np.zeros(10, int), y).any()


def test_no_anomalies_at_all_every_metric():
    y = np.zeros(8, int)
    none = np.zeros(8, int)
    some = np.array([0, 1, 0, 0, 0, 0, 0, 1])
    # Nothing labelled, nothing predicted: perfect agreement by convention.
    r = metrics.point_f1(none, y)
    assert r["f1"] == 1.0 and math.isnan(r["precision"]) and math.isnan(r["recall"])
    assert metrics.point_f1(none, y, adjust=True)["f1"] == 1.0
    assert metrics.affiliation_metrics(none, y)["f1"] == 1.0
    # Two false alarms: FP=2, TN=6, F1=0, precision 0.
    r = metrics.point_f1(some, y)
    assert (r["tp"], r["fp"], r["fn"], r["tn"], r["f1"], r["precision"]) == (0, 2, 0, 6, 0.0, 0.0)
    assert metrics.point_f1(some, y, adjust=True)["f1"] == 0.0
    aff = metrics.affiliation_metrics(some, y)
    assert aff["f1"] == 0.0 and aff["precision"] == 0.0 and math.isnan(aff["recall"])
    scores = np.arange(8.0)
    d = metrics.detection_metrics(scores, y, 6.5)  # flags the last step only
    assert d["f1"] == 0.0 and d["pa_f1"] == 0.0 and d["flagged_ratio"] == 1 / 8
    assert d["auc_pr"] is None  # undefined, documented, never a number to average


@pytest.mark.parametrize(
    ("labels", "what"),
    [
        (np.zeros(8, int), "all normal: no anomalous step, T = 8"),
        (np.ones(8, int), "all anomalous: no normal step, T = 8"),
        (np.zeros(0, int), "no step at all, T = 0"),
    ],
)
def test_threshold_free_scores_refuse_single_class_labels(labels, what):
    """Issue 29 item 3: AUC-PR was NaN (all normal) or 1.0 (all anomalous, for any scores), and
    the best-F1 search returned F1 = 1.0; both are undefined without both classes."""
    scores = np.linspace(0.0, 1.0, labels.size)
    for fn in (metrics.auc_pr, metrics.best_f1_threshold):
        with pytest.raises(
            ValueError, match=f"{fn.__name__}: labels hold a single class \\({what}"
        ):
            fn(scores, labels)
    if labels.size:
        assert metrics.detection_metrics(scores, labels, 0.5)["auc_pr"] is None


def test_affiliation_authors_readme_example():
    # ahstat/affiliation-metrics-py README: precision 0.82, recall 0.84, per-zone 0.63/1.0 and
    # 0.82/0.87, distances 0.5/0.0 and 0.5/0.33. Exact values computed by hand from the formula:
    # P_1 = 3.5/5.5, R_1 = 4.5/5.5, R_2 = (3.5/4.5 + 1 + 3.75/4.5) / 3.
    r = metrics.affiliation_metrics([0, 0, 0, 0, 1, 0, 0, 0, 1, 0], [0, 0, 0, 1, 0, 0, 0, 1, 1, 1])
    np.testing.assert_allclose(r["individual_precision_probabilities"], [3.5 / 5.5, 1.0])
    r2 = (3.5 / 4.5 + 1 + 3.75 / 4.5) / 3
    np.testing.assert_allclose(r["individual_recall_probabilities"], [4.5 / 5.5, r2])
    np.testing.assert_allclose(r["individual_precision_distances"], [0.5, 0.0])
    np.testing.assert_allclose(r["individual_recall_distances"], [0.5, 1 / 3])
    assert round(r["precision"], 2) == 0.82 and round(r["recall"], 2) == 0.84
    p, rec = (3.5 / 5.5 + 1) / 2, (4.5 / 5.5 + r2) / 2
    assert r["f1"] == pytest.approx(2 * p * rec / (p + rec))


def test_affiliation_authors_distance_examples():
    # The authors' worked example (their tests/test_metrics.py): four events in [1, 31).
    pred = np.array([(1, 3), (6, 18), (25, 26)])
    gt = np.array([(1, 8), (16, 17), (25, 28), (29, 31)])
    r = _affiliation_events(pred, gt, (1.0, 31.0))
    np.testing.assert_allclose(r["individual_precision_distances"][:3], [8 / 8, 8.5 / 6, 0.0])
    assert math.isnan(r["individual_precision_distances"][3])
    np.testing.assert_allclose(r["individual_recall_distances"][:3], [2.25 / 7, 0.0, 2 / 3])
    assert r["individual_recall_distances"][3] == math.inf
    assert r["individual_recall_probabilities"][3] == 0.0
    # Prediction inside the event everywhere -> precision 1; the whole event covered -> recall 1.
    full = metrics.affiliation_metrics([0, 1, 1, 1, 0, 0], [0, 1, 1, 1, 0, 0])
    assert full["precision"] == 1.0 and full["recall"] == 1.0 and full["f1"] == 1.0


def test_affiliation_precision_brute_force():
    # Precision survival by brute force on a fine grid of the zone, for one event at the border.
    y = np.zeros(20, int)
    y[:3] = 1  # event [0, 3) starts at index 0: zone [0, 20)
    pred = np.zeros(20, int)
    pred[10] = 1
    r = metrics.affiliation_metrics(pred, y)
    grid = (np.arange(20 * 4000) + 0.5) / 4000
    dist = np.maximum(grid - 3, 0)
    ys = (np.arange(4000) + 0.5) / 4000 + 10
    expect = np.mean([(dist >= yy - 3).mean() for yy in ys[::50]])
    assert r["precision"] == pytest.approx(expect, abs=2e-3)
    # Recall: distance from x in [0,3) to [10, 11) is 10 - x; P(|X - x| >= 10 - x), X ~ U[0, 20).
    xs = (np.arange(3000) + 0.5) / 1000
    expect_r = np.mean([(np.abs(grid - x) >= 10 - x).mean() for x in xs[::30]])
    assert r["recall"] == pytest.approx(expect_r, abs=2e-3)


def test_auc_pr_hand_counts_with_ties():
    # Thresholds 0.9, 0.5 (a tie of a positive and a negative), 0.1:
    # (R, P) = (1/3, 1), (2/3, 2/3), (1, 3/4) -> AP = (1 + 2/3 + 3/4) / 3.
    ap = metrics.auc_pr([0.9, 0.5, 0.5, 0.1], [1, 1, 0, 1])
    assert ap == pytest.approx((1 + 2 / 3 + 3 / 4) / 3)
    assert metrics.auc_pr([0.9, 0.8, 0.7, 0.6], [1, 0, 1, 0]) == pytest.approx(0.5 + 0.5 * 2 / 3)


@pytest.mark.slow  # importing scikit-learn takes seconds
def test_auc_pr_matches_sklearn():
    sk = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    s = rng.normal(size=300).round(1)  # ties
    y = (rng.random(300) < 0.2).astype(int)
    assert metrics.auc_pr(s, y) == pytest.approx(sk.average_precision_score(y, s))


def test_thresholds():
    s = np.array([0.1, 0.9, 0.5, 0.3, 0.7])
    y = np.array([0, 1, 0, 0, 1])
    assert metrics.threshold_at_ratio(s, 0.4) == 0.7  # top 2 of 5
    assert metrics.threshold_at_ratio(s, 0.3) == 0.7  # ceil(1.5) = 2
    thr, f1 = metrics.best_f1_threshold(s, y)
    assert (thr, f1) == (0.7, 1.0)
    # Brute force over every threshold.
    best = max(metrics.point_f1((s >= t).astype(int), y)["f1"] for t in s)
    assert f1 == best
    with pytest.raises(ValueError, match="ratio"):
        metrics.threshold_at_ratio(s, 0.0)
    with pytest.raises(ValueError, match="finite"):
        metrics.auc_pr([0.1, np.nan], [0, 1])
    with pytest.raises(ValueError, match="0 and 1"):
        metrics.point_f1([0, 2], [0, 1])
