"""Best-of-N estimators against brute-force enumeration and an exact categorical-policy gradient."""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax import rl

# ---------------------------------------------------------------- brute-force references


def brute_max_at_k(r, k):
    subsets = list(itertools.combinations(range(len(r)), k))
    return np.mean([max(r[j] for j in s) for s in subsets])


def brute_effective(r, k, baseline):
    """Average over all k-subsets I of [term(I, i) for i in I] (then summed per sample)."""
    n = len(r)
    subsets = list(itertools.combinations(range(n), k))
    out = np.zeros(n)
    for s in subsets:
        m = max(r[j] for j in s)
        for i in s:
            if baseline == "none":
                out[i] += m
            elif baseline == "loo-1" and k > 1:
                out[i] += m - max(r[j] for j in s if j != i)
            else:
                out[i] += m
    out /= len(subsets)
    if baseline == "loo" or (baseline == "loo-1" and k == 1):
        for i in range(n):
            others = [r[j] for j in range(n) if j != i]
            out[i] -= k / n * brute_max_at_k(others, k)
    return out


CASES = [(1, 1), (2, 1), (2, 2), (4, 1), (4, 2), (4, 4), (5, 3), (6, 2), (6, 5), (7, 4)]


def _rewards(n, seed, ties):
    rng = np.random.default_rng(seed)
    if ties:
        return rng.integers(0, 3, size=n).astype(np.float64)
    return rng.normal(size=n)


