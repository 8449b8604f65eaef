"""RLOO / GRPO / PKPO group advantages and the DPO loss and pair: hand computations, vmap, errors.

(The FIDIA-named wrappers are tested against the same hand computations in
tests/projects/fidia/test_advantages.py.)
"""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax import rl

REWARDS = np.array([0.3, -1.2, 2.5, 0.3, 1.1, -0.4], np.float32)


def test_rloo_grpo_by_hand():
    n, r = len(REWARDS), REWARDS.astype(np.float64)
    rloo = [(r[i] - np.delete(r, i).mean()) / n for i in range(n)]
    np.testing.assert_allclose(rl.rloo_advantages(jnp.asarray(REWARDS)), rloo, rtol=1e-5, atol=1e-7)
    grpo = (r - r.mean()) / (r.std(ddof=1) + 1e-3) / n
    np.testing.assert_allclose(rl.grpo_advantages(jnp.asarray(REWARDS), 1e-3), grpo, rtol=1e-5)


@pytest.mark.parametrize("k", [1, 2, 4])
def test_pkpo_by_enumeration_and_group_norm(k):
    r, n = REWARDS.astype(np.float64), len(REWARDS)
    total = len(list(itertools.combinations(range(n), k)))
    if k == 1:
        hand = [(r[i] - np.delete(r, i).mean()) / n for i in range(n)]
    else:
        hand = [
            sum(
                max(r[i] - max(r[list(J)]), 0.0)
                for J in itertools.combinations([j for j in range(n) if j != i], k - 1)
            )
            / total
            for i in range(n)
        ]
    got = rl.pkpo_advantages(jnp.asarray(REWARDS), k)
    np.testing.assert_allclose(got, hand, rtol=1e-5, atol=1e-6)
    normed = rl.pkpo_advantages(jnp.asarray(REWARDS), k, group_norm=True, eps=0.0)
    np.testing.assert_allclose(normed, np.asarray(hand) / r.std(ddof=1), rtol=1e-5, atol=1e-6)


def test_vmap_matches_rows_and_validation():
    r_bn = jnp.stack([jnp.asarray(REWARDS), -jnp.asarray(REWARDS)])
    for fn in (rl.rloo_advantages, rl.grpo_advantages, lambda r: rl.pkpo_advantages(r, 3)):
        batched = jax.jit(jax.vmap(fn))(r_bn)
        for b in range(2):
            np.testing.assert_allclose(batched[b], fn(r_bn[b]), rtol=1e-6, atol=1e-7)
    for fn in (rl.rloo_advantages, rl.grpo_advantages, rl.dpo_pair):
        with pytest.raises(ValueError, match="rewards_n must have rank 1"):
            fn(jnp.ones((2, 3)))
        with pytest.raises(ValueError, match="n >= 2"):
            fn(jnp.ones(1))
        with pytest.raises(ValueError, match="floating"):
            fn(jnp.arange(3))
    with pytest.raises(ValueError, match="1 <= k <= n"):
        rl.pkpo_advantages(jnp.ones(3), 4)


def test_dpo_loss_closed_form_and_gradient():
    for lw, ll, beta in ((0.0, 0.0, 0.5), (3.0, -1.0, 0.5), (-2.0, 1.0, 0.1)):
        got = rl.dpo_loss(jnp.float32(lw), jnp.float32(ll), beta)
        assert float(got) == pytest.approx(np.log1p(np.exp(-beta * (lw - ll))), rel=1e-6)
    # d loss / d lr_w = -beta * sigmoid(-beta * margin) = -d loss / d lr_l
    gw, gl = jax.grad(rl.dpo_loss, argnums=(0, 1))(jnp.float32(1.0), jnp.float32(0.0), 0.5)
    expect = -0.5 / (1.0 + np.exp(0.5))
    assert float(gw) == pytest.approx(expect, rel=1e-6)
    assert float(gl) == pytest.approx(-expect, rel=1e-6)
    batched = jax.vmap(rl.dpo_loss, in_axes=(0, 0, None))(
        jnp.array([0.0, 3.0]), jnp.array([0.0, -1.0]), 0.5
    )
    np.testing.assert_allclose(batched, [np.log(2.0), np.log1p(np.exp(-2.0))], rtol=1e-6)
    with pytest.raises(ValueError, match="log_ratio_chosen must have rank 0"):
        rl.dpo_loss(jnp.zeros(2), jnp.float32(0.0), 0.5)


def test_dpo_log_ratios_feed_dpo_loss_with_a_constant_reference():
    pw, rw, pl, rl_ = (jnp.asarray(v) for v in (-3.0, -4.0, -5.0, -4.5))
    r_w, r_l = rl.dpo_log_ratios(pw, rw, pl, rl_)
    assert (float(r_w), float(r_l)) == (1.0, -0.5)
    # log-ratios 1.0 and -0.5: loss = log(1 + exp(-beta * 1.5))
    np.testing.assert_allclose(rl.dpo_loss(r_w, r_l, 0.5), np.log1p(np.exp(-0.75)), rtol=1e-6)
    g = jax.grad(lambda ref: sum(rl.dpo_log_ratios(pw, ref, pl, ref)))(rw)
    assert float(g) == 0.0  # the reference is a constant
    gp = jax.grad(lambda p: rl.dpo_log_ratios(p, rw, pl, rl_)[0])(pw)
    assert float(gp) == 1.0


def test_dpo_pair_ties_and_no_preference():
    chosen, rejected, valid = rl.dpo_pair(jnp.asarray(REWARDS))
    assert (int(chosen), int(rejected), float(valid)) == (2, 1, 1.0)
    chosen, rejected, valid = rl.dpo_pair(jnp.array([1.0, 3.0, 3.0, -2.0, -2.0]))
    assert (int(chosen), int(rejected), float(valid)) == (1, 3, 1.0)  # lowest index on ties
    assert float(rl.dpo_pair(jnp.full(4, 0.7))[2]) == 0.0
