"""Planted leak (issue 41): HIT-VAR's training crops never depend on the held-out photos.

``make_data`` cuts training crops from the photos not in ``held_out`` and evaluation crops from
the held-out ones, degraded by a fixed rule (no statistic of any image is fitted). Inverting
every held-out photo leaves the training crops unchanged (exactly) while the evaluation crops
change. A normalisation by the mean of every photo (the leak, rebuilt here) would move them.
"""

import dataclasses

import numpy as np

from fidia_jax.projects import hitvar
from fidia_jax.projects.hitvar import train as hv_train


def _make(monkeypatch, flip: bool):
    config = dataclasses.replace(hitvar.get_config("tiny"), n_train=6, n_eval=4)
    photos = dict(hv_train.data.bundled_photos())
    if flip:
        photos = {k: (1.0 - v if k in config.held_out else v) for k, v in photos.items()}
    monkeypatch.setattr(hv_train.data, "bundled_photos", lambda: photos)
    return config, photos, hv_train.make_data(config)


def test_changing_the_held_out_photos_moves_no_training_crop(monkeypatch):
    _, _, a = _make(monkeypatch, False)
    _, _, b = _make(monkeypatch, True)
    for k in ("hr_train", "lr_train"):
        np.testing.assert_array_equal(b[k], a[k], err_msg=k)
    assert np.max(np.abs(b["hr_eval"] - a["hr_eval"])) > 0.1


def test_a_normalisation_over_every_photo_would_move_them(monkeypatch):
    config, pa, a = _make(monkeypatch, False)
    _, pb, b = _make(monkeypatch, True)

    def leaky(photos, crops):  # the leak: centre by the mean pixel of every photo
        return crops - np.mean([v.mean() for v in photos.values()])

    assert np.max(np.abs(leaky(pb, b["hr_train"]) - leaky(pa, a["hr_train"]))) > 1e-4
