"""HIT-VAR objectives against numpy and closed forms."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax import losses as shared_losses
from fidia_jax.projects.hitvar import losses


def test_token_log_prob_and_cross_entropy_match_numpy():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 5, 7)).astype(np.float32)
    tokens = rng.integers(0, 7, size=(3, 5))
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    want = np.array([sum(logp[b, t, tokens[b, t]] for t in range(5)) for b in range(3)])
    got = losses.token_log_prob(jnp.asarray(logits), jnp.asarray(tokens))
    np.testing.assert_allclose(got, want, rtol=1e-5)
    np.testing.assert_allclose(
        losses.next_scale_cross_entropy(jnp.asarray(logits), jnp.asarray(tokens)),
        -want.mean() / 5,
        rtol=1e-5,
    )
    with pytest.raises(ValueError, match="share"):
        losses.token_log_prob(jnp.asarray(logits), jnp.asarray(tokens[:, :4]))
    with pytest.raises(ValueError, match=r"token ids in \[0, 7\)"):
        losses.token_log_prob(jnp.asarray(logits), jnp.asarray(tokens + 7))


def test_token_log_prob_is_the_sum_of_the_shared_token_log_probs():
    """Built on fidia_jax.losses.token_log_probs: bit-identical to summing it over T."""
    rng = np.random.default_rng(1)
    logits = jnp.asarray(rng.normal(size=(4, 21, 16)).astype(np.float32))
    tokens = jnp.asarray(rng.integers(0, 16, size=(4, 21)))
    got = jax.jit(losses.token_log_prob)(logits, tokens)
    np.testing.assert_array_equal(
        got, jax.jit(lambda a, b: jnp.sum(shared_losses.token_log_probs(a, b), -1))(logits, tokens)
    )


def test_tokenizer_loss_by_hand():
    recon = {1: jnp.ones((1, 2, 2, 3)), 2: jnp.zeros((1, 4, 4, 3))}
    target = {1: jnp.zeros((1, 2, 2, 3)), 2: jnp.full((1, 4, 4, 3), 0.5)}
    f, fhat = jnp.ones((1, 2, 2, 2)), jnp.zeros((1, 2, 2, 2))
    loss, parts = losses.hitvar_tokenizer_loss(recon, target, f, fhat, commitment=0.25)
    # mse: 1 and 0.25 -> mean 0.625; commit 1 * 0.25
    np.testing.assert_allclose(loss, 0.625 + 0.25, rtol=1e-6)
    assert float(parts["mse_x2"]) == 0.25 and float(parts["commit"]) == 1.0
    # no gradient reaches fhat through the commitment term
    g = jax.jit(jax.grad(lambda z: losses.hitvar_tokenizer_loss(recon, target, f, z)[0]))(fhat)
    np.testing.assert_array_equal(g, 0.0)
    with pytest.raises(ValueError, match="scale x2 needs a target"):
        losses.hitvar_tokenizer_loss(recon, {1: target[1]}, f, fhat)
