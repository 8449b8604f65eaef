"""StreamFlow's training steps on a 4-device data mesh equal one device for the same batches."""

import dataclasses

import jax
import numpy as np
import pytest

from fidia_jax import parallel
from fidia_jax.projects import streamflow
from fidia_jax.projects.streamflow.train import digit_split, init_flow, train_flow


@pytest.mark.parametrize("sharding", ["replicated", "fsdp"])
def test_four_devices_match_one(sharding):
    if jax.device_count() < 4:
        pytest.skip("needs 4 devices (tests/conftest.py forces 4 CPU devices)")
    cfg = dataclasses.replace(streamflow.get_config("tiny"), train_steps=4, param_sharding=sharding)
    images, _ = digit_split(cfg)
    apply_fn, params = init_flow(cfg)
    runs = {}
    for n in (1, 4):
        c = dataclasses.replace(cfg, num_devices=n)
        p, losses = train_flow(apply_fn, params, images, c.train_steps, c, seed=1, quiet=True)
        runs[n] = (parallel.to_host(p), np.asarray(losses))
    # the mesh run really split the batch: its parameters live on the 4 devices
    assert len(jax.tree.leaves(p)[0].sharding.device_set) == 4
    # float32, only the summation order of the cross-device reductions differs (a few ulp per
    # step; 4 Adam steps stay far below 1e-5 relative on the losses)
    np.testing.assert_allclose(runs[4][1], runs[1][1], rtol=1e-5)
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5), runs[4][0], runs[1][0]
    )
