"""DyCon's checkpoint mode (issue 39): stages announced in order with progress, the synthetic
run's figure written (probe panel only), and a trace over the context refused before any weight
is read."""

from __future__ import annotations

import json

import pytest

from fidia_jax import models
from fidia_jax.errors import DataError
from fidia_jax.projects import dycon
from fidia_jax.projects.dycon import lm_probe

PNG = b"\x89PNG\r\n\x1a\n"


def _no_weights(*args, **kwargs):
    raise AssertionError("the weights were read")


def test_a_trace_over_the_limit_fails_before_the_weights(
    tmp_path, tiny_gemma3_checkpoint, monkeypatch
):
    for name in ("load_hf_checkpoint", "load_gguf", "load_lm_checkpoint"):
        monkeypatch.setattr(models, name, _no_weights)
    cfg = dycon.get_config(
        "tiny", checkpoint=str(tiny_gemma3_checkpoint), checkpoint_traces=8,
        checkpoint_max_seq_len=64,
    )  # fmt: skip
    # the byte-level tokenizer: BOS + one token per character of the whole trace
    tok = models.load_tokenizer(tiny_gemma3_checkpoint)
    lo, hi = lm_probe._checkpoint_operands(cfg)
    texts = ["".join(t["segments"]) for t in lm_probe.text_traces(8, min_operands=lo,
                                                                  max_operands=hi)]  # fmt: skip
    first = next(i for i, t in enumerate(texts) if len(tok.encode(t)) > 64)
    n = len(tok.encode(texts[first]))
    with pytest.raises(DataError, match=rf"trace {first} is {n} tokens.*> the limit 64 .*"
                       "raise checkpoint_max_seq_len"):  # fmt: skip
        dycon.train_and_evaluate(cfg, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def _canned(model, tokenizer, **kw):
    """What checkpoint_probe returns (values made up)."""
    return {
        "num_traces": kw["num_traces"], "num_boundaries": 30, "num_test_boundaries": 8,
        "r2_test": [0.0, 0.5, 0.6, 0.4], "r2_shuffled_test": [0.0, -0.1, -0.2, -0.1],
        "layer": 2, "r2_layer": 0.6, "r2_position_baseline": 0.3, "r2_counter_baseline": 0.9,
        "paired": {"mse_difference": -0.1, "ci95": [-0.2, 0.0], "p_probe_not_better": 0.02,
                   "test": "made up"},
        "seconds": 0.0,
    }  # fmt: skip


def test_checkpoint_run_announces_its_stages_and_writes_the_figure(
    tmp_path, tiny_gemma3_checkpoint, monkeypatch, capsys
):
    monkeypatch.delenv("FIDIA_QUIET", raising=False)
    monkeypatch.setattr(lm_probe, "checkpoint_probe", _canned)
    cfg = dycon.get_config(
        "tiny", checkpoint=str(tiny_gemma3_checkpoint), checkpoint_traces=8,
        checkpoint_max_seq_len=128,
    )  # fmt: skip
    res = dycon.train_and_evaluate(cfg, tmp_path / "run")
    err = " ".join(capsys.readouterr().err.split())  # rich wraps long lines (long tmp paths)
    stages = ("loading the tokenizer", "checking 8 text(s) against the context",
              "loading the weights")  # fmt: skip
    at = [err.index(f"DyCon: {s}") for s in stages]
    assert at == sorted(at)
    png = tmp_path / "run" / "dycon_tradeoff.png"
    assert res["figure"] == str(png) and png.read_bytes()[:8] == PNG
    saved = json.loads((tmp_path / "run" / "dycon_checkpoint.json").read_text())
    assert saved["figure"] == str(png) and saved["probe"]["layer"] == 2


@pytest.mark.integration
def test_checkpoint_run_shows_progress_over_the_batches(
    tmp_path, tiny_gemma3_checkpoint, monkeypatch, capsys
):
    monkeypatch.delenv("FIDIA_QUIET", raising=False)
    cfg = dycon.get_config(
        "tiny", checkpoint=str(tiny_gemma3_checkpoint), checkpoint_traces=8,
        checkpoint_max_seq_len=128,
    )  # fmt: skip
    res = dycon.train_and_evaluate(cfg, tmp_path / "run")
    err = " ".join(capsys.readouterr().err.split())  # rich wraps long lines (long tmp paths)
    assert "DyCon: residual stream of 8 teacher-forced traces: 1/1 batch(s) done in" in err
    assert err.index("DyCon: loading the weights") < err.index("DyCon: residual stream")
    assert "DyCon: ridge probes of 4 layers" in err  # embeddings + the 3 blocks
    assert (tmp_path / "run" / "dycon_tradeoff.png").read_bytes()[:8] == PNG
    assert len(res["probe"]["r2_test"]) == 4
