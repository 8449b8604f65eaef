"""The JSONL pipeline files of the original ProteinMPNN's ``helper_scripts``, read into our types.

Formats (as written by Dauparas et al.'s ``helper_scripts``, github.com/dauparas/ProteinMPNN):

* **parsed chains** (``parse_multiple_chains.py``): one JSON object per line and structure,
  ``{"name": "5PTI", "num_of_chains": 1, "seq": "<all chains concatenated>",
  "seq_chain_A": "RPDF...", "coords_chain_A": {"N_chain_A": [[x, y, z], ...], "CA_chain_A":
  [...], "C_chain_A": [...], "O_chain_A": [...]}, ...}``; coordinates in Å, a missing atom is
  ``NaN`` (or ``null``), a gap residue is ``-`` in the sequence.
* **chain assignments** (``assign_fixed_chains.py``): one JSON object
  ``{name: [[designed chains], [fixed (visible) chains]]}``.
* **fixed positions** (``make_fixed_positions_dict.py``): one JSON object
  ``{name: {chain: [1-based positions in that chain's sequence]}}``.
* **tied positions** (``make_tied_positions_dict.py``): one JSON object ``{name: [{chain:
  [positions], ...}, ...]}``; every list item is one tied group (all its positions, over all its
  chains, draw one residue). ``make_pos_neg_tied_positions_dict.py`` writes ``{chain:
  [[positions], [weights]]}`` instead; weight 1.0 is the plain tie, other weights (negative
  design) are refused.
* **per-residue bias** (``make_bias_per_res_dict.py``): one JSON object ``{name: {chain:
  [[21 logit biases] per residue]}}``, columns in :data:`ALPHABET` order (``ACDEFGHIKLMNPQRSTVWYX``).
* **per-residue omission** (``other_tools/make_omit_AA.py``): one JSON object ``{name: {chain:
  [[[positions], "LETTERS"], ...]}}``.
* **global bias** (``make_bias_AA.py``): one JSON object ``{letter: logit bias}``.

Positions count the slots of a chain from 1, as the original's ``tied_featurize`` does; on a
protein read by :func:`read_parsed_chains_jsonl` that is also its ``resnum``.
"""

from __future__ import annotations

import json
import os
import pathlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, overload

import numpy as np

from fidia_jax._io import atomic_write_text, read_json_lines
from fidia_jax.errors import ChainError, DataError
from fidia_jax.protein._types import ALPHABET, Protein

__all__ = [
    "read_bias_aa",
    "read_bias_by_res",
    "read_chain_assignments",
    "read_fixed_positions",
    "read_omit_aa_by_res",
    "read_tied_positions",
    "read_parsed_chains_jsonl",
    "write_parsed_chains_jsonl",
]

_ATOMS = ("N", "CA", "C", "O")


def _json_lines(path: str | os.PathLike) -> list[tuple[int, dict]]:
    out = read_json_lines(path, what="JSONL file")
    for n, obj in out:
        if not isinstance(obj, dict):
            raise DataError(f"{path}:{n}: expected a JSON object, got {type(obj).__name__}")
    return out


def _coords(value, where: str, length: int) -> np.ndarray:
    if not isinstance(value, list) or len(value) != length:
        raise DataError(f"{where}: expected {length} [x, y, z] triples")
    arr = np.full((length, 3), np.nan, np.float64)
    for i, xyz in enumerate(value):
        if xyz is None:
            continue
        if not isinstance(xyz, list) or len(xyz) != 3:
            raise DataError(f"{where}[{i}]: expected [x, y, z], got {xyz!r}")
        arr[i] = [np.nan if v is None else float(v) for v in xyz]
    return arr


