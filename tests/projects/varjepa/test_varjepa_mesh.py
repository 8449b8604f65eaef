"""VAR-T-JEPA / T-JEPA pretraining on a 4-device mesh (each batch of 32 rows split over
``"data"``; the step's PRNG key, from which the views and masks are drawn, replicated) against
one device.

Tolerance: each step's loss is a mean over the batch's rows (and tokens); on the mesh it is 4
partial sums added across devices, so a step's loss and gradient differ from one device's by
the float32 rounding of a reordered sum (relative ~ a few 2**-24 ~ 6e-8). The views and masks
are the same on any layout (partitionable threefry). Over the 6 AdamW steps of the tiny preset
the differences are carried, not amplified: ``rtol=1e-5`` on every step's loss;
``rtol=1e-4`` on the effective rank of the embeddings (an entropy of their singular values).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fidia_jax import parallel
from fidia_jax.projects.varjepa import get_config
from fidia_jax.projects.varjepa.train import load_config_data, pretrain


@pytest.mark.parametrize("method", ["var_tjepa", "tjepa"])
def test_mesh_matches_one_device(method, fit_calls):
    config = get_config("tiny")
    assert parallel.data_mesh(config.batch_size).size == 4  # tests/conftest.py: 4 devices
    splits = load_config_data(config)
    hist = [pretrain(dataclasses.replace(config, num_devices=n), splits, method)[1] for n in (1, 0)]
    (n1, l1), (n4, l4) = [(c.mesh_size, c.losses()) for c in fit_calls]
    assert (n1, n4) == (1, 4) and len(l1) == config.steps
    np.testing.assert_allclose(l4, l1, rtol=1e-5)
    np.testing.assert_allclose(hist[1]["effective_rank"], hist[0]["effective_rank"], rtol=1e-4)
