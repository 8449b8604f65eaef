"""Motif specifications (RFdiffusion contigs, MotifBench) -> fixed-position masks, and loaders.

Two addressing schemes occur in the benchmarks:

* **Author numbering** (RFdiffusion ``benchmark.csv`` contigs such as ``"10-40,A163-181,10-40"``,
  MotifBench ``test_cases.csv`` ``motif_residues`` such as ``"F63-69;F196-212"``, and the CLI's
  ``--fixed``): a motif segment is ``<chain><start>[<icode>][-<end>[<icode>]]`` in the numbering
  of the structure file, or ``<chain>:<start>...`` for any chain ID (needed for digit chain IDs:
  ``1:13``, ``1:5-10``). :func:`parse_motif_spec` turns such a spec into an ``(L,)`` bool mask
  over a :class:`~fidia_jax.protein.Protein`'s slots. Bare numbers / number ranges (``"10-40"``,
  ``"20"``, ``"0"``) are scaffold lengths of a contig: accepted (and skipped) only with
  ``scaffold_lengths=True``, an error otherwise, so that no part of a spec is skipped silently.
* **Segment-relative placement** (MotifBench ``example/reference_pdb_baseline/*/motif_info.csv``,
  e.g. ``"161/A1-21/112"``): numbers are scaffold lengths, ``A1-21`` is residues 1-21 of motif
  segment ``A``; :meth:`MotifInfo.motif_mask` walks the contig.

References:
  Watson et al., "De novo design of protein structure and function with RFdiffusion",
  Nature 620:1089-1100 (2023) -- contig syntax and the 25-problem benchmark.
  Zheng et al., "MotifBench: a standardized protein design benchmark for motif-scaffolding
  problems", arXiv:2502.12479 (2025), github.com/blt2114/MotifBench.
"""

from __future__ import annotations

import csv
import dataclasses
import os
import pathlib
import re

import numpy as np

from fidia_jax.errors import DataError, MotifSpecError
from fidia_jax.protein._types import Protein

__all__ = [
    "MotifBenchCase",
    "MotifInfo",
    "MotifSegment",
    "RFDiffusionProblem",
    "load_motif_info",
    "load_motifbench_cases",
    "load_rfdiffusion_benchmark",
    "motif_segments",
    "parse_motif_spec",
]

_RANGE = r"(?P<start>-?\d+)(?P<si>[A-Za-z]?)(?:-(?P<end>-?\d+)(?P<ei>[A-Za-z]?))?$"
_SEGMENT = re.compile(r"^(?P<chain>[A-Za-z]+)" + _RANGE)
#: Explicit chain form ``<chain>:<range>``: any alphanumeric chain ID, digits included.
_SEGMENT_EXPLICIT = re.compile(r"^(?P<chain>[A-Za-z0-9]+):" + _RANGE)
_SCAFFOLD = re.compile(r"^\d+(?:-\d+)?$")
_SPLIT = re.compile(r"[,;/\s]+")


@dataclasses.dataclass(frozen=True)
class MotifSegment:
    """One motif segment ``<chain><start><start_icode>-<end><end_icode>`` (author numbering).

    ``str()`` gives the spec form: ``A5-10``, or ``1:5-10`` when the chain ID holds a digit.
    """

    chain: str
    start: int
    end: int
    start_icode: str = ""
    end_icode: str = ""

    def __str__(self) -> str:
        s = _residue_label(self.chain, self.start, self.start_icode)
        if (self.end, self.end_icode) != (self.start, self.start_icode):
            s += f"-{self.end}{self.end_icode}"
        return s


def _residue_label(chain: str, num: int, icode: str = "") -> str:
    """``A5`` for a letters-only chain ID, ``1:5`` otherwise (the spec form that parses back)."""
    return f"{chain}{'' if chain.isalpha() else ':'}{num}{icode}"


def _match_segment(tok: str) -> re.Match | None:
    """``A5-10`` (letters-only chain ID) or ``<chain>:<range>`` (any alphanumeric chain ID)."""
    return _SEGMENT_EXPLICIT.match(tok) or _SEGMENT.match(tok)


