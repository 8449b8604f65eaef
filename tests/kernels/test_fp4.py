"""Bit-exactness of the NVFP4 fake quantiser against ml_dtypes."""

import functools

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from fidia_jax.kernels import fake_quant_nvfp4, round_to_e2m1, round_to_e4m3


def _grid_and_ties(values):
    values = np.asarray(sorted(values), np.float32)
    mids = (values[1:] + values[:-1]) / 2
    eps = np.float32(1e-3)
    xs = np.concatenate([values, mids, mids - eps * mids, mids + eps * mids])
    return np.concatenate([xs, -xs]).astype(np.float32)


def test_e2m1_bit_exact_including_ties_and_saturation():
    grid = [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    xs = np.concatenate([_grid_and_ties(grid), np.float32([6.5, 7.0, 1e4, -9.0, 5.0, 0.25, 0.75])])
    rng = np.random.default_rng(0)
    xs = np.concatenate([xs, rng.normal(scale=3.0, size=2000).astype(np.float32)])
    want = xs.astype(ml_dtypes.float4_e2m1fn).astype(np.float32)
    got = np.asarray(jax.jit(round_to_e2m1)(xs))
    np.testing.assert_array_equal(got, want)
    # spot-check the tie rule explicitly: 0.25->0, 0.75->1, 2.5->2, 3.5->4, 5->4
    np.testing.assert_array_equal(
        np.asarray(round_to_e2m1(jnp.float32([0.25, 0.75, 2.5, 3.5, 5.0]))), [0, 1, 2, 4, 4]
    )


def test_e4m3_bit_exact_including_subnormals_ties_and_max():
    vals = np.float32(
        [i * 2.0**-9 for i in range(8)]
        + [2.0**e * (1 + m / 8) for e in range(-6, 9) for m in range(8)]
    )
    vals = vals[vals <= 448]
    xs = np.concatenate(
        [_grid_and_ties(vals), np.float32([448.0, 450.0, 460.0, 3 * 2.0**-10, 2.0**-10])]
    )
    rng = np.random.default_rng(1)
    xs = np.concatenate([xs, np.exp(rng.uniform(-12, 6, size=2000)).astype(np.float32)])
    want = xs.astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
    got = np.asarray(jax.jit(round_to_e4m3)(xs))
    np.testing.assert_array_equal(got, want)
    # above the largest finite value we saturate (ml_dtypes gives NaN past 464)
    assert float(round_to_e4m3(jnp.float32(1000.0))) == 448.0


def _blocks(dtype):
    x = np.asarray(jax.random.normal(jax.random.key(0), (3, 5, 64)) * 4).astype(np.float32)
    x[0, 0, :16] = 0.0  # all-zero block
    x[1, 1, 16:32] *= 1e-4  # tiny block (scale in the e4m3 subnormal range)
    return np.asarray(jnp.asarray(x, dtype).astype(jnp.float32))


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_reciprocal_rounding_equals_numpy_multiply_by_float32_reciprocal(dtype):
    """Default rule: e2m1(x * float32(1/scale)) * scale, emulated with numpy + ml_dtypes; for
    bf16 it differs from the exact-quotient rule on some ties (so the two rules are distinct)."""
    x = _blocks(dtype)
    xb = x.reshape(3, 5, 4, 16)
    scale = (
        (np.abs(xb).max(-1, keepdims=True) / 6).astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
    )
    inv = np.where(scale > 0, np.float32(1) / np.where(scale > 0, scale, 1), np.float32(1))
    y = (xb * inv).astype(np.float32)
    want = np.minimum(np.abs(y), 6).astype(ml_dtypes.float4_e2m1fn).astype(np.float32) * scale
    want = np.where(np.signbit(xb), -want, want).reshape(x.shape)
    got = np.asarray(jax.jit(fake_quant_nvfp4)(jnp.asarray(x, dtype)).astype(jnp.float32))
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    exact = np.asarray(fake_quant_nvfp4(jnp.asarray(x, dtype), rounding="exact"), np.float32)
    if dtype == jnp.bfloat16:
        assert np.count_nonzero(exact != got) > 0  # ties of bf16 inputs round differently
    with pytest.raises(ValueError, match="rounding"):
        fake_quant_nvfp4(jnp.asarray(x), rounding="nearest")


def test_reciprocal_table_is_correctly_rounded():
    from fidia_jax.kernels._fp4 import _e4m3_reciprocal

    vals = np.float32(
        [i * 2.0**-9 for i in range(1, 8)]
        + [2.0**e * (1 + m / 8) for e in range(-6, 9) for m in range(8)]
    )
    vals = vals[vals <= 448]
    np.testing.assert_array_equal(
        np.asarray(jax.jit(_e4m3_reciprocal)(jnp.asarray(vals))), np.float32(1) / vals
    )


def test_signed_zeros_follow_the_input():
    x = np.zeros((3, 16), np.float32)
    x[0, :2] = [-0.0, 0.0]  # all-zero block: -0 stays -0
    x[1] = 1e-30  # scale rounds to 0: the block is zeros with the sign of x
    x[1, 3] = -1e-30
    x[2, 0], x[2, 1] = 6.0, -0.01  # -0.01 rounds to 0 within its block: -0
    for rounding in ("reciprocal", "exact"):
        got = np.asarray(fake_quant_nvfp4(jnp.asarray(x), rounding=rounding))
        np.testing.assert_array_equal(got[:2], 0.0)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(x))


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_fake_quant_matches_ml_dtypes_blockwise(dtype):
    """rounding="exact": e2m1 of the exact quotient x / scale, bit-exact against ml_dtypes."""
    x = _blocks(dtype)
    xb = x.reshape(3, 5, 4, 16)
    scale = (
        (np.abs(xb).max(-1, keepdims=True) / 6).astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
    )
    safe = np.where(scale > 0, scale, 1)
    want = np.where(
        scale > 0, (xb / safe).astype(ml_dtypes.float4_e2m1fn).astype(np.float32) * scale, 0
    )
    got = jax.jit(functools.partial(fake_quant_nvfp4, rounding="exact"))(jnp.asarray(x, dtype))
    assert got.dtype == dtype
    np.testing.assert_array_equal(
        np.asarray(got.astype(jnp.float32)),
        np.asarray(jnp.asarray(want.reshape(x.shape), dtype).astype(jnp.float32)),
    )
    # along another axis: same as moving that axis last
    got0 = fake_quant_nvfp4(jnp.asarray(x).transpose(2, 0, 1), axis=0)
    np.testing.assert_array_equal(
        np.asarray(got0).transpose(1, 2, 0), np.asarray(fake_quant_nvfp4(jnp.asarray(x)))
    )
    with pytest.raises(ValueError, match="multiple of 16"):
        fake_quant_nvfp4(jnp.ones((3, 20)))


