"""Parity with the reference implementation on tiny random checkpoints of each family
(issue 26, Deliver 2b).

``tests/data/hf_tiny/<family>/`` holds a checkpoint written by Hugging Face transformers
(``save_pretrained``: ``config.json`` + ``model.safetensors``, float32, random weights, norms and
biases) and transformers' own logits on three random 12-token sequences
(``tools/hf_tiny_make_fixtures.py``, run once in a throwaway venv). Here
``models.load_hf_checkpoint`` reads the same files and our forward must give the same logits.

Tolerance: ``|ours - theirs| <= 1e-4 * max|theirs| + 1e-5`` elementwise (float32 on both
sides, different summation orders; measured differences are about 1e-6 of the largest logit),
and the same argmax at every position. (Eager forward passes: the models are tiny, so no
compilation; about a second per family.) So that the check cannot pass vacuously, the
transformers logits must differ from the same checkpoint's logits with the family's
distinguishing option switched off by more than 100 times that tolerance.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from fidia_jax import models

pytest.importorskip("safetensors.numpy")

DATA = pathlib.Path(__file__).resolve().parents[1] / "data" / "hf_tiny"
FAMILIES = ("llama", "qwen2", "qwen3", "gemma3_text")


def _reference(family):
    ref = np.load(DATA / family / "reference.npz")
    return ref["tokens"], ref["logits"]


def _tolerance(want):
    return 1e-4 * float(np.abs(want).max()) + 1e-5


# the option of each family whose loss the comparison must notice
_SWITCH_OFF = {
    "llama": {"rope_scaling": None},
    "qwen2": {"qkv_bias": False},
    "qwen3": {"qk_norm": False},
    "gemma3_text": {"sliding_window": 0},
}


def _switched_off(model, family):
    """The same weights in a model without the family's option (parameters it lacks, Qwen2's
    biases or Qwen3's q/k norms, are dropped)."""
    cfg = dataclasses.replace(model.config, **_SWITCH_OFF[family])
    other = nnx.eval_shape(lambda: models.Llama(cfg, rngs=nnx.Rngs(0)))
    keep = {k for k, _ in nnx.to_flat_state(nnx.state(other))}
    flat = {k: v for k, v in nnx.to_flat_state(nnx.state(model)) if k in keep}
    nnx.update(other, nnx.from_flat_state(flat))
    return other


@pytest.mark.integration  # 2-12 s a family on the loaded 2-core sandbox (eager ops compile)
@pytest.mark.parametrize("family", FAMILIES)
def test_load_hf_checkpoint_matches_transformers(family):
    tokens, want = _reference(family)
    model = models.load_hf_checkpoint(DATA / family)
    got = np.asarray(model(jnp.asarray(tokens)), np.float32)
    assert got.shape == want.shape
    # |ours - transformers| <= tolerance everywhere (benchmarks/fidelity_parity.py measures it)
    np.testing.assert_allclose(got, want, rtol=0, atol=_tolerance(want), err_msg=family)
    np.testing.assert_array_equal(got.argmax(-1), want.argmax(-1))
    # not vacuous: without the family's option the same weights land far outside the tolerance
    off = np.asarray(_switched_off(model, family)(jnp.asarray(tokens)), np.float32)
    assert np.abs(off - want).max() > 100 * _tolerance(want)


def test_fixture_files_are_the_released_layout():
    """Each directory is what save_pretrained writes (one safetensors file, a config naming its
    family), and the sequences are long enough for Gemma's window of 4 to mask."""
    for family in FAMILIES:
        cfg = json.loads((DATA / family / "config.json").read_text())
        assert cfg["model_type"] == family
        assert (DATA / family / "model.safetensors").is_file()
        tokens, logits = _reference(family)
        assert tokens.shape[1] > 4 and logits.shape == (*tokens.shape, cfg["vocab_size"])
