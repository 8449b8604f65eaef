"""The K-arm balancing schemes (on the IPMs of fidia_jax.losses) against brute force, and the
plug-in alpha."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax import losses as ipms
from fidia_jax.projects.causal import losses


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


def test_pairwise_and_one_vs_all_brute_force(batch):
    x, t = batch
    for ipm in ("mmd_linear", "mmd_rbf"):
        pairs = [
            ipms.ipm(ipm, x, _arm_w(t, k), _arm_w(t, l))
            for k, l in itertools.combinations(range(3), 2)
        ]
        np.testing.assert_allclose(
            losses.balancing_pairwise(x, t, 3, ipm_name=ipm), np.mean(pairs), rtol=1e-5
        )
        rest = [ipms.ipm(ipm, x, _arm_w(t, k), (t != k) / np.sum(t != k)) for k in range(3)]
        np.testing.assert_allclose(
            losses.balancing_one_vs_all(x, t, 3, ipm_name=ipm), np.mean(rest), rtol=1e-5
        )


def test_two_arms_all_schemes_reduce_to_cfr_term(batch):
    x, t = batch
    keep = t < 2
    x2, t2 = x[keep], t[keep]
    cfr = ipms.mmd2_rbf(x2, _arm_w(t2, 0), _arm_w(t2, 1), bandwidth=None)  # median width
    np.testing.assert_allclose(losses.balancing_pairwise(x2, t2, 2), cfr, rtol=1e-5)
    np.testing.assert_allclose(losses.balancing_one_vs_all(x2, t2, 2), cfr, rtol=1e-5)


def test_aggregation_is_one_ipm_of_joint_vs_permuted(batch):
    x, t = batch
    key = jax.random.key(3)
    perm = np.asarray(jax.random.permutation(key, len(t)))
    e = np.eye(3)[t]
    cloud = np.concatenate([np.c_[x, e], np.c_[x, e[perm]]])
    n = len(t)
    a = np.r_[np.full(n, 1 / n), np.zeros(n)]
    b = np.r_[np.zeros(n), np.full(n, 1 / n)]
    got = losses.balancing_treatment_aggregation(x, t, 3, key, bandwidth=1.0)
    np.testing.assert_allclose(got, _rbf_mmd2_brute(cloud, a, b, 1.0), rtol=1e-4)
    # Separated arms are penalised more than arms whose representation ignores t.
    far = x + 5.0 * t[:, None]
    same = np.tile(x[:4], (3, 1))  # each arm holds the same 4 points
    t_same = np.repeat(np.arange(3), 4)
    keys = jax.random.split(jax.random.key(0), 8)
    v_far = np.mean(
        [losses.balancing_treatment_aggregation(far, t, 3, k, bandwidth=1.0) for k in keys]
    )
    v_same = np.mean(
        [losses.balancing_treatment_aggregation(same, t_same, 3, k, bandwidth=1.0) for k in keys]
    )
    assert v_far > 3 * v_same


def test_absent_arm_pairs_are_skipped_not_nan(batch):
    x, t = batch
    t_missing = np.where(t == 2, 1, t)  # arm 2 absent from this batch
    got = losses.balancing_pairwise(x, t_missing, 3)
    want = ipms.mmd2_rbf(x, _arm_w(t_missing, 0), _arm_w(t_missing, 1), bandwidth=None)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert float(losses.balancing_one_vs_all(x, np.zeros(12, int), 3)) == 0.0
    grads = jax.grad(lambda z: losses.balancing_pairwise(z, t_missing, 3))(jnp.asarray(x))
    assert np.all(np.isfinite(grads))


def test_bad_inputs_raise(batch):
    x, t = batch
    with pytest.raises(ValueError, match="num_arms >= 2"):
        losses.balancing_pairwise(x, np.zeros(12, int), 1)
    with pytest.raises(ValueError, match="treatments must be"):
        losses.balancing_one_vs_all(x, t[:5], 3)
    with pytest.raises(ValueError, match="unknown balancing scheme"):
        losses.balancing_loss("nope", x, t, 3, jax.random.key(0))


def test_arm_id_out_of_range_is_an_error_not_a_dropped_unit(batch):
    x, t = batch
    t_bad = t.copy()
    t_bad[7] = 3  # num_arms = 3: ids must be 0, 1, 2
    for scheme in losses.SCHEMES:
        with pytest.raises(ValueError, match=r"outside \[0, 3\) \(num_arms=3\): t_N\[7\] = 3"):
            losses.balancing_loss(scheme, x, t_bad, 3, jax.random.key(0))
    with pytest.raises(ValueError, match=r"t_N\[2\] = -1"):
        losses.arm_weights(np.where(np.arange(12) == 2, -1, t), 3)
    with pytest.raises(ValueError, match="must be integers"):
        losses.balancing_pairwise(x, t.astype(np.float32), 3)
    # under jit the ids are traced: the loss is NaN (a training loop stops), never finite
    for scheme in losses.SCHEMES:
        f = jax.jit(lambda z, tt, s=scheme: losses.balancing_loss(s, z, tt, 3, jax.random.key(0)))
        assert np.isfinite(float(f(x, t)))
        assert np.isnan(float(f(x, t_bad)))
    w, _ = jax.jit(lambda tt: losses.arm_weights(tt, 3))(t_bad)
    assert np.isnan(np.asarray(w)).all()


def test_estimate_alpha_is_median_gradient_norm():
    g = np.array([[3.0, 4.0], [0.0, 1.0], [6.0, 8.0]])
    np.testing.assert_allclose(losses.estimate_alpha(g), 5.0)
    np.testing.assert_allclose(losses.estimate_alpha(g, quantile=1.0), 10.0)
    with pytest.raises(ValueError, match="NaN"):
        losses.estimate_alpha(np.array([[np.nan, 1.0]]))
