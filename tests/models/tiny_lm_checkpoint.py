"""A tiny random Gemma 3 text checkpoint in the Hugging Face layout, with a byte-level tokenizer,
for the tests that run a method's ``checkpoint=PATH`` end to end (AlgoTrace, residual geometry).

The weights come from the loader tests' writer (``test_checkpoints._hf_weights`` /
``_write_hf``), with the embedding enlarged to the tokenizer's 258 ids."""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest


def write_tiny_gemma3(path: pathlib.Path) -> pathlib.Path:
    """A random Gemma 3 text checkpoint (HF layout, the loader tests' writer) with a byte-level
    ``tokenizer.json`` of 256 bytes + BOS/EOS (vocabulary 258)."""
    pytest.importorskip("safetensors")
    tk = pytest.importorskip("tokenizers")
    here = str(pathlib.Path(__file__).resolve().parent)
    sys.path.insert(0, here)
    try:
        import test_checkpoints as h
    finally:
        sys.path.remove(here)

    vocab = 258
    hf = dict(h.FAMILIES["gemma3_text"], vocab_size=vocab, max_position_embeddings=1024)
    w = h._hf_weights(hf, seed=5)
    w["model.embed_tokens.weight"] = (
        np.random.default_rng(6).normal(0, 1, (vocab, h.C)).astype(np.float32)
    )
    h._write_hf(path, hf, w)
    alphabet = tk.pre_tokenizers.ByteLevel.alphabet()
    table = {ch: i for i, ch in enumerate(sorted(alphabet))}
    table.update({"<bos>": 256, "<eos>": 257})
    tok = tk.Tokenizer(tk.models.BPE(vocab=table, merges=[]))
    tok.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tk.decoders.ByteLevel()
    tok.add_special_tokens(["<bos>", "<eos>"])
    tok.save(str(path / "tokenizer.json"))
    (path / "tokenizer_config.json").write_text(
        json.dumps({"bos_token": "<bos>", "eos_token": "<eos>", "add_bos_token": True})
    )
    return path
