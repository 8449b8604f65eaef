"""Planted leak (issue 41): StreamFlow's training digits do not depend on the held-out digits.

``digit_split`` maps pixels to ``[-1, 1]`` by a fixed rule (``2 x - 1``, no statistic of any
image) and holds out a seeded set of digits (the Fréchet proxy's reference set). Inverting the
held-out digits leaves every training image unchanged (exactly). A scaling by the mean / std of
all digits (the leak, rebuilt here) would move them.
"""

import numpy as np

from fidia_jax.projects import streamflow
from fidia_jax.projects.streamflow import train as sf_train


def _split(monkeypatch, flip_held_out: bool):
    rng = np.random.default_rng(0)
    images = rng.random((50, 16, 16)).astype(np.float32)
    config = streamflow.get_config("tiny", holdout=10, image_size=16, seed=3)
    held = np.random.default_rng(config.seed).permutation(50)[: config.holdout]
    if flip_held_out:
        images[held] = 1.0 - images[held]
    labels = np.zeros(50, np.int64)
    monkeypatch.setattr(sf_train.data, "load_digit_images", lambda size: (images, labels))
    return images, sf_train.digit_split(config), held


def test_flipping_the_held_out_digits_moves_no_training_image(monkeypatch):
    _, (tr_a, ho_a), _ = _split(monkeypatch, False)
    _, (tr_b, ho_b), _ = _split(monkeypatch, True)
    np.testing.assert_array_equal(tr_b, tr_a)
    np.testing.assert_allclose(ho_b, -ho_a, atol=1e-6)  # the held-out part did change


def test_a_scaling_by_statistics_of_every_digit_would_move_them(monkeypatch):
    def leaky(images, held):  # the leak: mean / std over training and held-out digits
        z = (images - images.mean()) / images.std()
        return np.delete(z, held, axis=0)

    a, _, held = _split(monkeypatch, False)
    b, _, _ = _split(monkeypatch, True)
    assert np.max(np.abs(leaky(b, held) - leaky(a, held))) > 1e-3
