"""SKAB's evaluation protocol: the UCL threshold and the pooled binary metrics, as the SKAB code
computes them (github waico/SKAB @ b2c0d46: ``core/metrics.py`` ``chp_score(...,
metric="binary")`` and ``metric="confusion_matrix"``; the ``Q`` / ``UCL = ...`` cells and the
``residuals > UCL`` comparison of ``notebooks/Conv_AE.ipynb``). Our own code, checked against
the fixture ``tests/data/skab/`` made by ``tools/skab_make_fixture.py`` from theirs
(``tests/projects/teamwork/test_skab_fidelity.py``).

* :func:`skab_ucl`: ``UCL = quantile_Q(training residuals) * factor`` (linear interpolation, as
  ``pandas.Series.quantile``). SKAB's notebooks differ per model: Conv-AE ``Q = 0.999``, factor
  ``4/3`` (the default here, the rule of SKAB's Conv-AE leaderboard entry); LSTM-AE ``0.99``,
  ``3/2``; Vanilla-AE ``0.99``, ``5/2`` (:data:`SKAB_UCL_RULES`). A step is anomalous when its
  residual is **strictly** above the UCL.
* :func:`skab_binary_metrics`: TP, TN, FP, FN pooled over the runs, ``F1 = TP / (TP + (FN +
  FP) / 2)``, ``FAR = 100 FP / (FP + TN)``, ``MAR = 100 FN / (FN + TP)``, each rounded to 2
  decimals (numpy's rounding, as SKAB's ``round`` of numpy scalars); a ``0 / 0`` is NaN, as in
  SKAB (numpy division).
* :func:`skab_window_labels`: SKAB's changepoint scoring windows (``window_width``,
  ``anomaly_window_destination``) as point labels; with them the binary metrics equal SKAB's
  for changepoints given as timestamps (its window form of ``chp_score``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["SKAB_UCL_RULES", "skab_binary_metrics", "skab_ucl", "skab_window_labels"]

#: ``(Q, factor)`` of the UCL in SKAB's notebooks (``notebooks/<name>.ipynb``).
SKAB_UCL_RULES: dict[str, tuple[float, float]] = {
    "Conv_AE": (0.999, 4.0 / 3.0),
    "LSTM_AE": (0.99, 3.0 / 2.0),
    "Vanilla_AE": (0.99, 5.0 / 2.0),
}


def skab_ucl(train_scores: Any, *, quantile: float = 0.999, factor: float = 4.0 / 3.0) -> float:
    """SKAB's upper control limit: ``quantile_Q(train_scores) * factor``.

    Args:
      train_scores: ``(T,)`` finite anomaly scores (residuals) of the training series.
      quantile: ``Q`` in ``[0, 1]`` (linear interpolation between order statistics, as
        ``pandas.Series.quantile`` and ``np.quantile``); factor: ``> 0``.

    Returns:
      The threshold (float); flag a step when its score is ``> UCL``.

    Raises:
      ValueError: empty or non-finite ``train_scores``, ``quantile`` outside ``[0, 1]``, or
        ``factor <= 0``.
    """
    s = np.asarray(train_scores, np.float64).ravel()
    if s.size == 0 or not np.isfinite(s).all():
        raise ValueError(
            f"skab_ucl: train_scores must be non-empty and finite, got {s.size} values"
        )
    if not 0.0 <= quantile <= 1.0 or not factor > 0:
        raise ValueError(
            f"skab_ucl: need 0 <= quantile <= 1 and factor > 0, got {quantile}, {factor}"
        )
    return float(np.quantile(s, quantile)) * factor


def skab_binary_metrics(
    labels: Sequence[Any], predictions: Sequence[Any], *, decimals: int | None = 2
) -> dict[str, float]:
    """SKAB's ``chp_score(labels, predictions, metric="binary")`` over one or more runs.

    Args:
      labels, predictions: one ``(T_i,)`` 0/1 (or bool) array per run, the same lengths pairwise;
        a step is anomalous where the value is 1.
      decimals: round F1, FAR and MAR to this many decimals (SKAB: 2); ``None`` keeps full
        precision.

    Returns:
      ``{"f1", "far", "mar"}`` (FAR and MAR in %; NaN where SKAB divides 0 by 0: F1 and MAR with
      nothing labelled and nothing predicted, FAR with no normal step) and the pooled counts
      ``"tp", "tn", "fp", "fn"`` (ints).

    Raises:
      ValueError: different numbers of runs, a length mismatch, or values other than 0 / 1.
    """
    if len(labels) != len(predictions) or not len(labels):
        raise ValueError(
            f"skab_binary_metrics: need as many label as prediction runs (>= 1), got "
            f"{len(labels)} and {len(predictions)}"
        )
    tp = tn = fp = fn = 0
    for i, (y, p) in enumerate(zip(labels, predictions, strict=True)):
        y, p = np.asarray(y), np.asarray(p)
        if y.shape != p.shape or y.ndim != 1:
            raise ValueError(
                f"skab_binary_metrics: run {i}: labels {y.shape} vs predictions {p.shape}"
            )
        for name, v in (("labels", y), ("predictions", p)):
            if not np.isin(v, (0, 1)).all():
                raise ValueError(f"skab_binary_metrics: run {i}: {name} must be 0 or 1")
        y, p = y == 1, p == 1
        tp, tn = tp + int(np.sum(y & p)), tn + int(np.sum(~y & ~p))
        fp, fn = fp + int(np.sum(~y & p)), fn + int(np.sum(y & ~p))

    def rate(num: float, den: float, scale: float) -> float:
        """SKAB's ``round(num / den * scale, 2)`` (the division first, as theirs)."""
        if not den:
            return math.nan
        value = num / den * scale
        return value if decimals is None else float(np.round(value, decimals))

    return {
        "f1": rate(tp, tp + (fn + fp) / 2, 1),
        "far": rate(fp, fp + tn, 100),
        "mar": rate(fn, fn + tp, 100),
        "tp": tp,
        "tn": tn,
        "fp": fp,
        "fn": fn,
    }


