"""SafeSci's checkpoint mode (issue 39): generation in length-sorted batches gives the answers of
unbatched generation, in the input order; a prompt over the context fails before the weights
load; and the shared context check (``fidia_jax.models.check_prompt_lengths``) reads the limit
from the checkpoint's metadata."""

from __future__ import annotations

import json
import pathlib
import random

import numpy as np
import pytest

from fidia_jax import models
from fidia_jax.errors import CheckpointError, ConfigError, DataError
from fidia_jax.projects.safesci import get_config
from fidia_jax.projects.safesci.records import load_safesci_jsonl

FIXTURE = pathlib.Path(__file__).parents[2] / "data" / "safesci" / "benign.jsonl"

# different lengths (byte-level tokenizer: one token per byte), given out of length order, all
# under 32 tokens (one padded width per batch size: few compiles)
PROMPTS = ["#QUERY: Goggles? A. no B. yes", "Q: 1 + 2", "A", "#QUERY: Add water?"]


@pytest.fixture
def no_weights(monkeypatch):
    """The weight loaders replaced by one that fails the test: nothing may load them."""

    def fail(*a, **k):
        raise AssertionError("the weights were loaded before the context check")

    monkeypatch.setattr(models, "load_hf_checkpoint", fail)
    monkeypatch.setattr(models, "load_gguf", fail)


@pytest.mark.integration
def test_batched_generation_equals_unbatched_in_input_order(tiny_gemma3_checkpoint):
    """Batches of 1, 3 and all, one width for all batches or one per batch, rounded or not,
    the head at the last prompt position or at all: the same texts, in the input order, and
    each one the text of its prompt decoded alone (no padding, no batch)."""
    import jax.numpy as jnp

    from fidia_jax.projects.safesci.models import checkpoint_generate

    path = str(tiny_gemma3_checkpoint)
    gen, info = checkpoint_generate(
        path, max_new_tokens=4, max_seq_len=80, batch_size=1, pad_multiple=1
    )
    one = gen(PROMPTS)  # one prompt per call, no padding at all
    assert info["batches"] == len(PROMPTS) and info["batch_size"] == 1
    tok = models.load_tokenizer(path)
    model = models.load_hf_checkpoint(path, max_seq_len=80)
    alone = []
    for p in PROMPTS:  # the reference: sample_llama on each prompt's own tokens
        out = models.sample_llama(
            model, jnp.asarray([tok.encode(p)], jnp.int32), max_new_tokens=4, stop_token=tok.eos_id
        )
        ids = [int(t) for t in np.asarray(out.tokens)[0, : int(out.num_tokens[0])]]
        alone.append(tok.decode([t for t in ids if t != tok.eos_id]))
    assert one == alone
    assert len(set(one)) > 1  # the prompts get different answers: an order mix-up would show
    longest = max(len(tok.encode(p)) for p in PROMPTS)
    cases = (  # batch size, pad multiple, options, the widths padded to
        (1, 32, {}, [32] * 4),  # the default: every batch at one width (one program)
        (3, 32, {"same_width": False}, None),  # each batch at its own rounded width
        (3, 1, {"prefill_logits": "all"}, [longest] * 2),  # the head at every prompt position
        (len(PROMPTS), 1, {}, [longest]),  # one batch, unrounded
    )
    for size, multiple, kw, widths in cases:
        gen, info = checkpoint_generate(
            path, max_new_tokens=4, max_seq_len=80, batch_size=size, pad_multiple=multiple, **kw
        )
        assert gen(PROMPTS) == one, (size, multiple, kw)
        assert info["batches"] == -(-len(PROMPTS) // size)
        if widths is not None:
            assert info["widths"] == widths, (size, multiple, kw)
    with pytest.raises(ConfigError, match="prefill_logits must be 'all' or 'last'"):
        checkpoint_generate(path, prefill_logits="none")


def test_a_prompt_over_the_context_fails_before_the_weights_load(
    tiny_gemma3_checkpoint, no_weights
):
    from fidia_jax.projects.safesci.models import checkpoint_generate

    long = "x" * 70  # 71 tokens with BOS; + 16 new > 80
    with pytest.raises(
        DataError, match=r"item 2 is 71 tokens.*87 > the limit 80 \(max_seq_len 80\)"
    ):
        checkpoint_generate(
            str(tiny_gemma3_checkpoint), max_new_tokens=16, max_seq_len=80,
            prompts=["short", long], names=["item 1", "item 2"],
        )  # fmt: skip


def test_evaluate_checks_the_fixture_prompts_and_keeps_the_unseeded_shuffle(
    tiny_gemma3_checkpoint, no_weights
):
    """``model=checkpoint`` on the fixture with a 64-token limit: the first record (hundreds of
    bytes) is named before any weight loads; the look-ahead leaves the global random state
    (the official unseeded shuffle) as it was."""
    from fidia_jax.projects.safesci.evaluate import _build

    records = load_safesci_jsonl(FIXTURE)
    config = get_config(
        "official", model="checkpoint", checkpoint=str(tiny_gemma3_checkpoint),
        checkpoint_max_seq_len=64,
    )  # fmt: skip
    random.seed(3)
    before = random.getstate()
    with pytest.raises(
        DataError, match=r"the fixture record 1 \(\w+\) is \d+ tokens.*> the limit 64"
    ):
        _build("checkpoint", records, config)
    assert random.getstate() == before


def test_checkpoint_batch_size_is_checked():
    assert get_config("default").checkpoint_batch_size == 1
    with pytest.raises(ConfigError, match="checkpoint_batch_size must be >= 1"):
        get_config("default", checkpoint_batch_size=0)


# ------------------------------------------------------------------ the shared context check
def test_context_length_from_a_gguf_header_matches_the_gguf_reader(tmp_path):
    gguf = pytest.importorskip("gguf")
    path = tmp_path / "m.gguf"
    wr = gguf.GGUFWriter(str(path), "gemma3")
    wr.add_string("general.name", "tiny")
    wr.add_array("general.tags", ["a", "bc", ""])  # arrays of strings and numbers skipped over
    wr.add_array("general.sizes", [1, 2, 3])
    wr.add_uint64("general.big", 2**40)
    wr.add_context_length(4096)
    wr.add_tensor("x", np.zeros(4, np.float32))
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    reader = gguf.GGUFReader(str(path))
    assert int(reader.fields["gemma3.context_length"].contents()) == 4096
    assert models.checkpoint_context_length(path) == 4096
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"NOPE" + bytes(32))
    with pytest.raises(CheckpointError, match="not a GGUF file"):
        models.checkpoint_context_length(bad)
    with pytest.raises(CheckpointError, match="no file or directory"):
        models.checkpoint_context_length(tmp_path / "missing.gguf")


