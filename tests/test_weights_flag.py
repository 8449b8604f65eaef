"""One meaning for ``--checkpoint`` (a training run directory); ``--weights`` names ProteinMPNN
weights in ``sample`` / ``score`` / ``design`` / ``evaluate``; the old spelling
``--checkpoint v_48_020`` still works with a FutureWarning (issue 30)."""

from __future__ import annotations

import warnings

import pytest

from fidia_jax import cli
from fidia_jax.projects.fidia import commands as fidia_commands
from fidia_jax.projects.proteinmpnn import commands as mpnn_commands

#: The required options of each verb.
_REQUIRED = {"sample": ["--out", "o"], "score": ["--fasta", "f.fasta"]}


@pytest.mark.parametrize("verb", ["sample", "score"])
def test_sample_and_score_take_weights(verb):
    args = cli._parse_args([verb, *_REQUIRED[verb], "--weights", "v_48_010"])
    assert args.weights == "v_48_010" and not getattr(args, "old_weights_flag", False)
    assert cli._parse_args([verb, *_REQUIRED[verb]]).weights == "v_48_020"  # the default
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mpnn_commands._warn_old_weights_flag(args)  # no warning for the new spelling


@pytest.mark.parametrize("verb", ["sample", "score"])
def test_the_old_weights_spelling_still_works_with_a_warning(verb):
    args = cli._parse_args([verb, *_REQUIRED[verb], "--checkpoint", "v_48_002"])
    assert args.weights == "v_48_002"
    with pytest.warns(FutureWarning, match="use --weights v_48_002"):
        mpnn_commands._warn_old_weights_flag(args)


@pytest.mark.parametrize("verb", ["design", "evaluate"])
def test_design_and_evaluate_take_a_run_or_weights(verb, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        args = cli._parse_args([verb, "--checkpoint", str(tmp_path)])
        assert fidia_commands._policy(args) == str(tmp_path)
        args = cli._parse_args([verb, "--weights", "v_48_020"])
        assert fidia_commands._policy(args) == "v_48_020"
    args = cli._parse_args([verb, "--checkpoint", "v_48_020"])
    with pytest.warns(FutureWarning, match="use --weights v_48_020"):
        assert fidia_commands._policy(args) == "v_48_020"


@pytest.mark.parametrize(
    "extra", [[], ["--checkpoint", "run", "--weights", "v_48_020"]], ids=["neither", "both"]
)
def test_design_needs_exactly_one_policy(extra, capsys):
    with pytest.raises(SystemExit) as e:
        cli._parse_args(["design", *extra])
    assert e.value.code == 2
    assert "--checkpoint" in capsys.readouterr().err
