"""HIT-VAR objectives against numpy and closed forms."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax import losses, rl


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


def test_dpo_term_reuses_rl_dpo_loss():
    pw, rw, pl, rl_ = (jnp.asarray(v) for v in (-3.0, -4.0, -5.0, -4.5))
    r_w, r_l = losses.dpo_log_ratios(pw, rw, pl, rl_)
    # log-ratios 1.0 and -0.5: loss = log(1 + exp(-beta * 1.5))
    np.testing.assert_allclose(rl.dpo_loss(r_w, r_l, 0.5), np.log1p(np.exp(-0.75)), rtol=1e-6)
    g = jax.grad(lambda ref: sum(losses.dpo_log_ratios(pw, ref, pl, ref)))(rw)
    assert float(g) == 0.0  # the reference is a constant


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
