"""The LDL cross-validation on a 4-device mesh (rows split over ``"data"``) against one device.

The 90 rows of the tiny set are padded to 92 on the mesh with rows of weight 0, which must
change no loss. Tolerance: every loss is a weighted mean over the rows; on the mesh it is 4
partial sums of 23 rows added across devices, so each step's loss and gradient differ from one
device's by float32 rounding of a reordered sum (relative ~ 90 * 2**-24 ~ 5e-6 at worst,
typically far less). Over the 20 full-batch Adam steps of this test such differences are carried, not
amplified (a smooth, nearly convex problem): ``rtol=2e-5`` on the mean training-loss curves and
``rtol=1e-4`` on the test-fold metrics computed from the trained models' predictions.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

from fidia_jax.errors import ConfigError
from fidia_jax.projects import ldl


def _run(num_devices):
    cfg = ldl.get_config("tiny", epochs=20, baselines=(), num_devices=num_devices)
    return ldl.cross_validate(cfg)


def test_mesh_matches_one_device(fit_calls):
    assert jax.device_count() == 4  # tests/conftest.py forces 4 host devices
    one, four = _run(1), _run(0)
    assert [c.mesh_size for c in fit_calls] == [1, 4]
    for a in one["loss_curves"]:
        np.testing.assert_allclose(four["loss_curves"][a], one["loss_curves"][a], rtol=2e-5)
    assert one["loss_curves"]["0.0"][0] > one["loss_curves"]["0.0"][-1]  # it trained
    for r1, r4 in zip(one["folds"], four["folds"], strict=True):
        for m in ldl.METRICS:
            np.testing.assert_allclose(r4[m], r1[m], rtol=1e-4, err_msg=m)


def test_mesh_config_fields_are_checked():
    with pytest.raises(ConfigError, match="param_sharding"):
        ldl.get_config("tiny", param_sharding="tp")
    with pytest.raises(ConfigError, match="num_devices"):
        ldl.get_config("tiny", num_devices=-1)
