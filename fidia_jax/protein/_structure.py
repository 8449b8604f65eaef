"""Structure-file parsing into ProteinMPNN's featurisation (:class:`~fidia_jax.protein.Protein`).

The featurisation reproduces what the original ProteinMPNN ``parse_PDB`` + ``tied_featurize``
feed the model (Dauparas et al. 2022, github.com/dauparas/ProteinMPNN):

* chains are concatenated in the order requested; ``chain_encoding`` is 1 for the first chain,
  2 for the second, ...;
* ``residue_idx = 100 * chain_index + running position`` where the running position counts
  residue slots over the whole concatenation (so the first slot of the second chain of a
  50-residue first chain has index 150);
* within a chain, residues are ordered by (author residue number, insertion code) and every
  residue number missing between the chain's first and last residue becomes a *placeholder slot*
  (token ``X``, ``mask`` 0, coordinates 0) -- exactly as ``parse_PDB`` does -- so the relative
  positional encoding and the neighbour sets match the original model's input;
* residues with an insertion code are separate slots (``52``, ``52A``, ``52B`` ...);
* ``mask`` is 1 only when all four backbone atoms N, CA, C, O are present; absent atoms have
  coordinate 0 while the present atoms of an incomplete residue keep their coordinates (as in
  ``tied_featurize``, which zeroes only the NaN entries).

Deliberate differences from ``parse_PDB`` (documented in ``docs/protein_io.md``): modified amino
acids are mapped to their parent residue with the Chemical Component Dictionary shipped with
biotite (``MSE`` -> ``M``, ``SEP`` -> ``S``, ``TPO`` -> ``T``, ``PTR`` -> ``Y``, ``HYP`` -> ``P``,
``MLY`` -> ``K``, ``CSO``/``CME`` -> ``C`` ...) whether they are ``ATOM`` or ``HETATM`` records
(the original keeps only ``HETATM MSE`` and turns other non-standard residues into ``X`` or
drops them); non-amino-acid records (ligands, waters, nucleotides) are ignored; alternate
locations follow biotite's "first altloc of the residue" rule; mmCIF files use author chain IDs
and author numbering.
"""

from __future__ import annotations

import functools
import gzip
import logging
import os
import pathlib
import re
import warnings
from collections.abc import Sequence

import numpy as np

from fidia_jax.errors import ChainError, StructureError
from fidia_jax.protein._types import ALPHABET, Protein

__all__ = ["default_backbone_path", "load_structure"]

logger = logging.getLogger(__name__)

_BACKBONE = ("N", "CA", "C", "O")
_STANDARD = {
    "ALA": "A", "ARG": "R", "ASN": "N", "ASP": "D", "CYS": "C", "GLN": "Q", "GLU": "E",
    "GLY": "G", "HIS": "H", "ILE": "I", "LEU": "L", "LYS": "K", "MET": "M", "PHE": "F",
    "PRO": "P", "SER": "S", "THR": "T", "TRP": "W", "TYR": "Y", "VAL": "V",
}  # fmt: skip
#: Frequent modified residues, resolved without loading the Chemical Component Dictionary (CCD).
_MODIFIED = {
    "MSE": "M", "SEP": "S", "TPO": "T", "PTR": "Y", "HYP": "P", "MLY": "K", "CSO": "C",
    "CME": "C", "CSD": "C", "CSS": "C", "OCS": "C", "KCX": "K", "LLP": "K", "M3L": "K",
    "PCA": "Q", "CGU": "E", "SAC": "S", "TYS": "Y", "HIC": "H", "MEN": "N", "NEP": "H",
}  # fmt: skip
_TOKEN = {a: i for i, a in enumerate(ALPHABET)}
_UNKNOWN = _TOKEN["X"]
_CIF_SUFFIXES = (".cif", ".mmcif", ".pdbx")
_PDB_SUFFIXES = (".pdb", ".ent")

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


