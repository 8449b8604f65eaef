"""Input/output helpers shared by every layer: atomic files (a reader never sees a half-written
file, DESIGN.md #12), strict JSON (:func:`json_text`), the one data-directory rule
(:func:`resolve_data_dir`), and the rich console, tables and progress display of the drivers and
the CLI."""

from __future__ import annotations

import contextlib
import json
import math
import os
import pathlib
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from fidia_jax.errors import DataError

__all__ = [
    "read_json_lines",
    "DATA_DIR_ENV",
    "NON_FINITE_KEY",
    "Reporter",
    "atomic_path",
    "atomic_write_text",
    "json_text",
    "make_console",
    "print_table",
    "resolve_data_dir",
]

#: Environment variable naming the shared data directory (second in :func:`resolve_data_dir`).
DATA_DIR_ENV = "FIDIA_DATA_DIR"

#: Top-level field that :func:`json_text` adds to a JSON object in which it wrote ``null`` for a
#: non-finite number: ``{"<path>": "nan" | "inf" | "-inf"}``, path as ``a.b.0.c``.
NON_FINITE_KEY = "non_finite"


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[pathlib.Path]:
    """Yields a temporary path beside ``path``; on success it is renamed onto ``path``.

    The temporary file keeps ``path``'s suffix (so writers that infer a format from it, such as
    matplotlib's ``savefig``, still work). On any exception the temporary file is removed and
    ``path`` is left as it was.
    """
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.", suffix=f".tmp{path.suffix}"
    )
    os.close(fd)
    try:
        yield pathlib.Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600; give the usual permissions
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Writes ``text`` to ``path`` through a temporary file and ``os.replace``."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def json_text(obj: Any, *, indent: int | None = None) -> str:
    """``obj`` as strict JSON text: every JSON file the package writes goes through this.

    JSON has no NaN or Infinity (Python's ``json`` would write the invalid tokens ``NaN`` /
    ``Infinity``, which strict readers such as ``jq`` or JavaScript reject). The rule: a
    non-finite number is written as ``null``, and when ``obj`` is a mapping the output gains a
    top-level field ``"non_finite"`` (:data:`NON_FINITE_KEY`) mapping the path of every such
    ``null`` to what it was (``{"metrics.max@4": "nan"}``), so a reader can tell a missing value
    from a non-finite one. Finite values are written exactly as ``json.dumps`` writes them.

    NumPy / JAX scalars and arrays become numbers and (nested) lists; any other object is
    converted with ``float`` (as ``json.dumps(..., default=float)`` did). ``allow_nan=False``
    guards the rule.

    Args:
      obj: dicts, lists, tuples, strings, numbers, booleans, ``None``, NumPy or JAX values.
      indent: as for ``json.dumps`` (``None``: one line).

    Returns:
      The JSON text (no trailing newline).

    Raises:
      TypeError: a value that is none of the above and not convertible with ``float``.
    """
    replaced: dict[str, str] = {}
    clean = _finite_json(obj, "", replaced)
    if replaced and isinstance(clean, dict):
        clean = {**clean, NON_FINITE_KEY: replaced}
    return json.dumps(clean, indent=indent, allow_nan=False)


def _finite_json(x: Any, path: str, replaced: dict[str, str]) -> Any:
    if x is None or isinstance(x, (str, bool, int)):
        return x
    if isinstance(x, float):
        if math.isfinite(x):
            return x
        replaced[path or "."] = "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
        return None
    if isinstance(x, Mapping):
        return {
            k: _finite_json(v, f"{path}.{k}" if path else str(k), replaced) for k, v in x.items()
        }
    if isinstance(x, (list, tuple)):
        return [
            _finite_json(v, f"{path}.{i}" if path else str(i), replaced) for i, v in enumerate(x)
        ]
    if hasattr(x, "__array__") or type(x).__module__ == "numpy":
        import numpy as np

        return _finite_json(np.asarray(x).tolist(), path, replaced)
    return _finite_json(float(x), path, replaced)


