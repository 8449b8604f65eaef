"""A multi-fidelity run killed with SIGKILL while it trains, then started again with the same
command, ends with exactly the results of an uninterrupted run.

Three processes run ``python -m fidia_jax.cli multifidelity train`` on the tiny preset with two
methods, long fits and a checkpoint every 500 steps: an uninterrupted run and a run that is
killed (``kill -9``) as soon as its first checkpoint is complete, both started together; then the
killed command is run again in its workdir. JAX's persistent compilation cache (a folder of this
test) lets the rerun load the step the first two compiled: the same executables, so the same
numbers, and seconds instead of a compile.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from fidia_jax import train

STEPS = 1500
ARGS = [
    "multifidelity", "train", "--config", "tiny",
    "--set", 'methods=["trusted_subsets","hf_only"]',
    "--set", f"steps={STEPS}", "--set", "checkpoint_every=500",
]  # fmt: skip


def _start(workdir, cache, log):
    env = dict(
        os.environ,
        JAX_PLATFORMS="cpu",
        XLA_FLAGS="",  # one device, as a user's run (tests/conftest.py forces 4)
        JAX_COMPILATION_CACHE_DIR=str(cache),
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
        JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0",
    )
    cmd = [sys.executable, "-m", "fidia_jax.cli", *ARGS, "--workdir", str(workdir)]
    return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)


def _tail(log) -> str:
    log.seek(0)
    return log.read().decode(errors="replace")[-3000:]


def _saved_steps(ckpt_dir) -> list[int]:
    """The complete checkpoints (orbax writes ``<step>.orbax-checkpoint-tmp`` first)."""
    if not ckpt_dir.is_dir():
        return []
    return sorted(
        int(d.name) for d in ckpt_dir.iterdir() if d.name.isdigit() and train.is_complete(d)
    )


def _without_timings(obj):
    if isinstance(obj, dict):
        return {k: _without_timings(v) for k, v in obj.items() if k != "wall_s"}
    if isinstance(obj, list):
        return [_without_timings(v) for v in obj]
    return obj


def _rows(workdir):
    return [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.integration  # three driver processes (make test-integration, CI)
def test_sigkill_and_rerun_equals_uninterrupted(tmp_path):
    full, killed, cache = tmp_path / "full", tmp_path / "killed", tmp_path / "xla_cache"
    logs = {name: open(tmp_path / f"{name}.log", "w+b") for name in ("full", "killed", "rerun")}
    ckpt_dir = killed / "checkpoints" / "trusted_subsets"
    uninterrupted = _start(full, cache, logs["full"])
    victim = _start(killed, cache, logs["killed"])
    try:
        deadline = time.monotonic() + 300
        while not _saved_steps(ckpt_dir):
            assert victim.poll() is None, "the run ended before its first checkpoint"
            assert time.monotonic() < deadline, "no checkpoint after 300 s"
            time.sleep(0.02)
        victim.send_signal(signal.SIGKILL)
        assert victim.wait(timeout=60) == -signal.SIGKILL
    finally:
        victim.kill()
    # killed inside the first method's fit: a checkpoint before the last step, no results yet
    steps = _saved_steps(ckpt_dir)
    assert steps and steps[-1] < STEPS, steps
    assert not (killed / "multifidelity.json").exists()

    assert uninterrupted.wait(timeout=600) == 0, _tail(logs["full"])
    rerun = _start(killed, cache, logs["rerun"])
    assert rerun.wait(timeout=600) == 0, _tail(logs["rerun"])
    assert "trusted_subsets: compiling (resuming at step" in _tail(logs["rerun"])

    done = [json.loads((d / "multifidelity.json").read_text()) for d in (full, killed)]
    assert _without_timings(done[0]) == _without_timings(done[1])
    assert _rows(full) == _rows(killed)  # every step's loss, bit for bit
    for name in ("summary.json", "rmse.png", "predictions.png", "curves.png"):
        assert (killed / name).is_file(), name
