"""Runs one command as N JAX processes on this machine (a laptop's multi-host rehearsal).

Each process gets the environment that :func:`fidia_jax.parallel.initialize_distributed` reads
(``JAX_COORDINATOR_ADDRESS=localhost:<free port>``, ``JAX_NUM_PROCESSES``, ``JAX_PROCESS_ID``),
CPU devices (``JAX_PLATFORMS=cpu``, ``--devices`` host devices each through
``XLA_FLAGS=--xla_force_host_platform_device_count``) and gloo CPU collectives
(``JAX_CPU_COLLECTIVES_IMPLEMENTATION=gloo``), so a driver that puts its work on
:func:`fidia_jax.parallel.data_mesh` trains on ``N x devices`` devices across N processes.

Usage (installed with the package; ``make multiprocess`` from a clone)::

  python -m fidia_jax.launch -n 2 --devices 2 -- \\
      fidia-jax ldl train --config tiny --workdir /tmp/ldl_mp

The launcher never hangs: when a process exits with an error, the others are stopped after
``--grace`` seconds (the coordinator's own failure detection can take minutes); after
``--timeout`` seconds all are stopped (also when the launcher itself gets SIGTERM). Its exit status is the first non-zero one of the
processes (124 on a timeout), else 0. Outputs pass through unchanged (only process 0 of a
``fidia_jax.train`` run prints tables and progress; the others print one line per fit).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["free_port", "launch", "main", "process_env"]


def free_port() -> int:
    """A TCP port on localhost that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("localhost", 0))
        return int(s.getsockname()[1])


def process_env(
    rank: int, n: int, port: int, devices: int, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of process ``rank`` of ``n`` (``base``: :data:`os.environ`)."""
    env = dict(os.environ if base is None else base)
    flags = [f for f in env.get("XLA_FLAGS", "").split() if "device_count" not in f]
    env.update(
        JAX_PLATFORMS="cpu",
        JAX_CPU_COLLECTIVES_IMPLEMENTATION="gloo",
        JAX_COORDINATOR_ADDRESS=f"localhost:{port}",
        JAX_NUM_PROCESSES=str(n),
        JAX_PROCESS_ID=str(rank),
        XLA_FLAGS=" ".join([*flags, f"--xla_force_host_platform_device_count={devices}"]),
    )
    return env


def _stop(procs: Sequence[subprocess.Popen], codes: list[int | None]) -> None:
    """SIGTERM to each running process's group (a nested launcher stops its own processes),
    SIGKILL 3 s later; the code of a process stopped here is ``-9``."""
    running = [i for i, p in enumerate(procs) if p.poll() is None]
    for i in running:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(procs[i].pid, signal.SIGTERM)
    deadline = time.monotonic() + 3.0
    for i in running:
        try:
            procs[i].wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(procs[i].pid, signal.SIGKILL)
            procs[i].wait()
    for i, p in enumerate(procs):
        codes[i] = -9 if i in running else p.returncode


def launch(
    command: Sequence[str],
    *,
    n: int = 2,
    devices: int = 2,
    timeout: float = 600.0,
    grace: float = 10.0,
    env: Mapping[str, str] | None = None,
    outputs: Sequence[Any] | None = None,
) -> list[int]:
    """Runs ``command`` as ``n`` processes; returns their exit codes (``-9``: killed here).

    Args:
      command: the program and its arguments (the same for every process).
      n: number of processes (``>= 1``).
      devices: CPU devices per process (``>= 1``).
      timeout: seconds before every process still running is killed.
      grace: seconds the others may run on once a process failed.
      env: base environment (``None``: :data:`os.environ`).
      outputs: per process, a ``(stdout, stderr)`` pair of open files (``None``: inherit).

    Raises:
      ValueError: ``n`` or ``devices`` below 1, or an empty command.
    """
    if n < 1 or devices < 1 or not command:
        raise ValueError(f"need n >= 1, devices >= 1 and a command, got {n}, {devices}, {command}")
    port = free_port()
    procs = []
    for rank in range(n):
        out, err = outputs[rank] if outputs is not None else (None, None)
        procs.append(
            subprocess.Popen(
                list(command),
                env=process_env(rank, n, port, devices, env),
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
        )
    deadline = time.monotonic() + timeout
    codes: list[int | None] = [None] * n
    failed_at = None
    try:
        while any(c is None for c in codes):
            for i, p in enumerate(procs):
                if codes[i] is None:
                    codes[i] = p.poll()
                    if codes[i] not in (None, 0) and failed_at is None:
                        failed_at = time.monotonic()
            now = time.monotonic()
            if now > deadline or (failed_at is not None and now > failed_at + grace):
                break
            time.sleep(0.1)
    finally:
        _stop(procs, codes)
    return [int(c) for c in codes]  # type: ignore[arg-type]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m fidia_jax.launch", description=__doc__.split("\n")[0]
    )
    parser.add_argument("-n", "--num-processes", type=int, default=2)
    parser.add_argument("--devices", type=int, default=2, help="CPU devices per process")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds, then kill all")
    parser.add_argument("--grace", type=float, default=10.0, help="seconds after a failure")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- program args ...")
    args = parser.parse_args(argv)
    # stopped from outside (a test's timeout, a batch system): stop the processes too
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    codes = launch(
        command,
        n=args.num_processes,
        devices=args.devices,
        timeout=args.timeout,
        grace=args.grace,
    )
    bad = [(i, c) for i, c in enumerate(codes) if c != 0]
    for i, c in bad:
        why = "killed by the launcher (timeout, or another process failed)" if c == -9 else c
        print(f"localhost_multiprocess: process {i} exited with {why}", file=sys.stderr)
    if not bad:
        return 0
    return 124 if all(c == -9 for _, c in bad) else next(c for _, c in bad if c != -9) or 1


if __name__ == "__main__":
    sys.exit(main())
