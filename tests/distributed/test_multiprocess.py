"""Two real JAX processes on localhost (gloo CPU collectives, 2 devices each).

Tolerance of the cross-run comparison: 2 processes x 2 devices and 1 process x 4 devices run
the same program on the same 4-way mesh; only the order in which the cross-device sums
(gradients, losses) are added differs (gloo's all-reduce against XLA's in-process one). One
reordered float32 sum moves a value by a few ulp (~1e-7 relative); 12 optimiser steps of the
tiny run can amplify that, so per-step losses are compared at ``rtol=1e-5`` -- far below the
loss changes between steps (~1e-2), so a run on different data or a doubled run would fail.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import time

import numpy as np
import pytest

pytestmark = pytest.mark.integration

HERE = pathlib.Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
LAUNCHER = ["-m", "fidia_jax.launch"]  # the documented user command (python -m fidia_jax.launch)


def _losses(workdir):
    lines = (workdir / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_optimizers_tiny_two_processes_match_one(
    multiprocess, single_process_env, tmp_path, shared_data_dir
):
    two, one = tmp_path / "two", tmp_path / "one"
    cli = ["-m", "fidia_jax", "optimizers", "train", "--config", "tiny",
           "--data-dir", shared_data_dir]  # fmt: skip
    # the documented user command: the launcher itself, 2 processes x 2 devices
    procs = multiprocess([*LAUNCHER, "-n", "2", "--devices", "2", "--timeout", "80", "--",
                          sys.executable, *cli, "--workdir", two], n=1, timeout=90)  # fmt: skip
    out = procs[0].stdout + procs[0].stderr
    assert "process 1/2 done" in out
    assert out.count("optimisers trained in") == 1  # one table, from process 0
    subprocess.run([sys.executable, *map(str, cli), "--workdir", str(one)], env=single_process_env,
                   check=True, timeout=90, capture_output=True)  # fmt: skip
    a, b = _losses(two), _losses(one)
    assert len(a) == len(b) == 12  # written once, not once per process
    assert [r["step"] for r in a] == [r["step"] for r in b]
    np.testing.assert_allclose([r["loss"] for r in a], [r["loss"] for r in b], rtol=1e-5)


def test_checkpoint_across_process_counts(multiprocess, tmp_path):
    worker = HERE / "ckpt_worker.py"
    two, one = tmp_path / "ck2", tmp_path / "ck1"
    multiprocess([worker, "save", two], n=2)
    multiprocess([worker, "save", one], n=1, devices=4)
    multiprocess([worker, "restore", two, tmp_path / "r22.npz"], n=2)
    multiprocess([worker, "restore", two, tmp_path / "r21.npz"], n=1, devices=4)
    multiprocess([worker, "restore", one, tmp_path / "r12.npz"], n=2)
    rng = np.random.default_rng(0)  # the worker's values
    want = {"w": rng.standard_normal((8, 3)).astype(np.float32),
            "b": rng.standard_normal((5,)).astype(np.float32)}  # fmt: skip
    for name in ("r22", "r21", "r12"):
        got = np.load(tmp_path / f"{name}.npz")
        for k, v in want.items():
            assert got[k].dtype == v.dtype and got[k].tobytes() == v.tobytes(), (name, k)


def test_a_killed_process_stops_the_other(multiprocess):
    t0 = time.monotonic()
    procs = multiprocess([HERE / "die_worker.py"], n=2, grace=5, timeout=60, expect_ok=False)
    assert procs[1].code == 3
    assert procs[0].code != 0  # stopped (by the launcher, or by JAX's own failure detection)
    assert time.monotonic() - t0 < 45
    assert "process 0 started" in procs[0].stdout


def test_launcher_reports_the_failure(multiprocess):
    (res,) = multiprocess([*LAUNCHER, "-n", "2", "--grace", "5", "--timeout", "60", "--",
                           sys.executable, HERE / "die_worker.py"], n=1, expect_ok=False)  # fmt: skip
    assert res.code == 3
    assert "process 1 exited with 3" in res.stderr
    assert "process 0 exited with killed by the launcher" in res.stderr


def test_ldl_two_processes_match_one(multiprocess, single_process_env, tmp_path):
    # `fidia-jax ldl train` (flax NNX through train.fit(mesh=)) joins the distributed runtime:
    # 2 processes x 2 devices train together and equal 1 process x 4 devices (same global
    # batch); process 0 alone writes metrics.jsonl and prints the table, the baselines run once
    two, one = tmp_path / "two", tmp_path / "one"
    cli = ["-m", "fidia_jax", "ldl", "train", "--config", "tiny"]
    p0, p1 = multiprocess([*cli, "--workdir", two], n=2, devices=2, timeout=240)
    assert "final loss" not in p1.stderr and "smoke test" not in p1.stdout
    assert "final loss" in p0.stderr and "smoke test" in p0.stdout
    subprocess.run([sys.executable, *cli, "--workdir", str(one)], env=single_process_env,
                   check=True, timeout=240, capture_output=True)  # fmt: skip
    a, b = _losses(two), _losses(one)
    assert len(a) == len(b) > 0  # written once, not once per process
    for ra, rb in zip(a, b, strict=True):
        assert ra.keys() == rb.keys()
        for k, va in ra.items():
            if isinstance(va, float):  # float32 sums over 4 devices in another order
                assert va == pytest.approx(rb[k], rel=1e-5, abs=1e-7), (k, ra, rb)
            else:
                assert va == rb[k], (k, ra, rb)


def test_a_hanging_run_is_stopped_at_the_timeout(multiprocess):
    t0 = time.monotonic()
    procs = multiprocess(["-c", "import time; time.sleep(600)"], timeout=3, expect_ok=False)
    assert [p.code for p in procs] == [-9, -9]
    assert time.monotonic() - t0 < 20
