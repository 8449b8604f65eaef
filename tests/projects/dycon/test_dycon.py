"""The DyCon driver end to end on the tiny preset, and its errors."""

import json

import jax
import numpy as np
import pytest

from fidia_jax import models
from fidia_jax._io import json_text
from fidia_jax.errors import ConfigError
from fidia_jax.projects import dycon
from fidia_jax.projects.dycon import control, task


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("dycon")
    config = dycon.get_config("tiny")
    return config, dycon.train_and_evaluate(config, workdir), workdir


@pytest.mark.integration  # a tiny driver run (make test-integration, CI)
def test_tiny_run_writes_a_consistent_summary(run):
    config, results, workdir = run
    saved = json.loads((workdir / "dycon.json").read_text())
    assert saved["config"]["steps"] == config.steps and saved["goals"] == json.loads(
        json.dumps(results["goals"])
    )
    assert (
        len(results["probe"]["r2"]) == config.n_layers + 1 == len(results["probe"]["r2_shuffled"])
    )
    for method in dycon.METHODS:
        cells = results["summary"][method]
        assert (
            sum(cells[f"{lo}-{hi}"]["n"] for lo, hi in config.buckets)
            == cells["all"]["n"]
            == config.num_test
        )
        for c in cells.values():
            assert 0.0 <= c["accuracy"] <= 1.0 and c["tokens"] >= 1
    g = results["goals"]
    s = results["summary"]
    assert g["accuracy_within_1se"]["met"] == (
        s["dycon"]["all"]["accuracy"]
        >= s["baseline"]["all"]["accuracy"] - s["baseline"]["all"]["accuracy_se"]
    )
    assert g["fewer_tokens"]["met"] == (g["fewer_tokens"]["paired_difference"] < 0)
    np.testing.assert_allclose(
        g["fewer_tokens"]["paired_difference"],
        s["dycon"]["all"]["tokens"] - s["baseline"]["all"]["tokens"],
        atol=1e-9,
    )
    assert (
        s["nowait"]["all"]["corrective"] == s["nowait"]["all"]["redundant"] == 0.0
    )  # wait is banned
    assert results["control"]["dycon"]["lam"] in config.lam_grid


@pytest.mark.integration  # a tiny driver run (make test-integration, CI)
def test_tiny_run_leaves_summary_picture_and_training_files(run):
    config, results, workdir = run
    summary = json.loads((workdir / "summary.json").read_text())
    headline = json.loads(json_text(dycon.headline(results)))  # NaN -> null, as written
    assert {k: v for k, v in summary.items() if k != "config"} == headline
    assert summary["config"]["steps"] == config.steps
    assert set(summary["decoders"]) == set(dycon.METHODS)
    assert (workdir / "dycon_tradeoff.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    records = [json.loads(x) for x in (workdir / "metrics.jsonl").read_text().splitlines()]
    steps = [r["step"] for r in records if r.get("run") == "dycon_lm" and "loss" in r]
    assert steps == list(range(1, config.steps + 1))
    np.testing.assert_allclose(
        results["train"]["loss_first"], [r["loss"] for r in records if r["step"] == 1][0],
        rtol=1e-6,
    )  # fmt: skip


@pytest.mark.integration  # a tiny driver run (make test-integration, CI)
def test_generate_errors_name_the_problem(run):
    config, _, _ = run
    from flax import nnx

    model = dycon.build_model(config, nnx.Rngs(3))
    batch = task.make_dycon_task(5, vocab=dycon.vocab_of(config), seed=9)
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="names layer 1, but the model has 1 layers"):
        dycon.generate(
            model,
            batch,
            method="baseline",
            key=key,
            temperature=None,
            hooks=(models.AddToResidual(layer=config.n_layers, vector=np.zeros(config.dim)),),
        )
    with pytest.raises(ValueError, match="layer"):  # the probe layer must exist too
        control.dycon_control(
            model,
            np.zeros(config.dim),
            0.0,
            layer=config.n_layers + 1,
            lam=1.0,
            tau=0.5,
            boundary_tokens=(2,),
            reflect_tokens=(4,),
        )
    with pytest.raises(ValueError, match="needs a control"):
        dycon.generate(model, batch, method="dycon", key=key, temperature=None)
    with pytest.raises(ValueError, match="method"):
        dycon.generate(model, batch, method="thinkless", key=key, temperature=None)


@pytest.mark.parametrize(
    "override, match",
    [
        ({"tau_grid": (0.5, 1.5)}, "tau_grid"),
        ({"lam_grid": (-1.0,)}, "lam_grid"),
        ({"num_probe": 1}, "num_probe"),
        ({"bucket_ends": (2, 2, 3)}, "bucket_ends"),
        ({"temperature": 0.0}, "temperature"),
        ({"control_form": "both"}, "control_form"),
        ({"checkpoint_traces": 4}, "checkpoint_traces"),
    ],
)
def test_bad_config_raises(override, match):
    with pytest.raises(ConfigError, match=match):
        dycon.get_config("tiny", **override)
