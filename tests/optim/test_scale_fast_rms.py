"""The row-blocked column RMS of ``optim.column_rms_normalize`` (issue 44).

For fan-in axes that lead (every Flax default case) the sum of squares is a loop over blocks of
rows (``_sum_squares_leading``) instead of XLA's reduce over a leading axis, which strides
across rows and was many times slower on a (768, 32000) head. Only the order of the additions
changes.

Tolerance, from the summation: the squares are non-negative, so a sum of ``n`` of them computed
in any order in a dtype with unit roundoff ``u`` has relative error at most ``(n + 1) u``
(``n - 1`` additions and the squaring). The loop's longest chain of additions is
``ceil(R / 8) + 8 + R % 8`` for ``R`` reduced rows (8 interleaved running sums, then their sum,
then the leftover rows). The normalised entries divide by ``sqrt`` of the mean, which halves
the relative error and adds a few roundings (mean, sqrt, divide): ``(n / 2 + 4) u``.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax import optim
from fidia_jax.optim import _scale

U32 = 2.0**-24  # float32 unit roundoff


def chain_length(rows: int) -> int:
    block = _scale._ROW_BLOCK
    return math.ceil(rows / block) + block + rows % block


SHAPES = [(3, 5), (8, 4), (37, 6), (64, 33), (6, 2, 9), (500, 3)]


@pytest.mark.parametrize("shape", SHAPES)
def test_sum_squares_within_summation_bound(shape):
    rng = np.random.default_rng(len(shape) * 100 + shape[0])
    g = rng.standard_normal(shape).astype(np.float32) * rng.uniform(0.1, 10, shape[-1])
    n_lead = len(shape) - 1
    ss = np.asarray(_scale._sum_squares_leading(jnp.asarray(g), n_lead, jnp.float32))
    exact = np.sum(np.asarray(g, np.float64) ** 2, axis=tuple(range(n_lead)))
    rows = math.prod(shape[:n_lead])
    bound = (chain_length(rows) + 1) * U32
    assert ss.shape == exact.shape and ss.dtype == np.float32
    np.testing.assert_array_less(np.abs(ss - exact) / exact, bound)


@pytest.mark.parametrize("shape", SHAPES)
def test_normalize_within_bound_of_exact(shape):
    rng = np.random.default_rng(7 + shape[0])
    g = rng.standard_normal(shape).astype(np.float32) * rng.uniform(0.1, 10, shape[-1])
    axes = tuple(range(len(shape) - 1))
    u = np.asarray(optim.column_rms_normalize(jnp.asarray(g), axes))
    g64 = np.asarray(g, np.float64)
    exact = g64 / np.sqrt(np.mean(g64**2, axis=axes, keepdims=True))
    rows = math.prod(shape[:-1])
    bound = (chain_length(rows) / 2 + 4) * U32
    np.testing.assert_array_less(np.abs(u - exact), bound * np.abs(exact) + 1e-30)


def test_zero_columns_and_bf16_stay_finite_and_exact():
    g = jnp.zeros((19, 3), jnp.bfloat16).at[:, 1].set(2.0)
    u = optim.column_rms_normalize(g, (0,))
    assert u.dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(u, np.float32)[:, 0], 0.0)
    np.testing.assert_array_equal(np.asarray(u, np.float32)[:, 1], 1.0)  # constant column


def test_float64_stays_float64():
    with jax.enable_x64(True):
        g = jnp.asarray(np.random.default_rng(0).standard_normal((21, 4)))
        ss = _scale._sum_squares_leading(g, 1, jnp.float64)
        assert ss.dtype == jnp.float64
        np.testing.assert_allclose(np.asarray(ss), np.sum(np.asarray(g) ** 2, 0), rtol=1e-14)


def test_non_leading_axes_use_the_plain_mean():
    g = jnp.asarray(np.random.default_rng(3).standard_normal((4, 5, 6)).astype(np.float32))
    u = optim.column_rms_normalize(g, (1,))
    want = g / jnp.maximum(jnp.sqrt(jnp.mean(g * g, axis=(1,), keepdims=True)), 1e-8)
    np.testing.assert_array_equal(np.asarray(u), np.asarray(want))


def test_row_loop_only_on_cpu_and_leading_axes():
    g = jnp.ones((64, 8, 3))
    lead = str(jax.make_jaxpr(lambda x: optim.column_rms_normalize(x, (0, 1)))(g))
    other = str(jax.make_jaxpr(lambda x: optim.column_rms_normalize(x, (1,)))(g))
    # fori_loop with a static trip count is a scan in the jaxpr
    assert ("scan" in lead or "while" in lead) == (jax.default_backend() == "cpu")
    assert "scan" not in other and "while" not in other
