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
        p = load_structure(path, chains="A,B")
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
    ba = load_structure(path, chains=["B", "A"])
    assert ba.sequence == "VX" + "AMGSTXXKS"
    assert ba.residue_idx.tolist() == [0, 1] + list(range(102, 111))
    assert load_structure(path).chain_order == ("A", "B")  # DNA chain C is not protein


def test_no_gap_filling(toy):
    p = load_structure(toy[0], chains="A", fill_gaps=False)
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


@pytest.mark.parametrize("content", [b"", b"   \n\n", gzip.compress(b"", mtime=0)], ids=["empty", "blank", "empty-gz"])
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
