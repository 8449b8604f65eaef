"""losses.token_log_probs / token_nll / next_token_loss against brute-force sums."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax import losses


def _brute(logits, tokens):
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.log(np.take_along_axis(p, tokens[..., None], -1)[..., 0])


def test_against_brute_force():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 5, 7)).astype(np.float32)
    tokens = rng.integers(0, 7, (2, 5))
    w = rng.uniform(size=(2, 5)).astype(np.float32)
    lp = _brute(logits.astype(np.float64), tokens)
    np.testing.assert_allclose(losses.token_log_probs(logits, tokens), lp, rtol=1e-5)
    np.testing.assert_allclose(losses.token_nll(logits, tokens), -lp.mean(), rtol=1e-5)
    np.testing.assert_allclose(
        losses.token_nll(logits, tokens, w), -(w * lp).sum() / w.sum(), rtol=1e-5
    )
    shifted = -(w[:, 1:] * lp_next(logits, tokens)).sum() / w[:, 1:].sum()
    np.testing.assert_allclose(losses.next_token_loss(logits, tokens, w), shifted, rtol=1e-5)


def lp_next(logits, tokens):
    return _brute(logits[:, :-1].astype(np.float64), tokens[:, 1:])


def test_zero_weights_give_zero_not_nan():
    logits = jnp.zeros((1, 3, 4))
    assert (
        float(losses.next_token_loss(logits, jnp.zeros((1, 3), jnp.int32), jnp.zeros((1, 3))))
        == 0.0
    )


def test_bad_ids_and_shapes():
    with pytest.raises(ValueError, match=r"token ids in \[0, 4\), got 4"):
        losses.token_nll(jnp.zeros((2, 4)), jnp.array([0, 4]))
    with pytest.raises(ValueError, match="must be \\(B, T, V\\)"):
        losses.next_token_loss(jnp.zeros((2, 4)), jnp.zeros((2,), jnp.int32))
    # traced: an out-of-range id gives NaN, never a wrapped-around id
    assert np.isnan(jax.jit(losses.token_nll)(jnp.zeros((2, 4)), jnp.array([0, -1])))
