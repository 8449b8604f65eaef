"""models.load_tokenizer: a checkpoint's own tokenizer through tokenizers / sentencepiece."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fidia_jax import models
from fidia_jax.errors import CheckpointError

gguf = pytest.importorskip("gguf")
pytest.importorskip("sentencepiece")
tokenizers = pytest.importorskip("tokenizers")

SPECIAL = ["<pad>", "<eos>", "<bos>", "<unk>"]
BYTES = [f"<0x{b:02X}>" for b in range(256)]
# SentencePiece BPE merges the adjacent pair whose merged piece has the highest score
WORDS = {
    "▁": -1.0,
    "h": -2.0,
    "e": -2.0,
    "l": -2.0,
    "o": -2.0,
    "w": -2.0,
    "r": -2.0,
    "d": -2.0,
    "he": -3.0,
    "ll": -3.0,
    "llo": -4.0,
    "hello": -5.0,
    "▁w": -3.5,
    "or": -3.6,
    "▁wor": -4.5,
    "▁world": -6.0,
    "ld": -4.0,
    "<start_of_turn>": 0.0,
}


def _write_vocab_gguf(path, *, add_space_prefix=False):
    tokens = SPECIAL + BYTES + list(WORDS)
    scores = [0.0] * len(SPECIAL) + [0.0] * 256 + list(WORDS.values())
    types = [3, 3, 3, 2] + [6] * 256 + [1] * (len(WORDS) - 1) + [4]
    wr = gguf.GGUFWriter(str(path), "gemma3")
    wr.add_tokenizer_model("llama")
    wr.add_token_list(tokens)
    wr.add_token_scores(scores)
    wr.add_token_types(types)
    wr.add_bos_token_id(2)
    wr.add_eos_token_id(1)
    wr.add_unk_token_id(3)
    wr.add_pad_token_id(0)
    wr.add_add_bos_token(True)
    wr.add_add_space_prefix(add_space_prefix)
    wr.add_tensor("token_embd.weight", np.zeros((len(tokens), 32), np.float32))
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    return tokens


def test_gguf_sentencepiece_vocabulary(tmp_path):
    tokens = _write_vocab_gguf(tmp_path / "v.gguf")
    tok = models.load_tokenizer(tmp_path / "v.gguf")
    assert (tok.bos_id, tok.eos_id, tok.add_bos, tok.vocab_size) == (2, 1, True, len(tokens))
    ids = tok.encode("hello world")
    # merges by score: h e l l o -> he ll o -> he llo -> hello; ▁ w o r l d -> ▁w or ld -> ...
    assert [tokens[i] for i in ids] == ["<bos>", "hello", "▁world"]
    assert tok.decode(ids) == "hello world"
    # byte fallback for characters outside the vocabulary; user-defined pieces kept whole
    text = "héllo<start_of_turn> wd\n"
    ids = tok.encode(text, add_bos=False)
    pieces = [tokens[i] for i in ids]
    assert "<0xC3>" in pieces and "<0xA9>" in pieces and "<start_of_turn>" in pieces
    assert "<unk>" not in pieces
    assert tok.decode(ids) == text


def test_gguf_dummy_prefix_flag(tmp_path):
    tokens = _write_vocab_gguf(tmp_path / "v.gguf", add_space_prefix=True)
    tok = models.load_tokenizer(tmp_path / "v.gguf")
    assert [tokens[i] for i in tok.encode("world", add_bos=False)] == ["▁world"]


def test_tokenizer_json_directory(tmp_path):
    """A byte-level BPE tokenizer.json (the Llama 3 / Qwen kind), BOS from tokenizer_config."""
    from tokenizers import Tokenizer, decoders, pre_tokenizers, trainers
    from tokenizers import models as tm

    tk = Tokenizer(tm.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<|begin|>", "<|end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tk.train_from_iterator(["the cat sat on the mat", "a dog, the cat!"] * 20, trainer)
    tk.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({"bos_token": "<|begin|>", "eos_token": "<|end|>", "add_bos_token": True})
    )
    tok = models.load_tokenizer(tmp_path)
    assert (tok.bos_id, tok.eos_id) == (0, 1)
    for text in ["the cat sat", "Ünïcödé 🙂 text\twith  spaces"]:
        ids = tok.encode(text)
        assert ids[0] == 0 and tok.decode(ids) == text
    assert len(tok.encode("the cat", add_bos=False)) < len("the cat")  # merges were applied


def test_tokenizer_errors(tmp_path):
    with pytest.raises(CheckpointError, match="tokenizer.json"):
        models.load_tokenizer(tmp_path)
    wr = gguf.GGUFWriter(str(tmp_path / "b.gguf"), "qwen2")
    wr.add_tokenizer_model("gpt2")
    wr.add_token_list(["a", "b"])
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    with pytest.raises(CheckpointError, match="gpt2"):
        models.load_tokenizer(tmp_path / "b.gguf")
