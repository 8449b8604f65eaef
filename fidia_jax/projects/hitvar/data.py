"""Super-resolution pairs for HIT-VAR: a degradation pipeline and LR/HR crops of photos.

:func:`degrade` makes the LR image of an HR one: Gaussian blur, bicubic downsampling by the
scale factor (Pillow), additive Gaussian noise and a JPEG round trip (Pillow), the classical
"blur -> down -> noise -> JPEG" order of Real-ESRGAN's first-order model (Wang et al., ICCVW 2021).
:func:`make_sr_pairs` cuts random HR crops of whole photos (:func:`fidia_jax.data.random_crops`)
and degrades each with its own deterministic noise stream.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Mapping, Sequence

import numpy as np

from fidia_jax.errors import DataError

__all__ = ["Degradation", "degrade", "make_sr_pairs"]


@dataclasses.dataclass(frozen=True)
class Degradation:
    """Parameters of :func:`degrade`.

    Attributes:
      scale: downsampling factor (``>= 1``; must divide the HR side).
      blur_sigma: Gaussian blur standard deviation in HR pixels (``0`` = no blur).
      noise_std: additive Gaussian noise standard deviation on the ``[0, 1]`` scale (``0`` =
        none).
      jpeg_quality: Pillow JPEG quality in ``[1, 95]``, or ``0`` for no JPEG round trip.
    """

    scale: int = 4
    blur_sigma: float = 1.0
    noise_std: float = 0.01
    jpeg_quality: int = 75

    def __post_init__(self) -> None:
        if int(self.scale) != self.scale or self.scale < 1:
            raise ValueError(f"Degradation: scale must be an int >= 1, got {self.scale}")
        if self.blur_sigma < 0 or self.noise_std < 0:
            raise ValueError(
                f"Degradation: blur_sigma and noise_std must be >= 0, got {self.blur_sigma}, "
                f"{self.noise_std}"
            )
        if self.jpeg_quality != 0 and not 1 <= self.jpeg_quality <= 95:
            raise ValueError(
                f"Degradation: jpeg_quality must be 0 (off) or in [1, 95], got {self.jpeg_quality}"
            )


_RANGE_TOL = 1e-6  # float slack on the [0, 1] range (an 8-bit image is off by ~255)


def _check_range(x: np.ndarray, where: str, name: str) -> None:
    """Raise :class:`DataError` naming ``name`` for non-finite values or values off ``[0, 1]``."""
    x = np.asarray(x)
    if not np.all(np.isfinite(x)):
        raise DataError(f"{where}: {name} has non-finite values (NaN or inf)")
    if x.size and (float(x.min()) < -_RANGE_TOL or float(x.max()) > 1.0 + _RANGE_TOL):
        raise DataError(
            f"{where}: {name} must be float in [0, 1], got values in "
            f"[{float(x.min()):.4g}, {float(x.max()):.4g}] (an 8-bit image? divide by 255)"
        )


def _check_image(hr: np.ndarray, scale: int, where: str) -> None:
    if hr.ndim != 3 or hr.shape[-1] != 3:
        raise ValueError(
            f"{where}: the image must have rank 3, (H, W, 3) float in [0, 1], got shape {hr.shape}"
        )
    if hr.shape[0] % scale or hr.shape[1] % scale:
        raise ValueError(
            f"{where}: scale {scale} must divide the image size {hr.shape[0]}x{hr.shape[1]}"
        )
    _check_range(hr, where, "hr")


def degrade(
    hr: np.ndarray, degradation: Degradation = Degradation(), *, seed: int = 0
) -> np.ndarray:
    """The LR version of one HR image (blur, bicubic down, noise, JPEG).

    Args:
      hr: ``(H, W, 3)`` float in ``[0, 1]``; ``H`` and ``W`` multiples of ``scale``.
      degradation: :class:`Degradation`.
      seed: seed of the noise (same seed, same LR).

    Returns:
      ``(H / scale, W / scale, 3)`` float32 in ``[0, 1]``.

    Raises:
      ValueError: an image that is not ``(H, W, 3)`` or a scale that does not divide its size.
      DataError: (a ``ValueError``) non-finite pixels, or pixels outside ``[0, 1]`` (beyond
        ``1e-6``), e.g. an 8-bit image in ``0..255``; nothing is clipped silently.
    """
    import scipy.ndimage  # jax's dependency
    from PIL import Image  # matplotlib's dependency (a core one here)

    d = degradation
    hr = np.asarray(hr, np.float32)
    _check_image(hr, d.scale, "degrade")
    x = hr
    if d.blur_sigma > 0:
        x = scipy.ndimage.gaussian_filter(x, sigma=(d.blur_sigma, d.blur_sigma, 0), mode="reflect")
    h, w = hr.shape[0] // d.scale, hr.shape[1] // d.scale
    if d.scale > 1:
        # Pillow's float ("F") mode keeps full precision per channel.
        x = np.stack(
            [
                np.asarray(
                    Image.fromarray(np.ascontiguousarray(x[..., c], np.float32)).resize(
                        (w, h), Image.Resampling.BICUBIC
                    )
                )
                for c in range(3)
            ],
            axis=-1,
        )
    if d.noise_std > 0:
        x = x + d.noise_std * np.random.default_rng(seed).standard_normal(x.shape).astype(
            np.float32
        )
    x = np.clip(x, 0.0, 1.0)
    if d.jpeg_quality:
        buf = io.BytesIO()
        Image.fromarray(np.round(x * 255).astype(np.uint8)).save(
            buf, format="JPEG", quality=int(d.jpeg_quality)
        )
        buf.seek(0)
        x = np.asarray(Image.open(buf).convert("RGB"), np.float32) / 255.0
    return x.astype(np.float32)


def make_sr_pairs(
    images: Mapping[str, np.ndarray] | Sequence[np.ndarray],
    hr_size: int,
    n: int,
    degradation: Degradation = Degradation(),
    *,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` random ``hr_size`` crops of the images and their degraded LR versions.

    Args:
      images: whole photos ``(H, W, 3)`` float in ``[0, 1]`` (a dict name -> image, e.g.
        :func:`fidia_jax.data.bundled_photos`, or a sequence).
      hr_size: HR crop side; a multiple of ``degradation.scale``.
      n: number of pairs ``>= 1``.
      degradation: :class:`Degradation`.
      seed: crops come from :func:`fidia_jax.data.random_crops` with this seed; pair ``i`` is
        degraded with noise seed ``seed * 1_000_003 + i`` (deterministic).

    Returns:
      ``(hr, lr)``: ``(n, hr_size, hr_size, 3)`` and ``(n, hr_size / s, hr_size / s, 3)``
      float32.

    Raises:
      ValueError: no images, ``n < 1``, or a scale that does not divide ``hr_size``.
      DataError: an image (``images[i]``) with non-finite values or values outside ``[0, 1]``.
    """
    from fidia_jax.data import random_crops  # the shared crop sampler (another module)

    imgs = list(images.values()) if isinstance(images, Mapping) else list(images)
    if not imgs:
        raise ValueError("make_sr_pairs: no images given")
    if n < 1:
        raise ValueError(f"make_sr_pairs: n must be >= 1, got {n}")
    if hr_size % degradation.scale:
        raise ValueError(f"make_sr_pairs: scale {degradation.scale} must divide hr_size {hr_size}")
    for i, im in enumerate(imgs):
        _check_range(np.asarray(im, np.float32), "make_sr_pairs", f"images[{i}]")
    hr = np.asarray(random_crops(imgs, hr_size, n, seed=seed), np.float32)
    lr = np.stack([degrade(h, degradation, seed=seed * 1_000_003 + i) for i, h in enumerate(hr)])
    return hr, lr
