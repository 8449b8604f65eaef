"""An image driver killed with SIGKILL while it trains, rerun with the same command, ends with
exactly the results of an uninterrupted run (the pattern of FIDIA's test in tests/projects/fidia).

``fidia-jax streamflow train --config tiny`` with 120 flow steps, a checkpoint every 30 and no
reflow round (to stay near a minute) runs as a subprocess; it is killed (``kill -9``) as soon as
its first checkpoint of the ``flow`` fit is on disk, then the same command runs again in the
same work directory: the fit resumes from the newest complete checkpoint (a save cut by the kill
is detected and dropped), the evaluation follows. The
results file, ``summary.json`` and ``metrics.jsonl`` must equal those of an uninterrupted run,
timings excepted. The three runs share JAX's persistent compilation cache (the later two load
the programs the first compiled: the same executables, so the same numbers, in less time).
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from fidia_jax.projects import streamflow

SETTINGS = ["train_steps=120", "checkpoint_every=30", "reflow_rounds=0"]


def _command(workdir):
    sets = [a for s in SETTINGS for a in ("--set", s)]
    return [sys.executable, "-m", "fidia_jax.cli", "streamflow", "train", "--config", "tiny",
            "--workdir", str(workdir), *sets]  # fmt: skip


def _env(cache):
    return dict(
        os.environ,
        JAX_PLATFORMS="cpu",
        XLA_FLAGS="--xla_force_host_platform_device_count=1",
        FIDIA_QUIET="1",
        JAX_COMPILATION_CACHE_DIR=str(cache),
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
        JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0",
    )


def _without_timings(obj):
    if isinstance(obj, dict):
        return {
            k: _without_timings(v)
            for k, v in obj.items()
            if not (k.endswith("seconds") or k == "wall_s")
        }
    if isinstance(obj, list):
        return [_without_timings(v) for v in obj]
    return obj


def _results(workdir):
    return {
        name: _without_timings(json.loads((workdir / name).read_text()))
        for name in (streamflow.SUMMARY_FILE, "summary.json")
    }


@pytest.mark.integration
def test_sigkill_while_training_then_rerun_equals_uninterrupted(tmp_path):
    full, killed, env = tmp_path / "full", tmp_path / "killed", _env(tmp_path / "xla_cache")
    done = subprocess.run(_command(full), env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]

    proc = subprocess.Popen(_command(killed), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    ckpts = killed / "checkpoints" / "flow"
    deadline = time.monotonic() + 300
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if ckpts.is_dir() and any(p.name.isdigit() for p in ckpts.iterdir()):
                os.kill(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.02)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL, err[-3000:]
    assert not (killed / streamflow.SUMMARY_FILE).exists()
    flow_steps = [
        json.loads(line)["step"]
        for line in (killed / "metrics.jsonl").read_text().splitlines()
        if '"flow"' in line
    ]
    assert 30 <= max(flow_steps) < 120  # killed in the middle of the flow fit

    again = subprocess.run(_command(killed), env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert _results(killed) == _results(full)
    lines = lambda d: (d / "metrics.jsonl").read_text().splitlines()  # noqa: E731
    assert lines(killed) == lines(full)
    assert (killed / "samples.png").is_file() and (killed / "curves.png").is_file()
