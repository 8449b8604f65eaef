"""Structure-file parsing into ProteinMPNN's featurisation (:class:`~fidia_jax.protein.Protein`).

The featurisation reproduces what the original ProteinMPNN ``parse_PDB`` + ``tied_featurize``
feed the model (Dauparas et al. 2022, github.com/dauparas/ProteinMPNN):

* chains are concatenated in the order requested; ``chain_encoding`` is 1 for the first chain,
  2 for the second, ...;
* ``residue_idx = 100 * chain_index + running position`` where the running position counts
  residue slots over the whole concatenation (so the first slot of the second chain of a
  50-residue first chain has index 150);
* a numbering gap where the backbone is broken becomes *placeholder slots* (token ``X``,
  ``mask`` 0, coordinates 0), one per missing residue number, as ``parse_PDB`` does, so the
  relative positional encoding and the neighbour sets match the original model's input;
  ``gaps="numbering"`` inserts them at every numbering gap, exactly as ``parse_PDB``;
* residues with an insertion code are separate slots (``52``, ``52A``, ``52B`` ...);
* ``mask`` is 1 only when all four backbone atoms N, CA, C, O are present and finite and not
  coincident; absent (or non-finite) atoms have coordinate 0 while the other atoms of an
  incomplete residue keep their coordinates (as in ``tied_featurize``, which zeroes only the NaN
  entries).

The parsing rules (residue order, duplicates, insertion codes, force-field residue names, gaps,
non-finite coordinates, HETATM records, missing atoms) are listed with what the user sees in one
table in ``docs/protein_io.md``. Deliberate differences from ``parse_PDB``: residues follow
file order (``parse_PDB`` sorts by number and insertion code); by default a numbering gap
bridged by a peptide bond gets no placeholders; modified amino acids are mapped to their parent
residue with the Chemical Component Dictionary shipped with biotite (``MSE`` -> ``M``, ``SEP`` ->
``S`` ...) and force-field protonation names to theirs (``HID`` -> ``H``, ``ASH`` -> ``D`` ...)
whether they are ``ATOM`` or ``HETATM`` records; a ``HETATM`` amino acid that is not part of the
chain (a free amino-acid ligand) is ignored; alternate locations follow the "first altloc of
the residue" rule, any non-blank altloc character (letters and digits) being an ID; mmCIF files use author chain IDs and author numbering.

Reading the file into residue blocks (formats, parser errors, residue names) is
:mod:`fidia_jax.protein._structure_parse`; this module assembles and checks the chains.
"""

from __future__ import annotations

import logging
import os
import pathlib
import re
import warnings
from collections.abc import Sequence
from typing import Literal

import numpy as np

from fidia_jax.errors import ChainError, StructureError
from fidia_jax.protein._structure_parse import (
    _BACKBONE,
    _UNKNOWN,
    _label,
    _read_atoms,
    _Residue,
    _residues,
)
from fidia_jax.protein._types import Protein

__all__ = ["default_backbone_path", "load_structure"]

logger = logging.getLogger(__name__)

#: Largest C(i)-N(i+1) distance (Å) read as a peptide bond. The bond is 1.33 Å; a C...N contact
#: between non-bonded residues is at least ~2.7 Å (van der Waals), and poorly refined bonds in
#: deposited structures reach ~1.8 Å, so 2.0 Å separates the two with margin.
_PEPTIDE_BOND_CUTOFF = 2.0
#: Backbone bonds N-CA, CA-C, C-O (1.46, 1.52, 1.23 Å) shorter than this (Å) mark a residue whose
#: atoms coincide (a degenerate backbone, e.g. every atom written at one point).
_COINCIDENT = 0.5
_MAX_LISTED = 12

#: File name of the built-in default backbone (BPTI, PDB 5PTI), see ``data/PROVENANCE.md``.
_DEFAULT_BACKBONE = "5PTI.cif.gz"


