"""HIT-VAR degradation pipeline: shapes, determinism, closed forms, errors."""

import numpy as np
import pytest
import scipy.ndimage

from fidia_jax import data as shared_data
from fidia_jax.projects.hitvar import data


def _img(h=32, w=48, seed=0):
    return np.random.default_rng(seed).uniform(size=(h, w, 3)).astype(np.float32)


def test_degrade_shapes_range_and_determinism():
    hr = _img()
    lr = data.degrade(hr, data.Degradation(scale=4), seed=3)
    assert lr.shape == (8, 12, 3) and lr.dtype == np.float32
    assert lr.min() >= 0.0 and lr.max() <= 1.0
    np.testing.assert_array_equal(lr, data.degrade(hr, data.Degradation(scale=4), seed=3))
    assert not np.array_equal(lr, data.degrade(hr, data.Degradation(scale=4), seed=4))


def test_degrade_steps_against_closed_forms():
    hr = _img()
    # everything off: identity
    off = data.Degradation(scale=1, blur_sigma=0.0, noise_std=0.0, jpeg_quality=0)
    np.testing.assert_array_equal(data.degrade(hr, off), hr)
    # blur only: scipy's Gaussian filter per channel
    blur = data.Degradation(scale=1, blur_sigma=1.5, noise_std=0.0, jpeg_quality=0)
    np.testing.assert_allclose(
        data.degrade(hr, blur),
        np.stack(
            [scipy.ndimage.gaussian_filter(hr[..., c], 1.5, mode="reflect") for c in range(3)], -1
        ),
        atol=1e-6,
    )
    # blur + bicubic down preserve a constant image (normalised filters)
    const = np.full((32, 32, 3), 0.37, np.float32)
    down = data.Degradation(scale=4, blur_sigma=1.0, noise_std=0.0, jpeg_quality=0)
    np.testing.assert_allclose(data.degrade(const, down), 0.37, atol=1e-5)
    # noise only: the seeded Gaussian draw, clipped
    noisy = data.Degradation(scale=1, blur_sigma=0.0, noise_std=0.05, jpeg_quality=0)
    want = np.clip(hr + 0.05 * np.random.default_rng(7).standard_normal(hr.shape), 0, 1)
    np.testing.assert_allclose(data.degrade(hr, noisy, seed=7), want, atol=1e-6)
    # JPEG: 8-bit output, close to a smooth input at quality 95, further at quality 10
    smooth = np.broadcast_to(
        np.linspace(0.1, 0.9, 48, dtype=np.float32)[None, :, None], (32, 48, 3)
    ).copy()
    smooth[..., 1] = smooth[..., 1][::-1, ::-1]

    def jpeg(q):
        return data.degrade(
            smooth, data.Degradation(scale=1, blur_sigma=0.0, noise_std=0.0, jpeg_quality=q)
        )

    hi, lo = jpeg(95), jpeg(10)
    np.testing.assert_array_equal(np.round(hi * 255) / 255, hi)
    assert np.abs(hi - smooth).mean() < 0.01 < np.abs(lo - smooth).mean()


def test_bad_input_names_the_problem():
    with pytest.raises(ValueError, match="must have rank 3"):
        data.degrade(np.zeros((8, 8)))
    with pytest.raises(ValueError, match="scale 4 must divide the image size 30x32"):
        data.degrade(np.zeros((30, 32, 3)))
    with pytest.raises(ValueError, match="non-finite"):
        data.degrade(np.full((8, 8, 3), np.nan))
    with pytest.raises(ValueError, match="jpeg_quality"):
        data.Degradation(jpeg_quality=100)
    with pytest.raises(ValueError, match="scale 3 must divide hr_size 16"):
        data.make_sr_pairs([_img()], 16, 2, data.Degradation(scale=3))


def test_make_sr_pairs_crops_and_degrades_each_pair():
    imgs = {"a": _img(40, 40, 1), "b": _img(36, 50, 2)}
    deg = data.Degradation(scale=2, jpeg_quality=0)
    hr, lr = data.make_sr_pairs(imgs, 16, 5, deg, seed=3)
    assert hr.shape == (5, 16, 16, 3) and lr.shape == (5, 8, 8, 3)
    np.testing.assert_array_equal(hr, shared_data.random_crops(imgs, 16, 5, seed=3))
    for i in range(5):
        np.testing.assert_array_equal(lr[i], data.degrade(hr[i], deg, seed=3 * 1_000_003 + i))