def _protein_from_record(rec: dict, where: str) -> Protein:
    name = rec.get("name")
    if not isinstance(name, str):
        raise DataError(f"{where}: missing 'name'")
    chains = [k[len("seq_chain_") :] for k in rec if k.startswith("seq_chain_")]
    if not chains:
        raise DataError(f"{where} ({name}): no 'seq_chain_<id>' field")
    if "num_of_chains" in rec and rec["num_of_chains"] != len(chains):
        raise DataError(
            f"{where} ({name}): num_of_chains is {rec['num_of_chains']} but {len(chains)} "
            f"seq_chain_<id> fields are present"
        )
    xs, ss, cids, nums, cidx = [], [], [], [], []
    for c_i, c in enumerate(chains):
        seq = rec[f"seq_chain_{c}"]
        coords = rec.get(f"coords_chain_{c}")
        if not isinstance(seq, str) or not isinstance(coords, dict):
            raise DataError(f"{where} ({name}): chain {c} needs seq_chain_{c} and coords_chain_{c}")
        n = len(seq)
        atoms = []
        for a in _ATOMS:
            key = f"{a}_chain_{c}"
            if key not in coords:
                raise DataError(f"{where} ({name}): coords_chain_{c} has no {key!r}")
            atoms.append(_coords(coords[key], f"{where} ({name}) {key}", n))
        xs.append(np.stack(atoms, 1))  # (n, 4, 3)
        ss += [ALPHABET.index(a) if a in ALPHABET else ALPHABET.index("X") for a in seq.upper()]
        cids += [c] * n
        nums += list(range(1, n + 1))
        cidx += [c_i] * n
    X = np.concatenate(xs).astype(np.float64)
    finite = np.isfinite(X).all(-1)  # (L, 4)
    mask = finite.all(-1)
    X = np.where(finite[..., None], X, 0.0).astype(np.float32)
    chain_index = np.asarray(cidx, np.int32)
    cid = np.asarray(cids, dtype=str)
    resnum = np.asarray(nums, np.int32)
    if "seq" in rec and isinstance(rec["seq"], str) and len(rec["seq"]) != len(ss):
        raise DataError(
            f"{where} ({name}): 'seq' has {len(rec['seq'])} letters, the chains {len(ss)}"
        )
    return Protein(
        X=X,
        mask=mask.astype(np.float32),
        S=np.asarray(ss, np.int32),
        residue_idx=(100 * chain_index + np.arange(len(ss), dtype=np.int32)).astype(np.int32),
        chain_encoding=(chain_index + 1).astype(np.int32),
        chain_id=cid,
        resnum=resnum,
        icode=np.full(len(ss), "", dtype=str),
        chain_order=tuple(chains),
        source=name,
        missing=tuple(f"{c}{r}" for c, r, m in zip(cid, resnum, mask, strict=True) if not m),
    )


def read_parsed_chains_jsonl(path: str | os.PathLike) -> list[Protein]:
    """Reads a parsed-chains JSONL file (``parse_multiple_chains.py`` output) into proteins.

    Chains are concatenated in the order of their ``seq_chain_<id>`` fields. Each slot gets
    ``resnum`` = its 1-based position in its chain's sequence (the numbering the helper scripts'
    fixed / tied positions use), ``icode`` ``""``, ``residue_idx = 100 * chain_index +
    running position`` (as :func:`load_structure`), and ``mask`` 0 where any of N, CA, C, O is
    ``NaN`` / ``null`` (those coordinates become 0.0). Letters outside :data:`ALPHABET` (the gap
    ``-``) become ``X``. ``Protein.source`` is the record's ``name``.

    Args:
      path: the JSONL file.

    Returns:
      One :class:`Protein` per non-empty line, in file order.

    Raises:
      DataError: unreadable file, a line that is not a JSON object, a missing field, coordinate
        lists whose length differs from the chain's sequence, ``num_of_chains`` or ``seq``
        inconsistent with the chains.
    """
    return [_protein_from_record(rec, f"{path}:{n}") for n, rec in _json_lines(path)]


def write_parsed_chains_jsonl(
    proteins: Iterable[Protein], path: str | os.PathLike, names: Sequence[str] | None = None
) -> None:
    """Writes proteins as a parsed-chains JSONL file (the format of ``parse_multiple_chains.py``).

    Slots with ``mask`` 0 get ``NaN`` coordinates (as the helper scripts write missing atoms) and
    the file is written atomically. :func:`read_parsed_chains_jsonl` reads it back with the same
    ``X``, ``mask``, ``S``, ``chain_id`` and ``chain_order``.

    Args:
      proteins: the structures.
      path: output file.
      names: record names (default: each protein's file stem of ``source``).
    """
    lines = []
    proteins = list(proteins)
    if names is None:
        names = [
            pathlib.Path(p.source).name.split(".")[0] or f"protein_{i}"
            for i, p in enumerate(proteins)
        ]
    for p, name in zip(proteins, names, strict=True):
        rec: dict = {}
        cid = np.asarray(p.chain_id)
        for c in p.chain_order:
            sel = cid == c
            rec[f"seq_chain_{c}"] = "".join(ALPHABET[int(t)] for t in p.S[sel])
            X = np.where(p.mask[sel, None, None] > 0, p.X[sel], np.nan).astype(float)
            rec[f"coords_chain_{c}"] = {
                f"{a}_chain_{c}": X[:, i].tolist() for i, a in enumerate(_ATOMS)
            }
        rec["name"] = name
        rec["num_of_chains"] = len(p.chain_order)
        rec["seq"] = "".join(rec[f"seq_chain_{c}"] for c in p.chain_order)
        lines.append(json.dumps(rec))  # NaN as the helper scripts write it (Python json)
    atomic_write_text(path, "\n".join(lines) + "\n")


