"""Statistical and exactness tests of the SANTA jnp reference (fidia_jax.kernels.santa)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax.kernels.santa import reference as R

B, HQ, HKV, D, BK, ST = 2, 4, 2, 8, 32, 4
N = 96
LENGTHS = jnp.array([96, 50], jnp.int32)
SEEDS = 4096


def _ar1(key, shape, rho, axis=1):
    """Gaussian AR(1) along ``axis`` (smooth along key positions, like real cached states)."""
    e = np.asarray(jax.random.normal(key, shape))
    x = np.empty_like(e)
    idx = [slice(None)] * len(shape)
    idx[axis] = 0
    x[tuple(idx)] = e[tuple(idx)]
    for t in range(1, shape[axis]):
        cur = list(idx)
        prev = list(idx)
        cur[axis], prev[axis] = t, t - 1
        x[tuple(cur)] = rho * x[tuple(prev)] + np.sqrt(1 - rho**2) * e[tuple(cur)]
    return jnp.asarray(x)


@pytest.fixture(scope="module")
def qkv():
    k1, k2, k3 = jax.random.split(jax.random.key(1), 3)
    q = 1.5 * jax.random.normal(k1, (B, HQ, D))
    k = _ar1(k2, (B, N, HKV, D), 0.8)
    v = _ar1(k3, (B, N, HKV, D), 0.95)
    return q, k, v


@pytest.fixture(scope="module")
def seed_estimates(qkv):
    """SANTA estimates for SEEDS independent uniform draws, per method: (SEEDS, B, HQ, D)."""
    q, k, v = qkv
    out = {}
    for method in R.METHODS:
        keys = jax.random.split(jax.random.key(7), SEEDS)
        shape = R.uniform_shape(B, HQ, N, block_k=BK, samples_per_tile=ST, method=method)
        unif = jax.vmap(lambda kk, s=shape: jax.random.uniform(kk, s))(keys)
        f = jax.jit(
            jax.vmap(
                lambda u, m=method: R.santa_decode_reference(
                    q, k, v, u, LENGTHS, samples_per_tile=ST, method=m, block_k=BK
                )
            )
        )
        out[method] = np.asarray(f(unif), np.float64)
    return out


def test_flash_decode_equals_dense(qkv):
    q, k, v = qkv
    dense = R.dense_decode_reference(q, k, v, LENGTHS)
    for bk in (32, 40):  # 40 does not divide N: exercises padding
        flash = R.flash_decode_reference(q, k, v, LENGTHS, block_k=bk)
        np.testing.assert_allclose(flash, dense, atol=2e-6, rtol=1e-6)
    # brute force for one head of the short row: softmax over the first 50 keys of kv head 1
    s = np.asarray(k[1, :50, 1], np.float64) @ np.asarray(q[1, 3], np.float64) / np.sqrt(D)
    p = np.exp(s - s.max())
    p /= p.sum()
    np.testing.assert_allclose(dense[1, 3], p @ np.asarray(v[1, :50, 1], np.float64), atol=2e-6)


@pytest.mark.parametrize(
    "method",
    [
        pytest.param("iid", marks=pytest.mark.slow),
        "stratified",
        pytest.param("systematic", marks=pytest.mark.slow),
    ],
)  # all three are covered at tile level by test_tile_counts_sum_to_budget_and_match_indices
def test_counts_and_gather_value_stages_agree(qkv, method):
    q, k, v = qkv
    u = R.make_uniforms(jax.random.key(3), B, HQ, N, block_k=BK, samples_per_tile=ST, method=method)
    kw = dict(samples_per_tile=ST, method=method, block_k=BK)
    a = R.santa_decode_reference(q, k, v, u, LENGTHS, value_stage="counts", **kw)
    b = R.santa_decode_reference(q, k, v, u, LENGTHS, value_stage="gather", **kw)
    np.testing.assert_allclose(a, b, atol=2e-6)
    assert float(jnp.max(jnp.abs(a - R.dense_decode_reference(q, k, v, LENGTHS)))) > 1e-3


@pytest.mark.parametrize("method", R.METHODS)
def test_tile_counts_sum_to_budget_and_match_indices(method):
    g, n = 3, 16
    key = jax.random.key(11)
    u = jnp.exp(2 * jax.random.normal(key, (g, n)))
    u = u.at[:, -3:].set(0.0)  # invalid tail
    ell = jnp.sum(u, axis=-1)
    s = 1 if method == "systematic" else 5
    unif = jax.random.uniform(jax.random.key(12), (g, s))
    c = R.tile_counts(u, ell, unif, samples_per_tile=5, method=method)
    np.testing.assert_array_equal(np.sum(c, axis=-1), 5)
    assert float(jnp.sum(c[:, -3:])) == 0
    full = jnp.broadcast_to(unif, (g, 5)) if method == "systematic" else unif
    idx, ok = R.tile_sample_indices(u, ell, full, samples_per_tile=5, method=method)
    hist = jax.vmap(lambda i, o: jnp.zeros(n).at[i].add(o.astype(jnp.float32)))(idx, ok)
    np.testing.assert_array_equal(hist, c)


@pytest.mark.parametrize("method", R.METHODS)
def test_estimator_is_unbiased(qkv, seed_estimates, method):
    q, k, v = qkv
    dense = np.asarray(R.dense_decode_reference(q, k, v, LENGTHS), np.float64)
    est = seed_estimates[method]
    std = est.std(axis=0) + 1e-9
    z = np.abs(est.mean(axis=0) - dense) / (std / np.sqrt(SEEDS))
    assert z.max() < 5.0, z.max()
    # error of the seed mean shrinks like 1/sqrt(seeds): 16x more seeds -> ~4x smaller
    err_small = np.sqrt(np.mean((est[:256].mean(axis=0) - dense) ** 2))
    err_big = np.sqrt(np.mean((est.mean(axis=0) - dense) ** 2))
    assert err_big < err_small / 2.0, (err_small, err_big)
    # and it is not trivially zero: a single estimate is noisy
    assert np.sqrt(np.mean((est[0] - dense) ** 2)) > 10 * err_big


def test_variance_ordering(seed_estimates):
    """systematic <= stratified <= iid (total variance over all outputs)."""
    var = {m: float(seed_estimates[m].var(axis=0).sum()) for m in R.METHODS}
    assert var["systematic"] <= var["stratified"] <= var["iid"], var
    assert var["stratified"] < 0.8 * var["iid"], var


def test_systematic_full_budget_exact_on_uniform_rows():
    """S_t = tile length and equal scores: every row is drawn exactly once -> exact mean."""
    k1, k2, k3 = jax.random.split(jax.random.key(5), 3)
    q = jnp.zeros((B, HQ, D))
    k = jax.random.normal(k1, (B, 64, HKV, D))
    v = jax.random.normal(k2, (B, 64, HKV, D))
    u = R.make_uniforms(k3, B, HQ, 64, block_k=BK, samples_per_tile=BK, method="systematic")
    est = R.santa_decode_reference(q, k, v, u, samples_per_tile=BK, method="systematic", block_k=BK)
    np.testing.assert_allclose(est, R.dense_decode_reference(q, k, v), atol=1e-6)


def test_systematic_error_bound(qkv):
    """|error| <= Σ_t (w_t/Z) TV_t(v) / S_t, per coordinate (Abel summation; prefix error < 1)."""
    q, k, v = qkv
    q1, k1, v1 = q[:1, :1], k[:1, :, :1], v[:1, :, :1]  # one head, full length
    dense = np.asarray(R.dense_decode_reference(q1, k1, v1), np.float64)[0, 0]
    s = np.asarray(k1[0, :, 0], np.float64) @ np.asarray(q1[0, 0], np.float64) / np.sqrt(D)
    p = np.exp(s - s.max())
    vv = np.asarray(v1[0, :, 0], np.float64)
    bound = np.zeros(D)
    for t in range(N // BK):
        sl = slice(t * BK, (t + 1) * BK)
        bound += p[sl].sum() / p.sum() * np.abs(np.diff(vv[sl], axis=0)).sum(axis=0) / ST
    for seed in range(8):
        u = R.make_uniforms(
            jax.random.key(seed), 1, 1, N, block_k=BK, samples_per_tile=ST, method="systematic"
        )
        est = np.asarray(
            R.santa_decode_reference(
                q1, k1, v1, u, samples_per_tile=ST, method="systematic", block_k=BK
            )
        )[0, 0]
        assert np.all(np.abs(est - dense) <= bound + 1e-5)


def test_ternary_query_unbiased():
    q = jax.random.normal(jax.random.key(0), (3, D))
    kk = jax.random.normal(jax.random.key(1), (5, D))
    unif = jax.random.uniform(jax.random.key(2), (SEEDS, 3, D))
    qt = np.asarray(jax.vmap(R.ternary_query, in_axes=(None, 0))(q, unif), np.float64)
    c = np.abs(np.asarray(q)).max(axis=-1, keepdims=True)
    assert set(np.unique(np.round(np.abs(qt) / c, 6))) <= {0.0, 1.0}
    scores = qt @ np.asarray(kk, np.float64).T
    exact = np.asarray(q, np.float64) @ np.asarray(kk, np.float64).T
    z = np.abs(scores.mean(0) - exact) / (scores.std(0) / np.sqrt(SEEDS) + 1e-9)
    assert z.max() < 5.0
    # sparsity: some coordinates are dropped on average
    assert 0.0 < np.mean(qt == 0) < 1.0


def test_bf16_inputs(qkv):
    q, k, v = qkv
    u = R.make_uniforms(
        jax.random.key(3), B, HQ, N, block_k=BK, samples_per_tile=ST, method="stratified"
    )
    kw = dict(samples_per_tile=ST, method="stratified", block_k=BK)
    ref = R.santa_decode_reference(q, k, v, u, LENGTHS, **kw)
    out = R.santa_decode_reference(
        q.astype(jnp.bfloat16), k.astype(jnp.bfloat16), v.astype(jnp.bfloat16), u, LENGTHS, **kw
    )
    assert out.dtype == jnp.bfloat16
    # sampling can flip a count when bf16 rounding moves a prefix sum across a position
    assert float(jnp.mean(jnp.abs(out.astype(jnp.float32) - ref))) < 5e-2


def test_validation_errors(qkv):
    q, k, v = qkv
    u = R.make_uniforms(jax.random.key(3), B, HQ, N, block_k=BK, samples_per_tile=ST, method="iid")
    with pytest.raises(ValueError, match="method"):
        R.santa_decode_reference(q, k, v, u, samples_per_tile=ST, method="bogus", block_k=BK)
    with pytest.raises(ValueError, match="uniforms"):
        R.santa_decode_reference(q, k, v, u[..., :1], samples_per_tile=ST, method="iid", block_k=BK)
    with pytest.raises(ValueError, match="multiple"):
        R.santa_decode_reference(q[:, :3], k, v, u, samples_per_tile=ST, method="iid", block_k=BK)


@pytest.mark.parametrize("method", ["systematic", "iid"])
def test_distinct_value_rows_one_dominant_key_per_tile(method):
    """With one overwhelming key per tile, every sample of a tile lands on it: one row per tile."""
    from fidia_jax.kernels.santa import distinct_value_rows, make_uniforms

    b, hq, hkv, d, block_k, nt = 2, 4, 2, 8, 16, 3
    n = block_k * nt
    q = jnp.ones((b, hq, d), jnp.float32)
    k = jnp.zeros((b, n, hkv, d), jnp.float32).at[:, 5::block_k].set(40.0)  # key 5 of each tile
    u = make_uniforms(
        jax.random.key(0), b, hq, n, block_k=block_k, samples_per_tile=4, method=method
    )
    assert (
        distinct_value_rows(q, k, u, samples_per_tile=4, block_k=block_k, method=method)
        == b * hkv * nt
    )
    # uniform scores: S_t = 4 samples per tile read at most 4 distinct rows per (b, kv head, tile)
    flat = distinct_value_rows(
        q, jnp.zeros_like(k), u, samples_per_tile=4, block_k=block_k, method=method
    )
    assert b * hkv * nt < flat <= b * hkv * nt * 4 * (hq // hkv)
