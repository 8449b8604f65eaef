"""The multi-fidelity comparison on a 4-device mesh (its 4 runs split over ``"data"``, one per
device; the method's loss weights replicated) against one device.

Tolerance: the runs are independent (each run's gradient is its own objective's), so a device
computes its run exactly as one device does; only the sum over runs of the reported loss (and
the global gradient norm) is reordered across devices. Within a run, XLA may still fuse and
order the per-row reductions differently for the smaller per-device program (float32, relative
~ 1e-7 per step). Over 5 AdamW steps: ``rtol=1e-5`` on every step's mean loss and on the test
RMSE of each run.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fidia_jax import parallel
from fidia_jax.projects.multifidelity import get_config, run_methods


def test_mesh_matches_one_device(fit_calls):
    assert parallel.data_mesh(4).size == 4  # tests/conftest.py forces 4 host devices
    config = get_config("tiny", num_seeds=4, steps=5,
                        methods=("trusted_subsets", "hf_only", "pretrain_finetune"))  # fmt: skip
    one = run_methods(dataclasses.replace(config, num_devices=1))
    four = run_methods(config)
    fit_runs = [(c.run, c.mesh_size, c.losses("mean_loss")) for c in fit_calls]
    half = len(fit_runs) // 2
    assert [n for _, n, _ in fit_runs] == [1] * half + [4] * half
    for (r1, _, l1), (r4, _, l4) in zip(fit_runs[:half], fit_runs[half:], strict=True):
        assert r1 == r4
        np.testing.assert_allclose(l4, l1, rtol=1e-5, err_msg=r1)
    for m in config.methods:
        np.testing.assert_allclose(four["methods"][m]["rmse"], one["methods"][m]["rmse"],
                                   rtol=1e-5, err_msg=m)  # fmt: skip