def _single_object(path, what: str) -> dict:
    recs = _json_lines(path)
    if len(recs) != 1:
        raise DataError(f"{path}: a {what} file holds one JSON object, found {len(recs)}")
    return recs[0][1]


def read_chain_assignments(
    path: str | os.PathLike,
) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """Reads a chain-assignment file (``assign_fixed_chains.py`` output).

    Returns:
      ``{name: (designed_chains, fixed_chains)}``; the designed chains are what
      :func:`prepare_design`'s ``design_chains`` takes, the fixed chains stay visible context.

    Raises:
      DataError: not one JSON object, or an entry that is not ``[[chains], [chains]]``.
    """
    obj = _single_object(path, "chain assignment")
    out = {}
    for name, v in obj.items():
        if (
            not isinstance(v, list) or len(v) != 2
            or not all(isinstance(x, list) and all(isinstance(c, str) for c in x) for x in v)
        ):  # fmt: skip
            raise DataError(f"{path}: entry {name!r} must be [[designed chains], [fixed chains]]")
        out[name] = (tuple(v[0]), tuple(v[1]))
    return out


@overload
def read_fixed_positions(
    path: str | os.PathLike, proteins: None = None
) -> dict[str, dict[str, list[int]]]: ...


@overload
def read_fixed_positions(
    path: str | os.PathLike, proteins: Mapping[str, Protein]
) -> dict[str, np.ndarray]: ...


def read_fixed_positions(
    path: str | os.PathLike, proteins: Mapping[str, Protein] | None = None
) -> dict[str, dict[str, list[int]]] | dict[str, np.ndarray]:
    """Reads a fixed-positions file (``make_fixed_positions_dict.py`` output).

    Args:
      path: the JSONL file (one object ``{name: {chain: [1-based positions]}}``).
      proteins: optional ``{name: Protein}``; when given, each entry becomes an ``(L,)`` bool
        mask over that protein's slots (position ``k`` of chain ``c`` = the ``k``-th slot of
        chain ``c``, counted from 1, as the original's ``tied_featurize``).

    Returns:
      ``{name: {chain: positions}}``, or ``{name: (L,) bool}`` when ``proteins`` is given
      (names absent from the file are absent from the result).

    Raises:
      DataError: malformed file, a non-integer position, a position outside ``1 .. len(chain)``,
        a name not in ``proteins``.
      ChainError: a chain the protein does not have.
    """
    obj = _single_object(path, "fixed positions")
    raw: dict[str, dict[str, list[int]]] = {}
    for name, chains in obj.items():
        raw[name] = {}
        for c, pos in _chain_entries(path, name, chains):
            raw[name][c] = _int_list(pos, f"{path}: {name} chain {c}: positions")
    if proteins is None:
        return raw
    masks: dict[str, np.ndarray] = {}
    for name, chains in raw.items():
        p = _protein(path, name, proteins)
        m = np.zeros(p.length, bool)
        for c, pos in chains.items():
            m[_slots(path, name, p, c, pos)] = True
        masks[name] = m
    return masks


def _chain_entries(path, name, chains) -> list[tuple[str, Any]]:
    if not isinstance(chains, dict):
        raise DataError(f"{path}: entry {name!r} must map chain IDs to values")
    return list(chains.items())


def _int_list(value, where: str) -> list[int]:
    if not isinstance(value, list) or not all(
        isinstance(k, int) and not isinstance(k, bool) for k in value
    ):
        raise DataError(f"{where} must be a list of integers, got {value!r}")
    return list(value)


def _protein(path, name: str, proteins: Mapping[str, Protein]) -> Protein:
    if name not in proteins:
        raise DataError(f"{path}: {name!r} is not among the structures {sorted(proteins)}")
    return proteins[name]


def _chain_slots(path, name: str, p: Protein, c: str) -> np.ndarray:
    slots = np.flatnonzero(np.asarray(p.chain_id) == c)
    if slots.size == 0:
        raise ChainError(f"{path}: {name} has no chain {c!r} (chains {list(p.chain_order)})")
    return slots


