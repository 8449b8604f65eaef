"""Bundled images (digits, photographs) and random crops: fidia_jax.data vision loaders."""

from __future__ import annotations

import socket

import numpy as np
import pytest

from fidia_jax.data import (
    BUNDLED_PHOTO_NAMES,
    _vision,
    bundled_photos,
    load_digit_images,
    random_crops,
)


def test_digits_native_size_is_pixels_over_16():
    from sklearn.datasets import load_digits

    ref = load_digits()
    x, y = load_digit_images()
    assert x.shape == (1797, 8, 8) and x.dtype == np.float32
    assert y.shape == (1797,) and y.dtype == np.int64
    np.testing.assert_array_equal(x, (ref.images / 16.0).astype(np.float32))
    np.testing.assert_array_equal(y, ref.target)
    assert np.bincount(y).tolist() == np.bincount(ref.target).tolist() and set(y) == set(range(10))


@pytest.mark.parametrize("size", [16, 5, 1])
def test_digits_resize_equals_skimage_bilinear(size):
    from skimage.transform import resize

    x8, _ = load_digit_images(8)
    x, y = load_digit_images(size)
    assert x.shape == (1797, size, size) and x.dtype == np.float32
    assert x.min() >= 0.0 and x.max() <= 1.0 and y.shape == (1797,)
    for i in (0, 1, 1796):
        ref = resize(x8[i].astype(np.float64), (size, size), order=1, mode="edge",
                     anti_aliasing=False)  # fmt: skip
        np.testing.assert_allclose(x[i], ref, atol=1e-6)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "8"])
def test_digits_bad_size(bad):
    with pytest.raises(ValueError, match="size"):
        load_digit_images(bad)


def test_bundled_photos_content_and_no_network(monkeypatch):
    def no_socket(*args, **kwargs):
        raise AssertionError("bundled_photos tried to open a socket")

    monkeypatch.setattr(socket, "socket", no_socket)
    monkeypatch.setattr(socket, "create_connection", no_socket)
    _vision._load_photos.cache_clear()
    photos = bundled_photos()
    assert list(photos) == sorted(photos) == list(BUNDLED_PHOTO_NAMES)
    assert {"china", "flower", "astronaut", "camera"} <= set(photos)
    for name, img in photos.items():
        assert img.ndim == 3 and img.shape[2] == 3 and img.dtype == np.float32, name
        assert 0.0 <= img.min() and img.max() <= 1.0 and img.max() > 0.5, name
    from sklearn.datasets import load_sample_images

    ref = load_sample_images()
    china = next(im for f, im in zip(ref.filenames, ref.images, strict=True) if "china" in f)
    np.testing.assert_allclose(photos["china"], china / 255.0, atol=1e-7)
    assert photos["china"].shape == (427, 640, 3) and photos["astronaut"].shape == (512, 512, 3)
    # grayscale photographs come back with R = G = B; colour ones do not
    cam = photos["camera"]
    assert np.array_equal(cam[..., 0], cam[..., 1]) and np.array_equal(cam[..., 0], cam[..., 2])
    assert not np.array_equal(photos["astronaut"][..., 0], photos["astronaut"][..., 1])
    colour = bundled_photos(grayscale=False)
    assert "camera" not in colour and {"china", "flower", "astronaut"} <= set(colour)
    assert all(not np.array_equal(v[..., 0], v[..., 1]) for v in colour.values())
    with pytest.raises(ValueError):
        photos["china"][0, 0, 0] = 1.0  # the cache is read-only


def _coded_images():
    """Images whose pixel (y, x) of image i holds (i, y, x): a crop reveals where it came from."""
    out = []
    for i, (h, w) in enumerate([(5, 7), (9, 6), (6, 6)]):
        yy, xx = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
        out.append(np.stack([np.full((h, w), i), yy, xx], axis=-1).astype(np.float32))
    return out


def test_random_crops_are_windows_within_bounds_and_deterministic():
    imgs = _coded_images()
    crops = random_crops(imgs, 4, 3000, seed=7)
    assert crops.shape == (3000, 4, 4, 3) and crops.dtype == np.float32
    np.testing.assert_array_equal(crops, random_crops(imgs, 4, 3000, seed=7))
    assert not np.array_equal(crops, random_crops(imgs, 4, 3000, seed=8))
    positions = {0: set(), 1: set(), 2: set()}
    for c in crops:
        i, y0, x0 = (int(v) for v in c[0, 0])
        h, w = imgs[i].shape[:2]
        assert 0 <= y0 <= h - 4 and 0 <= x0 <= w - 4
        np.testing.assert_array_equal(c, imgs[i][y0 : y0 + 4, x0 : x0 + 4])
        positions[i].add((y0, x0))
    # every image and every valid corner is drawn (uniform: 1000 per image, <= 18 corners each)
    counts = np.bincount(crops[:, 0, 0, 0].astype(int), minlength=3)
    assert np.all(np.abs(counts - 1000) < 120), counts
    for i, img in enumerate(imgs):
        h, w = img.shape[:2]
        assert positions[i] == {(y, x) for y in range(h - 3) for x in range(w - 3)}


def test_random_crops_mapping_and_edge_sizes():
    imgs = _coded_images()
    as_dict = dict(zip("abc", imgs, strict=True))
    np.testing.assert_array_equal(random_crops(as_dict, 3, 20, seed=0),
                                  random_crops(imgs, 3, 20, seed=0))  # fmt: skip
    assert random_crops(imgs, 2, 0, seed=0).shape == (0, 2, 2, 3)
    full = random_crops([imgs[2]], 6, 2, seed=0)  # crop = whole image
    np.testing.assert_array_equal(full[0], imgs[2])


def test_random_crops_errors():
    imgs = _coded_images()
    with pytest.raises(
        ValueError, match=r"image 0 of shape \(5, 7, 3\) is smaller than the crop size 6"
    ):
        random_crops(imgs, 6, 4, seed=0)
    with pytest.raises(ValueError, match="'small'"):
        random_crops({"big": np.zeros((10, 10, 3)), "small": np.zeros((3, 10, 3))}, 4, 1, seed=0)
    with pytest.raises(ValueError, match=r"\(H, W, C\)"):
        random_crops([np.zeros((8, 8))], 4, 1, seed=0)
    with pytest.raises(ValueError, match="channel counts"):
        random_crops([np.zeros((8, 8, 3)), np.zeros((8, 8, 1))], 4, 1, seed=0)
    with pytest.raises(ValueError, match="no images"):
        random_crops([], 4, 1, seed=0)
    with pytest.raises(ValueError, match="size"):
        random_crops(imgs, 0, 1, seed=0)
    with pytest.raises(ValueError, match="n must"):
        random_crops(imgs, 2, -1, seed=0)
