"""What every ``tools/*_make_fixture.py`` shares: the throwaway virtual environment that runs an
original implementation once (never a dependency of fidia_jax)."""

from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence


def make_venv(venv: pathlib.Path, *installs: Sequence[str]) -> pathlib.Path:
    """The Python of ``venv``, created on first use with one ``pip install -q`` per entry of
    ``installs`` (each a list of requirement arguments, in order); reused as it is afterwards."""
    py = venv / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        for args in installs:
            subprocess.run([str(py), "-m", "pip", "install", "-q", *args], check=True)
    return py


def authors_main(
    doc: str,
    script: str,
    *,
    repo: str,
    marker: str,
    peer: Callable[[pathlib.Path], None],
    venv: Callable[[], pathlib.Path],
    env: Mapping[str, str] | None = None,
) -> None:
    """The command line of a fixture tool run on a checkout of the authors' repository:
    ``--authors-dir DIR`` (checked for ``marker``, a file every checkout of ``repo`` has), then
    ``script`` re-runs itself with ``--peer`` in the throwaway venv, where ``peer(DIR)`` calls
    the authors' code and writes the fixture. ``env`` is added to the peer's environment."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--authors-dir", required=True, type=pathlib.Path, help=f"a checkout of {repo}")
    ap.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    authors = args.authors_dir.resolve()
    if not (authors / marker).exists():
        raise SystemExit(f"{authors} is not a checkout of {repo} (no {marker})")
    if args.peer:
        peer(authors)
        return
    subprocess.run(
        [str(venv()), str(pathlib.Path(script).resolve()), "--peer", "--authors-dir", str(authors)],
        check=True,
        env={**os.environ, **(env or {})},
    )