def test_check_prompt_lengths_limit_is_the_smaller_of_max_seq_len_and_the_context(
    tiny_gemma3_checkpoint,
):
    path = tiny_gemma3_checkpoint
    assert models.checkpoint_context_length(path) == 1024  # config.json max_position_embeddings
    tok = models.load_tokenizer(path)
    counts = models.check_prompt_lengths(tok, ["ab", "abcd"], max_new_tokens=3, max_seq_len=8)
    assert counts == [3, 5]  # BOS + bytes
    with pytest.raises(DataError, match=r"prompt 1 is 5 tokens.*8 > the limit 7 \(max_seq_len 7\)"):
        models.check_prompt_lengths(tok, ["ab", "abcd"], max_new_tokens=3, max_seq_len=7)
    with pytest.raises(DataError, match=r"limit 6 \(the checkpoint's trained context 6\)"):
        models.check_prompt_lengths(
            tok, ["abcd"], max_new_tokens=3, max_seq_len=100, context_length=6
        )
    with pytest.raises(DataError, match=r"\(1 other prompts too long as well\)"):
        models.check_prompt_lengths(tok, ["abcd", "abcde"], max_new_tokens=3, max_seq_len=7)
    # a path: the context from config.json (1024), capped by max_seq_len when smaller
    assert models.check_prompt_lengths(path, ["a" * 1000], max_new_tokens=23) == [1001]
    with pytest.raises(DataError, match=r"limit 1024 \(the checkpoint's context 1024\)"):
        models.check_prompt_lengths(path, ["a" * 1000], max_new_tokens=24)
    with pytest.raises(ConfigError, match="no position limit"):
        models.check_prompt_lengths(tok, ["a"], max_new_tokens=1)
    with pytest.raises(ConfigError, match="max_new_tokens"):
        models.check_prompt_lengths(tok, ["a"], max_new_tokens=-1, max_seq_len=8)


def test_context_length_of_an_hf_dir_without_it(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    assert models.checkpoint_context_length(tmp_path) is None
    (tmp_path / "config.json").write_text(
        json.dumps({"text_config": {"max_position_embeddings": 77}})
    )
    assert models.checkpoint_context_length(tmp_path) == 77
