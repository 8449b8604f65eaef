"""SafeSci's small Llama: its training steps on a 4-device data mesh equal one device's."""

import dataclasses
import pathlib

import jax
import numpy as np
import pytest
from flax import nnx

from fidia_jax import parallel
from fidia_jax.projects.safesci import get_config, train_safesci_llama
from fidia_jax.projects.safesci.models import _train_mesh
from fidia_jax.projects.safesci.records import load_safesci_jsonl

FIXTURE = pathlib.Path(__file__).parents[2] / "data" / "safesci" / "benign.jsonl"


def test_four_devices_match_one():
    if jax.device_count() < 4:
        pytest.skip("needs 4 devices (tests/conftest.py forces 4 CPU devices)")
    cfg = get_config("tiny", llm_steps=4, llm_layers=1, llm_augment=1)  # batch 8: 2 rows a device
    # num_devices=1 keeps the one-device program (no mesh, no sharding), as before issue 40
    assert _train_mesh(dataclasses.replace(cfg, num_devices=1)) is None
    assert _train_mesh(dataclasses.replace(cfg, num_devices=4)).size == 4
    assert _train_mesh(dataclasses.replace(cfg, num_devices=3)).size == 2  # the most dividing 8
    records = load_safesci_jsonl(FIXTURE)
    runs = {}
    for n in (1, 4):
        trained = train_safesci_llama(records, dataclasses.replace(cfg, num_devices=n))
        params = parallel.to_host(nnx.state(trained.model, nnx.Param))
        runs[n] = (trained.losses, params, trained.info)
    assert runs[1][0].shape == (4,) and np.all(np.isfinite(runs[1][0]))
    assert runs[4][2]["rows"] == runs[1][2]["rows"] and runs[4][2]["vocab"] == runs[1][2]["vocab"]
    # float32; only the summation order of the cross-device mean differs (a few ulp per step)
    np.testing.assert_allclose(runs[4][0], runs[1][0], rtol=1e-5)
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6), runs[4][1], runs[1][1]
    )