def motif_segments(spec: str, *, scaffold_lengths: bool = False) -> list[MotifSegment]:
    """Parses the motif segments of a motif spec or (with ``scaffold_lengths``) a contig.

    Segments are ``<chain><start>[icode][-<end>[icode]]`` with a letters-only chain ID
    (``A16-35``, ``H52A-52C``) or ``<chain>:<start>...`` with any alphanumeric chain ID
    (``1:13``, ``1:5-10``, ``AB:7``); they may be separated by ``,``, ``;``, ``/`` or whitespace;
    surrounding ``[...]`` are ignored. ``motif_segments("10-40/A163-181/10-40",
    scaffold_lengths=True)`` -> ``[MotifSegment("A", 163, 181)]``.

    Args:
      spec: the spec string.
      scaffold_lengths: read bare numbers and number ranges (``10-40``, ``20``, ``0``) as the
        scaffold lengths of an RFdiffusion contig and skip them. With ``False`` (default) such a
        token is an error: it addresses no chain, so it would select nothing.

    Raises:
      MotifSpecError: a token is not a motif segment (nor, with ``scaffold_lengths``, a scaffold
        length), a segment's end number precedes its start, or the spec holds no motif segment.
    """
    if not isinstance(spec, str):
        raise MotifSpecError(f"motif spec must be a string, got {type(spec).__name__}")
    tokens = [t for t in _SPLIT.split(spec.strip().strip("[]").strip()) if t]
    segments = []
    for tok in tokens:
        if _SCAFFOLD.match(tok):
            if scaffold_lengths:
                continue
            raise MotifSpecError(
                f"motif spec {spec!r}: {tok!r} names no chain, so it selects no residue (write "
                f"the chain: 'A{tok}', or '1:{tok}' for a digit chain ID; bare numbers are "
                "scaffold lengths only in RFdiffusion contigs)"
            )
        m = _match_segment(tok)
        if m is None:
            raise MotifSpecError(
                f"motif spec {spec!r}: cannot parse {tok!r} (expected e.g. 'A16-35', 'B7', "
                "'H52A-52C', or '1:5-10' for a digit chain ID)"
            )
        start, si = int(m["start"]), m["si"]
        end, ei = (int(m["end"]), m["ei"]) if m["end"] is not None else (start, si)
        if end < start:
            raise MotifSpecError(f"motif spec {spec!r}: segment {tok!r} ends before it starts")
        segments.append(MotifSegment(m["chain"], start, end, si, ei))
    if not segments:
        raise MotifSpecError(f"motif spec {spec!r} holds no motif segment (e.g. 'A16-35')")
    return segments


