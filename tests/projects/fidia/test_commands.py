"""CLI glue of train / evaluate / design: parsing and error paths (no training here)."""

import pytest

from fidia_jax import cli
from fidia_jax.projects.fidia import _commands


def test_parser_registers_fidia_commands():
    args = cli._parser().parse_args(
        ["train", "--config", "tiny", "--set", "train.num_steps=3", "--method", "rloo", "--seed", "4"])
    cfg = _commands._config_from_args(args)
    assert (cfg.method, cfg.seed, cfg.train.num_steps, cfg.train.n_samples) == ("rloo", 4, 3, 4)
    args = cli._parser().parse_args(["design", "--checkpoint", "run", "--num-samples", "8",
                                     "--fixed", "A10-12"])
    assert (args.command, args.num_samples, args.fixed) == ("design", 8, "A10-12")


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["train", "--config", "no_such_preset"], "neither a config preset"),
        (["train", "--config", "tiny", "--set", "train.k_bon=9"], "k_bon"),
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
    args = cli._parser().parse_args(["train", "--config", "tiny", "--data-dir", str(tmp_path)])
    with caplog.at_level("WARNING"):
        cfg = _commands._config_from_args(args)
    assert "--data-dir is unused" in caplog.text
    assert _commands._eval_title(cfg, 1) == "evaluation on the training backbone (1 backbone; not held out)"
    small = _commands._config_from_args(cli._parser().parse_args(["train", "--config", "small"]))
    assert _commands._eval_title(small, 8) == "held-out (8 backbones)"