def test_scale_is_rounded_from_exact_quotient():
    """amax values whose amax/6 sits on an e4m3 midpoint: ties to even, no division error."""
    from fidia_jax.kernels._fp4 import _e4m3_of_sixth

    mids = np.float32([1.0625, 1.1875, 0.53125, 3 * 2.0**-10, 2.0**-10, 1.9375, 416.0 + 16.0])
    amax = mids * 6
    want = mids.astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(jax.jit(_e4m3_of_sixth)(amax)), want)


# ---------------------------------------------------------------- non-finite inputs (issue 17.14)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_element_stays_visible_and_leaves_its_block_alone(bad):
    """One NaN/Inf in a 16-element block: it is returned as is, and the other 15 elements
    quantise exactly as if it were absent (a NaN used to zero the whole block)."""
    rng = np.random.default_rng(3)
    x = rng.normal(scale=2.0, size=(3, 32)).astype(np.float32)
    x[1, 5] = bad
    got = np.asarray(fake_quant_nvfp4(jnp.asarray(x)))
    if np.isnan(bad):
        assert np.isnan(got[1, 5])
    else:
        assert got[1, 5] == bad
    # the block without the bad element, quantised on its own (the gap filled by a 0, which
    # changes neither amax nor the others' values)
    clean = x.copy()
    clean[1, 5] = 0.0
    want = np.asarray(fake_quant_nvfp4(jnp.asarray(clean)))
    mask = np.ones_like(x, bool)
    mask[1, 5] = False
    np.testing.assert_array_equal(got[mask], want[mask])
    assert np.count_nonzero(got[1, :16]) >= 10  # the block is not zeroed


def test_all_non_finite_block_and_rounders():
    x = jnp.full((16,), jnp.nan).at[3].set(jnp.inf)
    got = np.asarray(fake_quant_nvfp4(x))
    assert np.isnan(np.delete(got, 3)).all() and got[3] == np.inf
    for fn in (round_to_e2m1, round_to_e4m3):
        out = np.asarray(fn(jnp.float32([np.nan, np.inf, -np.inf, 1.0])))
        assert np.isnan(out[0]) and out[1] == np.inf and out[2] == -np.inf and out[3] == 1.0
