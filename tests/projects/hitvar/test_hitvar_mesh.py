"""HIT-VAR's training phases on a 4-device mesh (each batch of 8 crops split over ``"data"``,
the step's PRNG key replicated) against one device: the HIT tokenizer (a custom step: the
gradient step, then the EMA codebook update from the step's statistics) and the conv SR net.

Tolerance: each step's loss is a mean over the batch's pixels; on the mesh it is 4 partial sums
added across devices, and the EMA codebook statistics (sums over the batch's latent vectors) are
reordered the same way, so every step differs from one device's by the float32 rounding of a
reordered sum (relative ~ a few 2**-24 ~ 6e-8). Over 3 Adam steps these are carried, not
amplified: ``rtol=1e-5`` on every step's loss, ``rtol=1e-4, atol=1e-6`` on the trained
parameters and codebook.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest
from flax import nnx

from fidia_jax import parallel
from fidia_jax.projects import hitvar
from fidia_jax.projects.hitvar._common import _schedule
from fidia_jax.projects.hitvar.train import _train_conv_sr, _train_tokenizer


@pytest.mark.parametrize("phase", ["tokenizer", "conv_sr"])
def test_mesh_matches_one_device(phase, fit_calls):
    config = hitvar.get_config("tiny", n_train=16)
    assert parallel.data_mesh(config.batch_size).size == 4  # tests/conftest.py: 4 devices
    rng = np.random.default_rng(0)
    side = config.lr_size * config.max_scale
    hr = rng.random((16, side, side, 3), dtype=np.float32)
    lr = rng.random((16, config.lr_size, config.lr_size, 3), dtype=np.float32)
    out = []
    for n in (1, 0):
        cfg = dataclasses.replace(config, num_devices=n)
        if phase == "tokenizer":
            out.append(_train_tokenizer(cfg, _schedule(cfg), hr, lr, True, 0, None, "tok"))
        else:
            out.append(_train_conv_sr(cfg, hr, lr, 2000, 0, None, "sr"))
    assert [c.mesh_size for c in fit_calls] == [1, 4]
    (m1, c1), (m4, c4) = out
    assert len(c1) == 3
    np.testing.assert_allclose(c4, c1, rtol=1e-5)
    s1, s4 = (jax.tree.leaves(nnx.state(m)) for m in (m1, m4))
    for a, b in zip(s1, s4, strict=True):
        if jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key):
            continue
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-4, atol=1e-6)