@functools.lru_cache(maxsize=4096)
def _residue_token(res_name: str) -> int | None:
    """Token of a residue name, or ``None`` when it is not an amino acid.

    Standard residues map directly; other names are looked up in the Chemical Component
    Dictionary bundled with biotite: a component whose link type is a peptide linking type is an
    amino acid, mapped to its parent's one-letter code when that is one of the 20, else ``X``.
    """
    if res_name in _STANDARD:
        return _TOKEN[_STANDARD[res_name]]
    if res_name in _MODIFIED:
        return _TOKEN[_MODIFIED[res_name]]
    import biotite.structure.info as info

    try:
        link = info.link_type(res_name)
    except Exception:  # noqa: BLE001 - unknown component names are simply not amino acids
        link = None
    if link is None or "PEPTIDE" not in link.upper():
        return None
    try:
        code = info.one_letter_code(res_name)
    except Exception:  # noqa: BLE001
        code = None
    if code is not None and len(code) == 1 and code.upper() in _TOKEN and code.upper() != "X":
        return _TOKEN[code.upper()]
    return _UNKNOWN


def _detect_format(path: pathlib.Path, head: bytes) -> str:
    name = path.name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    if name.endswith(".bcif"):
        return "bcif"
    if name.endswith(_CIF_SUFFIXES):
        return "cif"
    if name.endswith(_PDB_SUFFIXES):
        return "pdb"
    text = head.lstrip()
    if text.startswith(b"data_"):
        return "cif"
    return "pdb"


def _read_bytes(path: pathlib.Path) -> bytes:
    if not path.exists():
        raise StructureError(f"{path}: structure file not found")
    if path.is_dir():
        raise StructureError(f"{path}: is a directory, not a structure file")
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
    except (OSError, EOFError) as e:
        raise StructureError(f"{path}: cannot read structure file: {e}") from e
    if not raw.strip():
        raise StructureError(f"{path}: structure file is empty")
    return raw


def _read_atoms(path: pathlib.Path):
    """Atoms of the first model, first altloc, author fields (biotite ``AtomArray``)."""
    import io

    from biotite.structure.io import pdb, pdbx

    raw = _read_bytes(path)
    fmt = _detect_format(path, raw[:256])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # biotite warns about guessed elements etc.
            if fmt == "bcif":
                atoms = pdbx.get_structure(pdbx.BinaryCIFFile.read(io.BytesIO(raw)), model=1)
            elif fmt == "cif":
                text = raw.decode("utf-8")
                atoms = pdbx.get_structure(pdbx.CIFFile.read(io.StringIO(text)), model=1)
            else:
                text = raw.decode("utf-8", errors="replace")
                if not re.search(r"^(ATOM  |HETATM)", text, flags=re.MULTILINE):
                    raise StructureError(
                        f"{path}: not a structure file (no ATOM/HETATM records found)"
                    )
                atoms = pdb.PDBFile.read(io.StringIO(text)).get_structure(model=1)
    except StructureError:
        raise
    except Exception as e:  # noqa: BLE001 - any parser failure is a malformed file for the user
        kind = {"pdb": "PDB", "cif": "mmCIF", "bcif": "BinaryCIF"}[fmt]
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if isinstance(e, KeyError):
            msg = f"required field or category {msg} is missing"
        raise StructureError(f"{path}: cannot parse as {kind}: {msg}") from e
    if atoms.array_length() == 0:
        raise StructureError(f"{path}: not a structure file (no atoms found)")
    return atoms


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


def _label(chain: str, resnum: int, icode: str) -> str:
    return f"{chain}{resnum}{icode}"


