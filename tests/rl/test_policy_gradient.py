"""Clipped surrogate and k3 KL: closed forms, the clamp of k3's exponent, batching."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax import rl


def test_clipped_surrogate_by_hand():
    ratio = jnp.array([0.5, 0.9, 1.0, 1.1, 1.5])
    for adv in (2.0, -2.0):
        got = rl.clipped_surrogate(ratio, jnp.float32(adv), 0.2)
        hand = [min(r * adv, min(max(r, 0.8), 1.2) * adv) for r in np.asarray(ratio, np.float64)]
        np.testing.assert_allclose(got, hand, rtol=1e-6)
    # eps = 0: no clipping at all, per-step advantages broadcast elementwise
    adv_t = jnp.array([1.0, -1.0, 2.0, 0.5, -3.0])
    np.testing.assert_allclose(rl.clipped_surrogate(ratio, adv_t, 0.0), ratio * adv_t, rtol=1e-7)


def test_clipped_surrogate_gradient():
    """Score function at ratio 1; zero gradient where the clipped branch is active."""
    logp = jnp.array([-1.0, -2.0, -0.5])
    old = jnp.array([-1.0, -2.5, -0.2])  # ratios 1, e^0.5 (clipped for A > 0), e^-0.3
    adv = jnp.float32(1.5)
    grad = jax.grad(lambda lp: jnp.sum(rl.clipped_surrogate(jnp.exp(lp - old), adv, 0.2)))(logp)
    ratio = np.exp(np.asarray(logp - old, np.float64))
    np.testing.assert_allclose(grad, [1.5, 0.0, 1.5 * ratio[2]], rtol=1e-6)


def test_clipped_surrogate_validation():
    with pytest.raises(ValueError, match="ratio_t must have rank 1"):
        rl.clipped_surrogate(jnp.ones((2, 3)), jnp.float32(1.0), 0.2)
    with pytest.raises(ValueError, match="advantage_t must have rank 0 or 1"):
        rl.clipped_surrogate(jnp.ones(3), jnp.ones((3, 1)), 0.2)
    with pytest.raises(ValueError, match="clip_eps"):
        rl.clipped_surrogate(jnp.ones(3), jnp.float32(1.0), -0.1)


def test_k3_small_log_ratios_are_the_unclamped_formula_bitwise():
    rng = np.random.default_rng(0)
    logp = jnp.asarray(rng.normal(size=64) * 5 - 3, jnp.float32)
    ref = jnp.asarray(rng.normal(size=64) * 5 - 3, jnp.float32)
    d = ref - logp
    assert float(jnp.max(jnp.abs(d))) < rl.K3_LOG_RATIO_MAX
    for fn in (lambda f: f, jax.jit):
        plain = fn(lambda a, b: jnp.exp(b - a) - 1.0 - (b - a))
        np.testing.assert_array_equal(fn(rl.k3_kl)(logp, ref), plain(logp, ref))
        g = fn(jax.grad(lambda lp: jnp.sum(rl.k3_kl(lp, ref))))(logp)
        g_plain = fn(jax.grad(lambda lp: jnp.sum(jnp.exp(ref - lp) - 1.0 - (ref - lp))))(logp)
        np.testing.assert_array_equal(g, g_plain)
    # value by hand in float64 and E_pi[k3] = KL(pi || ref) on a categorical
    d64 = np.asarray(d, np.float64)
    np.testing.assert_allclose(rl.k3_kl(logp, ref), np.expm1(d64) - d64, rtol=2e-5, atol=1e-6)
    p = jax.nn.log_softmax(jnp.array([0.3, -1.0, 2.0, 0.0]))
    q = jax.nn.log_softmax(jnp.array([1.0, 0.5, -0.5, 0.2]))
    expect = jnp.sum(jnp.exp(p) * rl.k3_kl(p, q))
    assert float(expect) == pytest.approx(float(jnp.sum(jnp.exp(p) * (p - q))), rel=1e-5)


def test_k3_far_from_reference_is_large_and_finite():
    """A log-ratio of 1e4 (exp overflows float32 at 88.7): finite value and gradient."""
    c = rl.K3_LOG_RATIO_MAX
    logp = jnp.array([-1e4, -c - 5.0, -c])
    ref = jnp.zeros(3)
    value, grad = jax.value_and_grad(lambda lp: jnp.sum(rl.k3_kl(lp, ref)))(logp)
    per_step = rl.k3_kl(logp, ref)
    assert np.all(np.isfinite(per_step)) and np.all(np.isfinite(grad)) and np.isfinite(value)
    # beyond the bound: the tangent line at c, exp(c) (1 + d - c) - 1 - d, slope exp(c) - 1
    d = np.array([1e4, c + 5.0, c])
    tangent = np.exp(c) * (1.0 + d - c) - 1.0 - d
    np.testing.assert_allclose(per_step, tangent, rtol=1e-5)
    np.testing.assert_allclose(grad, -(np.exp(c) - 1.0) * np.ones(3), rtol=1e-5)
    assert float(per_step[0]) > 1e12  # still a large penalty, and it pulls the policy back
    # continuous at the bound, and below the exact k3 beyond it (exp is convex)
    exact = np.exp(np.float64(c + 5.0)) - 1.0 - (c + 5.0)
    assert float(per_step[1]) < exact
    # the same under jit, and finite in bfloat16 too
    np.testing.assert_allclose(jax.jit(rl.k3_kl)(logp, ref), per_step, rtol=1e-6)
    bf16 = rl.k3_kl(logp.astype(jnp.bfloat16), ref.astype(jnp.bfloat16))
    assert np.all(np.isfinite(np.asarray(bf16, np.float32)))


def test_k3_validation_and_vmap():
    with pytest.raises(ValueError, match="logp_t must have rank 1"):
        rl.k3_kl(jnp.zeros((2, 3)), jnp.zeros((2, 3)))
    with pytest.raises(ValueError, match="ref_logp_t must have shape"):
        rl.k3_kl(jnp.zeros(3), jnp.zeros(4))
    lp = jnp.array([[-1.0, -2.0], [-0.5, -3.0]])
    ref = jnp.array([[-1.5, -1.0], [-0.5, -2.0]])
    batched = jax.vmap(rl.k3_kl)(lp, ref)
    np.testing.assert_array_equal(batched[1], rl.k3_kl(lp[1], ref[1]))
