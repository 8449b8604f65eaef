"""A fixture that runs a command as N real JAX processes on localhost.

It uses :mod:`fidia_jax.launch` (the launcher the docs give users): a coordinator
on a free port, gloo CPU collectives, ``devices`` host CPU devices per process. Every run has a
timeout; nothing outlives it (the launcher kills all processes), and a failure shows every
process's output.
"""

from __future__ import annotations

import os
import pathlib
import sys
from typing import NamedTuple

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
HERE = pathlib.Path(__file__).resolve().parent


from fidia_jax import launch as launcher  # noqa: E402


class Proc(NamedTuple):
    code: int
    stdout: str
    stderr: str


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("FIDIA_COMPILATION_CACHE", "off")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    for var in ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID"):
        env.pop(var, None)
    return env


@pytest.fixture
def single_process_env():
    """The environment of a plain one-process run with 4 host CPU devices (the reference)."""
    return {**_env(), "XLA_FLAGS": "--xla_force_host_platform_device_count=4"}


@pytest.fixture
def multiprocess(tmp_path):
    """``multiprocess(args, n=2, devices=2, timeout=90, expect_ok=True) -> [Proc, ...]``:
    runs ``python <args>`` as ``n`` processes; fails the test with every output on a timeout
    or (with ``expect_ok``) a non-zero exit."""
    counter = [0]

    def run(args, *, n=2, devices=2, timeout=90.0, grace=10.0, expect_ok=True):
        counter[0] += 1
        logs = tmp_path / f"logs{counter[0]}"
        logs.mkdir()
        files = [
            (open(logs / f"{i}.out", "w+"), open(logs / f"{i}.err", "w+"))  # noqa: SIM115
            for i in range(n)
        ]
        try:
            codes = launcher.launch(
                [sys.executable, *map(str, args)],
                n=n,
                devices=devices,
                timeout=timeout,
                grace=grace,
                env=_env(),
                outputs=files,
            )
        finally:
            for f in (f for pair in files for f in pair):
                f.close()
        procs = [
            Proc(c, (logs / f"{i}.out").read_text(), (logs / f"{i}.err").read_text())
            for i, c in enumerate(codes)
        ]
        if expect_ok and any(p.code != 0 for p in procs):
            shown = "\n".join(
                f"--- process {i} (exit {p.code}) stdout:\n{p.stdout[-3000:]}\n"
                f"--- stderr:\n{p.stderr[-3000:]}"
                for i, p in enumerate(procs)
            )
            pytest.fail(
                f"{n} processes of {args}: not all exited with 0 (-9: stopped after the "
                f"{timeout} s timeout or {grace} s after another one failed)\n{shown}"
            )
        return procs

    return run


#: Worker scripts the tests run in subprocesses (they read sys.argv): never imported by pytest,
#: also not by --doctest-modules.
collect_ignore = ["ckpt_worker.py", "die_worker.py", "fidia_worker.py", "lm_worker.py"]
