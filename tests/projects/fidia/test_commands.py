"""CLI glue of ``fidia-jax fidia train | evaluate | design | demo``: parsing and error paths
(no training here; ``tests/test_cli.py`` holds the one real ``train --config tiny`` run)."""

import pytest

from fidia_jax import cli
from fidia_jax.projects.fidia import commands


@pytest.mark.parametrize("prefix", [[], ["fidia"]])  # short form and project form
def test_parser_registers_fidia_commands(prefix):
    args = cli._parse_args(
        prefix
        + [
            "train",
            "--config",
            "tiny",
            "--set",
            "train.num_steps=3",
            "--method",
            "rloo",
            "--seed",
            "4",
        ]
    )
    assert (args.project, args.verb) == ("fidia", "train")
    cfg = commands._config_from_args(args)
    assert (cfg.method, cfg.seed, cfg.train.num_steps, cfg.train.n_samples) == ("rloo", 4, 3, 4)
    args = cli._parse_args(
        prefix + ["design", "--checkpoint", "run", "--num-samples", "8", "--fixed", "A10-12"]
    )
    assert (args.verb, args.num_samples, args.fixed) == ("design", 8, "A10-12")


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["train", "--config", "no_such_preset"], "neither a config preset"),
        (["train", "--config", "tiny", "--set", "train.k_bon=9"], "k_bon"),
        (["fidia", "train", "--config", "tiny", "--set", "train.bogus=1"], "unknown key 'bogus'"),
        (["fidia", "train", "--config", "tiny", "--set", "train.num_steps=abc"], "train.num_steps"),
        (["evaluate", "--checkpoint", "{tmp}"], "not a training run directory"),
        (["design", "--checkpoint", "{tmp}", "--num-samples", "1"], "num-samples"),
        (["design", "--checkpoint", "{tmp}/no_such_run"], "no such training run directory"),
    ],
)
def test_errors_are_one_line_exit_2(argv, needle, tmp_path, capsys):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fidia-jax: error: ") and needle in err[0], err


def test_train_with_missing_data_leaves_no_workdir(tmp_path, capsys):
    workdir = tmp_path / "run"
    argv = [
        "train",
        "--config",
        "small",
        "--data-dir",
        str(tmp_path / "nonexistent"),
        "--workdir",
        str(workdir),
    ]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    # the command's first line (config and workdir), then the one-line error (no traceback); the
    # loading stage may print its line in between
    assert err[0].startswith("fidia-jax fidia train: config small") and "Traceback" not in str(
        err
    ), err
    assert err[-1].startswith("fidia-jax: error: ") and "data directory" in err[-1], err
    assert not workdir.exists()


def test_data_dir_with_builtin_backbone_config_warns_and_titles_say_not_held_out(caplog, tmp_path):
    args = cli._parse_args(["train", "--config", "tiny", "--data-dir", str(tmp_path)])
    with caplog.at_level("WARNING"):
        cfg = commands._config_from_args(args)
    assert "--data-dir is unused" in caplog.text
    assert (
        commands._eval_title(cfg, 1)
        == "evaluation on the training backbone (1 backbone; not held out)"
    )
    small = commands._config_from_args(cli._parse_args(["train", "--config", "small"]))
    assert commands._eval_title(small, 8) == "held-out (8 backbones)"


def test_design_outputs_with_non_finite_rewards_are_valid_json(tmp_path):
    """report.json stays valid JSON (null + the "non_finite" field) and the plot is drawn."""
    import json

    import numpy as np

    from fidia_jax import models, protein
    from fidia_jax.projects import fidia
    from fidia_jax.projects.fidia import design

    full = models.MPNNInputs.from_protein(protein.load_structure(protein.default_backbone_path()))
    inputs = models.MPNNInputs(*(np.asarray(a)[:12] for a in full))
    fixed = np.zeros(12, bool)
    fixed[2:4] = True
    bb = fidia.Backbone("toy", "motif", inputs, fixed, lambda s: (None, None))
    seqs = np.random.default_rng(0).integers(0, 20, (4, 12))
    rewards = np.array([0.5, np.nan, -0.2, np.inf], np.float32)
    # the reference max@N excludes the NaN reward and says so (issue 29 item 6)
    with pytest.warns(UserWarning, match="max_at_k: 1 of 2 rewards are non-finite"):
        design.write_design_outputs(
            tmp_path,
            bb,
            seqs,
            rewards,
            np.array([1, 0, 0, 0], bool),
            meta={"seed": 0},
            ref_rewards=np.array([0.1, np.nan], np.float32),
        )

    def reject(token):
        raise ValueError(token)

    report = json.loads((tmp_path / "report.json").read_text(), parse_constant=reject)
    assert report["best_index"] == 3 and report["best_reward"] is None
    assert report["metrics"]["reward_mean"] is None and report["reference_max@N"]["2"] is None
    assert report["non_finite"]["best_reward"] == "inf"
    assert report["non_finite"]["metrics.reward_mean"] == "nan"
    assert (tmp_path / "design.png").stat().st_size > 0


