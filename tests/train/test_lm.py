"""train.fit_llama: the language-model drivers' run (the loss is tested in tests/losses)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from fidia_jax import models, train
from fidia_jax.errors import TrainingError


def test_fit_llama_learns_a_deterministic_map_and_refuses_bad_input():
    cfg = models.LlamaConfig.tiny(vocab_size=12, max_seq_len=8)
    # sequences "a, a+1, a+2, ..." mod 12: every next token is a function of the current one
    starts = np.arange(12)
    seqs = (starts[:, None] + np.arange(6)[None]) % 12
    model = models.Llama(cfg, rngs=nnx.Rngs(0))
    model, losses = train.fit_llama(
        model, seqs, steps=80, batch_size=12, tx=optax.adam(1e-2), key=jax.random.key(1)
    )
    assert losses.shape == (80,) and losses[-1] < 0.1 * losses[0]
    pred = np.asarray(jnp.argmax(model(jnp.asarray(seqs)), -1))[:, :-1]
    np.testing.assert_array_equal(pred, seqs[:, 1:])
    with pytest.raises(ValueError, match="weights"):
        train.fit_llama(
            model,
            seqs,
            weights=np.ones((3, 6)),
            steps=1,
            batch_size=2,
            tx=optax.sgd(0.1),
            key=jax.random.key(0),
        )
    with pytest.raises(ValueError, match="patches"):
        train.fit_llama(
            model,
            seqs,
            patches=np.ones((12, 4, 4)),
            steps=1,
            batch_size=2,
            tx=optax.sgd(0.1),
            key=jax.random.key(0),
        )
    before = jax.tree.map(np.asarray, nnx.state(model, nnx.Param))
    with pytest.raises(TrainingError, match="at step 1 is not finite"):
        train.fit_llama(
            model, seqs, steps=3, batch_size=2, tx=optax.sgd(jnp.nan), key=jax.random.key(0)
        )
    after = jax.tree.map(np.asarray, nnx.state(model, nnx.Param))  # the NaN update was skipped
    jax.tree.map(np.testing.assert_array_equal, after, before)


def test_fit_llama_vl_reads_the_answer_from_the_image():
    cfg = models.LlamaConfig.tiny(vocab_size=6, max_seq_len=8)
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2, size=64)
    patches = np.zeros((64, 4, 4), np.float32)
    patches[:, 0, 0] = 2.0 * bits - 1.0  # the answer is the sign of one pixel
    tokens = np.stack([np.full(64, 5), 2 + bits], axis=1)  # "?" then the answer
    weights = np.array([[0.0, 1.0]] * 64)
    vl = models.LlamaVL(cfg, patch_dim=4, rngs=nnx.Rngs(0))
    vl, losses = train.fit_llama(
        vl,
        tokens,
        weights=weights,
        patches=patches,
        steps=60,
        batch_size=16,
        tx=optax.adam(1e-2),
        key=jax.random.key(2),
    )
    logits = vl(jnp.asarray(patches), jnp.asarray(tokens))[:, -2]
    np.testing.assert_array_equal(np.asarray(jnp.argmax(logits, -1)), tokens[:, 1])
