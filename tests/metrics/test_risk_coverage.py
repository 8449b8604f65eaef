"""Risk-coverage curve and AURC against brute force and closed forms."""

import numpy as np
import pytest

from fidia_jax import metrics


def test_risk_coverage_brute_force():
    rng = np.random.default_rng(0)
    u, e = rng.normal(size=50), (rng.random(50) < 0.3).astype(float)
    cov, risk = metrics.risk_coverage_curve(u, e)
    for k in (1, 7, 50):
        kept = np.argsort(u)[:k]
        assert risk[k - 1] == pytest.approx(e[kept].mean())
        assert cov[k - 1] == pytest.approx(k / 50)
    assert metrics.area_under_risk_coverage(u, e) == pytest.approx(risk.mean())


def test_aurc_perfect_and_worst_orderings():
    n, n_err = 1000, 200
    e = np.r_[np.zeros(n - n_err), np.ones(n_err)]
    perfect = metrics.area_under_risk_coverage(np.arange(n), e)
    r = n_err / n
    assert perfect == pytest.approx(r + (1 - r) * np.log(1 - r), abs=2e-3)
    worst = metrics.area_under_risk_coverage(-np.arange(n), e)
    assert worst > r > perfect
    constant = metrics.area_under_risk_coverage(np.zeros(n), np.full(n, 0.25))
    assert constant == pytest.approx(0.25)


def test_bad_inputs():
    with pytest.raises(ValueError, match="equal 1-D"):
        metrics.risk_coverage_curve(np.zeros(3), np.zeros(4))
    with pytest.raises(ValueError, match="NaN"):
        metrics.risk_coverage_curve(np.array([0.0, np.nan]), np.zeros(2))
