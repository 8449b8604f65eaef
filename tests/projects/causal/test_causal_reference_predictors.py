"""Issue 41: the predictors that ignore x (:func:`~.baselines.fit_reference`) against their
closed forms on synthetic data (float64 arithmetic on a few hundred units: tolerance 1e-9)."""

import numpy as np
import pytest

from fidia_jax import metrics
from fidia_jax.errors import DataError
from fidia_jax.projects.causal import baselines, data


def _split():
    rng = np.random.default_rng(3)
    d = data.make_multiarm(rng.normal(size=(300, 4)), 2, seed=2, imbalance=2.0)
    return data.split_causal(d, 0.3, seed=0)


def test_constant_effect_is_the_difference_in_training_arm_means():
    train, test = _split()
    y = train.y.astype(np.float64)
    d_hat = y[train.t == 1].mean() - y[train.t == 0].mean()
    tau = test.mu[:, 1].astype(np.float64) - test.mu[:, 0]
    predict, info = baselines.fit_reference(train, "constant_effect")
    mu_hat = predict(test.x)
    assert mu_hat.shape == (len(test), 2)
    assert info["effects"][1] == pytest.approx(d_hat, abs=1e-9)
    # sqrt(PEHE) = spread of the true effects around the constant; ATE error = |mean - const|
    pehe = np.sqrt(np.mean((tau - d_hat) ** 2))
    assert metrics.sqrt_pehe(test.mu, mu_hat) == pytest.approx(pehe, abs=1e-9)
    assert metrics.ate_error(test.mu, mu_hat) == pytest.approx(abs(tau.mean() - d_hat), abs=1e-9)


def test_the_oracle_constant_uses_the_training_units_potential_outcomes():
    train, test = _split()
    mu = train.mu.astype(np.float64)
    predict, info = baselines.fit_reference(train, "constant_effect",
                                            ate_source="potential_outcomes")  # fmt: skip
    assert info["effects"][1] == pytest.approx((mu[:, 1] - mu[:, 0]).mean(), abs=1e-9)
    no_mu = data.CausalData(train.x, train.t, train.y, None, 2)
    with pytest.raises(DataError, match="potential outcomes"):
        baselines.fit_reference(no_mu, "constant_effect", ate_source="potential_outcomes")


def test_mean_outcome_predicts_no_effect():
    train, test = _split()
    predict, info = baselines.fit_reference(train, "mean_outcome")
    mu_hat = predict(test.x)
    assert np.all(mu_hat == pytest.approx(float(np.mean(train.y.astype(np.float64)))))
    tau = test.mu[:, 1].astype(np.float64) - test.mu[:, 0]
    assert metrics.sqrt_pehe(test.mu, mu_hat) == pytest.approx(np.sqrt(np.mean(tau**2)), abs=1e-9)
    assert metrics.ate_error(test.mu, mu_hat) == pytest.approx(abs(tau.mean()), abs=1e-9)


def test_k_arms_and_bad_names():
    rng = np.random.default_rng(0)
    d = data.make_multiarm(rng.normal(size=(120, 3)), 4, seed=0)
    predict, info = baselines.fit_reference(d, "constant_effect")
    y = d.y.astype(np.float64)
    means = np.array([y[d.t == k].mean() for k in range(4)])
    np.testing.assert_allclose(predict(d.x[:3]), np.tile(means, (3, 1)), atol=1e-9)
    with pytest.raises(DataError, match="reference predictor"):
        baselines.fit_reference(d, "median")
    with pytest.raises(DataError, match="ate_source"):
        baselines.fit_reference(d, "constant_effect", ate_source="test")


def test_tuning_a_baseline_on_the_validation_split_picks_the_lowest_validation_mse():
    pytest.importorskip("sklearn")
    train, test = _split()
    grid = {"learning_rate": (0.01, 0.3)}
    predict, info = baselines.tune_meta_learner(train, "t", "gbm", 0, validation_fraction=0.25,
                                                grid=grid, split_seed=11)  # fmt: skip
    fit_part, val = data.split_causal(train, 0.25, 11)  # brute force: every grid fit again
    mse = {}
    for v in grid["learning_rate"]:
        p, _ = baselines.fit_meta_learner(fit_part, "t", "gbm", 0, params={"learning_rate": v})
        f = p(val.x)[np.arange(len(val)), val.t]
        mse[str(v)] = float(np.mean((f - val.y.astype(np.float64)) ** 2))
    assert info["grid"] == pytest.approx(mse, abs=1e-12)
    best = min(mse, key=mse.get)
    assert info["chosen"] == {"learning_rate": float(best)}
    assert mse["0.01"] != mse["0.3"]  # the setting matters on this data
    again, _ = baselines.fit_meta_learner(fit_part, "t", "gbm", 0,
                                          params={"learning_rate": float(best)})  # fmt: skip
    np.testing.assert_array_equal(predict(test.x), again(test.x))
    with pytest.raises(DataError, match="leave-one-out"):
        baselines.tune_meta_learner(train, "t", "ridge")
    with pytest.raises(DataError, match="one setting"):
        baselines.tune_meta_learner(train, "t", "gbm", grid={"learning_rate": ()})
