"""Parsed structures kept on disk: ``load_structure`` once per file, chains and options.

Parsing a PDB / mmCIF file costs CPU at every run, most of it importing biotite (which imports
matplotlib and networkx) and reading the atoms. A command that runs again on the
same file (``fidia-jax proteinmpnn sample``) reads the featurised
:class:`~fidia_jax.protein.Protein` back from an **entry** of a cache directory instead.

Entries are those of the language-model conversion cache
(:class:`fidia_jax._disk_cache.Entry`): a directory ``mpnn-structure-<sha256 of
the key>`` holding ``protein.npz`` and a sealed ``manifest.json``, written in a temporary
directory and renamed into place in one step; an entry whose files fail their manifest is
reported with one warning and rebuilt.

The key holds the file's absolute path, size, ``st_mtime_ns`` and the sha256 of its bytes
(:func:`fidia_jax._disk_cache.fingerprint`; the whole file up to 32 MiB), the
options of :func:`~fidia_jax.protein.load_structure` (``chains``, ``gaps``, ``ca_only``), the
sha256 of the parser's source files and the biotite version: a changed file, option, parser or
biotite is a miss. The warnings and the WARNING / INFO log records that parsing the file issued are kept
with the entry and issued again on every hit, so a cached load says what a fresh one says.

Nothing here imports biotite (unless a file is parsed) or flax.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pathlib
import warnings
from collections.abc import Sequence

import numpy as np

from fidia_jax import _disk_cache
from fidia_jax.protein import Protein

__all__ = ["load_structure_cached", "parser_fingerprint"]

#: Bumped when the entry's contents change meaning (older entries are then misses).
FORMAT_VERSION = 1

_ARRAYS = ("X", "mask", "S", "residue_idx", "chain_encoding", "chain_id", "resnum", "icode")
_PARSER_FILES = ("protein/_structure.py", "protein/_structure_parse.py", "protein/_types.py",
                 "projects/proteinmpnn/_structure_cache.py")  # fmt: skip
_LOGGER = "fidia_jax.protein._structure"
_WARNING_CLASSES = {c.__name__: c for c in (UserWarning, RuntimeWarning, DeprecationWarning,
                                           FutureWarning, SyntaxWarning)}  # fmt: skip


def parser_fingerprint() -> str:
    """The sha256 of the parser's source files (part of every key)."""
    h = hashlib.sha256()
    root = pathlib.Path(__file__).resolve().parents[2]  # fidia_jax/
    for name in _PARSER_FILES:
        h.update(name.encode())
        h.update((root / name).read_bytes())
    return h.hexdigest()


def _biotite_version() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("biotite")
    except metadata.PackageNotFoundError:
        return None


class _Records(logging.Handler):
    """Collects the records of the structure logger (level and formatted message)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[list] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append([record.levelno, record.getMessage()])


def _chains_key(chains) -> list[str] | str | None:
    if chains is None or isinstance(chains, str):
        return chains
    return [str(c) for c in chains]


def load_structure_cached(
    path: str | os.PathLike,
    chains: str | Sequence[str] | None = None,
    *,
    gaps: str = "geometry",
    ca_only: bool = False,
    cache_dir: str | os.PathLike | None = None,
) -> Protein:
    """:func:`~fidia_jax.protein.load_structure`, read from ``cache_dir`` when parsed before.

    Args:
      path, chains, gaps, ca_only: as :func:`~fidia_jax.protein.load_structure`.
      cache_dir: the cache directory; ``None`` parses the file without any cache.

    Returns:
      The :class:`~fidia_jax.protein.Protein` that ``load_structure`` returns, equal in every
      field (``source`` is ``str(path)`` of this call).

    Raises:
      As :func:`~fidia_jax.protein.load_structure` (errors are never cached: a file that fails
      to parse is parsed, and fails, again). A cache directory that cannot be written is one
      warning, and the structure is returned all the same.
    """
    from fidia_jax.protein import load_structure

    if cache_dir is None or not os.path.isfile(path):
        return load_structure(path, chains, gaps=gaps, ca_only=ca_only)
    cc = _disk_cache
    Entry, fingerprint = cc.Entry, cc.fingerprint
    source = str(pathlib.Path(path))
    key = {
        "format": FORMAT_VERSION,
        "path": os.path.abspath(path),
        "file": fingerprint(os.fspath(path), None),
        "chains": _chains_key(chains),
        "gaps": gaps,
        "ca_only": bool(ca_only),
        "parser": parser_fingerprint(),
        "biotite": _biotite_version(),
    }
    entry = Entry(os.fspath(cache_dir), "mpnn-structure", key, where=f"load_structure({source})")
    info = entry.read()
    if info is not None:
        try:
            with np.load(entry.file("protein.npz"), allow_pickle=False) as z:
                arrays = {k: z[k] for k in _ARRAYS}
            protein = Protein(
                **arrays, chain_order=tuple(info["chain_order"]), source=source,
                missing=tuple(info["missing"]),
            )  # fmt: skip
        except (OSError, ValueError, KeyError, TypeError) as err:
            entry.corrupt(f"protein.npz unreadable ({err})")
        else:
            _replay(info, info["source"], source, log=True)
            return protein
    handler = _Records()
    logger = logging.getLogger(_LOGGER)
    logger.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            protein = load_structure(path, chains, gaps=gaps, ca_only=ca_only)
    finally:
        logger.removeHandler(handler)
    info = {
        "chain_order": list(protein.chain_order),
        "missing": list(protein.missing),
        "source": source,
        "warnings": [[type(w.message).__name__, str(w.message)] for w in caught],
        "log": handler.records,
    }
    _replay(info, source, source, log=False)  # the records went out already
    arrays = {k: np.asarray(getattr(protein, k)) for k in _ARRAYS}
    entry.write({"protein.npz": lambda p: _save_npz(p, arrays)}, info)
    return protein


def _save_npz(path: str, arrays: dict) -> None:
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def _replay(info: dict, old: str, new: str, *, log: bool) -> None:
    """Issues the entry's warnings (and with ``log`` its log records) again, the path of the
    run that parsed the file replaced by this run's."""
    for name, message in info["warnings"]:
        warnings.warn(message.replace(old, new), _WARNING_CLASSES.get(name, UserWarning),
                      stacklevel=3)  # fmt: skip
    if log:
        logger = logging.getLogger(_LOGGER)
        for level, message in info["log"]:
            logger.log(int(level), "%s", message.replace(old, new))
