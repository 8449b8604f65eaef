"""Results files that the documentation's tables are rendered from (issue 41).

A benchmark calls :func:`write_results` with its tables; the file it writes,
``benchmarks/results/<name>.json``, is strict JSON::

    {"command": "python benchmarks/hist.py --sizes 1000,3000",  # what to run to remake it
     "date": "2026-12-04 15:30 UTC",
     "machine": "Linux x86_64, 2 CPUs (AMD EPYC ...), jax 0.10.2 cpu",
     "commit": "0123abc...+dirty",        # git rev-parse HEAD, +dirty when the tree has changes
     "load_average": "7.9 -> 8.3",        # 1-minute load at the start and at the end of the run
     "tables": {"<key>": {"columns": [...], "rows": [[...], ...], "formats": [...]}},
     ...}                                 # anything else the benchmark keeps (raw results)

``formats`` (optional) has one entry per column: a format spec for numbers (``".3f"``,
``".2e"``, ``".1%"``) or ``null`` (numbers as ``.4g``); strings are written as they are and
``null`` cells as ``—``. ``tools/render_tables.py`` renders a page's marked region from it
(``<!-- results: benchmarks/results/<name>.json table=<key> -->`` ... ``<!-- /results -->``)
and ``--check`` fails when a page and its file disagree.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import pathlib
import platform
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


RESERVED = ("command", "date", "machine", "commit", "load_average", "tables")
"""The keys :func:`write_results` fills; a benchmark's own results may not use them."""


