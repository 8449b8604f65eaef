"""Time-series anomaly-detection metrics: point-wise F1, point-adjusted F1, affiliation F1, AUC-PR.

All functions take host arrays (NumPy or anything ``np.asarray`` accepts) of one series:
``labels`` ``(T,)`` in ``{0, 1}`` (1 = anomalous time step), ``pred`` ``(T,)`` in ``{0, 1}``,
``scores`` ``(T,)`` float (higher = more anomalous). Events are maximal runs of ones, written as
half-open integer intervals ``[start, end)``; a step ``t`` covers the time interval ``[t, t + 1)``.

One convention for every F1 here (checked by hand counts in the tests): ``precision`` is NaN when
nothing is predicted, ``recall`` is NaN when nothing is labelled, and ``f1`` is always a number:
``1.0`` when there is nothing labelled and nothing predicted (perfect agreement), otherwise the
harmonic mean, ``0.0`` when either side is empty or zero.

Threshold-free scores need both classes: AUC-PR and the best-F1 threshold search are undefined
when the labels hold one class only (every step normal, or every step anomalous), so
:func:`auc_pr` and :func:`best_f1_threshold` raise ``ValueError`` there (they used to return NaN
and the threshold above every score), and :func:`detection_metrics` reports ``auc_pr`` as
``None``. A table never averages a number that is not a score.

References:
  Huet, Navarro, Rossi, "Local Evaluation of Time Series Anomaly Detection Algorithms",
  KDD 2022, https://arxiv.org/abs/2206.13167 (affiliation metrics).
  Xu et al., "Unsupervised Anomaly Detection via Variational Auto-Encoder for Seasonal KPIs in
  Web Applications", WWW 2018 (point adjustment; Kim et al., AAAI 2022, show it inflates F1).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = [
    "affiliation_metrics",
    "anomaly_events",
    "auc_pr",
    "best_f1_threshold",
    "detection_metrics",
    "point_adjust",
    "point_f1",
    "threshold_at_ratio",
]

# Midpoint-rule cells per time step for the affiliation integrals. With integer event bounds all
# kinks of the integrands lie on multiples of 1/8 (zone cuts on halves, gap midpoints on quarters,
# their images under the survival functions on eighths), so 16 cells per step integrate the
# piecewise-linear integrands exactly (up to float rounding).
_CELLS = 16


def _binary(x: Any, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D (T,), got shape {arr.shape}")
    if arr.size and not np.isin(arr, (0, 1)).all():
        raise ValueError(f"{name} must hold only 0 and 1, got values {np.unique(arr)[:5]}")
    return arr.astype(bool)


def _pair(pred: Any, labels: Any) -> tuple[np.ndarray, np.ndarray]:
    p, y = _binary(pred, "pred"), _binary(labels, "labels")
    if p.shape != y.shape:
        raise ValueError(f"pred {p.shape} and labels {y.shape} must have the same shape")
    return p, y


def _scores(scores: Any, labels: Any) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=np.float64)
    y = _binary(labels, "labels")
    if s.shape != y.shape:
        raise ValueError(f"scores {s.shape} and labels {y.shape} must have the same shape")
    if not np.isfinite(s).all():
        raise ValueError(f"scores must be finite, got {int((~np.isfinite(s)).sum())} non-finite")
    return s, y


def _two_classes(y: np.ndarray, fn: str) -> None:
    """Raises unless ``y`` holds both a normal and an anomalous step."""
    n_pos = int(y.sum())
    if n_pos == 0 or n_pos == y.size:
        what = (
            "no step at all"
            if y.size == 0
            else (
                "all normal: no anomalous step" if n_pos == 0 else "all anomalous: no normal step"
            )
        )
        raise ValueError(
            f"{fn}: labels hold a single class ({what}, T = {y.size}); the score is undefined "
            "without both classes (leave such a series out of the average, or report None)"
        )


def anomaly_events(labels: Any) -> np.ndarray:
    """Maximal runs of ones as half-open intervals.

    Args:
      labels: ``(T,)`` in ``{0, 1}``.

    Returns:
      ``(E, 2)`` int64 ``[start, end)`` rows, sorted; ``(0, 2)`` when there is no anomaly.
      A run touching index 0 starts at 0; one touching the last step ends at ``T``.
    """
    y = _binary(labels, "labels").astype(np.int8)
    d = np.diff(np.concatenate([[0], y, [0]]))
    return np.stack([np.flatnonzero(d == 1), np.flatnonzero(d == -1)], axis=1).astype(np.int64)


def point_adjust(pred: Any, labels: Any) -> np.ndarray:
    """Point adjustment: a labelled event counts as fully detected once any of its steps is flagged.

    This is the protocol of many deep TSAD papers; it **inflates** F1 (a random detector that
    flags a few points per long event scores near 1), so report it next to the plain F1 only.

    Args:
      pred: ``(T,)`` in ``{0, 1}``.
      labels: ``(T,)`` in ``{0, 1}``.

    Returns:
      ``(T,)`` bool: ``pred`` with every labelled event that it touches filled in.
    """
    p, y = _pair(pred, labels)
    out = p.copy()
    for start, end in anomaly_events(y):
        if p[start:end].any():
            out[start:end] = True
    return out


def _f1(tp: float, fp: float, fn: float) -> dict[str, float]:
    precision = tp / (tp + fp) if tp + fp > 0 else math.nan
    recall = tp / (tp + fn) if tp + fn > 0 else math.nan
    denom = 2 * tp + fp + fn
    f1 = 1.0 if denom == 0 else 2 * tp / denom
    return {"precision": precision, "recall": recall, "f1": f1}


def point_f1(pred: Any, labels: Any, *, adjust: bool = False) -> dict[str, float]:
    """Point-wise precision, recall and F1 (``f1 = 2 TP / (2 TP + FP + FN)``).

    Args:
      pred: ``(T,)`` in ``{0, 1}``.
      labels: ``(T,)`` in ``{0, 1}``.
      adjust: apply :func:`point_adjust` first (inflated; label it so).

    Returns:
      ``{"precision", "recall", "f1", "tp", "fp", "fn", "tn"}`` (counts as floats); see the module
      docstring for the empty conventions.
    """
    p, y = _pair(pred, labels)
    if adjust:
        p = point_adjust(p, y)
    tp, fp = float(np.sum(p & y)), float(np.sum(p & ~y))
    fn, tn = float(np.sum(~p & y)), float(np.sum(~p & ~y))
    return {**_f1(tp, fp, fn), "tp": tp, "fp": fp, "fn": fn, "tn": tn}


def _dist_to_interval(x: np.ndarray, a: float, b: float) -> np.ndarray:
    return np.maximum(np.maximum(a - x, x - b), 0.0)


def _dist_to_union(x: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Distance from each ``x`` to the union of sorted disjoint ``[starts, ends]``."""
    k = np.searchsorted(starts, x, side="right") - 1
    left = np.where(
        k >= 0, _dist_to_interval(x, starts[np.maximum(k, 0)], ends[np.maximum(k, 0)]), np.inf
    )
    k1 = np.minimum(k + 1, len(starts) - 1)
    right = np.where(k + 1 < len(starts), _dist_to_interval(x, starts[k1], ends[k1]), np.inf)
    return np.minimum(left, right)


