"""Meta-learner baselines: exact recovery on noiseless data, the S-learner's constant effect,
the X-learner's multi-arm form, and bad input."""

import numpy as np
import pytest

from fidia_jax import metrics
from fidia_jax.errors import DataError
from fidia_jax.projects.causal import baselines
from fidia_jax.projects.causal.data import CausalData

pytest.importorskip("sklearn")


def _linear(n=300, k=3, seed=0, noise=0.0):
    """Potential outcomes linear in x with arm-specific slopes (heterogeneous effects)."""
    coef = np.random.default_rng(100).normal(size=(k, 4))  # the same surfaces for every draw
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 4))
    mu = x @ coef.T + np.arange(k)[None, :]
    t = rng.integers(0, k, n).astype(np.int32)
    t[:k] = np.arange(k)
    y = mu[np.arange(n), t] + noise * rng.normal(size=n)
    return CausalData(x, t, y, mu, k)


@pytest.mark.parametrize("meta", ["t", "x"])
def test_t_and_x_ridge_recover_linear_potential_outcomes(meta):
    train, test = _linear(seed=0), _linear(seed=1)
    mu_test = test.mu
    predict, info = baselines.fit_meta_learner(train, meta, "ridge")
    mu_hat = predict(test.x)
    assert mu_hat.shape == (300, 3)
    # noiseless linear surfaces: only RidgeCV's smallest penalty (1e-3) separates us from exact
    assert metrics.sqrt_pehe(mu_test, mu_hat) < 1e-2
    assert info["wall_s"] >= 0


def test_s_learner_ridge_has_constant_effects_equal_to_the_mean_shift():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(400, 3))
    t = (rng.random(400) < 0.5).astype(np.int32)
    mu = np.stack([x @ [1.0, -2.0, 0.5], x @ [1.0, -2.0, 0.5] + 1.7], 1)
    d = CausalData(x, t, mu[np.arange(400), t], mu, 2)
    mu_hat = baselines.fit_meta_learner(d, "s", "ridge")[0](x)
    effect = mu_hat[:, 1] - mu_hat[:, 0]
    np.testing.assert_allclose(effect, effect[0], atol=1e-9)  # linear S-learner: one effect
    assert abs(effect[0] - 1.7) < 1e-2


def test_boosting_t_learner_finds_a_step_effect_that_ridge_cannot():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(600, 2))
    tau = 3.0 * (x[:, 0] > 0)
    mu = np.stack([np.zeros(600), tau], 1)
    t = (rng.random(600) < 0.5).astype(np.int32)
    d = CausalData(x, t, mu[np.arange(600), t] + 0.1 * rng.normal(size=600), mu, 2)
    pehe = {b: metrics.sqrt_pehe(mu, baselines.fit_meta_learner(d, "t", b)[0](x))
            for b in ("ridge", "gbm")}  # fmt: skip
    assert pehe["gbm"] < 0.5 < pehe["ridge"]  # ridge's best line leaves ~0.87 of a 0/3 step


def test_lightgbm_base_learner_runs_when_installed():
    pytest.importorskip("lightgbm")
    train = _linear(n=200, k=2, seed=5, noise=0.1)
    mu_hat = baselines.fit_meta_learner(train, "x", "lgbm")[0](train.x)
    assert mu_hat.shape == (200, 2) and np.all(np.isfinite(mu_hat))
    assert metrics.sqrt_pehe(train.mu, mu_hat) < metrics.sqrt_pehe(train.mu, 0 * mu_hat)


def test_bad_input():
    d = _linear(n=60, k=3)
    with pytest.raises(DataError, match="unknown meta-learner 'q'"):
        baselines.fit_meta_learner(d, "q", "ridge")
    with pytest.raises(DataError, match="unknown base learner 'svm'"):
        baselines.fit_meta_learner(d, "t", "svm")
    one = d.subset(np.concatenate([np.flatnonzero(d.t != 2), np.flatnonzero(d.t == 2)[:1]]))
    with pytest.raises(DataError, match="arm 2 has 1 training unit"):
        baselines.fit_meta_learner(one, "t", "ridge")
