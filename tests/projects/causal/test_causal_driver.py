"""Causal driver: the tiny run (CFR aggregation + multi-arm CausalEGM), configs, edge cases."""

import json

import numpy as np
import pytest

from fidia_jax import metrics
from fidia_jax.errors import ConfigError, DataError
from fidia_jax.projects import causal
from fidia_jax.projects.causal import data


@pytest.mark.integration  # a tiny driver run (make test-integration, CI)
def test_tiny_run_writes_finite_results(tmp_path):
    config = causal.get_config("tiny")
    results = causal.train_and_evaluate(config, tmp_path)
    written = json.loads((tmp_path / "causal_results.json").read_text())
    assert written["config"]["dataset"] == "multiarm_random"
    rows = {r["method"]: r for r in results["runs"]}
    assert set(rows) == {"cfr_aggregation", "causalegm"}
    for row in rows.values():
        assert np.isfinite(row["sqrt_pehe"]) and np.isfinite(row["ate_error"])
    # Score check: the held-out units' metrics equal the metric functions on a constant
    # prediction's lower bound: sqrt(PEHE) of predicting "no effect" is the effects' RMS.
    inst = list(causal.instances(config))
    _, _, d = inst[0]
    _, test = data.split_causal(d, config.test_fraction, config.seed + 0)
    zero = metrics.sqrt_pehe(test.mu, np.zeros_like(test.mu))
    assert zero > 0.5  # the generator has real effects to find


def test_config_errors():
    with pytest.raises(ConfigError, match="num_arms"):
        causal.get_config("tiny", num_arms=(1,))
    with pytest.raises(ConfigError, match="methods"):
        causal.get_config("tiny", methods=("nope",))
    with pytest.raises(ConfigError, match="IHDP replications"):
        causal.get_config("default", replications=(11,))


def test_validation_config_errors():
    with pytest.raises(ConfigError, match="needs an alpha_grid"):
        causal.get_config("tiny", validation_fraction=0.2)
    with pytest.raises(ConfigError, match=r"validation_fraction must be in \[0, 1\)"):
        causal.get_config("tiny", validation_fraction=1.0, alpha_grid=(1.0,))
    with pytest.raises(ConfigError, match="alpha_grid values must be >= 0"):
        causal.get_config("tiny", alpha_grid=(-1.0,))
    assert set(causal.configs.BASELINES) <= set(causal.METHODS)
    causal.get_config("tiny", methods=("t_ridge", "x_gbm", "s_lgbm"))


@pytest.mark.integration  # CFR fits at two alphas plus a pilot (make test-integration, CI)
def test_alpha_by_validation_and_by_bound_with_a_baseline_on_the_same_split():
    config = causal.get_config(
        "tiny",
        methods=("tarnet", "cfr_pairwise", "t_ridge"),
        alpha=None,
        alpha_grid=(0.0, 10.0),
        validation_fraction=0.3,
    )
    rows = {r["method"]: r for r in causal.run_experiment(config)["runs"]}
    assert set(rows) == {"tarnet", "cfr_pairwise", "t_ridge", "cfr_pairwise@val"}
    val = rows["cfr_pairwise@val"]
    grid = val["grid"]
    # the chosen alpha is the grid value of lowest validation MSE, and the row reports that fit
    chosen = min(grid, key=lambda a: grid[a]["val_mse"])
    assert val["alpha"] == float(chosen)
    assert val["sqrt_pehe"] == grid[chosen]["sqrt_pehe"]
    assert grid["0"]["sqrt_pehe"] != grid["10"]["sqrt_pehe"]  # alpha changes the fit
    # alpha_hat comes from the TARNet pilot (the TARNet row): positive, recorded on every row
    assert rows["cfr_pairwise"]["alpha"] == rows["tarnet"]["alpha_hat"] > 0
    assert rows["t_ridge"]["alpha"] is None
    # the baseline is scored on the same held-out units: recompute it here
    from fidia_jax.projects.causal import baselines

    _, _, d = next(iter(causal.instances(config)))
    train, test = data.split_causal(d, config.test_fraction, config.seed + 0)
    predict, _ = baselines.fit_meta_learner(train, "t", "ridge", config.seed + 0)
    assert rows["t_ridge"]["sqrt_pehe"] == pytest.approx(
        metrics.sqrt_pehe(test.mu, predict(test.x)), rel=1e-12
    )


def test_fitting_data_with_an_empty_arm_fails_before_training():
    rng = np.random.default_rng(0)
    d = data.make_multiarm(rng.normal(size=(60, 4)), 3, seed=0)
    with pytest.raises(DataError, match="have no units"):
        d.subset(np.flatnonzero(d.t != 2))  # arm 2 dropped: a clear error, never NaN effects