def load_average() -> float | None:
    """The 1-minute load average (``None`` where the OS has none)."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def _cpu_model() -> str | None:
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def machine() -> str:
    """``"<OS> <arch>, <n> CPUs (<cpu model>)"``, plus jax's version and backend when jax is
    already imported (a benchmark that used it), and on an accelerator backend the devices'
    count and kind (``..., jax 0.11.2 gpu, 1 x NVIDIA H200``)."""
    text = f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs"
    model = _cpu_model()
    if model:
        text += f" ({model})"
    jax = sys.modules.get("jax")
    if jax is not None:
        try:
            backend = jax.default_backend()
            text += f", jax {jax.__version__} {backend}"
            if backend != "cpu":
                devices = jax.devices()
                text += f", {len(devices)} x {devices[0].device_kind}"
        except Exception:  # noqa: BLE001 - a broken backend must not lose the results
            pass
    return text


def commit() -> str:
    """``$FIDIA_COMMIT`` when set (a copy of the tree without ``.git``, e.g. on a device
    machine: the commit it was copied from, ``+dirty`` when it had changes); else ``git
    rev-parse HEAD`` of the repository, with ``+dirty`` when tracked files differ from it
    (``"unknown"`` outside a git checkout); git runs in ``tools/render_tables.py``, since
    benchmarks start no processes but their peers (``benchmarks/_peers.py``)."""
    env_commit = os.environ.get("FIDIA_COMMIT", "").strip()
    if env_commit:
        return env_commit
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from render_tables import git_commit
    finally:
        sys.path.remove(str(ROOT / "tools"))
    return git_commit(ROOT)


def default_out(name: str, smoke: bool = False) -> pathlib.Path:
    """Where a benchmark writes when ``--out`` is not given: ``benchmarks/results/<name>.json``,
    or for a ``--smoke`` run a fresh temporary folder's ``<name>.json`` (a smoke run never
    replaces a results file that a page renders)."""
    if smoke:
        import tempfile

        return pathlib.Path(tempfile.mkdtemp(prefix=f"{name}_smoke_")) / f"{name}.json"
    return RESULTS / f"{name}.json"


def command_line(argv: Sequence[str] | None = None) -> str:
    """``python <script relative to the repository> <args>`` of this process."""
    argv = list(sys.argv if argv is None else argv)
    if argv:
        script = pathlib.Path(argv[0]).resolve()
        try:
            argv[0] = str(script.relative_to(ROOT))
        except ValueError:
            argv[0] = str(argv[0])
    return shlex.join(["python", *argv])


def run_fidia_cli(
    fidia_argv: Callable[[str], Sequence[str]], made: str, workdir: str | None = None
) -> tuple[dict[str, Any], str, float]:
    """Runs one ``fidia-jax`` command in this process and reads the JSON it writes (the
    benchmarks that wrap a driver's checkpoint mode).

    Args:
      fidia_argv: the command's arguments (without ``fidia-jax``) for a work directory.
      made: the file name the run writes in its work directory.
      workdir: the work directory (default: a temporary one, removed afterwards).

    Returns:
      ``(the run's JSON, the command as a shell line, wall seconds)``.

    Raises:
      SystemExit: the command failed, or left no new ``made`` (a reused work directory's older
        file is never read as this run's).
    """
    import tempfile
    import time

    from fidia_jax import cli

    with tempfile.TemporaryDirectory(prefix="fidia_bench_") as tmp:
        folder = pathlib.Path(workdir or tmp)
        argv = [str(a) for a in fidia_argv(str(folder))]
        shown = shlex.join(["fidia-jax", *argv])
        print(shown, flush=True)
        path = folder / made
        # the file's state before the run (its modification time, compared with the clock,
        # would be coarser than the clock: a file written just after t0 can look older)
        before = path.stat().st_mtime_ns if path.is_file() else None
        t0 = time.time()
        rc = cli.main(argv)
        wall = time.time() - t0
        if rc != 0:
            raise SystemExit(f"{shown} exited with {rc}")
        if not path.is_file() or path.stat().st_mtime_ns == before:
            raise SystemExit(f"{shown} left no new {path}")
        return json.loads(path.read_text(encoding="utf-8")), shown, wall


def _check_table(key: str, table: Mapping[str, Any]) -> dict[str, Any]:
    columns = list(table["columns"])
    rows = [list(r) for r in table["rows"]]
    for i, r in enumerate(rows):
        if len(r) != len(columns):
            raise ValueError(f"table {key!r} row {i} has {len(r)} cells for {len(columns)} columns")
        for c in r:
            if isinstance(c, float) and not math.isfinite(c):
                raise ValueError(f"table {key!r} row {i}: non-finite {c}; write null or a string")
    out: dict[str, Any] = {"columns": columns, "rows": rows}
    if table.get("formats") is not None:
        formats = list(table["formats"])
        if len(formats) != len(columns):
            raise ValueError(f"table {key!r}: {len(formats)} formats for {len(columns)} columns")
        out["formats"] = formats
    return out


def run_caption(load_start: float | None = None, *, command: str | None = None) -> dict[str, Any]:
    """The caption keys of a run ending now: ``command`` (default: this process's command
    line), ``date``, ``machine``, ``commit`` and ``load_average`` (``"<start> -> <now>"`` with
    ``load_start``, from :func:`load_average`)."""
    end = load_average()
    return {
        "command": command or command_line(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "commit": commit(),
        "load_average": end if load_start is None else f"{load_start} -> {end}",
    }


def write_results(
    name: str,
    tables: Mapping[str, Mapping[str, Any]],
    *,
    command: str | None = None,
    load_start: float | None = None,
    extra: Mapping[str, Any] | None = None,
    out: str | os.PathLike | None = None,
    caption: Mapping[str, Any] | None = None,
) -> pathlib.Path:
    """Writes ``benchmarks/results/<name>.json`` (or ``out``) atomically: ``tables`` with the
    command, date, machine, commit and load average filled in.

    Args:
      name: the file's stem.
      tables: key -> ``{"columns": [...], "rows": [[...]], "formats"?: [...]}``.
      command: what remakes the file (default: this process's command line).
      load_start: the 1-minute load average when the run began (:func:`load_average`); the
        file records ``"<start> -> <end>"``.
      extra: more keys kept in the file (raw results, config); they may not replace the ones
        above.
      out: another path (e.g. a scratch file).
      caption: the run's own ``date`` / ``machine`` / ``commit`` / ``load_average`` (and
        ``command``), for a file re-derived from a raw record after the run (``--retable``):
        they replace what this process would write.

    Returns:
      The path written.

    Raises:
      ValueError: a row's length differs from its columns', a float cell is not finite, or
        ``extra`` reuses a reserved key, or ``caption`` names a key that is not a caption key.
    """
    doc: dict[str, Any] = {
        **run_caption(load_start, command=command),
        "tables": {k: _check_table(k, t) for k, t in tables.items()},
    }
    for k, v in (caption or {}).items():
        if k not in RESERVED or k == "tables":
            raise ValueError(f"caption key {k!r} is not one of {RESERVED[:-1]}")
        doc[k] = v
    for k, v in (extra or {}).items():
        if k in doc:
            raise ValueError(f"extra key {k!r} is reserved")
        doc[k] = v
    path = pathlib.Path(out) if out is not None else RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    from fidia_jax._io import atomic_write_text, json_text

    atomic_write_text(path, json_text(doc, indent=2) + "\n")
    return path


def rewrite_results(
    name: str, record: Mapping[str, Any], tables: Mapping[str, Mapping[str, Any]], out
) -> pathlib.Path:
    """:func:`write_results` for a record that already carries its run's caption keys (a results
    file read back, or a raw record a script assembled): ``tables`` replace the record's, the
    caption keys it has are kept as they are, and every other key is kept as ``extra``."""
    caption = {k: record[k] for k in RESERVED if k in record and k != "tables"}
    extra = {k: v for k, v in record.items() if k not in RESERVED}
    return write_results(name, tables, extra=extra, out=out, caption=caption)


def retable(path: str | os.PathLike, tables: Callable[[Mapping[str, Any]], Mapping[str, Any]]):
    """Rewrites the tables of the results file ``path`` from its own raw record (``--report``
    of a benchmark: no run; the run's caption is kept): ``tables(record)`` gives them."""
    path = pathlib.Path(path)
    record = json.loads(path.read_text(encoding="utf-8"))
    out = rewrite_results(path.stem, record, tables(record), path)
    print(f"rewrote the tables of {path}")
    return out
