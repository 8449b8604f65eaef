"""StreamFlow driver: the tiny run end to end through the CLI, its stream statistics, configs."""

import json

import jax
import numpy as np
import pytest

from fidia_jax import cli
from fidia_jax.errors import ConfigError
from fidia_jax.projects import streamflow


@pytest.fixture(scope="module")
def tiny_workdir(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("streamflow")
    assert cli.main(["streamflow", "train", "--config", "tiny", "--workdir", str(workdir)]) == 0
    return workdir


@pytest.fixture(scope="module")
def tiny_run(tiny_workdir):
    return json.loads((tiny_workdir / streamflow.SUMMARY_FILE).read_text())


@pytest.mark.integration  # a tiny driver run (make test-integration, CI)
def test_tiny_run_summary(tiny_run):
    cfg = streamflow.get_config("tiny")
    assert tiny_run["config"]["eval_steps"] == [1, 2]
    assert tiny_run["data"] == {
        "train": 1797 - 16,
        "holdout": 16,
        "image_size": 8,
        "source": "sklearn digits (bundled)",
    }
    assert np.isfinite(tiny_run["train"]["loss_last"]) and np.isfinite(
        tiny_run["reflow"]["loss_last"]
    )
    for stage in ("base", "reflow"):
        stream = tiny_run["eval"][stage]["stream"]
        # every checked image equals the sequential sampler's
        assert stream["max_abs_diff_vs_sequential"] <= 1e-5
        assert stream["exact_checked"] == cfg.exact_check * 2
        # requests interleaved 1,2,1,2,1,2 steps through 2 slots, by hand:
        # [A1 B2] A done; [B C1] both done; [D2 E1] E done; [D F2] D done; [F] done
        assert stream["calls"] == 5 and stream["bucket_calls"] == {"1": 1, "2": 4}
        assert all(row["finite"] for row in tiny_run["eval"][stage]["steps"].values())


@pytest.mark.integration  # a tiny driver run (make test-integration, CI)
def test_tiny_run_files(tiny_workdir, tiny_run):
    """One metrics line per step of each fit, checkpoints at the ends, the headline numbers
    in summary.json, the curves and the sample grid."""
    records = [
        json.loads(line) for line in (tiny_workdir / "metrics.jsonl").read_text().splitlines()
    ]
    assert [(r["run"], r["step"]) for r in records] == [("flow", 1), ("flow", 2), ("flow", 3),
                                                        ("reflow", 1)]  # fmt: skip
    assert records[2]["loss"] == tiny_run["train"]["loss_last"]
    assert sorted(p.name for p in (tiny_workdir / "checkpoints").iterdir()) == ["flow", "reflow"]
    summary = json.loads((tiny_workdir / "summary.json").read_text())
    assert summary["train_loss_last"] == tiny_run["train"]["loss_last"]
    assert summary["stream_calls"] == {"base": 5, "reflow": 5}
    for png in ("curves.png", "samples.png"):
        assert (tiny_workdir / png).read_bytes()[:4] == b"\x89PNG"


def test_digit_split_is_disjoint_and_scaled():
    cfg = streamflow.get_config("tiny")
    train, hold = streamflow.digit_split(cfg)
    assert train.shape == (1781, 8, 8, 1) and hold.shape == (16, 8, 8, 1)
    assert train.min() >= -1.0 and train.max() <= 1.0 and train.dtype == np.float32
    # no held-out image appears in training (digits has a few exact duplicates: compare rows)
    rows = {r.tobytes() for r in train}
    assert sum(h.tobytes() in rows for h in hold) <= 1


def test_init_flow_draws_lecun_normal_kernels():
    """Every kernel: std 1/sqrt(fan_in) (truncated normal rescaled), |w| <= 2 sigma_raw;
    biases 0, GroupNorm scales 1 (no per-shape compile: numpy draws)."""
    cfg = streamflow.get_config("tiny", features=(8, 16))
    _, params = streamflow.init_flow(cfg)
    flat = jax.tree_util.tree_flatten_with_path(params)[0]
    kinds = set()
    for path, leaf in flat:
        name = [k.key for k in path if isinstance(k, jax.tree_util.DictKey)][-1]
        leaf = np.asarray(leaf)
        kinds.add(name)
        if name == "kernel":
            fan_in = int(np.prod(leaf.shape[:-1]))
            bound = 2.0 / 0.87962566103423978 / np.sqrt(fan_in)
            assert np.abs(leaf).max() <= bound * (1 + 1e-6)
            if leaf.size >= 500:
                assert abs(leaf.std() * np.sqrt(fan_in) - 1.0) < 0.12, (path, leaf.std())
        else:
            np.testing.assert_array_equal(leaf, 1.0 if name == "scale" else 0.0)
    assert kinds == {"kernel", "bias", "scale"}


def test_configs_validate():
    assert streamflow.get_config("default").eval_steps == (4, 8, 16)
    with pytest.raises(ConfigError, match="step count 0"):
        streamflow.get_config("tiny", eval_steps=(0, 2))
    with pytest.raises(ConfigError, match="multiple of 2"):
        streamflow.get_config("tiny", features=(8, 16), image_size=7)
    with pytest.raises(ConfigError, match="reflow_rounds"):
        streamflow.get_config("tiny", reflow_rounds=2)
