"""Causal driver: the tiny run (CFR aggregation + multi-arm CausalEGM), configs, edge cases."""

import json

import numpy as np
import pytest

from fidia_jax import metrics
from fidia_jax.errors import ConfigError, DataError
from fidia_jax.projects import causal
from fidia_jax.projects.causal import data
from fidia_jax.projects.causal._fit import VAL_SEED_OFFSET


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


def _noise_only_data(n=160, seed=0):
    """Outcomes that are pure noise (no signal in x): any fitting beyond the mean over-fits,
    so the validation error has its minimum early and rises after it."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 5)).astype(np.float32)
    t = np.arange(n) % 2
    return data.CausalData(x, t, rng.normal(size=n), np.zeros((n, 2)), 2, "noise")


@pytest.mark.integration  # CFR fits of 150-400 steps with one compile each (~15-25 s)
def test_early_stopping_returns_the_parameters_of_the_best_validation_step():
    d = _noise_only_data()
    s = causal.CfrSettings(
        scheme="none", alpha=0.0, rep_hidden=(64, 64), head_hidden=(64,), learning_rate=1e-2,
        weight_decay=0.0, batch_size=32, iterations=150, val_fraction=0.25, eval_every=5,
        patience=0,
    )  # fmt: skip
    predict, info = causal.fit_cfr(d, s, seed=0)
    steps, vals = zip(*info["val_history"], strict=True)
    assert info["stopped_step"] == 150 and steps[-1] == 150  # patience 0: runs to the end
    assert info["best_step"] == steps[int(np.argmin(vals))]
    # the noise over-fits: the best evaluation is not the last one
    assert info["best_step"] < 150 and vals[-1] > min(vals) + 1e-3
    # the returned model is the best evaluation's: its validation MSE, recomputed here from
    # the predictions on the held-back rows, is the minimum of the history, not the last value
    val = d.subset(info["val_index"])
    mse = float(np.mean((predict(val.x)[np.arange(len(val)), val.t] - val.y) ** 2))
    np.testing.assert_allclose(mse, min(vals), rtol=1e-4)
    np.testing.assert_allclose(info["val_mse"], min(vals), rtol=1e-6)
    # the held-back rows are the validation split of the alpha selection (same seed offset)
    _, val_rows = data.split_rows(d, 0.25, 0 + VAL_SEED_OFFSET)
    np.testing.assert_array_equal(info["val_index"], val_rows)


@pytest.mark.integration  # CFR fits of 150-400 steps with one compile each (~15-25 s)
def test_early_stopping_stops_after_patience_evaluations_without_gain():
    d = _noise_only_data(seed=1)
    s = causal.CfrSettings(
        scheme="none", alpha=0.0, rep_hidden=(64, 64), head_hidden=(64,), learning_rate=1e-2,
        weight_decay=0.0, batch_size=32, iterations=400, val_fraction=0.25, eval_every=5,
        patience=4,
    )  # fmt: skip
    _, info = causal.fit_cfr(d, s, seed=0)
    steps, vals = zip(*info["val_history"], strict=True)
    assert info["stopped_step"] < 400  # noise: it must stop early
    assert info["stopped_step"] == info["best_step"] + 4 * 5
    assert all(v >= info["val_mse"] for v in vals)  # nothing after (or before) beats the best


def test_early_stopping_settings_errors():
    with pytest.raises(ValueError, match="val_fraction"):
        causal.CfrSettings(val_fraction=1.0)
    with pytest.raises(ValueError, match="eval_every"):
        causal.CfrSettings(val_fraction=0.2, eval_every=0)
    with pytest.raises(ConfigError, match="early_stopping needs validation_fraction"):
        causal.get_config("tiny", early_stopping=True)