def load_structure(
    path: str | os.PathLike,
    chains: str | Sequence[str] | None = None,
    *,
    fill_gaps: bool = True,
) -> Protein:
    """Reads the protein backbone of a PDB / mmCIF / BinaryCIF file (optionally gzipped).

    Only the first model is read, with the first alternate location of each residue. Residues
    are amino acids according to the Chemical Component Dictionary (modified residues such as
    ``MSE``, ``SEP``, ``TPO``, ``PTR``, ``HYP``, ``MLY``, ``CSO``, ``CME`` map to their parent;
    unknown amino acids such as ``UNK`` become ``X``); ligands, waters and nucleic acids are
    ignored.

    Args:
      path: structure file; the format follows the suffix (``.pdb``/``.ent``,
        ``.cif``/``.mmcif``, ``.bcif``, each optionally ``.gz``) and is sniffed otherwise.
      chains: author chain IDs to load, in concatenation order (``"B,A"``, ``["B", "A"]``);
        ``None`` loads every chain holding amino acids, in the order of first appearance.
      fill_gaps: insert a placeholder slot (token ``X``, ``mask`` 0, coordinates 0) for every
        residue number missing between a chain's first and last residue, as ProteinMPNN's
        ``parse_PDB`` does (default). With ``False`` only residues present in the file get slots.

    Returns:
      A :class:`~fidia_jax.protein.Protein`; ``Protein.missing`` lists the labels
      (``chain + number + insertion code``) of slots with ``mask`` 0, which are also reported
      through the ``fidia_jax.protein._structure`` logger.

    Raises:
      StructureError: the file is missing, empty, not a structure file, cannot be parsed,
        holds no amino-acid residues, or no residue with a complete N/CA/C/O backbone.
      ChainError: a requested chain does not exist (the message lists the available chains),
        holds no amino acids, or is requested twice.

    Example:
      >>> from fidia_jax.protein import default_backbone_path, load_structure
      >>> p = load_structure(default_backbone_path(), chains="A")
      >>> p.length, p.sequence[:10]
      (58, 'RPDFCLEPPY')
    """
    path = pathlib.Path(path)
    wanted = _split_chains(chains)
    atoms = _read_atoms(path)

    # Only residue names that carry a backbone-like atom are looked up in the CCD (waters and
    # most ligands never trigger the dictionary load).
    has_bb = np.isin(atoms.atom_name, ("N", "CA", "C"))
    candidates = set(atoms.res_name[has_bb].tolist()) | (
        set(atoms.res_name.tolist()) & set(_STANDARD)
    )
    amino = [r for r in candidates if _residue_token(str(r)) is not None]
    is_aa = np.isin(atoms.res_name, amino)
    all_chains = list(dict.fromkeys(str(c) for c in atoms.chain_id))
    aa_atoms = atoms[is_aa]
    if aa_atoms.array_length() == 0:
        raise StructureError(
            f"{path}: no protein residues found (chains present: {all_chains or 'none'})"
        )
    protein_chains = list(dict.fromkeys(str(c) for c in aa_atoms.chain_id))

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

    chain_arr = aa_atoms.chain_id.astype(str)
    xs, ss, oks, cids, nums, icodes = [], [], [], [], [], []
    missing, incomplete, gaps = [], [], []
    for chain in wanted:
        sub = aa_atoms[chain_arr == chain]
        residues: dict[tuple[int, str], tuple[int, dict[str, np.ndarray]]] = {}
        coords = sub.coord
        for i, (rid, ic, rn, an) in enumerate(
            zip(
                sub.res_id.tolist(),
                sub.ins_code.tolist(),
                sub.res_name.tolist(),
                sub.atom_name.tolist(),
                strict=True,
            )
        ):
            key = (int(rid), str(ic).strip())
            entry = residues.get(key)
            if entry is None:
                entry = residues[key] = (_residue_token(str(rn)), {})
            if an in _BACKBONE and an not in entry[1]:
                entry[1][an] = coords[i]
        keys = sorted(residues)
        if fill_gaps:
            present = {k[0] for k in keys}
            keys = sorted(
                keys + [(n, "") for n in range(keys[0][0], keys[-1][0] + 1) if n not in present]
            )
        for key in keys:
            entry = residues.get(key)
            x = np.zeros((4, 3), np.float32)
            if entry is None:
                tok, ok = _UNKNOWN, False
                gaps.append(_label(chain, *key))
            else:
                tok, bb = entry
                for j, name in enumerate(_BACKBONE):
                    if name in bb:
                        x[j] = bb[name]
                ok = len(bb) == 4
                if not ok:
                    absent = ",".join(a for a in _BACKBONE if a not in bb)
                    incomplete.append(f"{_label(chain, *key)} (no {absent})")
            if not ok:
                missing.append(_label(chain, *key))
            xs.append(x)
            ss.append(tok)
            oks.append(ok)
            cids.append(chain)
            nums.append(key[0])
            icodes.append(key[1])

    mask = np.asarray(oks, np.float32)
    if not mask.any():
        raise StructureError(
            f"{path}: no residue with a complete N/CA/C/O backbone in chain(s) {wanted} "
            "(CA-only model?)"
        )
    chain_index = np.array([wanted.index(c) for c in cids], np.int32)
    residue_idx = (100 * chain_index + np.arange(len(cids), dtype=np.int32)).astype(np.int32)
    if incomplete:
        logger.warning(
            "%s: %d residue(s) missing backbone atoms get mask 0: %s",
            path, len(incomplete), ", ".join(incomplete),
        )  # fmt: skip
    if gaps:
        logger.info(
            "%s: %d numbering-gap placeholder slot(s) (mask 0, token X): %s",
            path, len(gaps), ", ".join(gaps),
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