def _cells(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Midpoints of ``_CELLS`` cells per unit length over the intervals (lengths multiple of 1/2)."""
    pts = []
    for a, b in zip(starts, ends, strict=True):
        n = int(round((b - a) * _CELLS))
        pts.append(a + (np.arange(n) + 0.5) / _CELLS)
    return np.concatenate(pts) if pts else np.zeros(0)


def _affiliation_events(
    pred_events: np.ndarray, gt_events: np.ndarray, t_range: tuple[float, float]
) -> dict[str, Any]:
    """Affiliation precision / recall from events (``(E, 2)`` ``[start, end)``) within ``t_range``."""
    lo_all, hi_all = t_range
    gs, ge = gt_events[:, 0].astype(float), gt_events[:, 1].astype(float)
    cuts = (ge[:-1] + gs[1:]) / 2.0
    zone_lo = np.concatenate([[lo_all], cuts])
    zone_hi = np.concatenate([cuts, [hi_all]])
    ps, pe = pred_events[:, 0].astype(float), pred_events[:, 1].astype(float)
    prec_p, rec_p, prec_d, rec_d = [], [], [], []
    for a, b, lo, hi in zip(gs, ge, zone_lo, zone_hi, strict=True):
        size = hi - lo
        qs, qe = np.maximum(ps, lo), np.minimum(pe, hi)
        keep = qe > qs
        qs, qe = qs[keep], qe[keep]
        if qs.size == 0:
            prec_p.append(math.nan)
            prec_d.append(math.nan)
            rec_p.append(0.0)
            rec_d.append(math.inf)
            continue
        # Precision: each predicted instant y against a uniform random X in the zone:
        # P(dist(X, gt) >= dist(y, gt)), equal to 1 when y lies inside the event.
        y = _cells(qs, qe)
        d = _dist_to_interval(y, a, b)
        surv = (np.maximum(a - d - lo, 0.0) + np.maximum(hi - b - d, 0.0)) / size
        prec_p.append(float(np.mean(np.where(d == 0, 1.0, surv))))
        prec_d.append(float(np.mean(d)))
        # Recall: each event instant x against a uniform random X in the zone:
        # P(|X - x| >= dist(x, predictions in the zone)).
        x = _cells(np.array([a]), np.array([b]))
        d = _dist_to_union(x, qs, qe)
        surv = (np.maximum(x - d - lo, 0.0) + np.maximum(hi - x - d, 0.0)) / size
        rec_p.append(float(np.mean(np.where(d == 0, 1.0, surv))))
        rec_d.append(float(np.mean(d)))
    defined = [v for v in prec_p if not math.isnan(v)]
    precision = float(np.mean(defined)) if defined else math.nan
    recall = float(np.mean(rec_p))
    if math.isnan(precision) or precision + recall == 0:
        f1 = 0.0
    else:
        f1 = 2 * precision * recall / (precision + recall)
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "individual_precision_probabilities": prec_p,
        "individual_recall_probabilities": rec_p,
        "individual_precision_distances": prec_d,
        "individual_recall_distances": rec_d,
    }


def affiliation_metrics(pred: Any, labels: Any) -> dict[str, Any]:
    """Affiliation precision, recall and F1 (Huet et al., KDD 2022), computed exactly.

    Formula (paper, Sec. 3-4): the time axis ``[0, T)`` is cut into one *affiliation zone*
    ``I_j`` per labelled event ``gt_j`` (cuts at the midpoints between consecutive events). Within
    ``I_j``, with ``Y_j`` the predicted instants in the zone and ``X ~ Uniform(I_j)``:

    * precision ``P_j = mean_{y in Y_j} P(dist(X, gt_j) >= dist(y, gt_j))`` (undefined if
      ``Y_j`` is empty),
    * recall ``R_j = mean_{x in gt_j} P(|X - x| >= dist(x, Y_j))`` (``0`` if ``Y_j`` is empty),

    means being integrals over instants (step ``t`` covers ``[t, t + 1)``). Precision averages
    ``P_j`` over zones where it is defined, recall averages ``R_j`` over all zones; F1 is their
    harmonic mean. Checked against the worked example of the authors' package README
    (ahstat/affiliation-metrics-py: precision 0.82, recall 0.84).

    Args:
      pred: ``(T,)`` in ``{0, 1}``.
      labels: ``(T,)`` in ``{0, 1}``.

    Returns:
      ``{"precision", "recall", "f1", "individual_*"}``: per-zone probabilities and mean
      distances (time steps). With no labelled event (no zones): ``f1`` is ``1.0`` when nothing
      is predicted and ``0.0`` otherwise, ``recall`` NaN, ``precision`` NaN when nothing is
      predicted and ``0.0`` otherwise (the module convention).
    """
    p, y = _pair(pred, labels)
    gt, pr = anomaly_events(y), anomaly_events(p)
    if len(gt) == 0:
        return {
            "precision": 0.0 if len(pr) else math.nan,
            "recall": math.nan,
            "f1": 0.0 if len(pr) else 1.0,
            "individual_precision_probabilities": [],
            "individual_recall_probabilities": [],
            "individual_precision_distances": [],
            "individual_recall_distances": [],
        }
    return _affiliation_events(pr, gt, (0.0, float(len(y))))


def auc_pr(scores: Any, labels: Any) -> float:
    """Point-wise area under the precision-recall curve (average precision, step interpolation).

    ``AP = sum_k (R_k - R_{k-1}) P_k`` over the distinct score thresholds, highest first (the
    definition of scikit-learn's ``average_precision_score``; tests compare with it).

    Args:
      scores: ``(T,)`` finite floats, higher = more anomalous.
      labels: ``(T,)`` in ``{0, 1}``.

    Returns:
      AP in ``[0, 1]``.

    Raises:
      ValueError: shapes differ, labels not binary, non-finite scores, or labels of a single
        class (all normal or all anomalous: AP is undefined; an all-anomalous series would
        score 1.0 for any scores).
    """
    s, y = _scores(scores, labels)
    _two_classes(y, "auc_pr")
    n_pos = int(y.sum())
    order = np.argsort(-s, kind="stable")
    s_sorted, y_sorted = s[order], y[order]
    tp = np.cumsum(y_sorted)
    fp = np.cumsum(~y_sorted)
    last = np.r_[np.flatnonzero(np.diff(s_sorted)), s.size - 1]  # last index of each tie group
    tp, fp = tp[last], fp[last]
    precision = tp / (tp + fp)
    recall = tp / n_pos
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def threshold_at_ratio(scores: Any, ratio: float) -> float:
    """Threshold flagging the top ``ratio`` fraction of steps (``pred = scores >= threshold``).

    Args:
      scores: ``(T,)`` finite floats.
      ratio: in ``(0, 1]``; ``ceil(ratio * T)`` steps are flagged (more on ties).

    Raises:
      ValueError: ``ratio`` outside ``(0, 1]``, empty or non-finite scores.
    """
    s = np.asarray(scores, dtype=np.float64)
    if not 0.0 < ratio <= 1.0:
        raise ValueError(f"ratio must be in (0, 1], got {ratio}")
    if s.ndim != 1 or s.size == 0 or not np.isfinite(s).all():
        raise ValueError(f"scores must be a non-empty finite (T,) array, got shape {s.shape}")
    k = int(math.ceil(ratio * s.size))
    return float(np.sort(s)[::-1][k - 1])


def best_f1_threshold(scores: Any, labels: Any) -> tuple[float, float]:
    """Oracle threshold: the one maximising point-wise F1 on these labels (uses the labels!).

    Every distinct score is tried (``pred = scores >= threshold``), exactly, in ``O(T log T)``.

    Returns:
      ``(threshold, f1)``.

    Raises:
      ValueError: shapes differ, labels not binary, non-finite scores, or labels of a single
        class (all normal or all anomalous): no threshold is "best" there (flagging nothing, or
        everything, scores F1 = 1 whatever the scores are).
    """
    s, y = _scores(scores, labels)
    _two_classes(y, "best_f1_threshold")
    n_pos = int(y.sum())
    order = np.argsort(-s, kind="stable")
    s_sorted, y_sorted = s[order], y[order]
    last = np.r_[np.flatnonzero(np.diff(s_sorted)), s.size - 1]
    tp = np.cumsum(y_sorted)[last]
    fp = np.cumsum(~y_sorted)[last]
    f1 = 2 * tp / (2 * tp + fp + (n_pos - tp))
    k = int(np.argmax(f1))
    return float(s_sorted[last[k]]), float(f1[k])


def detection_metrics(scores: Any, labels: Any, threshold: float) -> dict[str, float]:
    """Every metric of the TeamWork table at one threshold (``pred = scores >= threshold``).

    Returns:
      ``{"f1", "pa_f1", "affiliation_f1", "affiliation_precision", "affiliation_recall",
      "auc_pr", "precision", "recall", "flagged_ratio"}``; ``pa_f1`` is point-adjusted
      (inflated), ``auc_pr`` is threshold-free and ``None`` (undefined, not a number to
      average) when the labels hold a single class.
    """
    s, y = _scores(scores, labels)
    single = not 0 < int(y.sum()) < y.size
    pred = s >= threshold
    plain = point_f1(pred, y)
    aff = affiliation_metrics(pred, y)
    return {
        "f1": plain["f1"],
        "precision": plain["precision"],
        "recall": plain["recall"],
        "pa_f1": point_f1(pred, y, adjust=True)["f1"],
        "affiliation_f1": aff["f1"],
        "affiliation_precision": aff["precision"],
        "affiliation_recall": aff["recall"],
        "auc_pr": None if single else auc_pr(s, y),
        "flagged_ratio": float(pred.mean()) if pred.size else 0.0,
    }
