"""Output helpers: atomic files (a reader never sees a half-written file, DESIGN.md #12) and
the rich console, tables and progress display used by the drivers and the CLI."""

from __future__ import annotations

import contextlib
import os
import pathlib
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["Reporter", "atomic_path", "atomic_write_text", "make_console", "print_table"]


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[pathlib.Path]:
    """Yields a temporary path beside ``path``; on success it is renamed onto ``path``.

    The temporary file keeps ``path``'s suffix (so writers that infer a format from it, such as
    matplotlib's ``savefig``, still work). On any exception the temporary file is removed and
    ``path`` is left as it was.
    """
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=f".tmp{path.suffix}")
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


def print_table(console, title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Prints a ``rich`` table on ``console`` (``None``: prints nothing, the quiet mode).

    Floats are shown with 3 decimals; anything else with ``str`` (format a value yourself for
    another precision).
    """
    if console is None:
        return
    from rich.table import Table

    table = Table(title=title)
    for c in columns:
        table.add_column(c)
    for r in rows:
        table.add_row(*(f"{x:.3f}" if isinstance(x, float) else str(x) for x in r))
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
