"""Output helpers: atomic files (a reader never sees a half-written file, DESIGN.md #12) and
the rich console used by the CLI."""

from __future__ import annotations

import contextlib
import os
import pathlib
import tempfile
from collections.abc import Iterator

__all__ = ["atomic_path", "atomic_write_text", "make_console"]


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
