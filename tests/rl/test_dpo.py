"""DPO from per-token log-probabilities against the closed form on a tiny categorical policy."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax import rl

L, V = 6, 21


def _setup(seed=0):
    rng = np.random.default_rng(seed)
    theta = jnp.asarray(rng.normal(size=(L, V)), jnp.float32)  # per-position logits (the policy)
    ref = jnp.asarray(rng.normal(size=(L, V)), jnp.float32)
    seqs = jnp.asarray(rng.integers(0, 20, size=(2, L)), jnp.int32)  # (chosen, rejected)
    mask = np.ones((2, L), np.float32)
    mask[:, 0] = 0.0  # a token that does not count (fixed position, padding)
    return theta, ref, seqs, jnp.asarray(mask)


def _tok_logp(theta, seqs):
    lp = jax.nn.log_softmax(theta, -1)
    return jnp.take_along_axis(jnp.broadcast_to(lp, (2, L, V)), seqs[..., None], -1)[..., 0]


def test_dpo_sequence_loss_by_hand_and_gradient_direction():
    theta, ref, seqs, mask = _setup()
    ref_lp = _tok_logp(ref, seqs)

    def loss(th, valid=1.0):
        return rl.dpo_sequence_loss(_tok_logp(th, seqs), ref_lp, mask, jnp.float32(valid), 0.5)

    value, aux = loss(theta)
    seq = np.sum((np.asarray(_tok_logp(theta, seqs)) - np.asarray(ref_lp)) * np.asarray(mask), -1)
    margin = seq[0] - seq[1]
    assert float(aux["margin"]) == pytest.approx(margin, rel=1e-5)
    assert float(value) == pytest.approx(np.log1p(np.exp(-0.5 * margin)), rel=1e-5)
    assert float(value) == pytest.approx(float(rl.dpo_loss(seq[0], seq[1], 0.5)), rel=1e-6)
    assert float(aux["accuracy"]) == float(margin > 0)
    # a small step against the gradient raises the chosen-vs-rejected margin
    g = jax.grad(lambda th: loss(th)[0])(theta)
    assert float(loss(theta - 0.1 * g)[1]["margin"]) > margin
    # the reference is a constant, a masked token has no gradient
    g_ref = jax.grad(
        lambda r: rl.dpo_sequence_loss(_tok_logp(theta, seqs), r, mask, jnp.float32(1.0), 0.5)[0]
    )(ref_lp)
    np.testing.assert_array_equal(g_ref, np.zeros_like(g_ref))
    # no preference: zero loss and zero accuracy
    zero, aux0 = loss(theta, valid=0.0)
    assert float(zero) == 0.0 and float(aux0["accuracy"]) == 0.0


def test_dpo_sequence_loss_checks_shapes_and_vmaps():
    theta, ref, seqs, mask = _setup()
    lp, ref_lp = _tok_logp(theta, seqs), _tok_logp(ref, seqs)
    with pytest.raises(ValueError, match="dpo_sequence_loss"):
        rl.dpo_sequence_loss(lp[0], ref_lp[0], mask[0], jnp.float32(1.0), 0.5)
    with pytest.raises(ValueError, match="ref_logp_2xT"):
        rl.dpo_sequence_loss(lp, ref_lp[:, :-1], mask, jnp.float32(1.0), 0.5)
    batched, _ = jax.vmap(rl.dpo_sequence_loss, in_axes=(0, 0, 0, 0, None))(
        jnp.stack([lp, lp[::-1]]), jnp.stack([ref_lp, ref_lp[::-1]]), jnp.stack([mask, mask]),
        jnp.ones(2), 0.5,
    )  # fmt: skip
    one, _ = rl.dpo_sequence_loss(lp, ref_lp, mask, jnp.float32(1.0), 0.5)
    assert float(batched[0]) == float(one)
