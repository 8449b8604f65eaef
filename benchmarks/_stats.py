"""Paired tests shared by the benchmarks' tables (runs matched by replication, seed or item)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def paired_tests(a: Sequence[float], b: Sequence[float]) -> dict:
    """Paired tests of ``a - b`` over matched pairs.

    Returns:
      ``{"n", "mean_diff", "median_diff", "a_lower", "a_higher" (pairs with ``a`` below /
      above ``b``), "p_wilcoxon" (exact two-sided signed-rank: its smallest p is 0.25 with
      3 pairs, 0.0625 with 5, 0.002 with 10), "p_ttest" (paired t-test)}``. A p-value that
      cannot be computed (fewer than 2 pairs, every difference zero, differences without
      spread) is ``None``; so are the mean and median of no pairs.
    """
    from scipy import stats

    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    d = a - b
    ok = len(d) > 1 and bool(np.any(d != 0))

    def finite(p):
        return p if p is not None and math.isfinite(p) else None

    return {
        "n": len(d),
        "mean_diff": float(d.mean()) if len(d) else None,
        "median_diff": float(np.median(d)) if len(d) else None,
        "a_lower": int(np.sum(d < 0)),
        "a_higher": int(np.sum(d > 0)),
        "p_wilcoxon": finite(float(stats.wilcoxon(d).pvalue)) if ok else None,
        "p_ttest": finite(float(stats.ttest_rel(a, b).pvalue)) if ok else None,
    }


def paired_cells(p: dict) -> list:
    """The cells a paired table shows of :func:`paired_tests`'s result: pairs, mean and median
    difference, ``"<a lower>/<pairs>"``, Wilcoxon p, paired t-test p."""
    return [p["n"], p["mean_diff"], p["median_diff"], f"{p['a_lower']}/{p['n']}",
            p["p_wilcoxon"], p["p_ttest"]]  # fmt: skip
