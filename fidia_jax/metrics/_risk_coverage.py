"""Selective-prediction metrics: the risk-coverage curve and the area under it (AURC)."""

from __future__ import annotations

import numpy as np

__all__ = ["area_under_risk_coverage", "risk_coverage_curve"]


def risk_coverage_curve(uncertainty, errors):
    """Risk (error rate of the kept samples) when keeping the ``k`` least uncertain, ``k = 1..N``.

    Args:
      uncertainty: ``(N,)`` real scores, lower = more confident (e.g. a posterior variance).
        Ties are broken by the input order (a stable sort).
      errors: ``(N,)`` losses in ``[0, 1]`` (e.g. 0/1 misclassification).

    Returns:
      ``(coverage, risk)``, both ``(N,)`` float64: ``coverage[k-1] = k / N`` and ``risk[k-1]`` the
      mean error of the ``k`` kept samples.

    Raises:
      ValueError: shapes differ, are not 1-D, are empty, or hold NaN or inf.
    """
    u, e = np.asarray(uncertainty, np.float64), np.asarray(errors, np.float64)
    if u.ndim != 1 or u.shape != e.shape or u.size == 0:
        raise ValueError(
            f"risk_coverage_curve: need equal 1-D non-empty arrays, got {u.shape} and {e.shape}"
        )
    if not (np.isfinite(u).all() and np.isfinite(e).all()):
        raise ValueError(
            "risk_coverage_curve: uncertainty or errors contain NaN or inf (an infinite error "
            "made the area infinite, an infinite uncertainty ranked silently)"
        )
    order = np.argsort(u, kind="stable")
    k = np.arange(1, u.size + 1)
    return k / u.size, np.cumsum(e[order]) / k


def area_under_risk_coverage(uncertainty, errors) -> float:
    """AURC: the mean of :func:`risk_coverage_curve`'s risks over the ``N`` coverages.

    A random ordering gives about the overall error rate; a perfect ordering (every error ranked
    last) gives ``r + (1 - r) ln(1 - r)`` for error rate ``r`` (approximately, for large N); lower is
    better.

    References:
      Geifman, Uziel, El-Yaniv, "Bias-reduced uncertainty estimation for deep neural
      classifiers", ICLR 2019 (AURC).
    """
    return float(np.mean(risk_coverage_curve(uncertainty, errors)[1]))
