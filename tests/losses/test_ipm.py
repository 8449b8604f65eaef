"""The IPMs between weighted samples against closed forms and brute force."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from fidia_jax import losses


def _arm_w(t, k):
    w = (t == k).astype(np.float64)
    return w / w.sum()


def _rbf_mmd2_brute(x, a, b, sigma):
    n = len(x)
    total = 0.0
    for i in range(n):
        for j in range(n):
            kij = np.exp(-np.sum((x[i] - x[j]) ** 2) / (2 * sigma**2))
            total += (a[i] - b[i]) * (a[j] - b[j]) * kij
    return total


@pytest.fixture(scope="module")
def batch():
    rng = np.random.default_rng(0)
    t = np.array([0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2])
    x = rng.normal(size=(12, 3)) + t[:, None] * 0.5
    return x.astype(np.float32), t


def test_mmd_linear_closed_form_and_rbf_brute_force(batch):
    x, t = batch
    a, b = _arm_w(t, 0), _arm_w(t, 1)
    want = np.sum((x[t == 0].mean(0) - x[t == 1].mean(0)) ** 2)
    np.testing.assert_allclose(losses.mmd2_linear(x, a, b), want, rtol=1e-5)
    np.testing.assert_allclose(
        losses.mmd2_rbf(x, a, b, bandwidth=0.7), _rbf_mmd2_brute(x, a, b, 0.7), rtol=1e-4
    )


def test_wasserstein1_matches_exact_1d():
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.normal(size=8), rng.normal(2.0, 1.0, size=8)])[:, None]
    a = np.r_[np.full(8, 1 / 8), np.zeros(8)]
    b = np.r_[np.zeros(8), np.full(8, 1 / 8)]
    exact = scipy.stats.wasserstein_distance(x[:8, 0], x[8:, 0])
    got = losses.wasserstein1_sinkhorn(
        jnp.asarray(x, jnp.float32), a, b, epsilon=5e-3, max_iterations=300
    )
    np.testing.assert_allclose(got, exact, rtol=0.05)
    grad = jax.grad(lambda z: losses.wasserstein1_sinkhorn(z, a, b))(jnp.asarray(x, jnp.float32))
    assert np.all(np.isfinite(grad)) and np.any(grad != 0)


def test_bad_bandwidth_raises(batch):
    x, t = batch
    with pytest.raises(ValueError, match="bandwidth"):
        losses.mmd2_rbf(x, _arm_w(t, 0), _arm_w(t, 1), bandwidth=0.0)
