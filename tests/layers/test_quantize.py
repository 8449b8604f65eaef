"""Vector quantisers (nearest code, EMA codebook, residual, next-scale) and resizing against
brute force, hand computations and jax.image."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax import layers


def test_nearest_code_matches_brute_force():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(5, 7, 3)).astype(np.float32)
    cb = rng.normal(size=(11, 3)).astype(np.float32)
    got = np.asarray(layers.nearest_code(jnp.asarray(z), jnp.asarray(cb)))
    for i, j in itertools.product(range(5), range(7)):
        dists = [np.sum((z[i, j] - c) ** 2) for c in cb]
        assert got[i, j] == int(np.argmin(dists))
    with pytest.raises(ValueError, match="code dimension"):
        layers.nearest_code(jnp.zeros((2, 4)), jnp.asarray(cb))


def test_straight_through_forward_is_code_and_gradient_is_identity():
    cb = jnp.asarray([[0.0, 0.0], [1.0, 1.0], [-2.0, 0.5]])
    z = jnp.asarray([[0.9, 1.2], [-1.5, 0.2], [0.1, -0.1]])
    q, idx = layers.vector_quantize(z, cb)
    np.testing.assert_array_equal(np.asarray(idx), [1, 2, 0])
    np.testing.assert_allclose(q, cb[jnp.asarray([1, 2, 0])], atol=1e-7)
    w = jnp.asarray([[1.0, -2.0], [3.0, 0.5], [-1.0, 4.0]])
    g = jax.jit(jax.grad(lambda x: jnp.sum(w * layers.vector_quantize(x, cb)[0])))(z)
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))  # d q_st / d z = I
    g_cb = jax.jit(jax.grad(lambda c: jnp.sum(layers.vector_quantize(z, c)[0])))(cb)
    np.testing.assert_array_equal(np.asarray(g_cb), 0.0)  # codebook learns by EMA only


def test_ema_update_matches_hand_computation():
    cb = jnp.asarray([[0.0, 0.0], [2.0, 2.0], [5.0, -1.0]])
    state = layers.CodebookEMA.create(cb)
    z = jnp.asarray([[1.0, 0.0], [3.0, 2.0], [-1.0, 2.0]])
    idx = jnp.asarray([0, 1, 0])
    new = jax.jit(lambda s, z, i: layers.ema_codebook_update(s, z, i, decay=0.5, eps=0.1))(
        state, z, idx
    )
    # n = [2, 1, 0]; s = [[0, 2], [3, 2], [0, 0]]
    size = np.array([0.5 + 1.0, 0.5 + 0.5, 0.5 + 0.0])
    esum = 0.5 * np.asarray(cb) + 0.5 * np.array([[0.0, 2.0], [3.0, 2.0], [0.0, 0.0]])
    total = size.sum()
    smooth = (size + 0.1) / (total + 3 * 0.1) * total
    np.testing.assert_allclose(new.cluster_size, size, rtol=1e-6)
    np.testing.assert_allclose(new.embed_sum, esum, rtol=1e-6)
    np.testing.assert_allclose(new.codebook, esum / smooth[:, None], rtol=1e-6)
    with pytest.raises(ValueError, match="decay"):
        layers.ema_codebook_update(state, z, idx, decay=1.0)
    with pytest.raises(ValueError, match="idx"):
        layers.ema_codebook_update(state, z, idx[:2])


def test_ema_zero_counts_then_empty_batch_leaves_codebook_unchanged():
    # issue 42: zero counts followed by an empty batch gave 0 / 0 = NaN for every code
    cb = jnp.asarray([[0.5, -1.0], [2.0, 2.0], [5.0, -1.0]])
    state = layers.CodebookEMA(cb, jnp.zeros((3,)), jnp.zeros((3, 2)))
    update = jax.jit(lambda s, z, i: layers.ema_codebook_update(s, z, i, decay=0.9))
    new = update(state, jnp.zeros((0, 2)), jnp.zeros((0,), jnp.int32))
    np.testing.assert_array_equal(np.asarray(new.codebook), np.asarray(cb))
    np.testing.assert_array_equal(np.asarray(new.cluster_size), 0.0)
    # then one batch for code 1 only: it moves to its data, codes 0 and 2 (no mass) stay put
    z = jnp.asarray([[1.0, 3.0], [3.0, 5.0]])
    new = update(new, z, jnp.asarray([1, 1]))
    np.testing.assert_array_equal(np.asarray(new.codebook)[[0, 2]], np.asarray(cb)[[0, 2]])
    # N_1 = 0.2, m_1 = 0.1 * (4, 8); N~_1 = (0.2 + eps) / (0.2 + 3 eps) * 0.2
    smooth = (0.2 + 1e-5) / (0.2 + 3e-5) * 0.2
    np.testing.assert_allclose(np.asarray(new.codebook)[1], [0.4 / smooth, 0.8 / smooth], rtol=1e-5)
    with pytest.raises(ValueError, match="eps"):
        layers.ema_codebook_update(state, z, jnp.asarray([1, 1]), eps=0.0)


def test_ema_long_run_codes_die_and_revive_stay_finite():
    # 6 codes in 3-D; decay 0.6 so unused counts underflow to exactly zero within the run
    rng = np.random.default_rng(4)
    k, d, per = 6, 3, 4
    centers = rng.normal(size=(k, d)).astype(np.float32) * 2.0
    state = layers.CodebookEMA.create(jnp.asarray(centers + 0.3))
    update = jax.jit(lambda s, z, i: layers.ema_codebook_update(s, z, i, decay=0.6))
    empty = (jnp.zeros((0, d)), jnp.zeros((0,), jnp.int32))

    def batch(codes, where):
        idx = np.repeat(np.asarray(codes), per)
        z = where[idx] + 0.05 * rng.normal(size=(len(idx), d))
        return jnp.asarray(z, jnp.float32), jnp.asarray(idx, jnp.int32)

    def finite(s):
        return all(bool(jnp.all(jnp.isfinite(x))) for x in s)

    for _ in range(100):  # all codes used
        state = update(state, *batch(range(k), centers))
        assert finite(state)
    for t in range(200):  # codes 3..5 get nothing; every 7th batch is empty
        state = update(state, *(empty if t % 7 == 0 else batch([0, 1, 2], centers)))
        assert finite(state)
    assert float(jnp.max(state.cluster_size[3:])) == 0.0  # underflowed (0.6^200): no mass
    dead_cb = np.asarray(state.codebook)
    frozen = None
    for _ in range(240):  # nothing at all: every count decays to exactly zero
        state = update(state, *empty)
        assert finite(state)
        np.testing.assert_array_equal(np.asarray(state.codebook)[3:], dead_cb[3:])
        if frozen is None and float(jnp.sum(state.cluster_size)) == 0.0:
            frozen = np.asarray(state.codebook)
    assert frozen is not None  # the all-zero state that gave NaN before
    np.testing.assert_array_equal(np.asarray(state.codebook), frozen)
    new_centers = centers + np.asarray([1.0, -1.0, 0.5], np.float32)
    start = np.linalg.norm(np.asarray(state.codebook) - new_centers, axis=1)
    for _ in range(60):  # every code is assigned again, at new places
        state = update(state, *batch(range(k), new_centers))
        assert finite(state)
    end = np.linalg.norm(np.asarray(state.codebook) - new_centers, axis=1)
    assert np.all(end < 0.05) and np.all(start > 1.0), (start, end)


def test_residual_quantisation_error_non_increasing_with_depth():
    rng = np.random.default_rng(1)
    cb = np.concatenate([np.zeros((1, 4)), rng.normal(size=(31, 4))]).astype(np.float32)
    z = rng.normal(size=(64, 4)).astype(np.float32)
    codes, sums, errs = jax.jit(layers.residual_quantize, static_argnums=2)(
        jnp.asarray(z), jnp.asarray(cb), 6
    )
    errs = np.asarray(errs)
    assert np.all(np.diff(errs) <= 1e-7) and errs[-1] < errs[0] < np.mean(z**2)
    # partial sums are the sums of the chosen codes, and the residual is z minus them
    np.testing.assert_allclose(sums[-1], cb[np.asarray(codes)].sum(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(errs[-1], np.mean((z - np.asarray(sums[-1])) ** 2), rtol=1e-5)


def test_multiscale_prefix_latent_equals_truncated_token_sum():
    rng = np.random.default_rng(2)
    f = jnp.asarray(rng.normal(size=(2, 4, 4, 3)).astype(np.float32))
    cb = jnp.asarray(rng.normal(size=(16, 3)).astype(np.float32))
    grids = (1, 2, 3, 4)  # 3: overlapping area bins down, bicubic up (4 is not a multiple)
    codes, prefixes, residuals = jax.jit(layers.multiscale_residual_quantize, static_argnums=2)(
        f, cb, grids
    )
    assert [c.shape for c in codes] == [(2, s, s) for s in grids]
    decode = jax.jit(lambda c: [layers.tokens_to_latent(c, cb, 4, k) for k in range(1, 5)])
    for k, latent in enumerate(decode(codes), start=1):
        np.testing.assert_allclose(np.asarray(latent), np.asarray(prefixes[k - 1]), atol=1e-6)
    # scale k quantises the resized residual left by scales < k (first: f itself, area-pooled)
    np.testing.assert_allclose(residuals[0][:, 0, 0], f.mean(axis=(1, 2)), rtol=1e-5)
    np.testing.assert_allclose(
        residuals[1][:, 0, 0], (f - prefixes[0])[:, :2, :2].mean((1, 2)), rtol=1e-5, atol=1e-6
    )
    with pytest.raises(ValueError, match="last grid"):
        layers.multiscale_residual_quantize(f, cb, (1, 2))
    with pytest.raises(ValueError, match="rank 4"):
        layers.multiscale_residual_quantize(f[0], cb, grids)


def test_block_causal_mask_matches_brute_force():
    grids = (1, 2, 3)
    mask = layers.block_causal_mask(grids)
    scale = [k for k, s in enumerate(grids) for _ in range(s * s)]
    t = len(scale)
    assert mask.shape == (t, t) == (14, 14)
    for i in range(t):
        for j in range(t):
            assert mask[i, j] == (scale[j] <= scale[i])


def test_resize_images_matches_jax_image_resize():
    x = jnp.asarray(np.random.default_rng(3).uniform(size=(1, 8, 8, 2)).astype(np.float32))
    for size, method in ((3, "linear"), (12, "cubic")):  # down (antialiased) and up
        np.testing.assert_allclose(
            layers.resize_images(x, size, method),
            jax.image.resize(x, (1, size, size, 2), method),
            atol=2e-6,
        )
    with pytest.raises(ValueError, match="method"):
        layers.resize_images(x, 4, "nearest")
