"""FASTA reading."""

from __future__ import annotations

import os
import pathlib

from fidia_jax.errors import DataError

__all__ = ["read_fasta"]


def read_fasta(path: str | os.PathLike) -> list[tuple[str, str]]:
    """``[(header, sequence), ...]`` of a FASTA file, in file order.

    The ``>`` and surrounding whitespace are stripped from headers; sequence lines are joined;
    blank lines are skipped; duplicate headers are kept as separate records.
    (``biotite.sequence.io.fasta`` is not used: it silently drops lines before the first header
    and reads ``;`` lines as comments, where this reader reports the file and line.)

    Raises:
      DataError: missing file, a sequence line before the first header (``path:line``), or no
        record at all.
    """
    path = pathlib.Path(path)
    if not path.is_file():
        raise DataError(f"{path}: FASTA file not found")
    records: list[tuple[str, list[str]]] = []
    for n, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
        line = line.strip()
        if not line:
            continue
        if line.startswith(">"):
            records.append((line[1:].strip(), []))
        elif not records:
            raise DataError(f"{path}:{n}: sequence line before the first '>' header")
        else:
            records[-1][1].append(line)
    if not records:
        raise DataError(f"{path}: no FASTA records")
    return [(h, "".join(s)) for h, s in records]