def read_json_lines(
    path: str | os.PathLike[str], *, what: str = "JSONL file"
) -> list[tuple[int, Any]]:
    """The JSON values of a JSON Lines file, with their 1-based line numbers (blank lines skipped).

    Python's ``json`` reads the ``NaN`` / ``Infinity`` some writers emit.

    Raises:
      DataError: ``"<what> not found: <path>"`` or ``"<path>: cannot read (...)"``; a line that is
        not valid JSON: ``"<file name>:<line>: not valid JSON (<reason>)"``.
    """
    path = pathlib.Path(path)
    if not path.is_file():
        raise DataError(f"{what} not found: {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise DataError(f"{path}: cannot read ({getattr(e, 'strerror', None) or e})") from e
    out = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append((n, json.loads(line)))
        except json.JSONDecodeError as e:
            raise DataError(f"{path.name}:{n}: not valid JSON ({e.msg})") from None
    return out


def resolve_data_dir(data_dir: str | os.PathLike[str] | None = None) -> pathlib.Path:
    """The shared data directory, by the one rule every driver and loader follows.

    Order: ``data_dir`` (the ``--data-dir`` option, a config's ``data.data_dir``, a loader's
    ``data_dir`` argument), else ``$FIDIA_DATA_DIR``; nothing else (there is no guess next to the
    checkout, so a run never reads data the user did not name).

    Raises:
      DataError: neither is set (the message says how to set it), or the directory does not exist.
    """
    if data_dir is None or str(data_dir) == "":
        data_dir = os.environ.get(DATA_DIR_ENV) or None
    if data_dir is None:
        raise DataError(
            f"no data directory given: pass --data-dir DIR (or data_dir=DIR) or set "
            f"{DATA_DIR_ENV}=DIR, the folder holding the shared data (e.g. ../shared/data)"
        )
    path = pathlib.Path(data_dir)
    if not path.is_dir():
        raise DataError(f"data directory not found: {path} does not exist")
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def make_console(*, stderr: bool = False):
    """A ``rich`` console; 120 columns wide when not writing to a terminal (logs, pipes), where
    rich would otherwise truncate tables at 80 columns. ``$COLUMNS`` still wins."""
    from rich.console import Console

    console = Console(stderr=stderr)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(stderr=stderr, width=120)
    return console


def is_smoke_run() -> bool:
    """Whether this is a smoke run whose numbers are not results: ``$FIDIA_SMOKE`` (set by the
    command line for ``--config tiny``) or ``$FIDIA_NOTEBOOK_TINY`` is set and not ``0``."""
    return any(
        os.environ.get(k, "0") not in ("", "0") for k in ("FIDIA_SMOKE", "FIDIA_NOTEBOOK_TINY")
    )


def print_table(console, title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Prints a ``rich`` table on ``console`` (``None``: prints nothing, the quiet mode).

    Floats are shown with 3 decimals; anything else with ``str`` (format a value yourself for
    another precision). In a smoke run (:func:`is_smoke_run`: the ``tiny`` preset from the
    command line, or a notebook in tiny mode) the table's title says that its numbers are not
    results.
    """
    if console is None:
        return
    from rich.markup import escape
    from rich.table import Table

    if is_smoke_run():
        console.print("smoke test (tiny settings): the numbers below are not results")
    table = Table(title=escape(title))
    for c in columns:  # headers and cells wrap, never cut ("kl_divergenc"); brackets are text
        table.add_column(escape(str(c)), overflow="fold", min_width=min(len(str(c)), 24))
    for r in rows:
        table.add_row(*(escape(f"{x:.3f}" if isinstance(x, float) else str(x)) for x in r))
    console.print(table)


class Reporter:
    """Progress stages on stderr and tables on stdout (``rich``); silent when ``quiet``.

    Use as a context manager; ``with reporter.stage("loading"):`` marks one stage. The progress
    display is transient (nothing of it remains after the run, so an error leaves exactly one
    line on stderr) and disabled when stderr is not a terminal.
    """

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self._progress = None
        self.err = None if quiet else make_console(stderr=True)
        self.out = None if quiet else make_console()

    def __enter__(self):
        if not self.quiet:
            from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                console=self.err, transient=True, disable=not self.err.is_terminal,
            )  # fmt: skip
            self._progress.__enter__()
        return self

    def __exit__(self, *exc):
        if self._progress is not None:
            self._progress.__exit__(*exc)
        return False

    @contextlib.contextmanager
    def stage(self, description: str) -> Iterator[None]:
        """Marks one stage of the run (completed when the block exits without an exception)."""
        task = None if self._progress is None else self._progress.add_task(description, total=1)
        yield
        if task is not None:
            self._progress.update(task, completed=1)

    def table(self, title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """:func:`print_table` on stdout (nothing when quiet)."""
        print_table(self.out, title, columns, rows)


def is_quiet() -> bool:
    """``True`` when ``$FIDIA_QUIET`` is set to something other than ``0`` / empty."""
    return os.environ.get("FIDIA_QUIET", "0") not in ("", "0")


def _err_console():
    from fidia_jax import parallel

    return None if is_quiet() or not parallel.is_primary() else make_console(stderr=True)


STILL_RUNNING_EVERY_S = 8.0
"""Seconds between two ``still running`` lines of a stage (the house rule: no stage silent for
more than 10 s)."""


_BEATS: list[object] = []
"""The open heartbeats and live displays, innermost last: only the innermost prints (a stage
around a loader's stage, or around a fit's progress bar, stays quiet while the inner one
speaks)."""


@contextlib.contextmanager
def quiet_outer_beats() -> Iterator[None]:
    """Silences the heartbeats already running while the block runs (for a live display, such
    as a progress bar, that shows progress itself)."""
    token = object()
    _BEATS.append(token)
    try:
        yield
    finally:
        _BEATS.remove(token)


@contextlib.contextmanager
def beat_every(console, line, every_s: float = STILL_RUNNING_EVERY_S) -> Iterator[None]:
    """Prints ``line(seconds since the start)`` on ``console`` every ``every_s`` seconds while
    the block runs, from a daemon thread, when no inner heartbeat or live display
    (:func:`quiet_outer_beats`) is running (nothing at all when ``console`` is ``None`` or
    ``every_s <= 0``). The thread is stopped and joined when the block exits, also on an
    exception."""
    import threading
    import time

    if console is None or every_s <= 0:
        yield
        return
    done = threading.Event()
    t0 = time.perf_counter()
    token = object()

    def beat() -> None:
        while not done.wait(every_s):
            if _BEATS and _BEATS[-1] is token:
                console.print(line(time.perf_counter() - t0), highlight=False, markup=False)

    _BEATS.append(token)
    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        _BEATS.remove(token)


@contextlib.contextmanager
def stage(description: str, *, every_s: float = STILL_RUNNING_EVERY_S) -> Iterator[None]:
    """Prints ``description …`` when the block starts, ``description: still running, N s``
    every ``every_s`` seconds while it runs (``0``: never), and ``done in N s`` when it ends (on
    stderr; nothing when quiet, nor on a process other than 0). Public as
    :func:`fidia_jax.train.stage`; here so that every layer (the model loaders too) can say
    what it is doing, and no stage of a run sits silent for longer than ``every_s``.

    Example::

      with train.stage("loading HER2ST"):
          sections = load_her2st(data_dir)
    """
    import time

    from rich.markup import escape

    console = _err_console()
    t0 = time.perf_counter()
    if console is not None:
        console.print(f"[bold]{escape(description)}[/] …", highlight=False)
    with beat_every(console, lambda s: f"  {description}: still running, {s:.0f} s", every_s):
        yield
    if console is not None:
        console.print(
            f"  {escape(description)}: done in {time.perf_counter() - t0:.1f} s", highlight=False
        )
