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
    "pssm_arrays",
    "read_pssm_jsonl",
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
    if not tie and not homo_oligomer:  # no model import (flax) for an untied run
        return None
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


# ----------------------------------------------------------------------------- PSSM
def read_pssm_jsonl(path: str | os.PathLike) -> dict[str, Mapping]:
    """The original's ``--pssm_jsonl`` file (``helper_scripts/make_pssm_input_dict.py``).

    Each line is a JSON object ``{name: {chain: {"pssm_coef": [L], "pssm_bias": [L, 21],
    "pssm_log_odds": [L, 21]}}}``; the lines are merged (a later line wins on a name, as the
    original's ``dict.update``). ``name`` is the structure's name (the ``name`` of a
    ``parse_multiple_chains.py`` record, or a structure file's stem); ``L`` counts the chain's
    residues in order; the 21 columns follow ``ALPHABET`` (``ACDEFGHIKLMNPQRSTVWYX``).
    Validated per chain by :func:`pssm_arrays`.

    Raises:
      DataError: a missing file, a line that is not JSON (line named), not a mapping.
    """
    path = pathlib.Path(path)
    if not path.is_file():
        raise DataError(f"{path}: PSSM file not found")
    out: dict[str, Mapping] = {}
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"{path}:{n}: not valid JSON ({e})") from None
        if not isinstance(rec, Mapping) or not all(isinstance(v, Mapping) for v in rec.values()):
            raise DataError(
                f"{path}:{n}: expected {{name: {{chain: {{pssm_coef, pssm_bias, ...}}}}}}"
            )
        out.update(rec)
    return out


def pssm_arrays(
    entry: Mapping | None,
    protein,
    design_chains,
    *,
    multi: float = 0.0,
    threshold: float = 0.0,
    log_odds_flag: bool = False,
    bias_flag: bool = False,
    label: str = "--pssm-jsonl",
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Slot arrays ``(mix_L, probs_Lx21, scale_Lx21)`` for ``fidia_jax.models.sample(pssm=)``.

    The original ``protein_mpnn_run.py`` semantics (``tied_featurize`` and ``sample``):

    * only designed chains read the PSSM (visible chains get none); a designed chain absent from
      ``entry`` (or empty) gets none: ``coef = 0``, ``log_odds = 10000``;
    * ``bias_flag`` (``--pssm_bias_flag 1``): ``p <- (1 - multi * coef_i) p + multi * coef_i *
      pssm_bias_i``, so ``mix = multi * coef`` and ``probs = pssm_bias`` (else ``mix = 0``);
    * ``log_odds_flag`` (``--pssm_log_odds_flag 1``): ``p <- p * (m_i + 0.001)`` renormalised,
      ``m_i = (pssm_log_odds_i > threshold)``, so ``scale = m + 0.001`` (else ``1``).

    Args:
      entry: the structure's record of :func:`read_pssm_jsonl` (``{chain: {...}}``) or ``None``.
      protein: the loaded ``Protein`` (its chains' residue counts are checked).
      design_chains: the designed chain IDs.
      multi: ``--pssm_multi`` in ``[0, 1]`` (0 = the model alone, 1 = the PSSM alone where
        ``coef = 1``).
      threshold: ``--pssm_threshold`` on the log-odds.
      log_odds_flag, bias_flag: the original's two switches.
      label: the source named in errors.

    Returns:
      The three float32 arrays, or ``None`` when neither switch is on (the PSSM then changes
      nothing, as in the original).

    Raises:
      ConfigError: ``multi`` outside ``[0, 1]`` or not finite; a switch on without a PSSM file.
      DataError: a chain's lists of the wrong length (chain, expected and found named); a
        ``pssm_coef`` outside ``[0, 1]``; a ``pssm_bias`` row with negative or non-finite
        values or not summing to 1 (within 1e-3); a non-finite or missing ``pssm_log_odds``
        with ``log_odds_flag``.
    """
    if not (math.isfinite(multi) and 0.0 <= multi <= 1.0):
        raise ConfigError(f"--pssm-multi must lie in [0, 1], got {multi}")
    if not math.isfinite(threshold):
        raise ConfigError(f"--pssm-threshold must be finite, got {threshold}")
    if not (log_odds_flag or bias_flag):
        return None
    if entry is None:
        raise ConfigError("--pssm-bias-flag / --pssm-log-odds-flag need a PSSM (--pssm-jsonl)")
    n = protein.length
    mix = np.zeros(n, np.float32)
    probs = np.zeros((n, len(ALPHABET)), np.float32)
    log_odds = np.full((n, len(ALPHABET)), 10000.0, np.float64)
    cid = np.asarray(protein.chain_id)
    for chain in design_chains:
        rec = entry.get(chain)
        if not rec:
            continue
        where = f"{label}: {protein.source} chain {chain}"
        slots = np.flatnonzero(cid == chain)
        m = slots.size
        coef = _pssm_table(rec, "pssm_coef", (m,), where)
        if coef.min(initial=0.0) < 0 or coef.max(initial=0.0) > 1:
            raise DataError(f"{where}: pssm_coef must lie in [0, 1]")
        table = _pssm_table(rec, "pssm_bias", (m, len(ALPHABET)), where)
        if table.min(initial=0.0) < 0 or not np.allclose(table.sum(-1), 1.0, atol=1e-3):
            bad = np.flatnonzero((table < 0).any(-1) | ~np.isclose(table.sum(-1), 1.0, atol=1e-3))
            raise DataError(
                f"{where}: pssm_bias rows must be probabilities (>= 0, summing to 1); "
                f"residue(s) {(bad[:10] + 1).tolist()} (1-based) are not"
            )
        mix[slots] = multi * coef if bias_flag else 0.0
        probs[slots] = table
        if log_odds_flag:
            if "pssm_log_odds" not in rec:
                raise DataError(f"{where}: no pssm_log_odds (needed by --pssm-log-odds-flag)")
            log_odds[slots] = _pssm_table(rec, "pssm_log_odds", (m, len(ALPHABET)), where)
    scale = (
        (log_odds > threshold).astype(np.float32) + np.float32(0.001)
        if log_odds_flag
        else np.ones_like(probs)
    )
    return mix, probs, scale.astype(np.float32)


def _pssm_table(rec: Mapping, key: str, shape: tuple[int, ...], where: str) -> np.ndarray:
    if key not in rec:
        raise DataError(f"{where}: no {key}")
    try:
        a = np.asarray(rec[key], np.float64)
    except (TypeError, ValueError):
        raise DataError(f"{where}: {key} is not a numeric array") from None
    if a.shape != shape:
        raise DataError(
            f"{where}: {key} has shape {a.shape}, expected {shape} (one entry per residue of "
            "the chain)"
        )
    if not np.isfinite(a).all():
        raise DataError(f"{where}: {key} has non-finite values")
    return a