# ----------------------------------------------------------------------------- damaged run dirs
def _damaged_run(root):
    """A ``tiny`` run directory with a complete checkpoint at step 2 (the reference weights
    and a fresh optimiser state; no training) and an empty ``checkpoints/4/``, as a save killed
    before it wrote leaves it."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from fidia_jax import models
    from fidia_jax._io import atomic_write_text, json_text
    from fidia_jax.projects.fidia import _checkpoints as ckpt
    from fidia_jax.projects.fidia import config_to_dict, get_config, make_optimizer
    from fidia_jax.projects.fidia._step import TrainState

    cfg = get_config("tiny")
    atomic_write_text(root / "config.json", json_text(config_to_dict(cfg), indent=1))
    model = models.ProteinMPNN.from_checkpoint(cfg.model.checkpoint, variant=cfg.model.variant)
    params = jax.tree.map(jnp.asarray, nnx.to_pure_dict(nnx.state(model)))
    state = TrainState(step=2, params=params, opt_state=make_optimizer(cfg).init(params))
    checkpoints = ckpt.checkpointer(root, cfg)
    ckpt.save(checkpoints, state)
    checkpoints.close()
    (root / "checkpoints" / "4").mkdir()
    return cfg, state


def test_incomplete_newest_checkpoint_is_skipped_with_a_warning(tmp_path):
    import jax
    import numpy as np

    from fidia_jax import train
    from fidia_jax.errors import CheckpointError
    from fidia_jax.projects.fidia import _checkpoints as ckpt
    from fidia_jax.projects.fidia import load_policy

    cfg, state = _damaged_run(tmp_path)
    # design / evaluate: the newest complete checkpoint, read-only
    with pytest.warns(
        UserWarning, match=r"checkpoints/4 \(a save that did not finish\) skipped; using step 2"
    ):
        model, _, step = load_policy(tmp_path)
    assert step == 2 and (tmp_path / "checkpoints" / "4").is_dir()
    with pytest.raises(CheckpointError, match="step 4 is missing or incomplete"):
        load_policy(tmp_path, step=4)
    # train resuming: the incomplete folder goes, the run restores step 2 and can save step 4
    checkpoints = ckpt.checkpointer(tmp_path, cfg)
    with pytest.warns(UserWarning, match="removed; using step 2"):
        assert checkpoints.latest_step(remove_incomplete=True) == 2
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["2"]
    restored = ckpt.restore(checkpoints, 2, state)
    for a, b in zip(jax.tree.leaves(restored.params), jax.tree.leaves(state.params), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    ckpt.save(checkpoints, restored._replace(step=4))
    assert checkpoints.latest_step() == 4 and train.is_complete(tmp_path / "checkpoints" / "4")
    checkpoints.close()


def test_cli_prints_warnings_as_one_line_and_no_absl_noise(tmp_path):
    """``fidia-jax evaluate`` on a damaged run: our warning as one ``fidia-jax: warning:`` line,
    then the error line; no absl/orbax log lines (absolute paths), no traceback."""
    import subprocess
    import sys

    _damaged_run(tmp_path)
    res = subprocess.run(
        [sys.executable, "-m", "fidia_jax.cli", "evaluate", "--checkpoint", str(tmp_path),
         "--set", "train.bogus=1", "--out", str(tmp_path / "eval")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2, res.stderr
    assert len(lines) == 2, lines
    assert (
        lines[0].startswith("fidia-jax: warning: incomplete checkpoint ")
        and "using step 2" in lines[0]
    )
    assert lines[1].startswith("fidia-jax: error: ") and "bogus" in lines[1]


def test_metrics_jsonl_is_strict_json_and_reads_back_non_finite(tmp_path):
    """metrics.jsonl lines go through json_text; resuming reads NaN back (not None)."""
    import json
    import math

    from fidia_jax._io import json_text
    from fidia_jax.projects.fidia.train import _read_jsonl

    path = tmp_path / "metrics.jsonl"
    path.write_text(json_text({"step": 0, "kl": float("nan"), "reward_mean": 1.5}) + "\n"
                    + json_text({"step": 1, "kl": 0.25}) + "\n")  # fmt: skip
    for line in path.read_text().splitlines():
        json.loads(line, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    rows = _read_jsonl(path)
    assert (
        math.isnan(rows[0]["kl"]) and rows[0]["reward_mean"] == 1.5 and "non_finite" not in rows[0]
    )
    assert rows[1] == {"step": 1, "kl": 0.25}
