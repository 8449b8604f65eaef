"""The checkpoint mode's run (issue 39): stages announced in order with progress, the synthetic
run's figure written, and a sequence over the context refused before any weight is read."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fidia_jax import models
from fidia_jax.errors import ConfigError, DataError
from fidia_jax.projects import residual_geometry as rg
from fidia_jax.projects.residual_geometry import train as rg_train

PNG = b"\x89PNG\r\n\x1a\n"


def _no_weights(*args, **kwargs):
    raise AssertionError("the weights were read")


def test_a_sequence_over_the_context_fails_before_the_weights(
    tmp_path, tiny_gemma3_checkpoint, monkeypatch
):
    monkeypatch.setattr(models, "load_hf_checkpoint", _no_weights)
    monkeypatch.setattr(models, "load_gguf", _no_weights)
    monkeypatch.setattr(models, "load_lm_checkpoint", _no_weights)
    # the tiny checkpoint's config.json: max_position_embeddings 1024
    cfg = rg.get_config(
        "tiny", checkpoint=str(tiny_gemma3_checkpoint), checkpoint_sequences=4,
        checkpoint_tokens=1100, checkpoint_max_seq_len=2048,
    )  # fmt: skip
    with pytest.raises(DataError, match=r"sequence 0 is 1100 tokens.*> the limit 1024.*"
                       r"checkpoint_tokens"):  # fmt: skip
        rg.train_and_evaluate(cfg, tmp_path / "run")
    assert not (tmp_path / "run").exists()
    with pytest.raises(ConfigError, match="checkpoint_tokens .* must not exceed"):
        rg.get_config("tiny", checkpoint="x", checkpoint_tokens=300, checkpoint_max_seq_len=256)


def _canned(model, tok, config):
    """What checkpoint_geometry returns, for 2 of the model's layers (values made up)."""
    row = {k: [0.1, 0.2] for k in ("rid", "delta_s", "delta_d", "rid_pooled",
                                   "delta_d_pooled", "mixig", "r2_self", "r2_mix", "tme")}  # fmt: skip
    return {
        "geometry": {"attention": dict(row, tme_attention=[1.0, 1.1]), "ffn": row, "noise": row},
        "wilcoxon": [{"median_difference": -0.1, "p": 0.5}] * 2,
        "ordering": {
            "attention_rid_below_ffn": [False, False],
            "attention_rid_below_ffn_p05": [False, False],
            "attention_mixig_above_ffn": [False, False],
            "attention_mixig_above_noise": [False, False],
        },  # fmt: skip
        "layers": [0, 2],
        "rid_failures": [],
        "n_sequences": config.checkpoint_sequences,
        "n_tokens": config.checkpoint_tokens,
    }


def test_checkpoint_run_announces_its_stages_and_writes_the_figure(
    tmp_path, tiny_gemma3_checkpoint, monkeypatch, capsys
):
    monkeypatch.delenv("FIDIA_QUIET", raising=False)
    monkeypatch.setattr(rg_train, "checkpoint_geometry", _canned)
    cfg = rg.get_config(
        "tiny", checkpoint=str(tiny_gemma3_checkpoint), checkpoint_sequences=4,
        checkpoint_tokens=16, checkpoint_max_seq_len=32,
    )  # fmt: skip
    res = rg.train_and_evaluate(cfg, tmp_path / "run")
    err = " ".join(capsys.readouterr().err.split())  # rich wraps long lines (long tmp paths)
    stages = ("loading the tokenizer", "checking 4 text(s) against the context",
              "loading the weights")  # fmt: skip
    at = [err.index(f"residual geometry: {s}") for s in stages]
    assert at == sorted(at)
    png = tmp_path / "run" / "residual_geometry.png"
    assert res["figure"] == str(png) and png.read_bytes()[:8] == PNG
    assert "accuracy.png" not in {p.name for p in (tmp_path / "run").iterdir()}
    saved = json.loads((tmp_path / "run" / "residual_geometry_checkpoint.json").read_text())
    assert saved["layers"] == [0, 2]


@pytest.mark.integration
def test_checkpoint_run_shows_progress_over_batches_and_layers(
    tmp_path, tiny_gemma3_checkpoint, monkeypatch, capsys
):
    monkeypatch.delenv("FIDIA_QUIET", raising=False)
    cfg = rg.get_config(
        "tiny", checkpoint=str(tiny_gemma3_checkpoint), checkpoint_sequences=6,
        checkpoint_tokens=24, checkpoint_batch=4, checkpoint_max_seq_len=32,
    )  # fmt: skip
    res = rg.train_and_evaluate(cfg, tmp_path / "run")
    err = " ".join(capsys.readouterr().err.split())  # rich wraps long lines (long tmp paths)
    assert "capturing 6 sequences x 24 tokens: 2/2 batch(s) done in" in err
    assert "RID / MixIG / TME of 3 layers: 3/3 layer(s) done in" in err
    assert err.index("loading the weights") < err.index("capturing 6 sequences")
    assert (tmp_path / "run" / "residual_geometry.png").read_bytes()[:8] == PNG
    assert np.all(np.isfinite(res["geometry"]["attention"]["rid"]))
