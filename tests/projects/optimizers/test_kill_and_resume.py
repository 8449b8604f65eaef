"""`fidia-jax optimizers train` killed with SIGKILL after its first checkpoint and run again
ends with exactly the results of an uninterrupted run (one device, bit for bit).

The three runs are subprocesses of the command line on one host CPU device. The uninterrupted
run goes first and fills JAX's persistent compilation cache; the two others load the same
executables from it instead of compiling again (the same programs, so the same numbers).
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from fidia_jax import train

STEPS, EVERY = 300, 25


def _command(workdir, data_dir):
    sets = [f"steps={STEPS}", f"checkpoint_every={EVERY}"]
    return [
        sys.executable, "-m", "fidia_jax.cli", "optimizers", "train", "--config", "tiny",
        "--workdir", str(workdir), "--data-dir", str(data_dir),
        *(a for s in sets for a in ("--set", s)),
    ]  # fmt: skip


def _env(cache_dir):
    flags = " ".join(
        f
        for f in os.environ.get("XLA_FLAGS", "").split()
        if "xla_force_host_platform_device_count" not in f  # one device: bit-exact
    )
    return dict(
        os.environ,
        XLA_FLAGS=flags,
        JAX_PLATFORMS="cpu",
        JAX_COMPILATION_CACHE_DIR=str(cache_dir),
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
        JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0",
    )


def _complete_checkpoints(workdir):
    d = workdir / "checkpoints" / "scale"
    if not d.is_dir():
        return []
    return sorted(int(p.name) for p in d.iterdir() if p.name.isdigit() and train.is_complete(p))


def _without_times(record):
    return {k: v for k, v in record.items() if k != "step_time_s"}


@pytest.mark.integration  # three tiny command-line runs (~40 s); make test-integration, CI
def test_sigkill_and_rerun_equals_uninterrupted(tmp_path, shared_data_dir):
    env = _env(tmp_path / "xla_cache")
    full, killed = tmp_path / "full", tmp_path / "killed"
    done = subprocess.run(_command(full, shared_data_dir), env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]

    proc = subprocess.Popen(
        _command(killed, shared_data_dir),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while not _complete_checkpoints(killed) and proc.poll() is None:
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL  # killed while training, not after it ended
    assert not (killed / "metrics.json").exists()
    saved = _complete_checkpoints(killed)
    assert saved and max(saved) < STEPS and all(s % EVERY == 0 for s in saved)

    rerun = subprocess.run(_command(killed, shared_data_dir), env=env, capture_output=True,
                           text=True)  # fmt: skip
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "scale: compiling (resuming at step" in rerun.stderr

    def results(workdir):
        metrics = json.loads((workdir / "metrics.json").read_text())
        del metrics["step_time_s"]
        return metrics

    def records(workdir):
        return [_without_times(r) for r in train.read_metrics(workdir / "metrics.jsonl")]

    assert results(killed) == results(full)
    assert len(results(full)["train_losses"]) == STEPS
    assert records(killed) == records(full)
    summary = {k: v for k, v in json.loads((full / "summary.json").read_text()).items()}
    resumed = json.loads((killed / "summary.json").read_text())
    assert resumed["val_loss"] == summary["val_loss"]
    assert resumed["final_train_loss"] == summary["final_train_loss"]
    assert _complete_checkpoints(killed)[-1] == STEPS
