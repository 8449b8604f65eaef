"""Var-JEPA driver: configs, the tiny run (JSON, probes, effective rank, AURC) and the CLI."""

import json

import numpy as np
import pytest

from fidia_jax import cli
from fidia_jax.errors import ConfigError
from fidia_jax.projects import varjepa


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("varjepa")
    config = varjepa.get_config("tiny")
    return config, varjepa.train_and_evaluate(config, workdir), workdir


@pytest.mark.integration  # a tiny driver run (make test-integration, CI)
def test_tiny_run_writes_a_complete_summary(tiny_run):
    config, results, workdir = tiny_run
    saved = json.loads((workdir / "varjepa.json").read_text())
    assert saved["config"]["dataset"] == "breast_cancer" and saved["n_train"] == 120
    assert set(saved["methods"]) == {"T-JEPA", "Var-T-JEPA"}
    for name, row in results["methods"].items():
        assert 0.5 < row["linear_acc"] <= 1.0, name  # a probe on 30 informative features
        hist = row["history"]
        assert hist["step"] == [0, 3, 5] and len(hist["effective_rank"]) == 3
        assert all(1.0 <= r <= config.dim for r in hist["effective_rank"])
        # AURC of random order = error rate; confidence ranking cannot exceed the worst order
        assert row["aurc_random"] == pytest.approx(1.0 - row["linear_acc"])
    var = results["methods"]["Var-T-JEPA"]
    assert np.isfinite(var["aurc_posterior_variance"])
    assert set(var["history"]["terms"][0]) == {
        "rec_context",
        "rec_target",
        "kl_context",
        "kl_target",
    }


@pytest.mark.integration  # a tiny driver run (make test-integration, CI)
def test_cli_and_bad_configs(tiny_run, tmp_path, capsys):
    assert (
        cli.main(
            [
                "varjepa",
                "train",
                "--config",
                "tiny",
                "--set",
                'methods=["tjepa"]',
                "--workdir",
                str(tmp_path),
            ]
        )
        == 0
    )
    saved = json.loads((tmp_path / "varjepa.json").read_text())
    assert set(saved["methods"]) == {"T-JEPA"}
    # the same config, the same seed: the same numbers as the module-scoped run
    assert (
        saved["methods"]["T-JEPA"]["linear_acc"] == tiny_run[1]["methods"]["T-JEPA"]["linear_acc"]
    )
    with pytest.raises(ConfigError, match="dataset"):
        varjepa.get_config("tiny", dataset="iris")
    with pytest.raises(ConfigError, match="sum"):
        varjepa.get_config("tiny", context_fraction=0.8, target_fraction=0.5)
    assert (
        cli.main(
            [
                "varjepa",
                "train",
                "--config",
                "tiny",
                "--set",
                'methods=["byol"]',
                "--workdir",
                str(tmp_path / "bad"),
            ]
        )
        == 2
    )
    assert "methods" in capsys.readouterr().err
