"""Reading a structure file into amino-acid residue blocks: the parsing half of
:func:`fidia_jax.protein.load_structure`.

* the file: format from the suffix or sniffed (PDB, mmCIF, BinaryCIF, each optionally gzipped),
  parsed with biotite (first model, first altloc, author fields); a file that cannot be parsed
  raises :class:`~fidia_jax.errors.StructureError` naming the line / ``atom_site`` row and atom;
* residue names to tokens: the 20 standard names, frequent modified residues, force-field
  protonation names, then the Chemical Component Dictionary shipped with biotite;
* one :class:`_Residue` per amino-acid residue block, in file order, with its backbone atoms
  as read.

:mod:`fidia_jax.protein._structure` turns the residues into the featurised
:class:`~fidia_jax.protein.Protein` (chain selection, polymer membership, gaps, validation and
the warnings the user sees).
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import pathlib
import re
import warnings

import numpy as np

from fidia_jax.errors import StructureError, needs_extra
from fidia_jax.protein._types import ALPHABET

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
#: Protonation / disulfide residue names of molecular-dynamics force fields -> parent residue.
#: Amber (ff14SB/ff19SB) and OPLS-AA; CHARMM (CHARMM36); GROMACS (pdb2gmx, GROMOS/OPLS).
_FORCE_FIELD = {
    # Amber / OPLS-AA
    "HID": "H", "HIE": "H", "HIP": "H", "ASH": "D", "GLH": "E", "CYX": "C", "CYM": "C",
    "LYN": "K", "ARN": "R", "TYM": "Y",
    # CHARMM
    "HSD": "H", "HSE": "H", "HSP": "H", "ASPP": "D", "GLUP": "E", "LSN": "K",
    # GROMACS
    "HISD": "H", "HISE": "H", "HISH": "H", "HISA": "H", "HISB": "H", "HIS1": "H",
    "ASPH": "D", "GLUH": "E", "LYSN": "K", "LYSH": "K", "CYS2": "C", "CYSH": "C", "ARGN": "R",
}  # fmt: skip
#: Force-field names that are also CCD components of another amino acid (CCD ``GLH`` is a
#: glutamine derivative, ``HSE`` is L-homoserine): the force-field reading holds unless the
#: residue has heavy atoms that the force-field parent lacks.
_PARENT_HEAVY_ATOMS = {
    "GLH": frozenset({"N", "CA", "C", "O", "OXT", "CB", "CG", "CD", "OE1", "OE2"}),
    "HSE": frozenset({"N", "CA", "C", "O", "OXT", "CB", "CG", "ND1", "CD2", "CE1", "NE2"}),
}
_TOKEN = {a: i for i, a in enumerate(ALPHABET)}
_UNKNOWN = _TOKEN["X"]
_CIF_SUFFIXES = (".cif", ".mmcif", ".pdbx")
_PDB_SUFFIXES = (".pdb", ".ent")


@functools.lru_cache(maxsize=4096)
def _ccd_token(res_name: str) -> int | None:
    """Token from the Chemical Component Dictionary bundled with biotite, ``None`` if not an
    amino acid: a component whose link type is a peptide linking type is an amino acid, mapped
    to its parent's one-letter code when that is one of the 20, else ``X``."""
    with needs_extra("protein", "reading a structure"):
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


def _residue_token(res_name: str) -> int | None:
    """Token of a residue name, or ``None`` when it is not an amino acid.

    Lookup order: the 20 standard names, frequent modified residues, force-field names
    (:data:`_FORCE_FIELD`), then the Chemical Component Dictionary (:func:`_ccd_token`).
    """
    if res_name in _STANDARD:
        return _TOKEN[_STANDARD[res_name]]
    if res_name in _MODIFIED:
        return _TOKEN[_MODIFIED[res_name]]
    if res_name in _FORCE_FIELD:
        return _TOKEN[_FORCE_FIELD[res_name]]
    return _ccd_token(res_name)


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


