"""Real images that ship inside installed wheels: digits, photographs, random crops.

Nothing here touches the network. The images come from files on disk:

* scikit-learn's bundled 8×8 digits (``sklearn/datasets/data/digits.csv.gz``, 1797 images,
  pixel values 0..16) via :func:`sklearn.datasets.load_digits`, which only reads that file;
* scikit-learn's two sample photographs (``sklearn/datasets/images/{china,flower}.jpg``);
* the photographs inside the scikit-image wheel (``skimage/data/*.png|jpg``), read with
  :func:`skimage.io.imread` **on the file path**. The ``skimage.data`` functions are never
  called: several of them download their file on first use, which is off limits here.

Every image is float32 in ``[0, 1]``, channels-last.
"""

from __future__ import annotations

import functools
import importlib.util
import pathlib
from collections.abc import Mapping, Sequence

import numpy as np

from fidia_jax.errors import DataError, needs_extra

__all__ = ["BUNDLED_PHOTO_NAMES", "bundled_photos", "load_digit_images", "random_crops"]

#: Colour photographs inside the scikit-image wheel (file names under ``skimage/data/``).
_SKIMAGE_RGB = {
    "astronaut": "astronaut.png",
    "chelsea": "chelsea.png",
    "coffee": "coffee.png",
    "hubble_deep_field": "hubble_deep_field.jpg",
    "ihc": "ihc.png",
    "motorcycle_left": "motorcycle_left.png",
    "motorcycle_right": "motorcycle_right.png",
    "retina": "retina.jpg",
    "rocket": "rocket.jpg",
}
#: Grayscale photographs inside the scikit-image wheel (returned with R = G = B).
_SKIMAGE_GRAY = {
    "brick": "brick.png",
    "camera": "camera.png",
    "coins": "coins.png",
    "grass": "grass.png",
    "gravel": "gravel.png",
    "moon": "moon.png",
    "page": "page.png",
    "text": "text.png",
}
#: scikit-learn's two sample photographs (``sklearn/datasets/images/``).
_SKLEARN_RGB = {"china": "china.jpg", "flower": "flower.jpg"}

#: Every name :func:`bundled_photos` returns (``grayscale=True``), sorted.
BUNDLED_PHOTO_NAMES: tuple[str, ...] = tuple(
    sorted({**_SKIMAGE_RGB, **_SKIMAGE_GRAY, **_SKLEARN_RGB})
)


def _package_dir(package: str) -> pathlib.Path:
    """Directory of an installed package, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise DataError(
            f"package {package!r} is not installed; it ships the bundled images: "
            "pip install 'fidia_jax[vision]'"
        )
    return pathlib.Path(next(iter(spec.submodule_search_locations)))


def _bilinear_matrix(n_in: int, n_out: int) -> np.ndarray:
    """``(n_out, n_in)`` float64 weights of 1-D linear interpolation with half-pixel centres.

    Output pixel ``i`` samples input coordinate ``(i + 0.5) * n_in / n_out - 0.5``, clamped to
    ``[0, n_in - 1]`` (edge padding). This is scikit-image's ``resize(order=1, mode="edge",
    anti_aliasing=False)`` and ``jax.image.resize(method="linear")`` for upsampling.
    """
    coord = (np.arange(n_out, dtype=np.float64) + 0.5) * (n_in / n_out) - 0.5
    coord = np.clip(coord, 0.0, n_in - 1)
    lo = np.floor(coord).astype(np.int64)
    hi = np.minimum(lo + 1, n_in - 1)
    frac = coord - lo
    w = np.zeros((n_out, n_in), dtype=np.float64)
    np.add.at(w, (np.arange(n_out), lo), 1.0 - frac)
    np.add.at(w, (np.arange(n_out), hi), frac)
    return w


@functools.lru_cache(maxsize=1)
def _digits_raw() -> tuple[np.ndarray, np.ndarray]:
    with needs_extra("vision", "load_digit_images"):
        from sklearn.datasets import load_digits

    bunch = load_digits()
    images = np.asarray(bunch.images, dtype=np.float64) / 16.0
    labels = np.asarray(bunch.target, dtype=np.int64)
    images.setflags(write=False)
    labels.setflags(write=False)
    return images, labels


def load_digit_images(size: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's bundled handwritten digits, as images in ``[0, 1]``.

    The 1797 8×8 images of :func:`sklearn.datasets.load_digits` (read from the CSV inside the
    scikit-learn wheel; nothing is downloaded), divided by 16, then resized to ``size × size``
    with separable **bilinear** interpolation, half-pixel centres, edge clamping and no
    anti-aliasing, computed in float64 (equal to ``skimage.transform.resize(img, (size, size),
    order=1, mode="edge", anti_aliasing=False)``). ``size == 8`` returns the pixels unchanged;
    ``size < 8`` is allowed but aliases (no low-pass filter).

    Args:
      size: output side in pixels, ``>= 1``.

    Returns:
      ``(images, labels)``: ``(1797, size, size)`` float32 in ``[0, 1]`` (grayscale, no channel
      axis; add one with ``images[..., None]``) and ``(1797,)`` int64 class labels in ``0..9``.

    Raises:
      ValueError: ``size`` is not an integer ``>= 1``.
    """
    if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 1:
        raise ValueError(f"load_digit_images: size must be an integer >= 1, got {size!r}")
    images, labels = _digits_raw()
    size = int(size)
    if size == images.shape[1]:
        out = images
    else:
        w = _bilinear_matrix(images.shape[1], size)
        out = np.einsum("ij,njk,lk->nil", w, images, w)
    return np.clip(out, 0.0, 1.0).astype(np.float32), labels.copy()