def _slots(path, name: str, p: Protein, c: str, positions: Sequence[int]) -> np.ndarray:
    """Slot indices of 1-based ``positions`` of chain ``c`` (every position checked)."""
    slots = _chain_slots(path, name, p, c)
    bad = [k for k in positions if not 1 <= k <= slots.size]
    if bad:
        raise DataError(
            f"{path}: {name} chain {c} has {slots.size} residues; positions out of range: {bad}"
        )
    return slots[np.asarray(positions, int) - 1]


def read_tied_positions(
    path: str | os.PathLike, proteins: Mapping[str, Protein] | None = None
) -> dict[str, list[dict[str, list[int]]]] | dict[str, list[list[int]]]:
    """Reads a tied-positions file (``make_tied_positions_dict.py`` output).

    Args:
      path: the JSONL file (one object ``{name: [{chain: [1-based positions]}, ...]}``; the
        weighted form ``{chain: [[positions], [weights]]}`` is read when every weight is 1.0).
      proteins: optional ``{name: Protein}``; each group then becomes a list of slot indices
        (chains in the item's order, positions in the listed order), the ``tied=`` argument of
        :func:`fidia_jax.models.sample` / ``score``.

    Returns:
      ``{name: [{chain: positions}, ...]}``, or ``{name: [[slot, ...], ...]}`` with ``proteins``.

    Raises:
      DataError: malformed file; a weight other than 1.0 (negative design is not supported: the
        weight and chain are named); a position out of range; a slot in two groups; a name not
        in ``proteins``.
      ChainError: a chain the protein does not have.
    """
    obj = _single_object(path, "tied positions")
    raw: dict[str, list[dict[str, list[int]]]] = {}
    for name, items in obj.items():
        if not isinstance(items, list):
            raise DataError(
                f"{path}: entry {name!r} must be a list of {{chain: [positions]}} groups"
            )
        groups = []
        for g, item in enumerate(items):
            group = {}
            for c, v in _chain_entries(path, f"{name} group {g}", item):
                where = f"{path}: {name} group {g} chain {c}"
                if isinstance(v, list) and v and isinstance(v[0], list):  # [[positions], [weights]]
                    if len(v) != 2 or len(v[0]) != len(v[1]):
                        raise DataError(
                            f"{where}: expected [[positions], [weights]] of equal length"
                        )
                    if any(w != 1.0 for w in v[1]):
                        raise DataError(
                            f"{where}: tie weights {v[1]} (negative / weighted design) are not "
                            "supported; only weight 1.0 (a plain tie)"
                        )
                    v = v[0]
                group[c] = _int_list(v, f"{where}: positions")
            groups.append(group)
        raw[name] = groups
    if proteins is None:
        return raw
    out: dict[str, list[list[int]]] = {}
    for name, groups in raw.items():
        p = _protein(path, name, proteins)
        slot_groups, seen = [], set()
        for g, group in enumerate(groups):
            slots = [int(i) for c, pos in group.items() for i in _slots(path, name, p, c, pos)]
            twice = seen.intersection(slots) | {i for i in slots if slots.count(i) > 1}
            if twice:
                labels = [f"{p.chain_id[i]}{p.resnum[i]}" for i in sorted(twice)]
                raise DataError(f"{path}: {name} group {g}: {labels} already tied in another group")
            seen.update(slots)
            if slots:
                slot_groups.append(slots)
        out[name] = slot_groups
    return out


