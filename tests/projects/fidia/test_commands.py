"""CLI glue of ``fidia-jax fidia train | evaluate | design | demo``: parsing and error paths
(no training here; ``tests/test_cli.py`` holds the one real ``train --config tiny`` run)."""

import pytest

from fidia_jax import cli
from fidia_jax.projects.fidia import commands


@pytest.mark.parametrize("prefix", [[], ["fidia"]])  # short form and project form
def test_parser_registers_fidia_commands(prefix):
    args = cli._parse_args(prefix + [
        "train", "--config", "tiny", "--set", "train.num_steps=3", "--method", "rloo", "--seed", "4"])
    assert (args.project, args.verb) == ("fidia", "train")
    cfg = commands._config_from_args(args)
    assert (cfg.method, cfg.seed, cfg.train.num_steps, cfg.train.n_samples) == ("rloo", 4, 3, 4)
    args = cli._parse_args(prefix + ["design", "--checkpoint", "run", "--num-samples", "8",
                                     "--fixed", "A10-12"])
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
    argv = ["train", "--config", "small", "--data-dir", str(tmp_path / "nonexistent"),
            "--workdir", str(workdir)]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fidia-jax: error: "), err
    assert not workdir.exists()


def test_data_dir_with_builtin_backbone_config_warns_and_titles_say_not_held_out(caplog, tmp_path):
    args = cli._parse_args(["train", "--config", "tiny", "--data-dir", str(tmp_path)])
    with caplog.at_level("WARNING"):
        cfg = commands._config_from_args(args)
    assert "--data-dir is unused" in caplog.text
    assert commands._eval_title(cfg, 1) == "evaluation on the training backbone (1 backbone; not held out)"
    small = commands._config_from_args(cli._parse_args(["train", "--config", "small"]))
    assert commands._eval_title(small, 8) == "held-out (8 backbones)"
