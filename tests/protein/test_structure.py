"""Tests of fidia_jax.protein.load_structure (parity with ProteinMPNN's parse_PDB/tied_featurize)."""

from __future__ import annotations

import gzip
import hashlib
import logging
import pathlib

import numpy as np
import pytest

from fidia_jax.errors import ChainError, StructureError
from fidia_jax.protein import ALPHABET, Protein, default_backbone_path, load_structure

FIXTURES = (
    "mpnn_v48_020_6E6R_A.npz",
    "mpnn_v48_020_2KL8_A.npz",
    "mpnn_v48_020_1YCR_Bdesigned_Avisible.npz",
)


def _sha256(path: pathlib.Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _atom(rec, serial, name, resn, chain, resi, x, icode="", altloc="", occ=1.0):
    """One PDB ATOM/HETATM line with correct column positions."""
    aname = f" {name:<3}" if len(name) < 4 else name
    el = name[0]
    return (
        f"{rec:<6}{serial:>5} {aname}{altloc:1}{resn:>3} {chain:1}{resi:>4}{icode:1}   "
        f"{x[0]:>8.3f}{x[1]:>8.3f}{x[2]:>8.3f}{occ:>6.2f}{10.0:>6.2f}          {el:>2}"
    )


def _residue(
    lines, rec, resn, chain, resi, base, icode="", atoms=("N", "CA", "C", "O", "CB"), altloc=""
):
    for j, name in enumerate(atoms):
        lines.append(
            _atom(
                rec,
                len(lines) + 1,
                name,
                resn,
                chain,
                resi,
                base + np.array([j, 0.5 * j, 0.25]),
                icode,
                altloc,
            )
        )


def _toy_pdb() -> tuple[str, dict]:
    """Chain A: 1 ALA, 2 MSE(HETATM), 3 GLY, 3A SER (icode), 3B THR, 6 LYS without O, 7 SEP
    (HETATM) -> numbering gap 4-5; water and a ligand in chain A; chain B: 10 VAL with two altlocs,
    11 UNK; chain C: a DNA residue only. A second MODEL moves all atoms."""
    lines = ["HEADER    TOY"]
    lines.append("MODEL        1")
    _residue(lines, "ATOM", "ALA", "A", 1, np.array([0.0, 0.0, 0.0]))
    _residue(lines, "HETATM", "MSE", "A", 2, np.array([3.0, 0.0, 0.0]))
    _residue(lines, "ATOM", "GLY", "A", 3, np.array([6.0, 0.0, 0.0]), atoms=("N", "CA", "C", "O"))
    _residue(lines, "ATOM", "SER", "A", 3, np.array([9.0, 0.0, 0.0]), icode="A")
    _residue(lines, "ATOM", "THR", "A", 3, np.array([12.0, 0.0, 0.0]), icode="B")
    _residue(lines, "ATOM", "LYS", "A", 6, np.array([15.0, 0.0, 0.0]), atoms=("N", "CA", "C", "CB"))
    _residue(
        lines, "HETATM", "SEP", "A", 7, np.array([18.0, 0.0, 0.0]), atoms=("N", "CA", "C", "O", "P")
    )
    # altlocs: B first in the file for atom N? keep A first (the usual order); coordinates differ
    _residue(lines, "ATOM", "VAL", "B", 10, np.array([0.0, 5.0, 0.0]), altloc="A")
    _residue(lines, "ATOM", "VAL", "B", 10, np.array([0.0, 9.0, 0.0]), altloc="B")
    _residue(lines, "ATOM", "UNK", "B", 11, np.array([3.0, 5.0, 0.0]))
    _residue(lines, "ATOM", " DA", "C", 1, np.array([0.0, 20.0, 0.0]), atoms=("P", "C1'"))
    lines.append(_atom("HETATM", len(lines) + 1, "O", "HOH", "A", 301, np.array([1.0, 1.0, 1.0])))
    lines.append(_atom("HETATM", len(lines) + 1, "C1", "NAG", "A", 302, np.array([2.0, 1.0, 1.0])))
    lines.append("ENDMDL")
    lines.append("MODEL        2")
    _residue(lines, "ATOM", "ALA", "A", 1, np.array([50.0, 50.0, 50.0]))
    lines.append("ENDMDL")
    lines.append("END")
    expected = {
        "A": dict(
            seq="AMGSTXXKS",
            resnum=[1, 2, 3, 3, 3, 4, 5, 6, 7],
            icode=["", "", "", "A", "B", "", "", "", ""],
            mask=[1, 1, 1, 1, 1, 0, 0, 0, 1],
        ),
        "B": dict(seq="VX", resnum=[10, 11], icode=["", ""], mask=[1, 1]),
    }
    return "\n".join(lines) + "\n", expected


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> tuple[pathlib.Path, dict]:
    text, expected = _toy_pdb()
    path = tmp_path_factory.mktemp("toy") / "toy.pdb"
    path.write_text(text)
    return path, expected


@pytest.mark.parametrize("name", FIXTURES)
def test_matches_proteinmpnn_featurisation(name, fixtures_dir, shared_data_dir):
    """X, S, mask, residue_idx, chain_encoding, chain_mask equal the torch pipeline's exactly."""
    fx = np.load(fixtures_dir / "proteinmpnn" / name)
    pdb = shared_data_dir / "protein" / "motif_problems" / pathlib.Path(str(fx["pdb_file"])).name
    if not pdb.is_file() or _sha256(pdb) != str(fx["pdb_sha256"]):
        pytest.skip(f"{pdb} absent or not the file the fixture was made from")
    p = load_structure(pdb, chains=str(fx["chain_order"]))
    assert p.chain_order == tuple(str(fx["chain_order"]).split(","))
    for key in ("X", "S", "mask", "residue_idx", "chain_encoding"):
        got, want = getattr(p, key), fx[key]
        assert got.dtype == want.dtype, key
        np.testing.assert_array_equal(got, want, err_msg=key)
    np.testing.assert_array_equal(p.chain_mask(str(fx["designed_chains"])), fx["chain_mask"])


def test_toy_pdb_rules(toy, caplog):
    path, expected = toy
    with caplog.at_level(logging.INFO, logger="fidia_jax.protein._structure"):
        p = load_structure(path, chains="A,B", gaps="numbering")
    a, b = expected["A"], expected["B"]
    assert p.sequence == a["seq"] + b["seq"]
    assert p.resnum.tolist() == a["resnum"] + b["resnum"]
    assert p.icode.tolist() == a["icode"] + b["icode"]
    assert p.mask.tolist() == a["mask"] + b["mask"]
    assert p.chain_id.tolist() == ["A"] * 9 + ["B"] * 2
    assert p.chain_encoding.tolist() == [1] * 9 + [2] * 2
    assert p.residue_idx.tolist() == list(range(9)) + [109, 110]
    assert p.missing == ("A4", "A5", "A6")
    # first model, first altloc; present atoms of incomplete residue kept, absent ones zero
    np.testing.assert_allclose(p.X[0, 1], [1.0, 0.5, 0.25])
    np.testing.assert_allclose(p.X[9, 0], [0.0, 5.0, 0.25])
    np.testing.assert_allclose(p.X[7, 2], [17.0, 1.0, 0.25])
    np.testing.assert_array_equal(p.X[7, 3], 0.0)
    np.testing.assert_array_equal(p.X[5:7], 0.0)
    assert p.S.dtype == np.int32 and p.X.dtype == np.float32 and p.mask.dtype == np.float32
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "A6 (no O)" in warnings[0].getMessage()
    assert any("A4, A5" in r.getMessage() for r in caplog.records if r.levelno == logging.INFO)


def test_toy_chain_order_and_default(toy):
    path, _ = toy
    ba = load_structure(path, chains=["B", "A"], gaps="numbering")
    assert ba.sequence == "VX" + "AMGSTXXKS"
    assert ba.residue_idx.tolist() == [0, 1] + list(range(102, 111))
    assert load_structure(path).chain_order == ("A", "B")  # DNA chain C is not protein


def test_no_gap_filling(toy):
    p = load_structure(toy[0], chains="A", gaps="none")
    assert p.sequence == "AMGSTKS" and p.resnum.tolist() == [1, 2, 3, 3, 3, 6, 7]


def test_mmcif_and_gzip_agree_with_pdb(toy, tmp_path):
    from biotite.structure.io import pdb as bpdb
    from biotite.structure.io import pdbx

    ref = load_structure(toy[0], chains="A,B")
    atoms = bpdb.PDBFile.read(str(toy[0])).get_structure(model=1, altloc="first")
    cif = pdbx.CIFFile()
    pdbx.set_structure(cif, atoms)
    cif_path = tmp_path / "toy.cif"
    cif.write(str(cif_path))
    gz_path = tmp_path / "toy.cif.gz"
    gz_path.write_bytes(gzip.compress(cif_path.read_bytes()))
    pdb_gz = tmp_path / "toy.pdb.gz"
    pdb_gz.write_bytes(gzip.compress(toy[0].read_bytes()))
    for path in (cif_path, gz_path, pdb_gz):
        p = load_structure(path, chains="A,B")
        assert p.sequence == ref.sequence and p.icode.tolist() == ref.icode.tolist()
        np.testing.assert_array_equal(p.X, ref.X)
        np.testing.assert_array_equal(p.mask, ref.mask)


def test_default_backbone():
    path = default_backbone_path()
    p = load_structure(path)
    assert isinstance(p, Protein) and p.chain_order == ("A",)
    assert p.length == 58 and p.mask.all() and p.missing == ()
    assert p.sequence == "RPDFCLEPPYTGPCKARIIRYFYNAKAGLCQTFVYGGCRAKRNNFKSAEDCMRTCGGA"
    assert set(p.sequence) <= set(ALPHABET[:20])
    prov = (path.parent / "PROVENANCE.md").read_text()
    assert _sha256(path) in prov and "mdanalysistests" in prov


def test_default_backbone_is_not_a_shared_file():
    listing = (
        pathlib.Path(__file__).resolve().parents[2].parent
        / "shared"
        / "hooks"
        / "shared-files.sha256"
    )
    if not listing.is_file():
        pytest.skip(f"{listing} absent")
    assert _sha256(default_backbone_path()) not in listing.read_text()


# --------------------------------------------------------------------------- errors
def test_missing_file(tmp_path):
    with pytest.raises(StructureError, match="nope.pdb.*not found"):
        load_structure(tmp_path / "nope.pdb")


@pytest.mark.parametrize(
    "content", [b"", b"   \n\n", gzip.compress(b"", mtime=0)], ids=["empty", "blank", "empty-gz"]
)
def test_empty_file(tmp_path, content):
    path = tmp_path / "empty.pdb"
    path.write_bytes(content)
    with pytest.raises(StructureError, match="empty.pdb.*empty"):
        load_structure(path)


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("notes.pdb", b"hello world\nthis is not a structure\n"),
        ("garbage.cif", b"data_x\n_cell.length_a 1\nloop_\n_atom_site.id\n1\n"),
        ("random.txt", bytes(range(256)) * 4),
    ],
)
def test_not_a_structure(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(StructureError, match=name.replace(".", r"\.")):
        load_structure(path)


def test_unknown_chain_lists_available(toy):
    with pytest.raises(ChainError, match=r"\['Z'\] not found.*\['A', 'B'\]") as err:
        load_structure(toy[0], chains="A,Z")
    assert str(toy[0]) in str(err.value)


def test_non_protein_chain_and_duplicates(toy):
    with pytest.raises(ChainError, match="no protein residues"):
        load_structure(toy[0], chains="C")
    with pytest.raises(ChainError, match="more than once"):
        load_structure(toy[0], chains="A,A")


def test_no_protein_residues(tmp_path):
    lines = [
        _atom("HETATM", i + 1, "O", "HOH", "A", 100 + i, np.array([i, 0.0, 0.0])) for i in range(3)
    ]
    path = tmp_path / "water.pdb"
    path.write_text("\n".join(lines) + "\nEND\n")
    with pytest.raises(StructureError, match="water.pdb.*no protein residues"):
        load_structure(path)


def test_ca_only_has_no_complete_backbone(tmp_path):
    lines = []
    for i in range(3):
        _residue(lines, "ATOM", "ALA", "A", i + 1, np.array([3.8 * i, 0.0, 0.0]), atoms=("CA",))
    path = tmp_path / "ca.pdb"
    path.write_text("\n".join(lines) + "\nEND\n")
    with pytest.raises(StructureError, match="complete N/CA/C/O"):
        load_structure(path)


def test_public_api():
    import fidia_jax.protein as fp

    for name in ("load_structure", "default_backbone_path", "parse_motif_spec", "load_motif_info",
                 "load_motifbench_cases", "load_rfdiffusion_benchmark", "Protein", "ALPHABET"):  # fmt: skip
        assert name in fp.__all__ and hasattr(fp, name)
    assert all(hasattr(fp, n) for n in fp.__all__)


# --------------------------------------------------------------------------- parsing rules
# Backbone (N, CA, C, O) of four consecutive residues with 1.33 Å peptide bonds, copied from the
# failing inputs of 2026-11-30 (shared/cases/2026-11-30/*.pdb, residues A1-A4).
_BB4 = np.array(
    [
        [[0.000, 0.000, 0.000], [1.458, 0.000, 0.000], [2.009, 1.422, 0.000], [2.910, 1.743, 0.776]],
        [[1.463, 2.263, -0.872], [1.899, 3.650, -0.974], [1.768, 4.370, 0.364], [2.693, 5.057, 0.797]],
        [[0.618, 4.205, 1.008], [0.364, 4.838, 2.297], [1.421, 4.443, 3.323], [1.958, 5.298, 4.027]],
        [[1.711, 3.149, 3.398], [2.704, 2.639, 4.337], [4.057, 3.309, 4.126], [4.696, 3.743, 5.085]],
    ]
)  # fmt: skip


def _pdb(residues, tmp_path, name="x.pdb") -> pathlib.Path:
    """``residues``: (record, resname, chain, number, icode, (4, 3) backbone) tuples."""
    lines = []
    for rec, resn, chain, num, icode, bb in residues:
        for a, xyz in zip(("N", "CA", "C", "O"), bb, strict=True):
            line = _atom(rec, len(lines) + 1, a, resn[:3], chain, num, np.asarray(xyz), icode)
            # a 4-letter name (CHARMM, GROMACS) spills into column 21, as those programs write it
            lines.append(line if len(resn) == 3 else line[:20] + resn[3] + line[21:])
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\nEND\n")
    return path


def _chain(names=("ALA",) * 4, nums=(1, 2, 3, 4), chain="A", bb=_BB4, rec="ATOM", icodes=None):
    icodes = icodes or ("",) * len(nums)
    return [(rec, n, chain, r, i, x) for n, r, i, x in zip(names, nums, icodes, bb, strict=True)]


def _strict(fn, *args, **kwargs):
    """Calls ``fn`` turning any warning into an error (to assert that none is issued)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fn(*args, **kwargs)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
@pytest.mark.parametrize("atom", range(4), ids=["N", "CA", "C", "O"])
def test_non_finite_backbone_atom_masks_the_residue(tmp_path, atom, value):
    """A non-finite N/CA/C/O never reaches the model: mask 0, atom 0.0, a warning naming it."""
    bb = _BB4.copy()
    path = _pdb(_chain(bb=bb), tmp_path)
    lines = path.read_text().splitlines()
    k = 4 * 1 + atom  # residue A2
    lines[k] = lines[k][:30] + f"{value:>8}" + lines[k][38:]
    path.write_text("\n".join(lines) + "\n")
    name = ("N", "CA", "C", "O")[atom]
    with pytest.warns(UserWarning, match=rf"1 residue\(s\) with non-finite .*: A2 \({name}\)"):
        p = load_structure(path)
    assert p.mask.tolist() == [1.0, 0.0, 1.0, 1.0] and p.missing == ("A2",)
    assert np.isfinite(p.X).all()
    np.testing.assert_array_equal(p.X[1, atom], 0.0)
    keep = [j for j in range(4) if j != atom]
    np.testing.assert_allclose(p.X[1, keep], _BB4[1, keep], atol=1e-3)
    assert p.sequence == "AAAA"


def test_unknown_mmcif_coordinate_is_not_read_as_zero(tmp_path):
    """mmCIF ``?`` in Cartn_x: biotite alone reads 0.0; here it is flagged like NaN."""
    from biotite.structure.io import pdb as bpdb
    from biotite.structure.io import pdbx

    atoms = bpdb.PDBFile.read(str(_pdb(_chain(), tmp_path))).get_structure(model=1)
    cif = pdbx.CIFFile()
    pdbx.set_structure(cif, atoms)
    x = cif.block["atom_site"]["Cartn_x"].as_array(str)
    x[5] = "?"  # CA of A2
    cif.block["atom_site"]["Cartn_x"] = pdbx.CIFColumn(pdbx.CIFData(x), pdbx.CIFData(
        np.where(np.arange(len(x)) == 5, pdbx.MaskValue.MISSING, pdbx.MaskValue.PRESENT)))  # fmt: skip
    path = tmp_path / "q.cif"
    cif.write(str(path))
    with pytest.warns(UserWarning, match=r"non-finite .*A2 \(CA\)"):
        p = load_structure(path)
    assert p.mask.tolist() == [1.0, 0.0, 1.0, 1.0]
    np.testing.assert_array_equal(p.X[1, 1], 0.0)
    # BinaryCIF: the same masked value
    bcif = pdbx.BinaryCIFFile()
    pdbx.set_structure(bcif, atoms)
    site = bcif.block["atom_site"]
    xb = site["Cartn_x"].as_array(np.float32)
    missing = np.where(np.arange(len(xb)) == 5, 2, 0).astype(np.uint8)  # 2 = MaskValue.MISSING
    site["Cartn_x"] = pdbx.BinaryCIFColumn(pdbx.BinaryCIFData(xb), pdbx.BinaryCIFData(missing))
    bpath = tmp_path / "q.bcif"
    bcif.write(str(bpath))
    with pytest.warns(UserWarning, match=r"non-finite .*A2 \(CA\)"):
        assert load_structure(bpath).mask.tolist() == [1.0, 0.0, 1.0, 1.0]
    # a coordinate that is not a number at all: the error says which atom
    text = path.read_text().replace("?", "abc", 1)
    path.write_text(text)
    with pytest.raises(
        StructureError, match=r"atom_site row 6 \(id 6\): CA ALA A 2: Cartn_x 'abc'"
    ):
        load_structure(path)


def test_digit_chain_labels_use_the_motif_spec_form(tmp_path):
    """Chain ``1`` residue 2 is labelled ``1:2`` (not ``12``), as motif specs address it."""
    path = _pdb(_chain(chain="1"), tmp_path)
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:7] + lines[8:]) + "\n")  # drop the O of residue 2
    p = load_structure(path)
    assert p.chain_order == ("1",) and p.missing == ("1:2",)


def test_degenerate_backbone(tmp_path):
    bb = _BB4.copy()
    bb[2, :3] = bb[2, 1]  # A3: N, CA, C at one point
    with pytest.warns(UserWarning, match=r"1 residue\(s\) with coincident backbone atoms.*: A3"):
        p = load_structure(_pdb(_chain(bb=bb), tmp_path))
    assert p.mask.tolist() == [1.0, 1.0, 0.0, 1.0] and p.missing == ("A3",)
    one_point = np.full_like(_BB4, 7.0)  # every atom at one point
    with pytest.raises(StructureError, match="4 residue.*coincident backbone atoms"):
        load_structure(_pdb(_chain(bb=one_point), tmp_path, "point.pdb"))


def test_duplicated_residue_id_keeps_the_first_copy(tmp_path):
    """duplicate_residue.pdb: A2 again after A3, moved 5 Å: a warning naming A2, first copy kept."""
    res = _chain()[:3] + [("ATOM", "GLY", "A", 2, "", _BB4[1] + 5.0)]
    with pytest.warns(UserWarning, match=r"more than once: A2 \(2 copies\); the first copy"):
        p = load_structure(_pdb(res, tmp_path))
    assert p.sequence == "AAA" and p.resnum.tolist() == [1, 2, 3]
    np.testing.assert_allclose(p.X[1], _BB4[1], atol=1e-3)


def test_descending_insertion_codes_keep_file_order(tmp_path, caplog):
    """descending_insertion_codes.pdb: file order 1B, 1A, 1 (bonded) stays the chain order."""
    res = _chain(("GLY", "SER", "TRP"), (1, 1, 1), bb=_BB4[:3], icodes=("B", "A", ""))
    with caplog.at_level(logging.INFO, logger="fidia_jax.protein._structure"):
        p = _strict(load_structure, _pdb(res, tmp_path))
    assert p.sequence == "GSW" and p.icode.tolist() == ["B", "A", ""]
    np.testing.assert_allclose(p.X[:, 1], _BB4[:3, 1], atol=1e-3)
    assert any("confirm the file order: A1B -> A1A" in r.getMessage() for r in caplog.records)
    # Without a peptide bond confirming it, file order is kept with a warning.
    res[1] = res[1][:5] + (_BB4[1] + 10.0,)
    with pytest.warns(
        UserWarning,
        match=r"does not increase along the file at A1B -> A1A, A1A -> A1 \(no peptide bond",
    ):
        p = load_structure(_pdb(res, tmp_path, "y.pdb"))
    assert p.sequence == "GSW"


_FF = {
    "HID": "H", "HIE": "H", "HIP": "H", "ASH": "D", "GLH": "E", "CYX": "C", "CYM": "C",
    "LYN": "K", "ARN": "R", "TYM": "Y", "HSD": "H", "HSE": "H", "HSP": "H", "ASPP": "D",
    "GLUP": "E", "LSN": "K", "HISD": "H", "HISE": "H", "HISH": "H", "ASPH": "D", "GLUH": "E",
    "LYSN": "K", "CYS2": "C",
}  # fmt: skip


@pytest.mark.parametrize("fmt", ["pdb", "cif"])
def test_force_field_residue_names(tmp_path, fmt):
    """amber_residue_names.pdb (HID, ASH inside a chain) and the other force fields' names:
    the parent residue's letter, coordinates kept, mask 1 (mmCIF keeps 4-letter names whole)."""
    names = list(_FF)
    nums = list(range(1, len(names) + 1))
    bb = [_BB4[i % 4] + 20.0 * i for i in range(len(names))]  # one chain break per residue
    path = _pdb(_chain(names, nums, bb=bb), tmp_path)
    if fmt == "cif":
        from biotite.structure.io import pdb as bpdb
        from biotite.structure.io import pdbx

        atoms = bpdb.PDBFile.read(str(path)).get_structure(model=1)
        atoms.res_name = np.repeat(names, 4)  # PDB columns truncate ASPP to ASP: restore
        cif = pdbx.CIFFile()
        pdbx.set_structure(cif, atoms)
        path = tmp_path / "ff.cif"
        cif.write(str(path))
    p = _strict(load_structure, path)
    assert p.sequence == "".join(_FF.values())
    assert p.mask.all() and p.resnum.tolist() == nums
    np.testing.assert_allclose(p.X, np.stack(bb), atol=1e-3)


def test_amber_names_in_a_chain(tmp_path):
    p = _strict(load_structure, _pdb(_chain(("ALA", "HID", "ASH", "ALA")), tmp_path))
    assert p.sequence == "AHDA" and p.mask.all()
    np.testing.assert_allclose(p.X, _BB4, atol=1e-3)


def test_force_field_name_clash_with_ccd_component(tmp_path):
    """HSE is CHARMM's histidine and the CCD's homoserine: the atoms decide."""
    lines = []
    for name, xyz in zip(
        ("N", "CA", "C", "O", "CB", "C4", "O3"), np.arange(21).reshape(7, 3) * 0.9, strict=True
    ):
        lines.append(_atom("ATOM", len(lines) + 1, name, "HSE", "A", 1, xyz.astype(float)))
    path = tmp_path / "hse.pdb"
    path.write_text("\n".join(lines) + "\nEND\n")
    assert load_structure(path).sequence == "S"  # homoserine side chain (C4, O3)
    assert (
        _strict(load_structure, _pdb(_chain(("HSE",), (1,), bb=_BB4[:1]), tmp_path)).sequence == "H"
    )


def test_gaps_from_geometry(tmp_path, caplog):
    """numbering_gap_continuous_backbone.pdb: 10, 11, 15, 16 with C(11)-N(15) = 1.33 Å."""
    path = _pdb(_chain(nums=(10, 11, 15, 16)), tmp_path)
    with caplog.at_level(logging.INFO, logger="fidia_jax.protein._structure"):
        p = _strict(load_structure, path)
    assert p.sequence == "AAAA" and p.resnum.tolist() == [10, 11, 15, 16] and p.mask.all()
    assert p.residue_idx.tolist() == [0, 1, 2, 3] and p.missing == ()
    assert any("A11 -> A15 (C-N 1.33 Å)" in r.getMessage() for r in caplog.records)
    # parity with ProteinMPNN's parse_PDB: one placeholder per missing number
    q = load_structure(path, gaps="numbering")
    assert q.sequence == "AAXXXAA" and q.resnum.tolist() == [10, 11, 12, 13, 14, 15, 16]
    assert q.mask.tolist() == [1, 1, 0, 0, 0, 1, 1] and q.missing == ("A12", "A13", "A14")
    assert load_structure(path, gaps="none").sequence == "AAAA"
    # a broken backbone (residues 15-16 moved 8 Å away) keeps the placeholders by default
    bb = _BB4.copy()
    bb[2:] += 8.0
    r = load_structure(_pdb(_chain(nums=(10, 11, 15, 16), bb=bb), tmp_path, "b.pdb"))
    assert r.sequence == "AAXXXAA" and r.residue_idx.tolist() == list(range(7))
    with pytest.raises(ValueError, match="gaps must be"):
        load_structure(path, gaps="distance")  # type: ignore[arg-type]


def test_toy_default_geometry_has_no_placeholders(toy):
    """The toy's 3B -> 6 numbering gap is bridged by a 1.41 Å C-N bond, so no placeholder."""
    p = load_structure(toy[0], chains="A")
    assert p.sequence == "AMGSTKS" and p.resnum.tolist() == [1, 2, 3, 3, 3, 6, 7]
    assert p.missing == ("A6",)


def test_coordinate_overflow_names_line_and_atom(tmp_path):
    """overflow_coordinate.pdb: ``********`` in the x field of line 6."""
    path = _pdb(_chain()[:2], tmp_path)
    lines = path.read_text().splitlines()
    lines[5] = lines[5][:30] + "********" + lines[5][38:]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(StructureError, match=r"line 6: CA ALA A 2: x coordinate '\*{8}'.*overflow"):
        load_structure(path)
    lines[5] = lines[5][:30] + f"{1.0:>8.3f}" + lines[5][38:46] + "   abc  " + lines[5][54:]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(
        StructureError, match=r"line 6: CA ALA A 2: z coordinate 'abc' is not a number"
    ):
        load_structure(path)


def test_free_hetatm_amino_acids_are_not_chain_residues(tmp_path, caplog):
    """A HETATM lysine numbered 501 (not bonded) does not join chain A with 496 placeholders, an
    UNK ligand with a blank chain ID is not a chain; bonded HETATM residues stay."""
    lig = _BB4[0] + 15.0
    res = _chain() + [("HETATM", "LYS", "A", 501, "", lig), ("HETATM", "UNK", " ", 1, "", lig + 9)]
    with caplog.at_level(logging.INFO, logger="fidia_jax.protein._structure"):
        p = load_structure(_pdb(res, tmp_path), gaps="numbering")
    assert p.chain_order == ("A",) and p.sequence == "AAAA" and p.resnum.tolist() == [1, 2, 3, 4]
    msg = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(msg) == 1 and "ignored as ligands: LYS A501, UNK 1" in msg[0]
    with pytest.raises(ChainError, match="hold no protein residues"):
        load_structure(_pdb(res, tmp_path), chains=[""])
    # Modified residues written as HETATM inside the chain (bonded) or a HETATM-only chain stay.
    het = _chain(("ALA", "MSE", "SEP", "ALA"), rec="ATOM")
    het[1] = ("HETATM",) + het[1][1:]
    het[2] = ("HETATM",) + het[2][1:]
    assert _strict(load_structure, _pdb(het, tmp_path, "h.pdb")).sequence == "AMSA"
    only = _chain(("MSE", "MSE"), (1, 2), bb=_BB4[:2], rec="HETATM")
    assert _strict(load_structure, _pdb(only, tmp_path, "o.pdb")).sequence == "MM"


def _altloc_pdb(tmp_path, first, second, *, only=None) -> pathlib.Path:
    """Chain A 1-4 (``_BB4``); residue A2 in two alternate locations, ``first`` met first
    (the second copy moved 0.4 Å in y); ``only``: the backbone atoms that carry altlocs (the
    others are written once, without an altloc ID)."""
    lines = []
    for i, xyz in enumerate(_BB4):
        for a, x in zip(("N", "CA", "C", "O"), xyz, strict=True):
            if i == 1 and (only is None or a in only):
                for alt, dy, occ in ((first, 0.0, 0.6), (second, 0.4, 0.4)):
                    pos = np.asarray(x) + np.array([0.0, dy, 0.0])
                    lines.append(_atom("ATOM", len(lines) + 1, a, "SER", "A", 2, pos, "", alt, occ))
            else:
                resn = "SER" if i == 1 else "ALA"
                lines.append(_atom("ATOM", len(lines) + 1, a, resn, "A", i + 1, np.asarray(x)))
    path = tmp_path / f"alt_{first}{second}.pdb"
    path.write_text("\n".join(lines) + "\nEND\n")
    return path


@pytest.mark.parametrize(("first", "second"), [("A", "B"), ("1", "2"), ("2", "1"), ("B", "A")])
@pytest.mark.parametrize("fmt", ["pdb", "cif"])
def test_any_altloc_character_keeps_the_first_location(tmp_path, first, second, fmt):
    """Issue 29 item 5: digit altlocs (``1`` / ``2``, as some refinement programs write them)
    follow the rule of letters: the altloc met first in the residue is kept, with no warning;
    they used to drop the residue's atoms (masked ``X``)."""
    path = _altloc_pdb(tmp_path, first, second)
    if fmt == "cif":
        from biotite.structure.io import pdb as bpdb
        from biotite.structure.io import pdbx

        atoms = bpdb.PDBFile.read(str(path)).get_structure(model=1, altloc="all")
        cif = pdbx.CIFFile()
        pdbx.set_structure(cif, atoms)
        ids = np.where(atoms.altloc_id == " ", ".", atoms.altloc_id)
        cif.block["atom_site"]["label_alt_id"] = pdbx.CIFColumn(ids)
        path = tmp_path / "alt.cif"
        cif.write(str(path))
        assert f" {second} SER" in path.read_text()  # the altloc IDs are in the mmCIF file
    p = _strict(load_structure, path)
    assert p.sequence == "ASAA" and p.mask.tolist() == [1.0] * 4 and p.missing == ()
    np.testing.assert_allclose(p.X, _BB4, atol=1e-3)  # the first copy, not the moved one


def test_altloc_on_some_atoms_only(tmp_path):
    """Atoms without an altloc ID are kept beside the first alternate of the others."""
    path = _altloc_pdb(tmp_path, "1", "2", only=("CA", "O"))
    p = _strict(load_structure, path)
    assert p.sequence == "ASAA" and p.mask.tolist() == [1.0] * 4
    np.testing.assert_allclose(p.X, _BB4, atol=1e-3)
