"""Sequence constraints of ``fidia-jax proteinmpnn sample | score``: omitted letters, global and
per-residue logit biases, per-residue omissions and tied positions, parsed from the command line,
JSON files or the arrays of the pipeline-file readers (``fidia_jax.protein.read_*``).
"""

from __future__ import annotations

import json
import math
import os
import pathlib
from collections.abc import Mapping

import numpy as np

from fidia_jax.errors import ConfigError, DataError
from fidia_jax.protein import ALPHABET

__all__ = [
    "OMIT_BIAS",
    "load_bias_by_res",
    "load_omit_by_res",
    "parse_bias_aa",
    "parse_omit_aas",
    "tied_groups",
]


def _check_letters(letters, what: str) -> None:
    bad = sorted({str(a) for a in letters} - set(ALPHABET))
    if bad:
        raise ConfigError(f"{what}: letter(s) {bad} not in the ProteinMPNN alphabet {ALPHABET!r}")


def _finite(value, what: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{what}: bias {value!r} is not a number") from None
    if not math.isfinite(v):
        raise ConfigError(f"{what}: bias {value!r} is not finite")
    return v


def parse_omit_aas(omit_aas: str | None) -> str:
    """Letters never sampled: the given ones plus ``X`` (always omitted), e.g. ``"CX"``.

    Raises:
      ConfigError: a letter outside ``ALPHABET`` (named), or every amino acid omitted.
    """
    letters = "".join((omit_aas or "").split()).replace(",", "").upper()
    _check_letters(letters, "--omit-aa")
    letters = "".join(sorted(set(letters + "X"), key=ALPHABET.index))
    if len(letters) == len(ALPHABET):
        raise ConfigError("--omit-aa omits every amino acid")
    return letters


def parse_bias_aa(bias_aa: str | Mapping[str, float] | None) -> np.ndarray:
    """Global logit bias ``(21,)`` float32 from ``"W:1.5,C:-2"`` or ``{"W": 1.5, "C": -2}``.

    The bias is added to the logits before the temperature, as the original's ``--bias_AA_jsonl``:
    ``p = softmax((logits + bias) / T)`` (a letter given twice: the values add).

    Raises:
      ConfigError: a malformed item, an unknown letter (named) or a non-finite value.
    """
    out = np.zeros(len(ALPHABET), np.float32)
    if not bias_aa:
        return out
    if isinstance(bias_aa, str):
        items = []
        for item in bias_aa.replace(" ", "").split(","):
            if not item:
                continue
            if item.count(":") != 1:
                raise ConfigError(
                    f"--bias-aa: item {item!r} is not LETTER:VALUE (e.g. 'W:1.5,C:-2')"
                )
            items.append(tuple(item.split(":")))
    else:
        items = list(bias_aa.items())
    for letter, value in items:
        letter = str(letter).upper()
        _check_letters([letter], "--bias-aa")
        out[ALPHABET.index(letter)] += _finite(value, f"--bias-aa {letter}")
    return out


def _residue_entries(spec, protein, what: str, value: str, label: str):
    """``(slot, value, where)`` per residue of a ``{chain: {residue: value}}`` JSON file or dict.

    The addressing shared by ``--bias-by-res`` and ``--omit-aa-by-res``: author chain ID, then
    author residue number with insertion code if any (``"12"``, ``"27A"``). ``what`` names the
    file kind in errors (``"per-residue bias"``), ``value`` the expected value (``"{letter: bias}"``),
    ``label`` the source named in errors when ``spec`` is a dict (a file is named by its path).

    Raises:
      DataError: missing file or invalid JSON; not a mapping; an unknown chain or residue (named).
    """
    src = label
    if not isinstance(spec, Mapping):
        path = pathlib.Path(spec)
        src = str(path)
        if not path.is_file():
            raise DataError(f"{path}: {what} file not found")
        try:
            spec = json.loads(path.read_text())
        except json.JSONDecodeError as e:
            raise DataError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(spec, Mapping):
        raise DataError(
            f"{src}: expected {{chain: {{residue: {value}}}}}, got {type(spec).__name__}"
        )
    cid = np.asarray(protein.chain_id)
    labels = np.array([f"{int(r)}{i}" for r, i in zip(protein.resnum, protein.icode, strict=True)])
    for chain, residues in spec.items():
        if chain not in protein.chain_order:
            raise DataError(
                f"{src}: chain {chain!r} not among loaded chains {list(protein.chain_order)}"
            )
        if not isinstance(residues, Mapping):
            raise DataError(f"{src}: chain {chain!r}: expected {{residue: {value}}}")
        for res, val in residues.items():
            slot = np.flatnonzero((cid == chain) & (labels == str(res).strip()))
            if slot.size == 0:
                raise DataError(
                    f"{src}: residue {chain}{res} not in chain {chain} of {protein.source}"
                )
            yield int(slot[0]), val, f"{src}: residue {chain}{res}"


def _check_residue_letter(letter, where: str) -> int:
    if str(letter).upper() not in ALPHABET:
        raise DataError(f"{where}: letter {letter!r} not in the ProteinMPNN alphabet {ALPHABET!r}")
    return ALPHABET.index(str(letter).upper())


def load_bias_by_res(spec: str | os.PathLike | Mapping | None, protein) -> np.ndarray:
    """Per-residue logit bias ``(L, 21)`` float32 from a JSON file (or the same dict).

    Format (author chain ID -> author residue number, with insertion code if any -> letter ->
    bias added to that residue's logits before the temperature)::

        {"A": {"12": {"W": 2.0, "C": -1.0}, "27A": {"P": -3.0}}}

    Slots not listed get 0; the table is added to the global ``--bias-aa`` bias.

    Raises:
      DataError: missing file or invalid JSON; an unknown chain, residue or letter (named);
        a non-finite or non-numeric value.
    """
    bias = np.zeros((protein.length, len(ALPHABET)), np.float32)
    if spec is None:
        return bias
    if isinstance(spec, np.ndarray):  # an (L, 21) table (e.g. protein.read_bias_by_res)
        return _slot_table(spec, protein, "per-residue bias").astype(np.float32)
    entries = _residue_entries(spec, protein, "per-residue bias", "{letter: bias}", "bias")
    for slot, letters, where in entries:
        if not isinstance(letters, Mapping):
            raise DataError(f"{where}: expected {{letter: bias}}")
        for letter, value in letters.items():
            k = _check_residue_letter(letter, where)
            try:
                v = _finite(value, where)
            except ConfigError as e:
                raise DataError(str(e)) from None
            bias[slot, k] += v
    return bias


def _slot_table(table: np.ndarray, protein, what: str) -> np.ndarray:
    if table.shape != (protein.length, len(ALPHABET)):
        raise DataError(
            f"{what}: a table must be ({protein.length}, {len(ALPHABET)}), got {table.shape}"
        )
    if table.dtype.kind == "f" and not np.isfinite(table).all():
        raise DataError(f"{what}: the table has non-finite values")
    return table


OMIT_BIAS = -1e8
"""Logit bias of a letter omitted at one residue (the original's omit value; ``exp(-1e8 / T)``
is exactly 0 in float32 for any usable ``T``)."""


def load_omit_by_res(
    spec: str | os.PathLike | Mapping | None, protein, omit_aas: str = "X"
) -> np.ndarray:
    """Per-residue omission ``(L, 21)`` bool from a JSON file (or the same dict).

    Format (the addressing of :func:`load_bias_by_res`; value = the letters never sampled at that
    residue)::

        {"A": {"12": "CW", "27A": "P"}}

    :func:`run_sample` applies it as a bias of :data:`OMIT_BIAS` at those (residue, letter)
    cells, so those letters are never sampled there (fixed and visible positions keep their
    native residue whatever it is).

    Raises:
      DataError: as :func:`load_bias_by_res` (missing file, invalid JSON, unknown chain, residue
        or letter, named); a value that is not a string; a residue where the listed letters and
        the global ``omit_aas`` leave nothing to sample.
    """
    omit = np.zeros((protein.length, len(ALPHABET)), bool)
    if spec is None:
        return omit
    glob = np.isin(np.array(list(ALPHABET)), list(omit_aas or ""))
    if isinstance(spec, np.ndarray):  # an (L, 21) mask (e.g. protein.read_omit_aa_by_res)
        omit = _slot_table(spec, protein, "per-residue omit").astype(bool)
        full = np.flatnonzero((omit | glob).all(-1))
        if full.size:
            i = int(full[0])
            raise DataError(
                f"per-residue omit: {protein.chain_id[i]}{protein.resnum[i]}{protein.icode[i]} "
                f"omits every amino acid (with --omit-aa {omit_aas!r})"
            )
        return omit
    entries = _residue_entries(spec, protein, "per-residue omit", '"LETTERS"', "omit")
    for slot, letters, where in entries:
        if not isinstance(letters, str):
            raise DataError(f'{where}: expected a string of letters (e.g. "CW"), got {letters!r}')
        for letter in "".join(letters.replace(",", "").split()):
            omit[slot, _check_residue_letter(letter, where)] = True
        if (omit[slot] | glob).all():
            raise DataError(f"{where}: omits every amino acid (with --omit-aa {omit_aas!r})")
    return omit


def tied_groups(tie, homo_oligomer: bool, protein) -> list[list[int]] | None:
    """Slot groups of ``--tie`` specs (or of slot-index lists, e.g. from
    ``protein.read_tied_positions``) and/or ``--homo-oligomer`` (``None`` when neither)."""
    from fidia_jax.models.proteinmpnn import homo_oligomer_groups, tied_groups_from_spec

    groups = homo_oligomer_groups(protein) if homo_oligomer else []
    if tie:
        if homo_oligomer:
            raise ConfigError("--tie and --homo-oligomer: give one or the other")
        if isinstance(tie, str) or all(isinstance(t, str) for t in tie):
            groups = tied_groups_from_spec(tie, protein)
        else:
            groups = [[int(i) for i in g] for g in tie]
    return groups or None


# ----------------------------------------------------------------------------- sample