def parse_motif_spec(spec: str, protein: Protein, *, scaffold_lengths: bool = False) -> np.ndarray:
    """Fixed-position mask of a motif spec in author numbering.

    A segment ``A52-55`` covers every slot of chain ``A`` from the slot numbered 52 (no insertion
    code) through the slot numbered 55, in slot (chain) order, so insertion-code residues in
    between (``52A``, ``52B``) and numbering-gap placeholder slots are included. Every part of
    the spec must select at least one slot: nothing is skipped silently.

    Args:
      spec: e.g. ``"A16-35,A52-71"``, ``"F63-69;F196-212"``, ``"H52A-52C"``, ``"1:13"`` (chain
        ``1``), or with ``scaffold_lengths=True`` a contig ``"10-40/A163-181/10-40"``.
      protein: the structure the spec addresses.
      scaffold_lengths: accept (and skip) the scaffold lengths of an RFdiffusion contig; see
        :func:`motif_segments`.

    Returns:
      ``(L,)`` bool, True at motif (fixed) slots.

    Raises:
      MotifSpecError: unparseable spec, a bare number without ``scaffold_lengths`` (it names no
        chain), unknown chain (the message lists the loaded chains), a segment endpoint that is
        not a residue of the chain (the message gives the chain's range), a segment whose end
        comes before its start in chain order, or a segment of residues that all lack backbone
        coordinates (placeholders of a numbering gap, masked residues).
    """
    fixed = np.zeros(protein.length, bool)
    chain_id = np.asarray(protein.chain_id)
    src = protein.source or "the structure"
    for seg in motif_segments(spec, scaffold_lengths=scaffold_lengths):
        if seg.chain not in protein.chain_order:
            raise MotifSpecError(
                f"motif spec {spec!r}: chain {seg.chain!r} not among the loaded chains "
                f"{list(protein.chain_order)} of {src}"
            )
        slots = np.flatnonzero(chain_id == seg.chain)
        keys = [(int(protein.resnum[i]), str(protein.icode[i])) for i in slots]
        where = {k: j for j, k in enumerate(keys)}
        lo, hi = where.get((seg.start, seg.start_icode)), where.get((seg.end, seg.end_icode))
        if lo is None or hi is None:
            num, ic = (seg.start, seg.start_icode) if lo is None else (seg.end, seg.end_icode)
            label = _residue_label(seg.chain, num, ic)
            first, last = keys[0], keys[-1]
            span = f"residues {first[0]}{first[1]}-{last[0]}{last[1]}"
            nums = [k[0] for k in keys]
            if min(nums) <= num <= max(nums):  # inside the numbering, but no such residue
                span += f"; {num}{ic} is absent from the numbering"
            raise MotifSpecError(
                f"motif spec {spec!r}: residue {label} is outside chain {seg.chain} of {src} "
                f"({span})"
            )
        if hi < lo:
            raise MotifSpecError(
                f"motif spec {spec!r}: segment {seg} ends before it starts in the chain order of "
                f"{src}"
            )
        chosen = slots[lo : hi + 1]
        if not np.any(np.asarray(protein.mask)[chosen] > 0):
            raise MotifSpecError(
                f"motif spec {spec!r}: segment {seg} selects only residues without backbone "
                f"coordinates (numbering-gap placeholders or masked residues) in {src}; a motif "
                "must hold observed residues"
            )
        fixed[chosen] = True
    return fixed


# ----------------------------------------------------------------------------- data loaders
def _data_root(data_dir: str | os.PathLike | None) -> pathlib.Path:
    """The data directory by the package's one rule (:func:`fidia_jax.data.resolve_data_dir`)."""
    from fidia_jax._io import resolve_data_dir

    return resolve_data_dir(data_dir)


def _find(root: pathlib.Path, *candidates: str) -> pathlib.Path:
    for rel in candidates:
        path = root / rel
        if path.exists():
            return path
    raise DataError(f"{root}: none of {list(candidates)} found")


def _read_csv(path: pathlib.Path, required: set[str]) -> list[dict[str, str]]:
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise DataError(f"{path}: cannot read CSV: {e}") from e
    if not rows:
        raise DataError(f"{path}: no rows")
    absent = required - set(rows[0])
    if absent:
        raise DataError(f"{path}: missing column(s) {sorted(absent)}")
    return rows


def _int(path: pathlib.Path, value: str, what: str) -> int:
    try:
        return int(value)
    except ValueError as e:
        raise DataError(f"{path}: {what} {value!r} is not an integer") from e


@dataclasses.dataclass(frozen=True)
class MotifBenchCase:
    """One row of MotifBench ``test_cases.csv``.

    Attributes:
      number: 1-based problem number (row order), as in the ``NN_XXXX`` folder names.
      name: ``f"{number:02d}_{pdb_id}"``, e.g. ``"04_5WN9"``.
      pdb_id: PDB entry of the native structure.
      motif_residues: motif segments in the native entry's author numbering (``"F63-69;F196-212"``).
      redesign: motif positions whose identity may be redesigned (same numbering; "" = none).
      length: total scaffold length to design.
      group: MotifBench difficulty group (1 single segment, 2 two segments, 3 many segments).
    """

    number: int
    name: str
    pdb_id: str
    motif_residues: str
    redesign: str
    length: int
    group: int

    def segments(self) -> list[MotifSegment]:
        """Parsed ``motif_residues``."""
        return motif_segments(self.motif_residues)


