"""Each method's advantages against a hand computation (loops over samples / subsets)."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fidia_jax import rl
from fidia_jax.projects import fidia

REWARDS = np.array([0.3, -1.2, 2.5, 0.3, 1.1, -0.4], np.float32)


def test_rloo_by_hand_and_equals_k1_pkpo():
    n = len(REWARDS)
    hand = [(REWARDS[i] - np.mean(np.delete(REWARDS, i))) / n for i in range(n)]
    got = fidia.rloo_advantages(jnp.asarray(REWARDS))
    np.testing.assert_allclose(got, hand, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(
        got, rl.max_at_k_effective_rewards(jnp.asarray(REWARDS), 1), atol=1e-7
    )


def test_grpo_by_hand():
    n = len(REWARDS)
    mean = sum(REWARDS) / n
    std = (sum((r - mean) ** 2 for r in REWARDS) / (n - 1)) ** 0.5
    hand = [(r - mean) / (std + 1e-6) / n for r in REWARDS]
    np.testing.assert_allclose(fidia.grpo_advantages(jnp.asarray(REWARDS)), hand, rtol=1e-5)
    # all-equal group: zero advantages, no NaN
    np.testing.assert_array_equal(fidia.grpo_advantages(jnp.ones(4)), np.zeros(4))


@pytest.mark.parametrize("k", [2, 3, 6])
def test_fidia_is_loo_minus_one_by_enumeration(k):
    """s_i = mean over k-subsets I containing i of (r_i - max of the other k-1)_+ * (k/n)...

    written out as the defining sum: (1/C(n,k)) sum_{|J|=k-1, i notin J} (r_i - max r_J)_+.
    """
    r, n = REWARDS.astype(np.float64), len(REWARDS)
    total = len(list(itertools.combinations(range(n), k)))
    hand = []
    for i in range(n):
        others = [j for j in range(n) if j != i]
        acc = sum(max(r[i] - max(r[list(J)]), 0.0) for J in itertools.combinations(others, k - 1))
        hand.append(acc / total)
    np.testing.assert_allclose(
        fidia.fidia_advantages(jnp.asarray(REWARDS), k), hand, rtol=1e-5, atol=1e-6
    )


def test_fidia_group_norm_divides_by_sample_std_and_is_affine_invariant():
    r = jnp.asarray(REWARDS)
    std = float(np.std(REWARDS.astype(np.float64), ddof=1))
    np.testing.assert_allclose(
        fidia.fidia_advantages(r, 3, group_norm=True),
        np.asarray(fidia.fidia_advantages(r, 3)) / std,
        rtol=1e-5,
    )
    # invariant to r -> a r + b (a > 0), unlike the raw effective rewards, which scale with a
    np.testing.assert_allclose(
        fidia.fidia_advantages(2.5 * r - 7.0, 3, group_norm=True),
        fidia.fidia_advantages(r, 3, group_norm=True),
        rtol=1e-4,
        atol=1e-6,
    )
    via_dispatch = fidia.advantages("fidia", r, k=3, fidia_group_norm=True)
    np.testing.assert_allclose(
        via_dispatch, fidia.fidia_advantages(r, 3, group_norm=True), rtol=1e-6
    )
    np.testing.assert_array_equal(
        fidia.fidia_advantages(jnp.ones(4), 2, group_norm=True), np.zeros(4)
    )


def test_dpo_pair_and_dispatch():
    chosen, rejected, valid = rl.dpo_pair(jnp.asarray(REWARDS))
    assert (int(chosen), int(rejected), float(valid)) == (2, 1, 1.0)
    _, _, valid = rl.dpo_pair(jnp.zeros(3))
    assert float(valid) == 0.0
    batched = jax.vmap(lambda r: fidia.advantages("fidia", r, k=2))(
        jnp.stack([jnp.asarray(REWARDS)] * 2)
    )
    np.testing.assert_allclose(
        batched[1], fidia.fidia_advantages(jnp.asarray(REWARDS), 2), atol=1e-7
    )
    with pytest.raises(ValueError):
        fidia.advantages("dpo", jnp.asarray(REWARDS), k=2)
    with pytest.raises(ValueError):
        fidia.rloo_advantages(jnp.ones((2, 3)))


# Issue 17 items 6-7 through the method dispatch the training step uses (vmapped, so traced).
METHODS = [
    ("fidia", {"k": 2}),
    ("fidia", {"k": 4, "fidia_group_norm": True}),
    ("fidia", {"k": 1}),
    ("rloo", {"k": 1}),
    ("grpo", {"k": 1}),
]


@pytest.mark.parametrize("method,kw", METHODS)
def test_dispatch_excludes_non_finite_rewards_and_zeroes_ties(method, kw):
    with_nan = np.array([0.3, np.nan, -1.2, 2.5, np.inf, 1.1], np.float32)
    finite = np.isfinite(with_nan)
    fn = jax.vmap(lambda r: fidia.advantages(method, r, **kw))
    got = np.asarray(fn(jnp.asarray(with_nan[None])))[0]
    want = np.zeros(6, np.float32)
    want[finite] = fidia.advantages(method, jnp.asarray(with_nan[finite]), **kw)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert np.all(got[~finite] == 0.0)
    tied = np.asarray(fn(jnp.full((3, 8), 0.35).at[1].set(10.35).at[2].set(-7e5)))
    np.testing.assert_array_equal(tied, np.zeros((3, 8)))


@settings(max_examples=15, deadline=None)  # each example compiles: keep make test fast
@given(
    ints=st.lists(st.integers(-512, 512), min_size=4, max_size=8),
    b=st.integers(-512, 512),
    p=st.integers(-6, 6),
)
def test_property_dispatch_offset_and_scale(ints, b, p):
    """Dyadic rewards: exact offset invariance, scale equivariance, zero sum for rloo/grpo."""
    r = jnp.asarray(np.asarray(ints, np.float32) / 64.0)
    a = np.float32(2.0**p)
    for method, kw in METHODS:
        power = 0 if method == "grpo" or kw.get("fidia_group_norm") else 1
        if power == 0:  # the default eps = 1e-6 is absolute: exact scale invariance needs 0
            kw = dict(kw, grpo_eps=0.0)
        base = np.asarray(fidia.advantages(method, r, **kw))
        np.testing.assert_array_equal(fidia.advantages(method, r + b / 64.0, **kw), base)
        np.testing.assert_array_equal(fidia.advantages(method, r * a, **kw), base * a**power)
        if method in ("rloo", "grpo") or kw["k"] == 1:
            assert abs(float(base.astype(np.float64).sum())) <= 1e-6 * max(1.0, np.ptp(ints) / 64)
