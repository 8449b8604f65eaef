"""Residual geometry's training steps on a 4-device data mesh equal one device's."""

import dataclasses

import jax
import numpy as np
import pytest
from flax import nnx

from fidia_jax import data, parallel
from fidia_jax.projects import residual_geometry
from fidia_jax.projects.residual_geometry import questions
from fidia_jax.projects.residual_geometry.train import _train_mesh, build_model, fit_model


def test_four_devices_match_one():
    if jax.device_count() < 4:
        pytest.skip("needs 4 devices (tests/conftest.py forces 4 CPU devices)")
    cfg = dataclasses.replace(residual_geometry.get_config("tiny"), steps=4, batch_size=8)
    assert _train_mesh(dataclasses.replace(cfg, num_devices=1)) is None
    assert _train_mesh(dataclasses.replace(cfg, num_devices=4)).size == 4
    images, labels = data.load_digit_images()
    train_q = questions.make_digit_questions(images[:200], labels[:200], 64, seed=1)
    runs = {}
    for n in (1, 4):
        c = dataclasses.replace(cfg, num_devices=n)
        model, losses = fit_model(build_model(c), train_q, c)
        runs[n] = (np.asarray(losses), parallel.to_host(nnx.state(model, nnx.Param)))
    assert runs[1][0].shape == (4,)
    # float32; only the summation order of the cross-device mean differs (a few ulp per step)
    np.testing.assert_allclose(runs[4][0], runs[1][0], rtol=1e-5)
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6), runs[4][1], runs[1][1]
    )
