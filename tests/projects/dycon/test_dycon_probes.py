"""Per-layer held-out probe R² with a shuffled control, against scikit-learn's Ridge."""

import numpy as np
import pytest
from sklearn.linear_model import Ridge
from sklearn.metrics import r2_score

from fidia_jax.projects.dycon import probes


def test_layer_probe_r2_matches_sklearn_and_finds_the_informative_layer():
    rng = np.random.default_rng(0)
    n, c = 600, 6
    y = rng.uniform(size=n)
    x0 = rng.normal(size=(n, c))  # layer 0: noise
    x1 = rng.normal(size=(n, c))
    x1[:, 2] = 3.0 * y + 0.05 * rng.normal(size=n)  # layer 1: linear in y
    x = np.stack([x0, x1], axis=1)
    train = np.arange(n) < 400
    out = probes.layer_probe_r2(x, y, train, alpha=0.5, seed=1)
    for k in range(2):
        ref = Ridge(alpha=0.5).fit(x[train, k], y[train])
        assert out.r2[k] == pytest.approx(r2_score(y[~train], ref.predict(x[~train, k])), abs=1e-5)
        y_shuf = np.random.default_rng(1).permutation(y[train])
        ref_s = Ridge(alpha=0.5).fit(x[train, k], y_shuf)
        assert out.r2_shuffled[k] == pytest.approx(
            r2_score(y[~train], ref_s.predict(x[~train, k])), abs=1e-5
        )
    assert out.best_layer == 1 and out.r2[1] > 0.95 and out.r2[0] < 0.1
    assert out.r2_shuffled[1] < 0.2
    np.testing.assert_allclose(
        out.fits[1].coef, Ridge(alpha=0.5).fit(x[train, 1], y[train]).coef_, atol=1e-8
    )


def test_layer_probe_r2_refuses_one_example_and_bad_shapes():
    x = np.zeros((3, 2, 4))
    with pytest.raises(ValueError, match="at least 2 training"):
        probes.layer_probe_r2(x, np.arange(3.0), np.array([True, False, False]))
    with pytest.raises(ValueError, match="at least 2 training"):
        probes.layer_probe_r2(x, np.arange(3.0), np.array([True, True, False]))  # 1 held out
    with pytest.raises(ValueError, match=r"\(N, K, C\)"):
        probes.layer_probe_r2(x[:, 0], np.arange(3.0), np.ones(3, bool))


def test_layer_probe_r2_refuses_non_finite_values():
    import numpy as np
    import pytest

    from fidia_jax.projects.dycon import probes

    x = np.random.default_rng(0).normal(size=(12, 2, 3))
    y = np.arange(12.0)
    train = np.arange(12) < 8
    y[10] = np.nan  # a held-out target: the training-side checks alone would not see it
    with pytest.raises(ValueError, match="must be finite"):
        probes.layer_probe_r2(x, y, train)
