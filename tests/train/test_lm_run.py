"""The stages of a checkpoint run (``fidia_jax.train._lm_run``): progress over a loop with a
``still running`` line when it is silent, and texts checked before any weight is read."""

from __future__ import annotations

import re
import time

import pytest

from fidia_jax import models
from fidia_jax.errors import CheckpointError, DataError
from fidia_jax.train import heartbeat, load_checked, loop_progress


def test_loop_progress_is_never_silent_longer_than_every_s(capsys, monkeypatch):
    monkeypatch.delenv("FIDIA_QUIET", raising=False)
    with loop_progress("capture", 3, unit="batch", every_s=0.2) as bar:
        time.sleep(0.55)  # a slow first item (a compilation): heartbeat lines meanwhile
        bar.advance()
        bar.advance(2)
    err = capsys.readouterr().err
    assert "capture: compiling …" in err
    assert len(re.findall(r"capture: compiling, 0/3 batch\(s\) done, \d+ s", err)) >= 2
    assert "capture: compiled in" in err and "capture: 3/3 batch(s), " in err
    assert re.search(r"capture: 3/3 batch\(s\) done in \d+\.\d s", err)
    with loop_progress("layers", 2, unit="layer", every_s=0.2, compiles=False) as bar:
        time.sleep(0.3)
        bar.advance(2)
    err = capsys.readouterr().err
    assert "layers: 0/2 layer(s) …" in err and "layers: running, 0/2 layer(s) done" in err
    assert "compiling" not in err and re.search(r"layers: 2/2 layer\(s\) done in", err)
    with heartbeat("loading", every_s=0.1):
        time.sleep(0.35)
    assert re.findall(r"loading: still running, \d+ s", capsys.readouterr().err)


def test_loop_progress_is_quiet_when_asked(capsys, monkeypatch):
    monkeypatch.setenv("FIDIA_QUIET", "1")
    with loop_progress("capture", 2, every_s=0.05) as bar:
        time.sleep(0.15)
        bar.advance(2)
    assert capsys.readouterr().err == ""


def _no_weights(*args, **kwargs):
    raise AssertionError("weights were read")


def test_load_checked_refuses_a_long_text_before_the_weights(tiny_gemma3_checkpoint, monkeypatch):
    monkeypatch.setattr(models, "load_hf_checkpoint", _no_weights)
    monkeypatch.setattr(models, "load_gguf", _no_weights)
    tok = models.load_tokenizer(tiny_gemma3_checkpoint)  # byte-level: one token per character
    n = len(tok.encode("a" * 40))
    msg = rf"prompt 1 is {n} tokens; with max_new_tokens 8 that is {n + 8} > the limit 40 .*; lower it"
    with pytest.raises(DataError, match=msg):
        load_checked(
            tiny_gemma3_checkpoint, read=["a" * 20], generate=["b", "a" * 40],
            max_new_tokens=8, max_seq_len=40, where="t", hint="lower it",
        )  # fmt: skip
    with pytest.raises(DataError, match="doc 0 is"):
        load_checked(
            tiny_gemma3_checkpoint, read=lambda tok: ["x" * 50], max_seq_len=40, where="t",
            labels=("doc", "prompt"),
        )  # fmt: skip
    with pytest.raises(CheckpointError, match="nope.gguf' does not exist"):
        load_checked(tiny_gemma3_checkpoint.parent / "nope.gguf", max_seq_len=40, where="t")


def test_load_checked_loads_what_fits(tiny_gemma3_checkpoint):
    model, tok = load_checked(
        tiny_gemma3_checkpoint, read=["a" * 20], max_seq_len=64, where="t", what="test"
    )
    assert model.config.max_seq_len == 64 and tok.encode("ab", add_bos=False) == [
        tok.encode("a", add_bos=False)[0], tok.encode("b", add_bos=False)[0]
    ]  # fmt: skip
