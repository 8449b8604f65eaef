"""models.load_tokenizer against the reference tokenizers (fixture: tools/lm_tokenizer_make_fixture.py).

The reference ids in ``tests/data/lm_tokenizer/reference.json`` come from ``transformers``'
GGUF tokenizer (``AutoTokenizer.from_pretrained(dir, gguf_file=...)``) and from ``tokenizers``
with the file's post-processor, on every line of ``corpus.txt`` and on the whole corpus. Token
ids are integers: equality is exact.
"""

from __future__ import annotations

import json
import os
import pathlib

import numpy as np
import pytest

from fidia_jax import models

pytest.importorskip("gguf")
pytest.importorskip("sentencepiece")
pytest.importorskip("tokenizers")

DATA = pathlib.Path(__file__).resolve().parent.parent / "data" / "lm_tokenizer"
REF = json.loads((DATA / "reference.json").read_text(encoding="utf-8"))
NAMES = ["spm_gemma3.gguf", "spm_llama.gguf", "bpe_bos", "bpe_llama3.gguf", "bpe_qwen2.gguf"]


def _assert_same_ids(got, want):
    """Every text's ids equal the reference's: one element per text, equal when the whole id
    list is (benchmarks/fidelity_parity.py counts the texts that differ)."""
    same = [g == w for g, w in zip(got, want, strict=True)]
    bad = [(t, g, w) for t, g, w, s in zip(REF["texts"], got, want, same, strict=True) if not s]
    first = f", first: {bad[0]!r}" if bad else ""
    np.testing.assert_array_equal(
        same, [True] * len(want), err_msg=f"{len(bad)} of {len(got)} texts differ{first}"
    )


def test_corpus_matches_fixture_texts():
    corpus = (DATA / "corpus.txt").read_text(encoding="utf-8")
    assert REF["texts"] == [*corpus.split("\n")[:-1], corpus]


@pytest.mark.parametrize("name", NAMES)
def test_ids_equal_reference(name):
    tok = models.load_tokenizer(DATA / name)
    got = [tok.encode(t) for t in REF["texts"]]
    _assert_same_ids(got, REF["ids"][name])


@pytest.mark.parametrize("name", NAMES)
def test_decode_round_trip(name):
    tok = models.load_tokenizer(DATA / name)
    for text in REF["texts"]:
        if name == "spm_llama.gguf" and text.startswith(" "):
            continue  # " x" and "x" both start with "▁x" there: the decoder drops the space
        assert tok.decode(tok.encode(text)) == text


def test_space_runs_are_single_tokens():
    """Four spaces are one user-defined token of the vocabulary (spelled with real spaces)."""
    tok = models.load_tokenizer(DATA / "spm_gemma3.gguf")
    ids = tok.encode("    x", add_bos=False)
    assert len(ids) == 2 and tok.decode(ids[:1]) == "    "


def test_metadata_flags():
    g = models.load_tokenizer(DATA / "spm_gemma3.gguf")
    ll = models.load_tokenizer(DATA / "spm_llama.gguf")
    assert (g.bos_id, g.eos_id, g.add_bos) == (2, 1, True)
    assert (ll.bos_id, ll.eos_id, ll.add_bos) == (2, 1, True)  # absent flag: llama.cpp adds BOS
    # absent add_space_prefix: the reference's default (a prefix space) applies
    assert g.encode("hello", add_bos=False) != ll.encode("hello", add_bos=False)
    q = models.load_tokenizer(DATA / "bpe_qwen2.gguf")
    assert (q.bos_id, q.eos_id, q.add_bos) == (0, 1, False)  # absent flag: BPE adds no BOS
    bpe = models.load_tokenizer(DATA / "bpe_bos")
    assert (bpe.bos_id, bpe.add_bos) == (0, True)
    assert bpe.encode("hello", add_bos=False)[0] != 0


@pytest.mark.skipif(
    "gemma3_270m" not in REF["ids"] or not os.environ.get("FIDIA_GEMMA3_GGUF"),
    reason="real Gemma 3 GGUF: set FIDIA_GEMMA3_GGUF and make the fixture with --gemma-gguf",
)
def test_real_gemma3_vocabulary():
    tok = models.load_tokenizer(os.environ["FIDIA_GEMMA3_GGUF"])
    got = [tok.encode(t) for t in REF["texts"]]
    _assert_same_ids(got, REF["ids"]["gemma3_270m"])


def test_unknown_bpe_pretokenizer_is_refused(tmp_path):
    import gguf

    from fidia_jax.errors import CheckpointError

    wr = gguf.GGUFWriter(str(tmp_path / "b.gguf"), "qwen2")
    wr.add_tokenizer_model("gpt2")
    wr.add_tokenizer_pre("some-new-model")
    wr.add_token_list(["a", "b", "ab"])
    wr.add_token_merges(["a b"])
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    with pytest.raises(CheckpointError, match="some-new-model"):
        models.load_tokenizer(tmp_path / "b.gguf")
