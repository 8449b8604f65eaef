"""HIT-VAR data entry points reject images off [0, 1] or non-finite instead of clipping them."""

import numpy as np
import pytest

from fidia_jax.errors import DataError
from fidia_jax.projects.hitvar import data


def _img(side=16, seed=0):
    return np.random.default_rng(seed).uniform(0.0, 1.0, (side, side, 3)).astype(np.float32)


def test_degrade_rejects_8bit_image_naming_hr():
    with pytest.raises(DataError, match=r"degrade: hr must be float in \[0, 1\].*255"):
        data.degrade(_img() * 255.0)
    with pytest.raises(DataError, match="degrade: hr"):
        data.degrade(_img() - 0.01)


def test_degrade_rejects_nan_and_inf():
    for bad in (np.nan, np.inf):
        x = _img()
        x[3, 4, 1] = bad
        with pytest.raises(DataError, match="degrade: hr has non-finite"):
            data.degrade(x)


def test_degrade_accepts_bounds_and_float_slack():
    x = _img()
    x[0, 0, 0], x[0, 1, 0] = 0.0, 1.0 + 1e-7
    lr = data.degrade(x, data.Degradation(jpeg_quality=0, noise_std=0.0))
    assert lr.shape == (4, 4, 3) and np.all((lr >= 0) & (lr <= 1))


def test_make_sr_pairs_names_the_bad_image():
    imgs = [_img(32, 0), _img(32, 1) * 255.0]
    with pytest.raises(DataError, match=r"make_sr_pairs: images\[1\]"):
        data.make_sr_pairs(imgs, 16, 2)
    imgs = {"a": _img(32, 0), "b": _img(32, 1)}
    imgs["b"][5, 5, 2] = np.nan
    with pytest.raises(DataError, match=r"make_sr_pairs: images\[1\] has non-finite"):
        data.make_sr_pairs(imgs, 16, 2)