def _locate_pdb_error(text: str) -> str | None:
    """``"line 6: CA ALA A 2: x coordinate '********' is not a number ..."`` for the first
    ATOM/HETATM record whose coordinate or residue number cannot be read, else ``None``."""
    fields = (("x coordinate", 30, 38), ("y coordinate", 38, 46), ("z coordinate", 46, 54))
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.startswith(("ATOM  ", "HETATM")):
            continue
        where = (
            f"line {n}: {line[12:16].strip()} {line[17:21].strip()} {line[21:22].strip() or '_'} "
            f"{line[22:27].strip()}"
        )
        for what, a, b in fields:
            value = line[a:b]
            try:
                float(value)
            except ValueError:
                hint = ""
                if "*" in value:
                    hint = (
                        " (the PDB format's fixed-width field overflowed: coordinates must lie "
                        "within -999.999..9999.999 Å; write the structure as mmCIF)"
                    )
                return f"{where}: {what} {value.strip()!r} is not a number{hint}"
        try:
            int(line[22:26])
        except ValueError:
            return f"{where}: residue number {line[22:26].strip()!r} is not an integer"
    return None


def _unknown_coordinates_to_nan(block) -> None:
    """mmCIF/BinaryCIF ``?``/``.`` coordinates become NaN (biotite would read them as 0.0), so
    the non-finite rule of :func:`load_structure` flags them instead of placing atoms at the
    origin."""
    try:
        site = block["atom_site"]
    except KeyError:
        return
    for name in ("Cartn_x", "Cartn_y", "Cartn_z"):
        try:
            column = site[name]
        except KeyError:
            return
        if column.mask is not None:
            site[name] = column.as_array(np.float64, masked_value=np.nan)


def _locate_cif_error(block) -> str | None:
    """Where an mmCIF coordinate cannot be read: ``atom_site row 2 (id 2): CA ALA A 1: ...``."""
    try:
        site = block["atom_site"]
        cols = {k: site[k].as_array(str) for k in ("Cartn_x", "Cartn_y", "Cartn_z")}
    except Exception:  # noqa: BLE001 - nothing more precise to say
        return None

    def col(name: str, i: int) -> str:
        try:
            return str(site[name].as_array(str)[i])
        except Exception:  # noqa: BLE001
            return "?"

    for key, values in cols.items():
        for i, v in enumerate(values):
            try:
                float(v)
            except ValueError:
                atom = (
                    f"{col('auth_atom_id', i)} {col('auth_comp_id', i)} {col('auth_asym_id', i)} "
                    f"{col('auth_seq_id', i)}"
                )
                return f"atom_site row {i + 1} (id {col('id', i)}): {atom}: {key} {str(v)!r} is not a number"
    return None


def _read_atoms(path: pathlib.Path):
    """Atoms of the first model, first altloc, author fields (biotite ``AtomArray``)."""
    import io

    with needs_extra("protein", "reading a structure"):
        from biotite.structure.io import pdb, pdbx

    raw = _read_bytes(path)
    fmt = _detect_format(path, raw[:256])
    text, block = "", None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # biotite warns about guessed elements etc.
            if fmt == "bcif":
                cif = pdbx.BinaryCIFFile.read(io.BytesIO(raw))
                block = cif.block
                _unknown_coordinates_to_nan(block)
                atoms = pdbx.get_structure(cif, model=1, altloc="all")
            elif fmt == "cif":
                text = raw.decode("utf-8")
                cif = pdbx.CIFFile.read(io.StringIO(text))
                block = cif.block
                _unknown_coordinates_to_nan(block)
                atoms = pdbx.get_structure(cif, model=1, altloc="all")
            else:
                text = raw.decode("utf-8", errors="replace")
                if not re.search(r"^(ATOM  |HETATM)", text, flags=re.MULTILINE):
                    raise StructureError(
                        f"{path}: not a structure file (no ATOM/HETATM records found)"
                    )
                atoms = pdb.PDBFile.read(io.StringIO(text)).get_structure(model=1, altloc="all")
    except StructureError:
        raise
    except Exception as e:  # noqa: BLE001 - any parser failure is a malformed file for the user
        kind = {"pdb": "PDB", "cif": "mmCIF", "bcif": "BinaryCIF"}[fmt]
        where = None
        if fmt == "pdb":
            where = _locate_pdb_error(text)
        elif block is not None:
            where = _locate_cif_error(block)
        if where is not None:
            raise StructureError(f"{path}: cannot parse as {kind}: {where}") from e
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if isinstance(e, KeyError):
            msg = f"required field or category {msg} is missing"
        raise StructureError(f"{path}: cannot parse as {kind}: {msg}") from e
    if atoms.array_length() == 0:
        raise StructureError(f"{path}: not a structure file (no atoms found)")
    return _first_altloc(atoms)


