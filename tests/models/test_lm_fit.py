"""fit_llama / masked_next_token_loss: the shared training loop of the issue-14 drivers."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from fidia_jax import models


def test_masked_loss_matches_a_numpy_loop_and_ignores_padding():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 5, 7)).astype(np.float32)
    tokens = rng.integers(0, 7, size=(2, 5))
    w = np.array([[1, 1, 1, 0, 0], [1, 0, 1, 1, 1]], np.float32)
    total, count = 0.0, 0.0
    for b in range(2):
        for t in range(1, 5):
            lp = logits[b, t - 1] - np.log(np.exp(logits[b, t - 1]).sum())
            total += w[b, t] * -lp[tokens[b, t]]
            count += w[b, t]
    got = models.masked_next_token_loss(jnp.asarray(logits), jnp.asarray(tokens), jnp.asarray(w))
    np.testing.assert_allclose(float(got), total / count, rtol=1e-5)
    tokens2 = tokens.copy()
    tokens2[0, 3:] = 0  # padded targets change, the loss does not
    got2 = models.masked_next_token_loss(jnp.asarray(logits), jnp.asarray(tokens2), jnp.asarray(w))
    assert float(got2) == pytest.approx(float(got), rel=1e-6)
    assert (
        float(
            models.masked_next_token_loss(
                jnp.asarray(logits), jnp.asarray(tokens), jnp.zeros((2, 5))
            )
        )
        == 0.0
    )


def test_fit_llama_learns_a_deterministic_map_and_refuses_bad_input():
    cfg = models.LlamaConfig.tiny(vocab_size=12, max_seq_len=8)
    # sequences "a, a+1, a+2, ..." mod 12: every next token is a function of the current one
    starts = np.arange(12)
    seqs = (starts[:, None] + np.arange(6)[None]) % 12
    model = models.Llama(cfg, rngs=nnx.Rngs(0))
    model, losses = models.fit_llama(
        model, seqs, steps=80, batch_size=12, tx=optax.adam(1e-2), key=jax.random.key(1)
    )
    assert losses.shape == (80,) and losses[-1] < 0.1 * losses[0]
    pred = np.asarray(jnp.argmax(model(jnp.asarray(seqs)), -1))[:, :-1]
    np.testing.assert_array_equal(pred, seqs[:, 1:])
    with pytest.raises(ValueError, match="weights"):
        models.fit_llama(
            model,
            seqs,
            weights=np.ones((3, 6)),
            steps=1,
            batch_size=2,
            tx=optax.sgd(0.1),
            key=jax.random.key(0),
        )
    with pytest.raises(ValueError, match="patches"):
        models.fit_llama(
            model,
            seqs,
            patches=np.ones((12, 4, 4)),
            steps=1,
            batch_size=2,
            tx=optax.sgd(0.1),
            key=jax.random.key(0),
        )
    with pytest.raises(ValueError, match="not finite"):
        models.fit_llama(
            model, seqs, steps=3, batch_size=2, tx=optax.sgd(jnp.nan), key=jax.random.key(0)
        )


def test_fit_llama_vl_reads_the_answer_from_the_image():
    cfg = models.LlamaConfig.tiny(vocab_size=6, max_seq_len=8)
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2, size=64)
    patches = np.zeros((64, 4, 4), np.float32)
    patches[:, 0, 0] = 2.0 * bits - 1.0  # the answer is the sign of one pixel
    tokens = np.stack([np.full(64, 5), 2 + bits], axis=1)  # "?" then the answer
    weights = np.array([[0.0, 1.0]] * 64)
    vl = models.LlamaVL(cfg, patch_dim=4, rngs=nnx.Rngs(0))
    vl, losses = models.fit_llama(
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
