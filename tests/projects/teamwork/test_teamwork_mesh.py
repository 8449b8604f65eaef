"""TeamWork's neural fits on a 4-device mesh (batch of windows split over ``"data"``) against
one device.

Tolerance: each step's loss is a mean over the 8 windows of the batch (and their time steps and
channels); on the mesh it is 4 partial sums added across devices, so the loss and gradient of
a step differ from one device's by the float32 rounding of a reordered sum (relative ~ a few
ulps, 2**-24 ~ 6e-8 each). Over the 5 Adam steps of the test these differences are carried,
not amplified: ``rtol=1e-5`` on the mean training loss, and ``rtol=1e-4, atol=1e-6`` on the
anomaly scores of the trained model (a squared error of its predictions, in which a parameter
difference of ~1e-6 relative can show doubled).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fidia_jax import parallel
from fidia_jax.projects import teamwork
from fidia_jax.projects.teamwork import data
from fidia_jax.projects.teamwork.train import fit_detector


@pytest.mark.parametrize("method", ["teamwork", "convae"])
def test_mesh_matches_one_device(method, fit_calls):
    config = dataclasses.replace(
        teamwork.get_config("tiny"), steps=5, convae_steps=5, train_length=240, test_length=160
    )
    assert parallel.data_mesh(config.batch_size).size == 4  # tests/conftest.py: 4 devices
    syn = data.make_synthetic(0, train_length=240, test_length=160, n_anomalies=2)
    dets = [
        fit_detector(method, syn.train, dataclasses.replace(config, num_devices=n)) for n in (1, 0)
    ]
    assert [c.mesh_size for c in fit_calls] == [1, 4]
    s1, s4 = (d.score(syn.test) for d in dets)
    if method == "teamwork":
        np.testing.assert_allclose(dets[1].info["final_loss"], dets[0].info["final_loss"],
                                   rtol=1e-5)  # fmt: skip
    np.testing.assert_allclose(s4, s1, rtol=1e-4, atol=1e-6)
    assert np.std(s1) > 0
