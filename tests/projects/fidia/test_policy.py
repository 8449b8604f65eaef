"""Policy loss: gradients against closed forms on a tiny categorical policy (no ProteinMPNN)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax.projects import fidia

N, L, V = 5, 6, 21
T = 0.7


def _setup(seed=0):
    rng = np.random.default_rng(seed)
    theta = jnp.asarray(rng.normal(size=(L, V)), jnp.float32)  # per-position logits (the policy)
    ref = jnp.asarray(rng.normal(size=(L, V)), jnp.float32)
    seqs = jnp.asarray(rng.integers(0, 20, size=(N, L)), jnp.int32)
    adv = jnp.asarray(rng.normal(size=N), jnp.float32)
    designed = np.ones((N, L), np.float32)
    designed[:, 0] = 0.0  # a fixed position
    return theta, ref, seqs, adv, jnp.asarray(designed)


def _tok_logp(theta, seqs):
    lp = jax.nn.log_softmax(jnp.broadcast_to(theta, (N, L, V)), -1)  # the "T = 1 log-softmax"
    return fidia.tempered_token_log_probs(lp, seqs, temperature=T, omit_21=fidia.omit_mask("X"))


def test_tempered_token_log_probs_match_tempered_softmax():
    theta, _, seqs, _, _ = _setup()
    logits = theta / T
    logits = logits.at[:, 20].set(-jnp.inf)
    expect = jnp.take_along_axis(
        jax.nn.log_softmax(logits, -1)[None].repeat(N, 0), seqs[..., None], -1
    )[..., 0]
    np.testing.assert_allclose(_tok_logp(theta, seqs), expect, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("temperature", [0.0, -0.1, float("nan")])
def test_tempered_token_log_probs_refuses_a_temperature_sample_refuses(temperature):
    """Issue 29 item 6: T = 0 gave NaN and T = -0.1 a finite number; models.sample rejects
    both. Concrete: an error; traced: every entry NaN (never a finite number)."""
    theta, _, seqs, _, _ = _setup()
    lp = jax.nn.log_softmax(jnp.broadcast_to(theta, (N, L, V)), -1)
    with pytest.raises(ValueError, match="tempered_token_log_probs: temperature must be > 0"):
        fidia.tempered_token_log_probs(lp, seqs, temperature=temperature)
    jitted = jax.jit(lambda t: fidia.tempered_token_log_probs(lp, seqs, temperature=t))
    assert np.isnan(np.asarray(jitted(jnp.float32(temperature)))).all()


@pytest.mark.parametrize("bad", [21, -1])
def test_tempered_token_log_probs_refuses_out_of_range_ids(bad):
    """-1 used to wrap around to X (a finite number), 21 gave NaN; both are errors now, as in
    models.score, and NaN (never a wrapped id) under jit."""
    theta, _, seqs, _, _ = _setup()
    lp = jax.nn.log_softmax(jnp.broadcast_to(theta, (N, L, V)), -1)
    seqs = seqs.at[2, 3].set(bad)
    with pytest.raises(
        ValueError, match=f"must be token ids in \\[0, 21\\), got {bad} at index \\(2, 3\\)"
    ):
        fidia.tempered_token_log_probs(lp, seqs, temperature=T)
    got = np.asarray(jax.jit(lambda s: fidia.tempered_token_log_probs(lp, s, temperature=T))(seqs))
    assert np.isnan(got[2, 3]) and np.isfinite(np.delete(got.ravel(), 2 * L + 3)).all()
    with pytest.raises(ValueError, match="log_probs must be"):
        fidia.tempered_token_log_probs(lp[..., :20], seqs, temperature=T)


@pytest.mark.parametrize("clip_eps", [0.0, 0.2])
def test_on_policy_gradient_is_sum_of_advantage_weighted_score(clip_eps):
    """At old = current and beta = 0: grad loss = -sum_i A_i grad log pi(y_i) / L_designed."""
    theta, ref, seqs, adv, designed = _setup()
    old = _tok_logp(theta, seqs)
    ref_lp = _tok_logp(ref, seqs)

    def loss(th):
        return fidia.policy_loss(
            _tok_logp(th, seqs), old, ref_lp, adv, designed, beta_kl=0.0, clip_eps=clip_eps
        )[0]

    def score_fn(th):
        seq_logp = jnp.sum(_tok_logp(th, seqs) * designed, -1) / jnp.sum(designed, -1)
        return -jnp.sum(adv * seq_logp)

    np.testing.assert_allclose(
        jax.grad(loss)(theta), jax.grad(score_fn)(theta), rtol=1e-5, atol=1e-6
    )


def test_clipping_zeroes_gradient_outside_trust_region():
    theta, ref, seqs, _, designed = _setup()
    adv = jnp.ones(N)
    old = _tok_logp(theta, seqs) - 1.0  # ratio = e > 1 + eps everywhere, A > 0: clipped
    g = jax.grad(
        lambda th: fidia.policy_loss(
            _tok_logp(th, seqs), old, old, adv, designed, beta_kl=0.0, clip_eps=0.2
        )[0]
    )(theta)
    np.testing.assert_array_equal(g, np.zeros_like(g))
    _, aux = fidia.policy_loss(
        _tok_logp(theta, seqs), old, old, adv, designed, beta_kl=0.0, clip_eps=0.2
    )
    assert float(aux["clip_frac"]) == pytest.approx(1.0)


def test_k3_penalty_value_and_unbiasedness():
    theta, ref, seqs, adv, designed = _setup()
    lp, ref_lp = _tok_logp(theta, seqs), _tok_logp(ref, seqs)
    base, _ = fidia.policy_loss(lp, lp, ref_lp, adv, designed, beta_kl=0.0)
    with_kl, aux = fidia.policy_loss(lp, lp, ref_lp, adv, designed, beta_kl=0.3)
    d = np.asarray(ref_lp - lp, np.float64)
    k3 = np.exp(d) - 1 - d
    per_seq = (k3 * np.asarray(designed)).sum(-1) / np.asarray(designed).sum(-1)
    assert float(with_kl - base) == pytest.approx(0.3 * per_seq.mean(), rel=1e-5)
    assert float(aux["kl"]) == pytest.approx(per_seq.mean(), rel=1e-5)
    # E_{y ~ pi}[k3(y)] = KL(pi || ref) exactly: enumerate every token of one position
    p = jax.nn.log_softmax(theta[0] / T)
    q = jax.nn.log_softmax(ref[0] / T)
    dd = q - p
    expect_k3 = jnp.sum(jnp.exp(p) * (jnp.exp(dd) - 1 - dd))
    kl = jnp.sum(jnp.exp(p) * (p - q))
    assert float(expect_k3) == pytest.approx(float(kl), rel=1e-4)


def test_masked_positions_cannot_overflow():
    """A padded position near the omit floor (-1e9) must not turn exp() into inf * 0 = NaN."""
    theta, ref, seqs, adv, designed = _setup()
    lp, ref_lp = _tok_logp(theta, seqs), _tok_logp(ref, seqs)
    designed = designed.at[0, 0].set(0.0)
    lp = lp.at[0, 0].set(-1e9)
    ref_lp = ref_lp.at[0, 0].set(-1e9 + 128.0)
    loss, grad = jax.value_and_grad(
        lambda x: fidia.policy_loss(x, lp, ref_lp, adv, designed, beta_kl=0.3, clip_eps=0.2)[0]
    )(lp)
    assert np.isfinite(float(loss))
    assert np.all(np.isfinite(np.asarray(grad)))
    assert float(grad[0, 0]) == 0.0