def read_bias_by_res(
    path: str | os.PathLike, proteins: Mapping[str, Protein] | None = None
) -> dict[str, dict[str, np.ndarray]] | dict[str, np.ndarray]:
    """Reads a per-residue bias file (``make_bias_per_res_dict.py`` output).

    Args:
      path: the JSONL file (one object ``{name: {chain: [[21 floats] per residue]}}``, columns in
        :data:`ALPHABET` order).
      proteins: optional ``{name: Protein}``; each entry then becomes an ``(L, 21)`` float32
        table over that protein's slots (chains not listed get 0), the logit bias the sampler adds
        before the temperature.

    Returns:
      ``{name: {chain: (n, 21) float32}}``, or ``{name: (L, 21) float32}`` with ``proteins``.

    Raises:
      DataError: malformed file, a table that is not ``(n, 21)`` with ``n`` the chain's length
        (with ``proteins``), a non-finite value, a name not in ``proteins``.
      ChainError: a chain the protein does not have.
    """
    obj = _single_object(path, "per-residue bias")
    raw: dict[str, dict[str, np.ndarray]] = {}
    for name, chains in obj.items():
        raw[name] = {}
        for c, table in _chain_entries(path, name, chains):
            where = f"{path}: {name} chain {c}"
            try:
                arr = np.asarray(table, np.float64)
            except (TypeError, ValueError):
                raise DataError(f"{where}: expected a list of 21-number rows") from None
            if arr.ndim != 2 or arr.shape[1] != len(ALPHABET):
                raise DataError(
                    f"{where}: expected (residues, {len(ALPHABET)}) numbers, got shape {arr.shape}"
                )
            if not np.isfinite(arr).all():
                raise DataError(f"{where}: non-finite bias values")
            raw[name][c] = arr.astype(np.float32)
    if proteins is None:
        return raw
    out: dict[str, np.ndarray] = {}
    for name, chains in raw.items():
        p = _protein(path, name, proteins)
        bias = np.zeros((p.length, len(ALPHABET)), np.float32)
        for c, arr in chains.items():
            slots = _chain_slots(path, name, p, c)
            if arr.shape[0] != slots.size:
                raise DataError(
                    f"{path}: {name} chain {c} has {slots.size} residues but {arr.shape[0]} bias rows"
                )
            bias[slots] = arr
        out[name] = bias
    return out


def read_omit_aa_by_res(
    path: str | os.PathLike, proteins: Mapping[str, Protein] | None = None
) -> dict[str, dict[str, list[tuple[list[int], str]]]] | dict[str, np.ndarray]:
    """Reads a per-residue omission file (``other_tools/make_omit_AA.py`` output).

    Args:
      path: the JSONL file (one object ``{name: {chain: [[[1-based positions], "LETTERS"], ...]}}``).
      proteins: optional ``{name: Protein}``; each entry then becomes an ``(L, 21)`` bool mask of
        the (slot, letter) cells never sampled.

    Returns:
      ``{name: {chain: [(positions, letters), ...]}}``, or ``{name: (L, 21) bool}``.

    Raises:
      DataError: malformed file, a letter outside :data:`ALPHABET`, a position out of range, a
        name not in ``proteins``.
      ChainError: a chain the protein does not have.
    """
    obj = _single_object(path, "per-residue omit")
    raw: dict[str, dict[str, list[tuple[list[int], str]]]] = {}
    for name, chains in obj.items():
        raw[name] = {}
        for c, items in _chain_entries(path, name, chains):
            where = f"{path}: {name} chain {c}"
            if not isinstance(items, list):
                raise DataError(f'{where}: expected a list of [[positions], "LETTERS"] pairs')
            pairs = []
            for item in items:
                if not (isinstance(item, list) and len(item) == 2 and isinstance(item[1], str)):
                    raise DataError(f'{where}: expected [[positions], "LETTERS"], got {item!r}')
                bad = sorted(set(item[1]) - set(ALPHABET))
                if bad:
                    raise DataError(
                        f"{where}: unknown amino-acid letters {bad} (alphabet {ALPHABET})"
                    )
                pairs.append((_int_list(item[0], f"{where}: positions"), item[1]))
            raw[name][c] = pairs
    if proteins is None:
        return raw
    out: dict[str, np.ndarray] = {}
    for name, chains in raw.items():
        p = _protein(path, name, proteins)
        omit = np.zeros((p.length, len(ALPHABET)), bool)
        for c, pairs in chains.items():
            _chain_slots(path, name, p, c)
            for pos, letters in pairs:
                cols = [ALPHABET.index(a) for a in letters]
                omit[np.ix_(_slots(path, name, p, c, pos), cols)] = True
        out[name] = omit
    return out


def read_bias_aa(path: str | os.PathLike) -> dict[str, float]:
    """Reads a global amino-acid bias file (``make_bias_AA.py`` output, ``{"A": -0.01, ...}``).

    Returns:
      ``{letter: bias}``, the ``bias_aa`` argument of the design commands.

    Raises:
      DataError: not one JSON object, a letter outside :data:`ALPHABET`, a non-finite or
        non-numeric bias.
    """
    obj = _single_object(path, "amino-acid bias")
    out = {}
    for letter, v in obj.items():
        if letter not in ALPHABET:
            raise DataError(f"{path}: unknown amino-acid letter {letter!r} (alphabet {ALPHABET})")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
            raise DataError(f"{path}: the bias of {letter!r} must be a finite number, got {v!r}")
        out[letter] = float(v)
    return out