def default_backbone_path() -> pathlib.Path:
    """Path of the small backbone shipped with the package (BPTI, PDB entry 5PTI, chain A).

    58 residues, mmCIF (gzip). Taken from the test data of the PyPI package ``mdanalysistests``
    2.11.0; provenance and licence in ``fidia_jax/protein/data/PROVENANCE.md``. Used by the CLI
    when no ``--pdb`` is given.

    Returns:
      Absolute path of ``fidia_jax/protein/data/5PTI.cif.gz``.
    """
    return pathlib.Path(__file__).resolve().parent / "data" / _DEFAULT_BACKBONE


def _split_chains(chains: str | Sequence[str] | None) -> list[str] | None:
    if chains is None:
        return None
    if isinstance(chains, str):
        parts = [c for c in re.split(r"[,\s]+", chains.strip()) if c]
    else:
        parts = [str(c).strip() for c in chains]
    if not parts:
        raise ChainError("empty chain selection")
    return parts


def _listing(labels: Sequence[str]) -> str:
    shown = ", ".join(labels[:_MAX_LISTED])
    return shown if len(labels) <= _MAX_LISTED else f"{shown}, ... ({len(labels)} in all)"


def _peptide_bonded(a: _Residue, b: _Residue) -> bool | None:
    """Whether C(a)-N(b) is a peptide bond (<= ``_PEPTIDE_BOND_CUTOFF``); ``None`` when an
    atom is absent or not finite."""
    c, n = a.bb.get("C"), b.bb.get("N")
    if c is None or n is None or not (np.isfinite(c).all() and np.isfinite(n).all()):
        return None
    return bool(np.linalg.norm(c - n) <= _PEPTIDE_BOND_CUTOFF)


def _c_n_distance(a: _Residue, b: _Residue) -> float:
    return float(np.linalg.norm(a.bb["C"] - b.bb["N"]))


def _polymer_members(res: list[_Residue]) -> tuple[list[_Residue], list[_Residue]]:
    """Splits one chain's residues (file order) into polymer residues and free amino acids.

    ``ATOM`` records are polymer residues. A ``HETATM`` amino acid is a polymer residue when it
    is peptide-bonded to its neighbour in file order (a modified residue inside the chain), when
    it lies between two ``ATOM`` residues of the chain in file order (a modified residue next to a
    gap or with missing atoms), or when it is bonded into a run of two or more residues (a chain
    written entirely as ``HETATM``). Otherwise it is a free amino acid (a ligand).
    """
    n = len(res)
    bonded = [bool(_peptide_bonded(res[i], res[i + 1])) for i in range(n - 1)]
    atom_idx = [i for i, r in enumerate(res) if not r.hetero]
    first_atom, last_atom = (atom_idx[0], atom_idx[-1]) if atom_idx else (n, -1)
    keep, free = [], []
    for i, r in enumerate(res):
        linked = (i > 0 and bonded[i - 1]) or (i < n - 1 and bonded[i])
        if not r.hetero or linked or first_atom < i < last_atom:
            keep.append(r)
        else:
            free.append(r)
    return keep, free