#: Altloc fields that mean "no alternate location".
_NO_ALTLOC = (".", "?", " ", "")


def _first_altloc(atoms):
    """Keeps, per residue, the atoms without an altloc ID and those with the residue's first one.

    Any non-blank character is an altloc ID: letters (``A``, ``B``) and also the digits (``1``,
    ``2``) that some refinement programs write. biotite's own filter counts letters only, so a
    residue whose alternates are numbered lost every such atom (and came out masked, as ``X``).
    """
    with needs_extra("protein", "reading a structure"):
        import biotite.structure as struc

    if "altloc_id" not in atoms.get_annotation_categories():
        return atoms
    ids = np.asarray(atoms.altloc_id, dtype=str)
    keep = np.isin(ids, _NO_ALTLOC)
    if keep.all():
        return atoms
    starts = struc.get_residue_starts(atoms, add_exclusive_stop=True)
    for a, b in zip(starts[:-1].tolist(), starts[1:].tolist(), strict=True):
        alt = ids[a:b][~keep[a:b]]
        if alt.size:
            keep[a:b] |= ids[a:b] == alt[0]
    return atoms[keep]


def _label(chain: str, resnum: int, icode: str) -> str:
    """``A45``, ``H52A``; ``1:45`` when the chain ID holds a digit (the motif-spec form)."""
    sep = "" if chain.isalpha() or not chain else ":"
    return f"{chain}{sep}{resnum}{icode}"


@dataclasses.dataclass
class _Residue:
    """One amino-acid residue block of the file (first model, first altloc)."""

    chain: str
    num: int
    icode: str
    name: str
    hetero: bool
    token: int
    bb: dict[str, np.ndarray]  # first occurrence of each backbone atom, as read (may be NaN)

    @property
    def key(self) -> tuple[int, str]:
        return (self.num, self.icode)

    @property
    def label(self) -> str:
        return _label(self.chain, self.num, self.icode)


def _residues(atoms) -> list[_Residue]:
    """Amino-acid residue blocks in file order (biotite residue starts of the first model)."""
    with needs_extra("protein", "reading a structure"):
        import biotite.structure as struc

    # Only residue names that carry a backbone-like atom are looked up in the CCD (waters and
    # most ligands never trigger the dictionary load).
    has_bb = np.isin(atoms.atom_name, ("N", "CA", "C"))
    candidates = set(atoms.res_name[has_bb].tolist()) | (
        set(atoms.res_name.tolist()) & set(_STANDARD)
    )
    amino = [r for r in candidates if _residue_token(str(r)) is not None]
    aa = atoms[np.isin(atoms.res_name, amino)]
    if aa.array_length() == 0:
        return []
    starts = np.append(struc.get_residue_starts(aa), aa.array_length())
    names, coords, hetero = aa.atom_name.tolist(), aa.coord, aa.hetero
    elements = aa.element.tolist()
    out = []
    for s, e in zip(starts[:-1].tolist(), starts[1:].tolist(), strict=True):
        rn = str(aa.res_name[s])
        token = _residue_token(rn)
        if rn in _PARENT_HEAVY_ATOMS:
            heavy = {
                n for n, el in zip(names[s:e], elements[s:e], strict=True) if el not in ("H", "D")
            }
            if heavy - _PARENT_HEAVY_ATOMS[rn]:  # atoms of the CCD component, not the FF residue
                token = _ccd_token(rn)
                if token is None:
                    continue
        bb: dict[str, np.ndarray] = {}
        for i in range(s, e):
            if names[i] in _BACKBONE and names[i] not in bb:
                bb[names[i]] = coords[i].astype(np.float32)
        out.append(
            _Residue(
                chain=str(aa.chain_id[s]),
                num=int(aa.res_id[s]),
                icode=str(aa.ins_code[s]).strip(),
                name=rn,
                hetero=bool(hetero[s:e].all()),
                token=int(token),
                bb=bb,
            )
        )
    return out