def skab_window_labels(
    length: int, changepoints: Sequence[int], width: float, *, destination: str = "lefter"
) -> np.ndarray:
    """SKAB's changepoint scoring windows as 0/1 point labels (``chp_score`` with the true
    changepoints as timestamps and ``window_width``; steps one time unit apart).

    A changepoint at step ``c`` gets the window ``[c - w, c]`` (``"lefter"``, SKAB's default),
    ``[c, c + w]`` (``"righter"``) or ``[c - w/2, c + w/2]`` (``"center"``), both ends included,
    cut to the series (a window at an edge keeps only its steps inside).

    Args:
      length: ``T``; changepoints: step indices in ``[0, T)``, increasing; width: ``w >= 0``
        (steps); destination: as above.

    Returns:
      ``(T,)`` int8 labels.

    Raises:
      ValueError: a bad ``destination``, changepoints out of range or not increasing, or
        overlapping windows (SKAB then cuts one window at the other's end, and a flagged step on
        the shared end counts for both: not reproduced).
    """
    if destination not in ("lefter", "righter", "center"):
        raise ValueError(f"skab_window_labels: unknown destination {destination!r}")
    cps = np.asarray(changepoints, np.float64)
    if cps.size and (cps.min() < 0 or cps.max() >= length or np.any(np.diff(cps) <= 0)):
        raise ValueError(f"skab_window_labels: changepoints must increase within [0, {length})")
    if not width >= 0:
        raise ValueError(f"skab_window_labels: width must be >= 0, got {width}")
    lo = {"lefter": cps - width, "righter": cps, "center": cps - width / 2}[destination]
    hi = lo + width
    if np.any(hi[:-1] >= lo[1:]):
        raise ValueError("skab_window_labels: scoring windows overlap (SKAB cuts them)")
    t = np.arange(length)
    inside = (t[None, :] >= lo[:, None]) & (t[None, :] <= hi[:, None])
    return inside.any(axis=0).astype(np.int8)
