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


def test_fitting_data_with_an_empty_arm_fails_before_training():
    rng = np.random.default_rng(0)
    d = data.make_multiarm(rng.normal(size=(60, 4)), 3, seed=0)
    with pytest.raises(DataError, match="have no units"):
        d.subset(np.flatnonzero(d.t != 2))  # arm 2 dropped: a clear error, never NaN effects