def load_structure(
    path: str | os.PathLike,
    chains: str | Sequence[str] | None = None,
    *,
    gaps: Literal["geometry", "numbering", "none"] = "geometry",
    ca_only: bool = False,
) -> Protein:
    """Reads the protein backbone of a PDB / mmCIF / BinaryCIF file (optionally gzipped).

    Only the first model is read, with the first alternate location of each residue. Residues
    are amino acids according to the Chemical Component Dictionary (modified residues such as
    ``MSE``, ``SEP``, ``TPO``, ``PTR``, ``HYP``, ``MLY``, ``CSO``, ``CME`` map to their parent;
    unknown amino acids such as ``UNK`` become ``X``) or force-field residue names (Amber
    ``HID``/``HIE``/``HIP`` -> H, ``ASH`` -> D, ``GLH`` -> E, ``CYX``/``CYM`` -> C, ``LYN`` -> K;
    CHARMM ``HSD``/``HSE``/``HSP``, ``ASPP``, ``GLUP``, ``LSN``; GROMACS ``HISD``/``HISE``/``HISH``,
    ``ASPH``, ``GLUH``, ``LYSN``, ``CYS2`` ...); ligands, waters and nucleic acids are ignored,
    and so is a ``HETATM`` amino acid that is not part of its chain (not peptide-bonded to it and
    not between two of its ``ATOM`` residues: a free amino-acid ligand).

    Rules (each listed with what the user sees in ``docs/protein_io.md``):

    * **Order**: within a chain, residues keep file order. Where the numbering does not increase
      along the file (descending insertion codes ``1B, 1A, 1``), file order is kept; a
      :class:`UserWarning` is issued unless a peptide bond confirms the file order.
    * **Duplicates**: a residue ID (chain, number, insertion code) that occurs again later in the
      file keeps its first copy; the later copies are ignored with a :class:`UserWarning` naming
      them (``A2``).
    * **Gaps** (``gaps``): see below; placeholders are logged at INFO level.
    * **Non-finite coordinates** (NaN/inf in N, CA, C or O; ``?`` coordinates in mmCIF): the atom
      counts as missing (coordinate 0.0) and the residue gets ``mask`` 0, with a
      :class:`UserWarning` naming it (``A2 (O)``).
    * **Degenerate backbone**: a residue whose N-CA, CA-C or C-O distance is below 0.5 Å gets
      ``mask`` 0 with a :class:`UserWarning`; when no residue is left, :class:`StructureError`.
    * **Missing backbone atoms**: ``mask`` 0, present atoms keep their coordinates; one WARNING
      on the ``fidia_jax.protein._structure`` logger (printed on stderr by default).

    Args:
      path: structure file; the format follows the suffix (``.pdb``/``.ent``,
        ``.cif``/``.mmcif``, ``.bcif``, each optionally ``.gz``) and is sniffed otherwise.
      chains: author chain IDs to load, in concatenation order (``"B,A"``, ``["B", "A"]``);
        ``None`` loads every chain holding amino acids, in the order of first appearance.
      gaps: how residue numbers missing between two consecutive residues of a chain become
        placeholder slots (token ``X``, ``mask`` 0, coordinates 0, one per missing number):
        ``"geometry"`` (default) inserts them only where the backbone is broken, i.e. unless
        C(i)-N(i+1) <= ``_PEPTIDE_BOND_CUTOFF`` (2.0 Å; a numbering jump over a continuous
        backbone, as antibody numbering schemes make, gets no placeholder); ``"numbering"``
        inserts them at every numbering gap, exactly as ProteinMPNN's ``parse_PDB``;
        ``"none"`` inserts none (only residues present in the file get slots).
      ca_only: for CA-only (coarse-grained) structures and the CA-only ProteinMPNN: ``mask`` is
        1 where the residue has a finite CA (N, C, O are kept where present, 0.0 otherwise, and
        neither required nor checked for degeneracy). Without the C/N atoms no peptide bond can
        be seen, so ``"geometry"`` gaps then insert placeholders at every numbering gap.

    Returns:
      A :class:`~fidia_jax.protein.Protein`; ``Protein.missing`` lists the labels
      (``chain + number + insertion code``) of slots with ``mask`` 0.

    Raises:
      StructureError: the file is missing, empty, not a structure file, cannot be parsed (the
        message names the line and atom of an unreadable PDB field, e.g. ``line 6: CA ALA A 2``),
        holds no amino-acid residues, or no residue with a complete, finite, non-degenerate
        N/CA/C/O backbone (with ``ca_only``: no residue with a finite CA).
      ChainError: a requested chain does not exist (the message lists the available chains),
        holds no amino acids, or is requested twice.
      ValueError: ``gaps`` is not one of the three modes.

    Example:
      >>> from fidia_jax.protein import default_backbone_path, load_structure
      >>> p = load_structure(default_backbone_path(), chains="A")
      >>> p.length, p.sequence[:10]
      (58, 'RPDFCLEPPY')
    """
    if gaps not in ("geometry", "numbering", "none"):
        raise ValueError(f"gaps must be 'geometry', 'numbering' or 'none', got {gaps!r}")
    path = pathlib.Path(path)
    wanted = _split_chains(chains)
    atoms = _read_atoms(path)
    all_chains = list(dict.fromkeys(str(c) for c in atoms.chain_id))

    by_chain: dict[str, list[_Residue]] = {}
    for r in _residues(atoms):
        by_chain.setdefault(r.chain, []).append(r)
    members: dict[str, list[_Residue]] = {}
    free: list[_Residue] = []
    for chain, res in by_chain.items():
        keep, lone = _polymer_members(res)
        free += lone
        if keep:
            members[chain] = keep
    if not members:
        raise StructureError(
            f"{path}: no protein residues found (chains present: {all_chains or 'none'})"
        )
    protein_chains = list(members)

    if wanted is None:
        wanted = protein_chains
    else:
        dup = sorted({c for c in wanted if wanted.count(c) > 1})
        if dup:
            raise ChainError(f"{path}: chain(s) {dup} requested more than once")
        unknown = [c for c in wanted if c not in all_chains]
        if unknown:
            raise ChainError(
                f"{path}: chain(s) {unknown} not found; available protein chains: {protein_chains}"
            )
        no_aa = [c for c in wanted if c not in protein_chains]
        if no_aa:
            raise ChainError(
                f"{path}: chain(s) {no_aa} hold no protein residues; "
                f"available protein chains: {protein_chains}"
            )

    xs, ss, oks, cids, nums, icodes = [], [], [], [], [], []
    missing, incomplete, placeholders = [], [], []
    nonfinite, degenerate, duplicates, disorder, confirmed, bridged = [], [], [], [], [], []
    for chain in wanted:
        seen: dict[tuple[int, str], int] = {}
        res = []
        for r in members[chain]:
            if r.key in seen:
                seen[r.key] += 1
                continue
            seen[r.key] = 1
            res.append(r)
        duplicates += [f"{_label(chain, *k)} ({n} copies)" for k, n in seen.items() if n > 1]
        prev = None
        for r in res:
            if prev is not None:
                bond = _peptide_bonded(prev, r)
                if r.key <= prev.key:
                    pair = f"{prev.label} -> {r.label}"
                    (confirmed if bond else disorder).append(pair)
                absent = range(prev.num + 1, r.num)
                if len(absent) and gaps == "geometry" and bond:
                    bridged.append(
                        f"{prev.label} -> {r.label} (C-N {_c_n_distance(prev, r):.2f} Å)"
                    )
                elif len(absent) and gaps != "none":
                    for num in absent:
                        xs.append(np.zeros((4, 3), np.float32))
                        ss.append(_UNKNOWN)
                        oks.append(False)
                        cids.append(chain)
                        nums.append(num)
                        icodes.append("")
                        missing.append(_label(chain, num, ""))
                        placeholders.append(_label(chain, num, ""))
            x = np.zeros((4, 3), np.float32)
            bad = [a for a in _BACKBONE if a in r.bb and not np.isfinite(r.bb[a]).all()]
            for j, name in enumerate(_BACKBONE):
                if name in r.bb and name not in bad:
                    x[j] = r.bb[name]
            absent_atoms = [a for a in _BACKBONE if a not in r.bb]
            if ca_only:  # only the CA matters
                absent_atoms = [a for a in absent_atoms if a == "CA"]
                bad = [a for a in bad if a == "CA"]
            ok = not absent_atoms and not bad
            if absent_atoms:
                incomplete.append(f"{r.label} (no {','.join(absent_atoms)})")
            if bad:
                nonfinite.append(f"{r.label} ({','.join(bad)})")
            if ok and not ca_only:
                bonds = np.linalg.norm(x[[0, 1, 2]] - x[[1, 2, 3]], axis=-1)
                if (bonds < _COINCIDENT).any():
                    ok = False
                    degenerate.append(r.label)
            if not ok:
                missing.append(r.label)
            xs.append(x)
            ss.append(r.token)
            oks.append(ok)
            cids.append(chain)
            nums.append(r.num)
            icodes.append(r.icode)
            prev = r

    mask = np.asarray(oks, np.float32)
    if not mask.any():
        why = []
        if degenerate:
            why.append(f"{len(degenerate)} residue(s) with coincident backbone atoms: "
                       "all atoms at one point?")  # fmt: skip
        if nonfinite:
            why.append(f"{len(nonfinite)} residue(s) with non-finite coordinates")
        if ca_only:
            raise StructureError(
                f"{path}: no residue with a finite CA atom in chain(s) {wanted} "
                f"({'; '.join(why) or 'no CA atoms'})"
            )
        if incomplete and not why:
            why.append("CA-only model?")
        raise StructureError(
            f"{path}: no residue with a complete N/CA/C/O backbone in chain(s) {wanted} "
            f"({'; '.join(why) or 'CA-only model?'}); for a CA-only structure use "
            "--ca-only on the command line (load_structure(..., ca_only=True) and the CA-only "
            "ProteinMPNN in Python)"
        )
    chain_index = np.array([wanted.index(c) for c in cids], np.int32)
    residue_idx = (100 * chain_index + np.arange(len(cids), dtype=np.int32)).astype(np.int32)

    # What the user must confirm: UserWarning (the file is inconsistent or broken).
    if nonfinite:
        warnings.warn(
            f"{path}: {len(nonfinite)} residue(s) with non-finite backbone coordinates get mask 0 "
            f"(those atoms are treated as missing and set to 0.0): {_listing(nonfinite)}",
            UserWarning,
            stacklevel=2,
        )
    if degenerate:
        warnings.warn(
            f"{path}: {len(degenerate)} residue(s) with coincident backbone atoms (N-CA, CA-C or "
            f"C-O shorter than {_COINCIDENT} Å) get mask 0: {_listing(degenerate)}",
            UserWarning,
            stacklevel=2,
        )
    if duplicates:
        warnings.warn(
            f"{path}: residue ID(s) occurring more than once: {_listing(duplicates)}; the first "
            "copy in the file is kept, later copies are ignored",
            UserWarning,
            stacklevel=2,
        )
    if disorder:
        warnings.warn(
            f"{path}: residue numbering does not increase along the file at "
            f"{_listing(disorder)} (no peptide bond confirms the order); file order is kept",
            UserWarning,
            stacklevel=2,
        )
    # Ordinary properties of experimental structures: logged (WARNING is printed on stderr).
    if incomplete:
        logger.warning(
            "%s: %d residue(s) missing backbone atoms get mask 0: %s",
            path, len(incomplete), ", ".join(incomplete),
        )  # fmt: skip
    if free:
        logger.warning(
            "%s: %d HETATM amino acid(s) not part of a chain are ignored as ligands: %s",
            path, len(free), ", ".join(f"{r.name} {r.label}" for r in free),
        )  # fmt: skip
    if placeholders:
        logger.info(
            "%s: %d numbering-gap placeholder slot(s) (mask 0, token X): %s",
            path, len(placeholders), ", ".join(placeholders),
        )  # fmt: skip
    if bridged:
        logger.info(
            "%s: numbering jumps over a continuous backbone, no placeholder slots: %s",
            path, ", ".join(bridged),
        )  # fmt: skip
    if confirmed:
        logger.info(
            "%s: numbering decreases along the file but peptide bonds confirm the file order: %s",
            path, ", ".join(confirmed),
        )  # fmt: skip
    return Protein(
        X=np.stack(xs).astype(np.float32),
        mask=mask,
        S=np.asarray(ss, np.int32),
        residue_idx=residue_idx,
        chain_encoding=(chain_index + 1).astype(np.int32),
        chain_id=np.asarray(cids, dtype=str),
        resnum=np.asarray(nums, np.int32),
        icode=np.asarray(icodes, dtype=str),
        chain_order=tuple(wanted),
        source=str(path),
        missing=tuple(missing),
    )