def load_motifbench_cases(data_dir: str | os.PathLike | None = None) -> list[MotifBenchCase]:
    """Reads MotifBench ``test_cases.csv`` (30 problems).

    Args:
      data_dir: the shared data directory (holding ``protein/motifbench/``) or the ``motifbench``
        folder itself; ``None`` uses ``$FIDIA_DATA_DIR``.

    Raises:
      DataError: directory or file missing, malformed rows.
    """
    root = _data_root(data_dir)
    path = _find(
        root, "test_cases.csv", "motifbench/test_cases.csv", "protein/motifbench/test_cases.csv"
    )
    rows = _read_csv(path, {"pdb_id", "motif_residues", "redesign_idcs", "length", "group"})
    cases = []
    for i, r in enumerate(rows, start=1):
        cases.append(
            MotifBenchCase(
                number=i,
                name=f"{i:02d}_{r['pdb_id']}",
                pdb_id=r["pdb_id"],
                motif_residues=r["motif_residues"],
                redesign=r["redesign_idcs"] or "",
                length=_int(path, r["length"], "length"),
                group=_int(path, r["group"], "group"),
            )
        )
    return cases


@dataclasses.dataclass(frozen=True)
class MotifInfo:
    """``motif_info.csv`` of one MotifBench reference chain (``reference_pdb_baseline/NN_XXXX``).

    Attributes:
      name: problem folder name, e.g. ``"12_4JHW"``.
      sample_num: sample index (0 for the reference).
      contig: placement of the motif segments in the reference chain, e.g. ``"37/A1-7/87/B1-17/301"``:
        numbers are scaffold lengths, ``A1-7`` are residues 1-7 of motif segment ``A``.
      redesign_positions: motif positions whose identity may change, segment-relative
        (``"A1;A7;B1"``; "" = none).
      segment_order: motif segment labels in placement order (``"A;B"``).
      pdb_path: the reference chain's PDB file (chain ``A``, renumbered from 1).
    """

    name: str
    sample_num: int
    contig: str
    redesign_positions: str
    segment_order: str
    pdb_path: pathlib.Path

    def _layout(self) -> tuple[int, dict[str, tuple[int, int, int]]]:
        """Total length and ``segment -> (offset in chain, first segment residue, count)``."""
        pos, seg = 0, {}
        for tok in (t for t in self.contig.split("/") if t):
            if tok.isdigit():
                pos += int(tok)
                continue
            m = _match_segment(tok)
            if m is None or m["si"] or m["ei"]:
                raise MotifSpecError(
                    f"{self.name}: cannot parse contig token {tok!r} of {self.contig!r}"
                )
            start = int(m["start"])
            end = int(m["end"]) if m["end"] is not None else start
            if end < start:
                raise MotifSpecError(f"{self.name}: contig token {tok!r} ends before it starts")
            seg[m["chain"]] = (pos, start, end - start + 1)
            pos += end - start + 1
        return pos, seg

    @property
    def length(self) -> int:
        """Total chain length implied by the contig."""
        return self._layout()[0]

    def motif_mask(self) -> np.ndarray:
        """``(length,)`` bool, True on the motif residues of the reference chain."""
        total, seg = self._layout()
        mask = np.zeros(total, bool)
        for off, _, n in seg.values():
            mask[off : off + n] = True
        return mask

    def redesign_mask(self) -> np.ndarray:
        """``(length,)`` bool, True on motif residues whose amino-acid identity may change."""
        total, seg = self._layout()
        mask = np.zeros(total, bool)
        if not self.redesign_positions.strip():
            return mask
        for s in motif_segments(self.redesign_positions):
            if s.chain not in seg:
                raise MotifSpecError(
                    f"{self.name}: redesign segment {s} names unknown motif segment {s.chain!r}"
                )
            off, first, n = seg[s.chain]
            if s.start < first or s.end > first + n - 1:
                raise MotifSpecError(
                    f"{self.name}: redesign segment {s} outside motif segment {s.chain}"
                )
            mask[off + s.start - first : off + s.end - first + 1] = True
        return mask


