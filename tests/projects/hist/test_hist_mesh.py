"""HiST's neural fits on a 4-device mesh against one device: the spatial models (one section a
step: its spots split over ``"data"``, the lattice plan replicated) and the per-spot MLP (its
rows split).

Tolerance: each step's loss is a masked mean over a section's spots (the MLP's: over all
training rows); on the mesh it is 4 partial sums added across devices, so a step's loss and
gradient differ from one device's by the float32 rounding of a reordered sum (relative ~ a few
2**-24 ~ 6e-8). Dropout draws the same masks on any layout (partitionable threefry). Over the
4 AdamW steps of the test the differences are carried, not amplified: ``rtol=1e-5`` on every
step's loss, ``rtol=1e-4, atol=1e-5`` on the held-out predictions.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fidia_jax.projects.hist import data
from fidia_jax.projects.hist.configs import get_config
from fidia_jax.projects.hist.train import _prepare, fit_predict


@pytest.mark.parametrize("method", ["hist", "mlp"])
def test_mesh_matches_one_device(method, fit_calls):
    secs = data.synthetic_sections(3, shape=(8, 8), n_features=6, n_genes=8, seed=3)
    prep = _prepare(secs, 6, "all_sections", folds=3)
    view = prep.for_fold(2)  # trained on sections 0 and 1: 29 + 35 = 64 spots (the MLP's rows)
    config = get_config("tiny", num_genes=6, eval_genes=3, epochs=2, methods=(method,))
    preds = [
        fit_predict(method, view, [0, 1], 2, dataclasses.replace(config, num_devices=n))[0]
        for n in (1, 0)
    ]
    (n1, l1), (n4, l4) = [(c.mesh_size, c.losses()) for c in fit_calls]
    assert (n1, n4) == (1, 4) and len(l1) == 4  # 2 epochs x 2 training sections
    np.testing.assert_allclose(l4, l1, rtol=1e-5)
    np.testing.assert_allclose(preds[1], preds[0], rtol=1e-4, atol=1e-5)
    assert np.std(preds[0]) > 0
