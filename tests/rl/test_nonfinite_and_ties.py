"""Non-finite rewards, tied groups and binary inputs in every reward estimator of fidia_jax.rl.

The rule (fidia_jax.rl docstring): a non-finite reward is a missing sample, excluded with a zero
advantage; the others get the estimator of the group of the m finite samples. Tied groups give
exactly zero advantages at any offset and scale; RLOO / GRPO advantages sum to zero.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from fidia_jax import rl

NAN, INF = float("nan"), float("inf")
#: rewards with missing samples (nan, +inf, -inf) between finite ones
WITH_MISSING = np.array([0.3, NAN, -1.2, 2.5, INF, 0.3, 1.1, -INF], np.float32)
FINITE = np.isfinite(WITH_MISSING)

# Per-sample estimators: (name, fn). Each must equal, on the finite samples, the same estimator
# applied to the finite samples alone, and give exactly 0 at the excluded ones.
PER_SAMPLE = [
    ("rloo", rl.rloo_advantages),
    ("grpo", rl.grpo_advantages),
    ("grpo_eps0", functools.partial(rl.grpo_advantages, eps=0.0)),
    ("pkpo_k1", functools.partial(rl.pkpo_advantages, k=1)),
    ("pkpo_k3", functools.partial(rl.pkpo_advantages, k=3)),
    ("pkpo_k5_norm", functools.partial(rl.pkpo_advantages, k=5, group_norm=True)),
    ("eff_none_k2", functools.partial(rl.max_at_k_effective_rewards, k=2, baseline="none")),
    ("eff_loo_k2", functools.partial(rl.max_at_k_effective_rewards, k=2, baseline="loo")),
    ("eff_loo1_k4", functools.partial(rl.max_at_k_effective_rewards, k=4, baseline="loo-1")),
]


@pytest.mark.parametrize("name,fn", PER_SAMPLE, ids=[p[0] for p in PER_SAMPLE])
@pytest.mark.parametrize("traced", [False, True])
def test_non_finite_rewards_are_excluded_with_zero_advantage(name, fn, traced):
    expect = np.zeros(len(WITH_MISSING), np.float32)
    expect[FINITE] = fn(jnp.asarray(WITH_MISSING[FINITE]))
    call = jax.jit(fn) if traced else fn
    got = np.asarray(call(jnp.asarray(WITH_MISSING)))
    assert np.all(np.isfinite(got)), got
    np.testing.assert_allclose(got, expect, rtol=1e-6, atol=1e-7)
    assert np.all(got[~FINITE] == 0.0)


def test_non_finite_rewards_under_vmap_and_too_few_finite_samples():
    rows = jnp.asarray(np.stack([WITH_MISSING, np.where(FINITE, 1.0, NAN).astype(np.float32)]))
    for name, fn in PER_SAMPLE:
        batched = jax.jit(jax.vmap(fn))(rows)
        np.testing.assert_allclose(batched[0], fn(rows[0]), rtol=1e-6, atol=1e-7)
        # the finite samples of row 1 are tied: zero advantages, except without a baseline,
        # where every finite sample gets 1 * k / m = 2 / 5
        tied = np.where(FINITE, 0.4 if name == "eff_none_k2" else 0.0, 0.0)
        np.testing.assert_allclose(batched[1], tied, rtol=1e-6, atol=0)
    # one finite sample (issue 17: grpo([1, nan, nan, nan]) was all nan): no signal, zeros
    one = jnp.array([1.0, NAN, NAN, NAN, INF, NAN, NAN, -INF])
    for _, fn in PER_SAMPLE:  # (k = 2 > m = 1 without baseline: no estimate either)
        np.testing.assert_array_equal(fn(one), np.zeros(8))
    # fewer finite samples than k: zero effective rewards, nan estimates
    three = jnp.array([1.0, NAN, 3.0, 2.0, INF])
    np.testing.assert_array_equal(rl.pkpo_advantages(three, 4), np.zeros(5))
    np.testing.assert_array_equal(rl.max_at_k_effective_rewards(three, 3, "loo"), np.zeros(5))
    with pytest.warns(UserWarning, match="max_at_k: 2 of 5 rewards are non-finite"):
        assert np.isnan(float(rl.max_at_k(three, 4)))
    with pytest.warns(UserWarning, match="pass_at_k: 1 of 3 rewards are non-finite"):
        assert np.isnan(float(rl.pass_at_k(jnp.array([1.0, NAN, 0.0]), 3)))
    np.testing.assert_array_equal(
        rl.pass_at_k_effective_rewards(jnp.array([1.0, NAN, 0.0]), 3), np.zeros(3)
    )


def test_max_at_k_and_pass_at_k_exclude_non_finite():
    for k in (1, 2, 5):
        want = float(rl.max_at_k(jnp.asarray(WITH_MISSING[FINITE]), k))
        with pytest.warns(UserWarning, match="max_at_k: 3 of 8 rewards are non-finite"):
            got = float(rl.max_at_k(jnp.asarray(WITH_MISSING), k))
        assert got == pytest.approx(want, rel=1e-6)
        assert float(jax.jit(rl.max_at_k, static_argnums=1)(jnp.asarray(WITH_MISSING), k)) == (
            pytest.approx(want, rel=1e-6)
        )
    # binary: 1 success among the 4 finite samples; pass@2 = 1 - C(3, 2) / C(4, 2) = 1/2
    binary = jnp.array([1.0, NAN, 0.0, 0.0, INF, 0.0])
    with pytest.warns(UserWarning) as record:  # issue 29 item 6: the caller is told
        assert float(rl.pass_at_k(binary, 2)) == pytest.approx(0.5, rel=1e-6)
    assert [str(w.message) for w in record] == [
        "pass_at_k: 2 of 6 rewards are non-finite (nan/inf) and were excluded as missing "
        "samples (first at index 1); the estimate uses the 4 finite ones"
    ]
    assert float(jax.jit(rl.pass_at_k, static_argnums=1)(binary, 2)) == pytest.approx(0.5)
    finite = jnp.array([1.0, 0.0, 0.0, 0.0])
    for baseline in ("none", "loo-1"):
        for k in (1, 2, 3):
            if baseline == "none" or k >= 1:
                got = rl.pass_at_k_effective_rewards(binary, k, baseline)
                want = rl.pass_at_k_effective_rewards(finite, k, baseline)
                np.testing.assert_allclose(np.asarray(got)[[0, 2, 3, 5]], want, rtol=1e-6)
                assert float(got[1]) == 0.0 and float(got[4]) == 0.0


def test_dpo_pair_never_picks_a_non_finite_reward():
    chosen, rejected, valid = rl.dpo_pair(jnp.asarray(WITH_MISSING))
    assert (int(chosen), int(rejected), float(valid)) == (3, 2, 1.0)
    chosen, rejected, valid = jax.jit(rl.dpo_pair)(jnp.array([NAN, 0.5, INF, 0.5]))
    assert float(valid) == 0.0 and int(chosen) == 1 and int(rejected) == 1
    assert float(rl.dpo_pair(jnp.array([NAN, 2.0, NAN]))[2]) == 0.0
    assert float(rl.dpo_pair(jnp.full(3, NAN))[2]) == 0.0


# ----------------------------------------------------------------------------- binary inputs


@pytest.mark.parametrize("fn", [rl.pass_at_k, rl.pass_at_k_effective_rewards])
def test_binary_estimators_reject_non_binary_rewards(fn):
    graded = jnp.array([0.95, 0.3, 0.0, -1.0])  # issue 17 item 13: was thresholded at 0.5
    with pytest.raises(ValueError, match=r"must be binary .*0\.95.* index 0 .*threshold"):
        fn(graded, 2)
    # traced: cannot raise, the result is nan instead of a silently thresholded value
    got = jax.jit(fn, static_argnums=1)(graded, 2)
    assert np.all(np.isnan(np.asarray(got)))
    # explicit threshold: successes are the rewards > t
    as_binary = jnp.array([1.0, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(fn(graded, 2, threshold=0.5), fn(as_binary, 2), rtol=1e-6)
    np.testing.assert_allclose(
        fn(graded, 2, threshold=0.2), fn(jnp.array([1.0, 1, 0, 0]), 2), rtol=1e-6
    )
    # bool and exact 0/1 input still pass without a threshold
    np.testing.assert_allclose(fn(jnp.array([True, False, False, False]), 2), fn(as_binary, 2))


# ----------------------------------------------------------------------------- ties


# every per-sample estimator with a baseline, plus group norm at k = n with eps = 0
TIE_FNS = [p for p in PER_SAMPLE if p[0] != "eff_none_k2"] + [
    ("pkpo_k8_norm_eps0", functools.partial(rl.pkpo_advantages, k=8, group_norm=True, eps=0.0)),
]


@pytest.mark.parametrize("name,fn", TIE_FNS, ids=[p[0] for p in TIE_FNS])
def test_tied_group_gives_exact_zeros(name, fn):
    for value in (0.35, 10.35, -1e6 + 0.1, 3e-30, 0.0, 1e30):
        got = np.asarray(fn(jnp.full(8, value, jnp.float32)))
        np.testing.assert_array_equal(got, np.zeros(8), err_msg=f"{name} at {value}")


def test_one_ulp_apart_group_sums_to_zero():
    """Issue 17: eight 10.35 with one an ulp higher gave all-positive GRPO advantages (sum 0.49)."""
    r = np.full(8, 10.35, np.float32)
    r[3] = np.nextafter(r[3], np.float32(11.0))
    r = jnp.asarray(r)
    for fn in (rl.rloo_advantages, rl.grpo_advantages):
        assert abs(float(jnp.sum(fn(r)))) < 1e-6
    # a spread within TIE_ULPS ulps is rounding: the std-normalised estimators treat it as a tie
    np.testing.assert_array_equal(rl.grpo_advantages(r), np.zeros(8))
    np.testing.assert_array_equal(rl.pkpo_advantages(r, 2, group_norm=True), np.zeros(8))
    # rloo's advantages stay proportional to the (tiny) differences
    assert float(jnp.max(jnp.abs(rl.rloo_advantages(r)))) < 1e-6


# Hypothesis: dyadic rewards (k / 64) so that offsets and power-of-two scales are exact in
# float32; then the min-centred estimators are exactly offset-invariant and scale-equivariant.
dyadic = st.lists(st.integers(-1024, 1024), min_size=2, max_size=9).map(
    lambda xs: np.asarray(xs, np.float32) / 64.0
)
offsets = st.integers(-1024, 1024).map(lambda b: np.float32(b / 64.0))
pow2 = st.integers(-8, 8).map(lambda p: np.float32(2.0**p))
general = st.lists(
    st.floats(-1e3, 1e3, width=32, allow_subnormal=False), min_size=2, max_size=9
).map(lambda xs: np.asarray(xs, np.float32))
PROPERTY = settings(max_examples=20, deadline=None)  # each example compiles: keep make test fast


def _estimators(n):
    """(name, fn, sums_to_zero, scale_power): output scales as ``a ** scale_power``."""
    out = [
        ("rloo", rl.rloo_advantages, True, 1),
        ("grpo", functools.partial(rl.grpo_advantages, eps=0.0), True, 0),
    ]
    for k in sorted({1, 2, n}):
        out.append((f"pkpo_k{k}", functools.partial(rl.pkpo_advantages, k=k), k == 1, 1))
        out.append(
            (
                f"pkpo_k{k}_norm",
                functools.partial(rl.pkpo_advantages, k=k, group_norm=True, eps=0.0),
                k == 1,
                0,
            )
        )
    return out


@PROPERTY
@given(r=dyadic, b=offsets, a=pow2)
def test_property_offset_invariance_and_scale_equivariance(r, b, a):
    for name, fn, _, power in _estimators(len(r)):
        base = np.asarray(fn(jnp.asarray(r)))
        np.testing.assert_array_equal(np.asarray(fn(jnp.asarray(r + b))), base, err_msg=name)
        np.testing.assert_array_equal(
            np.asarray(fn(jnp.asarray(r * a))), base * a**power, err_msg=name
        )


@PROPERTY
@given(r=general)
@example(r=np.array([0.0, 1.1754944e-38], np.float32))  # spread at the smallest normal: std -> 0
def test_property_zero_sum_and_sign(r):
    spread = float(r.max() - r.min())
    for name, fn, sums_to_zero, power in _estimators(len(r)):
        adv = np.asarray(fn(jnp.asarray(r)), np.float64)
        assert np.all(np.isfinite(adv)), name
        if sums_to_zero:
            # rounding relative to the spread (power 1) or to the normalised scale (power 0)
            tol = 1e-5 * (spread if power == 1 else 1.0) + 1e-30
            assert abs(adv.sum()) <= tol, (name, adv.sum(), tol)
        if name.startswith("pkpo_k") and not name.startswith("pkpo_k1"):
            assert np.all(adv >= 0.0), name


@PROPERTY
@given(
    value=st.floats(-1e6, 1e6, width=32),
    n=st.integers(2, 9),
    b=st.floats(-1e3, 1e3, width=32),
    a=st.floats(2.0**-10, 2.0**10, width=32),
)
def test_property_ties_exactly_zero_at_any_offset_and_scale(value, n, b, a):
    tied = np.full(n, value, np.float32)
    for shifted in (tied, tied + np.float32(b), tied * np.float32(a)):
        for name, fn, _, _ in _estimators(n):
            np.testing.assert_array_equal(
                np.asarray(fn(jnp.asarray(shifted))), np.zeros(n), err_msg=name
            )


@PROPERTY
@given(r=general, b=st.floats(-1e2, 1e2, width=32))
def test_property_grpo_offset_invariance_within_rounding(r, b):
    """Any floats: GRPO(r + b) = GRPO(r) up to the rounding of r + b relative to the spread."""
    shifted = (r + np.float32(b)).astype(np.float32)
    spread = float(r.max() - r.min())
    scale = float(np.abs(shifted).max() + np.abs(r).max())
    assume(spread > 1e3 * np.finfo(np.float32).eps * scale)
    tol = 100 * np.finfo(np.float32).eps * scale / spread
    got = np.asarray(rl.grpo_advantages(jnp.asarray(shifted), eps=0.0))
    np.testing.assert_allclose(got, rl.grpo_advantages(jnp.asarray(r), eps=0.0), atol=tol)