def _to_unit_rgb(a: np.ndarray, name: str) -> np.ndarray:
    if a.dtype != np.uint8:
        raise DataError(f"bundled image {name!r}: expected uint8 pixels, got {a.dtype}")
    if a.ndim == 2:
        a = np.repeat(a[:, :, None], 3, axis=2)
    if a.ndim != 3 or a.shape[2] != 3:
        raise DataError(f"bundled image {name!r}: expected (H, W) or (H, W, 3), got {a.shape}")
    out = a.astype(np.float32) / np.float32(255.0)
    out.setflags(write=False)
    return out


@functools.lru_cache(maxsize=1)
def _load_photos() -> dict[str, np.ndarray]:
    with needs_extra("vision", "bundled_photos"):
        import skimage.io

    skimage_dir = _package_dir("skimage") / "data"
    sklearn_dir = _package_dir("sklearn") / "datasets" / "images"
    paths = {name: skimage_dir / f for name, f in {**_SKIMAGE_RGB, **_SKIMAGE_GRAY}.items()}
    paths |= {name: sklearn_dir / f for name, f in _SKLEARN_RGB.items()}
    out = {}
    for name in sorted(paths):
        path = paths[name]
        if not path.is_file():
            raise DataError(f"bundled image {name!r} not found at {path} (incomplete install?)")
        out[name] = _to_unit_rgb(np.asarray(skimage.io.imread(str(path))), name)
    return out


def bundled_photos(*, grayscale: bool = True) -> dict[str, np.ndarray]:
    """Photographs shipped inside the scikit-learn and scikit-image wheels, read from disk.

    Colour: ``china``, ``flower`` (scikit-learn, 427×640) and ``astronaut``, ``chelsea``,
    ``coffee``, ``hubble_deep_field``, ``ihc``, ``motorcycle_left``, ``motorcycle_right``,
    ``retina``, ``rocket`` (scikit-image). Grayscale (scikit-image; returned with the gray value
    copied to R, G and B): ``brick``, ``camera``, ``coins``, ``grass``, ``gravel``, ``moon``,
    ``page``, ``text``. Synthetic or non-photographic files (chessboard, logo, phantom, horse
    silhouette, ...) are left out. Files are read with :func:`skimage.io.imread` on their path;
    no ``skimage.data`` function (some of which download) is called.

    Args:
      grayscale: also return the 8 grayscale photographs (as 3 equal channels).

    Returns:
      ``{name: (H, W, 3) float32 in [0, 1]}`` with names in sorted order. The arrays are
      read-only views of a per-process cache (copy before writing).

    Raises:
      DataError: a bundled file is missing from the installed wheel.
    """
    photos = _load_photos()
    return {k: v for k, v in photos.items() if grayscale or k not in _SKIMAGE_GRAY}


def random_crops(
    images: Sequence[np.ndarray] | Mapping[str, np.ndarray], size: int, n: int, *, seed: int
) -> np.ndarray:
    """``n`` random square crops, uniform over images and then over positions.

    Crop ``k`` picks an image index uniformly, then a top-left corner uniformly among the
    ``(H - size + 1) * (W - size + 1)`` positions of that image, all drawn from
    ``numpy.random.default_rng(seed)`` (image indices for all crops first, then rows, then
    columns), so the same arguments always give the same crops.

    Args:
      images: a sequence of ``(H, W, C)`` arrays, or a mapping (its values, in iteration order);
        every image must have the same ``C``.
      size: crop side in pixels, ``>= 1``.
      n: number of crops, ``>= 0``.
      seed: seed of the numpy Generator.

    Returns:
      ``(n, size, size, C)`` array with the images' dtype (float32 for :func:`bundled_photos`).

    Raises:
      ValueError: no images, an image that is not 3-D, differing channel counts, ``size < 1``,
        ``n < 0``, or an image smaller than ``size`` in height or width (named by index/key).
    """
    if isinstance(images, Mapping):
        keys = list(images.keys())
        arrays = [np.asarray(images[k]) for k in keys]
    else:
        arrays = [np.asarray(a) for a in images]
        keys = list(range(len(arrays)))
    if not arrays:
        raise ValueError("random_crops: no images given")
    if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 1:
        raise ValueError(f"random_crops: size must be an integer >= 1, got {size!r}")
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
        raise ValueError(f"random_crops: n must be an integer >= 0, got {n!r}")
    for k, a in zip(keys, arrays, strict=True):
        if a.ndim != 3:
            raise ValueError(f"random_crops: image {k!r} must be (H, W, C), got shape {a.shape}")
        if a.shape[0] < size or a.shape[1] < size:
            raise ValueError(
                f"random_crops: image {k!r} of shape {a.shape} is smaller than the crop size {size}"
            )
    channels = {a.shape[2] for a in arrays}
    if len(channels) != 1:
        raise ValueError(f"random_crops: images have different channel counts {sorted(channels)}")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(arrays), size=n)
    heights = np.array([a.shape[0] for a in arrays], dtype=np.int64)
    widths = np.array([a.shape[1] for a in arrays], dtype=np.int64)
    ys = rng.integers(0, heights[idx] - size + 1)
    xs = rng.integers(0, widths[idx] - size + 1)
    dtype = np.result_type(*arrays)
    out = np.empty((n, size, size, channels.pop()), dtype=dtype)
    for j, (i, y, x) in enumerate(zip(idx, ys, xs, strict=True)):
        out[j] = arrays[i][y : y + size, x : x + size]
    return out
