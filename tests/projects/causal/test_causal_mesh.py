"""TARNet/CFR and CausalEGM gradient steps on a 4-device data mesh equal one device's."""

import dataclasses

import jax
import numpy as np
import pytest

from fidia_jax import train
from fidia_jax.projects import causal
from fidia_jax.projects.causal import _fit, data

# float32 networks; only the summation order of the cross-device reductions differs between
# the runs (a few ulp per step), which a handful of Adam steps carries to well below 1e-5.
RTOL = 1e-5


@pytest.fixture(autouse=True)
def _four_devices():
    if jax.device_count() < 4:
        pytest.skip("needs 4 devices (tests/conftest.py forces 4 CPU devices)")


def _data(k):
    rng = np.random.default_rng(0)
    return data.make_multiarm(rng.normal(size=(96, 5)), k, seed=1)


@pytest.mark.parametrize(("scheme", "sharding"), [("pairwise", "replicated"), ("none", "fsdp")])
def test_cfr_four_devices_match_one(tmp_path, scheme, sharding):
    d = _data(3)
    s = causal.CfrSettings(
        scheme=scheme, alpha=1.0 if scheme != "none" else 0.0, rep_hidden=(16, 16),
        head_hidden=(8,), batch_size=32, iterations=6, param_sharding=sharding,
    )  # fmt: skip
    out = {}
    for n in (1, 4):
        predict, info = causal.fit_cfr(
            d, dataclasses.replace(s, num_devices=n), seed=0, workdir=tmp_path, run=f"n{n}"
        )
        losses = [r["loss"] for r in train.read_metrics(tmp_path / "metrics.jsonl", f"n{n}")]
        out[n] = (np.asarray(losses), info["final_factual_mse"], predict(d.x))
    assert _fit._mesh(32, 4).size == 4 and out[1][0].shape == (6,)
    np.testing.assert_allclose(out[4][0], out[1][0], rtol=RTOL)
    np.testing.assert_allclose(out[4][1], out[1][1], rtol=RTOL)
    np.testing.assert_allclose(out[4][2], out[1][2], rtol=RTOL, atol=1e-5)


def test_causalegm_four_devices_match_one():
    d = _data(2)
    s = causal.EgmSettings(
        n_iter=3, batches_per_eval=1, batch_size=16, g_d_freq=2, z_dims=(1, 2, 1, 2),
        g_units=(8,), e_units=(8,), f_units=(8,), h_units=(8,), dz_units=(8,), dv_units=(8,),
    )  # fmt: skip
    out = {}
    for n in (1, 4):
        predict, info = causal.fit_causalegm(d, dataclasses.replace(s, num_devices=n), seed=0)
        out[n] = (np.asarray([m for _, m in info["evals"]]), predict(d.x))
    assert out[1][0].shape == (4,)  # an evaluation after every iteration (0..3)
    np.testing.assert_allclose(out[4][0], out[1][0], rtol=RTOL)
    np.testing.assert_allclose(out[4][1], out[1][1], rtol=RTOL, atol=1e-5)
