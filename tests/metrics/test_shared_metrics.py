"""The shared metrics against scikit-learn / numpy references and closed forms."""

import numpy as np
import pytest
from sklearn.metrics import mean_squared_error
from sklearn.metrics import r2_score as sk_r2

from fidia_jax import metrics


def test_regression_metrics_match_references():
    rng = np.random.default_rng(0)
    y = rng.normal(size=(40, 3))
    p = y + rng.normal(scale=0.5, size=y.shape)
    np.testing.assert_allclose(
        metrics.rmse(y, p), np.sqrt(mean_squared_error(y.ravel(), p.ravel())), rtol=1e-5
    )
    np.testing.assert_allclose(
        metrics.rmse(y, p, axis=0), np.sqrt(((y - p) ** 2).mean(0)), rtol=1e-5
    )
    np.testing.assert_allclose(
        metrics.r2_score(y, p, axis=0), sk_r2(y, p, multioutput="raw_values"), rtol=1e-4
    )
    np.testing.assert_allclose(metrics.r2_score(y, p), sk_r2(y.ravel(), p.ravel()), rtol=1e-4)
    per_col = [np.corrcoef(y[:, j], p[:, j])[0, 1] for j in range(3)]
    np.testing.assert_allclose(metrics.pearson_r(y, p, axis=0), per_col, rtol=1e-4)
    np.testing.assert_allclose(
        metrics.pearson_r(y, p), np.corrcoef(y.ravel(), p.ravel())[0, 1], rtol=1e-4
    )


def test_undefined_correlation_is_nan_not_a_number():
    y = np.ones((5, 2))
    assert np.isnan(metrics.pearson_r(y, np.arange(10.0).reshape(5, 2), axis=0)).all()
    assert np.isnan(metrics.r2_score(y, y + 1))
    with pytest.raises(ValueError, match="shape"):
        metrics.rmse(np.ones(3), np.ones(4))


def test_effective_rank_closed_forms():
    assert float(metrics.effective_rank(np.eye(6))) == pytest.approx(6.0, rel=1e-5)
    assert float(
        metrics.effective_rank(np.outer(np.arange(1.0, 5), np.arange(1.0, 4)))
    ) == pytest.approx(1.0, abs=1e-3)
    # singular values (3, 1): p = (3/4, 1/4), erank = exp(H(p))
    p = np.array([0.75, 0.25])
    expected = np.exp(-(p * np.log(p)).sum())
    assert float(metrics.effective_rank(np.diag([3.0, 1.0]))) == pytest.approx(expected, rel=1e-5)
    assert float(metrics.effective_rank(np.zeros((3, 3)))) == 0.0
    with pytest.raises(ValueError, match="2-D"):
        metrics.effective_rank(np.ones(3))
