"""``train.fit_llama(mesh=)`` (the language-model drivers' training run) as 2 real processes.

2 processes x 2 CPU devices (gloo) against 1 process x 4 devices, the same tiny random Llama,
data and global batch (8 rows). Tolerance: both runs compute the same program on a 4-way
``data`` mesh; only the order of the cross-device sums of the loss mean and the gradient
differs (gloo's all-reduce against XLA's in-process one), a few float32 ulps per step
(relative ~1e-7), which 6 Adam steps carry forward without amplifying much: losses at
``rtol=1e-5``, far below the loss's change over the run (asserted above 10 %), so a run on
other rows or a doubled step would fail.

Checkpoints: the final orbax checkpoint of the 2-process run, restored by a 1-process run
(``fit`` resumes a finished run: nothing trained), gives back the 2-process parameters bit for
bit; the 1-process checkpoint restored by 2 processes gives back its own.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.integration

WORKER = pathlib.Path(__file__).resolve().parent / "lm_worker.py"


def _params(npz):
    return {k: v for k, v in npz.items() if k.startswith("param/")}


def test_fit_llama_two_processes_match_one_and_checkpoints_cross(
    multiprocess, single_process_env, tmp_path
):
    w2, w1 = tmp_path / "w2", tmp_path / "w1"
    p0, p1 = multiprocess([WORKER, w2, tmp_path / "two.npz", 6], n=2, devices=2)
    assert "lm: process 1/2 done" in p1.stderr and "final loss" not in p1.stderr
    assert "final loss" in p0.stderr
    one_proc = [sys.executable, str(WORKER), str(w1), str(tmp_path / "one.npz"), "6"]
    subprocess.run(one_proc, env=single_process_env, check=True, timeout=90, capture_output=True)
    two, one = dict(np.load(tmp_path / "two.npz")), dict(np.load(tmp_path / "one.npz"))
    assert two["losses"].shape == (6,)
    assert abs(two["losses"][-1] - two["losses"][0]) > 0.1 * two["losses"][0]  # it trains
    np.testing.assert_allclose(two["losses"], one["losses"], rtol=1e-5)
    rows = [json.loads(line) for line in (w2 / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, 7))  # written once, by process 0
    np.testing.assert_allclose([r["loss"] for r in rows], two["losses"], rtol=1e-6)

    # the 2-process checkpoint in 1 process, the 1-process checkpoint in 2: bit for bit
    again = [sys.executable, str(WORKER), str(w2), str(tmp_path / "r21.npz"), "6"]
    subprocess.run(again, env=single_process_env, check=True, timeout=90, capture_output=True)
    multiprocess([WORKER, w1, tmp_path / "r12.npz", 6], n=2, devices=2)
    for restored, saved in (("r21", two), ("r12", one)):
        got = _params(np.load(tmp_path / f"{restored}.npz"))
        want = _params(saved)
        assert got.keys() == want.keys() and len(got) > 5
        for k, v in want.items():
            assert got[k].dtype == v.dtype and got[k].tobytes() == v.tobytes(), (restored, k)