@pytest.mark.parametrize("n,k", CASES)
@pytest.mark.parametrize("ties", [False, True])
def test_max_at_k_matches_enumeration(n, k, ties):
    r = _rewards(n, 10 * n + k, ties)
    got = rl.max_at_k(jnp.asarray(r, jnp.float32), k)
    np.testing.assert_allclose(float(got), brute_max_at_k(r, k), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n,k", CASES)
@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("baseline", ["none", "loo", "loo-1"])
def test_effective_rewards_match_enumeration(n, k, ties, baseline):
    if baseline != "none" and n == 1:
        with pytest.raises(ValueError, match="n >= 2"):
            rl.max_at_k_effective_rewards(jnp.zeros(1), k, baseline)
        return
    if baseline == "loo" and k == n:
        with pytest.raises(ValueError, match="k < n"):
            rl.max_at_k_effective_rewards(jnp.zeros(n), k, baseline)
        return
    r = _rewards(n, 100 * n + k, ties)
    got = rl.max_at_k_effective_rewards(jnp.asarray(r, jnp.float32), k, baseline)
    np.testing.assert_allclose(np.asarray(got), brute_effective(r, k, baseline), atol=2e-6)


def test_special_cases_k1_rloo_and_kn_best_minus_runner_up():
    r = jnp.array([0.3, -1.2, 2.5, 0.7, 1.9])
    n = r.shape[0]
    s1 = rl.max_at_k_effective_rewards(r, 1)
    rloo = (r - (r.sum() - r) / (n - 1)) / n
    np.testing.assert_allclose(s1, rloo, rtol=1e-6, atol=1e-7)
    sn = np.asarray(rl.max_at_k_effective_rewards(r, n))
    np.testing.assert_allclose(sn, [0, 0, 2.5 - 1.9, 0, 0], atol=1e-6)
    assert float(rl.max_at_k(r, 1)) == pytest.approx(float(r.mean()), rel=1e-6)
    assert float(rl.max_at_k(r, n)) == pytest.approx(2.5)


def test_ties_and_permutation_equivariance():
    r = jnp.array([1.0, 3.0, 3.0, 0.0, 3.0, 1.0])
    s = np.asarray(rl.max_at_k_effective_rewards(r, 3))
    assert s[1] == pytest.approx(s[2]) and s[2] == pytest.approx(s[4])
    assert s[0] == pytest.approx(s[5])
    perm = np.array([4, 2, 0, 5, 1, 3])
    s_perm = np.asarray(rl.max_at_k_effective_rewards(r[perm], 3))
    np.testing.assert_allclose(s_perm, s[perm], atol=1e-7)
    # All tied rewards: loo-1 gives zero everywhere.
    np.testing.assert_allclose(rl.max_at_k_effective_rewards(jnp.full(5, 2.0), 2), 0.0, atol=1e-7)


def test_weights_exact_and_large_n_stable():
    w = rl.max_at_k_weights(6, 3)
    np.testing.assert_allclose(w, [math.comb(i - 1, 2) / math.comb(6, 3) for i in range(1, 7)])
    w = rl.max_at_k_weights(1200, 500)
    assert np.all(np.isfinite(w)) and w.sum() == pytest.approx(1.0, abs=1e-12)
    r = jnp.linspace(0.0, 1.0, 1200)
    s = rl.max_at_k_effective_rewards(r, 500)
    assert np.all(np.isfinite(np.asarray(s))) and np.all(np.asarray(s) >= -1e-6)


@pytest.mark.parametrize("n,k", [(1, 1), (4, 1), (5, 2), (6, 3), (6, 6)])
def test_pass_at_k_binary_closed_forms(n, k):
    for seed in range(3):
        f = np.random.default_rng(seed + n).integers(0, 2, size=n).astype(np.float64)
        f_j = jnp.asarray(f, jnp.float32)
        expected = brute_max_at_k(f, k)
        assert float(rl.pass_at_k(f_j, k)) == pytest.approx(expected, abs=1e-6)
        assert float(rl.pass_at_k(f_j.astype(bool), k)) == pytest.approx(expected, abs=1e-6)
        none = rl.pass_at_k_effective_rewards(f_j, k, "none")
        np.testing.assert_allclose(none, brute_effective(f, k, "none"), atol=1e-6)
        if n > 1:
            loo1 = rl.pass_at_k_effective_rewards(f_j, k, "loo-1")
            np.testing.assert_allclose(loo1, brute_effective(f, k, "loo-1"), atol=1e-6)
            np.testing.assert_allclose(loo1, rl.max_at_k_effective_rewards(f_j, k), atol=1e-6)


def test_validation_errors():
    with pytest.raises(ValueError, match="rank 1"):
        rl.max_at_k(jnp.zeros((2, 3)), 1)
    with pytest.raises(ValueError, match="floating"):
        rl.max_at_k(jnp.arange(3), 1)
    with pytest.raises(ValueError, match="1 <= k <= n"):
        rl.max_at_k(jnp.zeros(3), 4)
    with pytest.raises(ValueError, match="static Python int"):
        rl.max_at_k(jnp.zeros(3), 1.0)
    with pytest.raises(ValueError, match="baseline"):
        rl.max_at_k_effective_rewards(jnp.zeros(3), 1, "mean")
    with pytest.raises(ValueError, match="bool or floating"):
        rl.pass_at_k(jnp.arange(3), 1)


def test_jit_and_vmap_batch():
    r_bn = jax.random.normal(jax.random.key(0), (3, 6))
    f = jax.jit(jax.vmap(lambda r: rl.max_at_k_effective_rewards(r, 3)))
    out = f(r_bn)
    for b in range(3):
        np.testing.assert_allclose(
            out[b], brute_effective(np.asarray(r_bn[b], np.float64), 3, "loo-1"), atol=1e-6
        )
    m = jax.jit(jax.vmap(lambda r: rl.max_at_k(r, 4)))(r_bn)
    np.testing.assert_allclose(m, [brute_max_at_k(np.asarray(x), 4) for x in r_bn], atol=1e-6)


# ------------------------------------------------- Monte-Carlo gradient vs exact gradient


def test_score_function_gradient_unbiased_on_categorical_policy():
    num_outcomes, n, k = 5, 6, 3
    values = jnp.array([0.0, 1.0, -0.5, 2.0, 0.7])
    theta = jnp.array([0.4, -0.2, 0.1, -0.8, 0.3])
    outcomes_k = np.array(list(itertools.product(range(num_outcomes), repeat=k)))

    def expected_max(th):
        logp = jax.nn.log_softmax(th)
        prob = jnp.exp(jnp.sum(logp[outcomes_k], axis=1))
        return jnp.sum(prob * jnp.max(values[outcomes_k], axis=1))

    exact = jax.grad(expected_max)(theta)
    p = jax.nn.softmax(theta)
    # The gradient of E[max of 1] = E[value] is p * (values - p.values): clearly different, so the
    # check below can tell a k = 3 estimator from a k = 1 one.
    exact_k1 = p * (values - jnp.dot(p, values))
    assert float(jnp.max(jnp.abs(exact - exact_k1))) > 0.1

    def one_draw(key):
        x_n = jax.random.categorical(key, theta, shape=(n,))
        score_nm = jax.nn.one_hot(x_n, num_outcomes) - p[None, :]
        return jnp.stack(
            [
                jnp.sum(rl.max_at_k_effective_rewards(values[x_n], k, b)[:, None] * score_nm, 0)
                for b in ("none", "loo", "loo-1")
            ]
        )

    draws = 16000
    grads = jax.jit(jax.vmap(one_draw))(jax.random.split(jax.random.key(1), draws))
    mean = np.asarray(grads.mean(0))
    stderr = np.asarray(grads.std(0)) / np.sqrt(draws)
    for b in range(3):
        np.testing.assert_array_less(np.abs(mean[b] - exact), 4.5 * stderr[b] + 1e-6)
    # The loo-1 baseline reduces variance relative to no baseline.
    assert np.all(stderr[2] < stderr[0])


def test_public_api():
    for name in [
        "max_at_k",
        "max_at_k_weights",
        "max_at_k_effective_rewards",
        "pass_at_k",
        "pass_at_k_effective_rewards",
    ]:
        assert name in rl.__all__ and callable(getattr(rl, name))


def test_loo1_effective_rewards_unaffected_by_a_large_offset_in_float32():
    """loo-1 is shift invariant; a common offset of 1e4 must not cost float32 digits."""
    base = np.random.default_rng(3).normal(size=32).astype(np.float32)
    shifted = base + np.float32(1e4)
    exact_diffs = shifted - np.float32(1e4)  # exact in float32 (Sterbenz), so same differences
    got = rl.max_at_k_effective_rewards(jnp.asarray(shifted), 8, "loo-1")
    want = rl.max_at_k_effective_rewards(jnp.asarray(exact_diffs), 8, "loo-1")
    np.testing.assert_allclose(got, want, atol=2e-6)