def load_motif_info(data_dir: str | os.PathLike | None = None) -> list[MotifInfo]:
    """Reads every ``example/reference_pdb_baseline/<problem>/motif_info.csv`` of MotifBench.

    Args:
      data_dir: the shared data directory (holding ``protein/motifbench/``) or the ``motifbench``
        folder itself; ``None`` uses ``$FIDIA_DATA_DIR``.

    Returns:
      One :class:`MotifInfo` per problem folder, sorted by name.

    Raises:
      DataError: directory or files missing, malformed rows.
    """
    root = _data_root(data_dir)
    base = _find(
        root,
        "example/reference_pdb_baseline",
        "motifbench/example/reference_pdb_baseline",
        "protein/motifbench/example/reference_pdb_baseline",
    )
    out = []
    for d in sorted(p for p in base.iterdir() if p.is_dir() and (p / "motif_info.csv").is_file()):
        path = d / "motif_info.csv"
        rows = _read_csv(
            path, {"pdb_name", "sample_num", "contig", "redesign_positions", "segment_order"}
        )
        r = rows[0]
        pdbs = sorted(d.glob("*.pdb"))
        if not pdbs:
            raise DataError(f"{d}: no reference PDB file")
        out.append(
            MotifInfo(
                name=r["pdb_name"],
                sample_num=_int(path, r["sample_num"], "sample_num"),
                contig=r["contig"],
                redesign_positions=r["redesign_positions"] or "",
                segment_order=r["segment_order"],
                pdb_path=pdbs[0],
            )
        )
    if not out:
        raise DataError(f"{base}: no problem folders with motif_info.csv")
    return out


@dataclasses.dataclass(frozen=True)
class RFDiffusionProblem:
    """One row of the RFdiffusion motif-scaffolding ``benchmark.csv`` (``motif_problems/``).

    Attributes:
      name: problem name (``"1PRW"``, ``"7MRX_60"``...).
      contig: RFdiffusion contig with scaffold ranges and motif segments in author numbering.
      length: total-length range ("" when unconstrained).
      length_fixed: the fixed total length used by the benchmark.
      redesign: motif positions whose identity may change (author numbering, "" = none).
      pdb_path: native structure file.
    """

    name: str
    contig: str
    length: str
    length_fixed: int
    redesign: str
    pdb_path: pathlib.Path

    def segments(self) -> list[MotifSegment]:
        """Motif segments of ``contig``."""
        return motif_segments(self.contig, scaffold_lengths=True)


def load_rfdiffusion_benchmark(
    data_dir: str | os.PathLike | None = None,
) -> list[RFDiffusionProblem]:
    """Reads ``protein/motif_problems/benchmark.csv``.

    Args:
      data_dir: the shared data directory or the ``motif_problems`` folder itself; ``None`` uses
        ``$FIDIA_DATA_DIR``.

    Raises:
      DataError: directory or file missing, malformed rows.
    """
    root = _data_root(data_dir)
    path = _find(
        root,
        "benchmark.csv",
        "motif_problems/benchmark.csv",
        "protein/motif_problems/benchmark.csv",
    )
    rows = _read_csv(
        path, {"target", "contig", "length", "motif_path", "length_fixed", "idcs_to_redesign"}
    )
    return [
        RFDiffusionProblem(
            name=r["target"],
            contig=r["contig"],
            length=r["length"] or "",
            length_fixed=_int(path, r["length_fixed"], "length_fixed"),
            redesign=r["idcs_to_redesign"] or "",
            pdb_path=path.parent / pathlib.PurePosixPath(r["motif_path"]).name,
        )
        for r in rows
    ]
