"""Tests of motif specs (fidia_jax.protein._motif) and the benchmark CSV loaders."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fidia_jax.errors import DataError, MotifSpecError
from fidia_jax.protein import (
    MotifSegment,
    Protein,
    load_motif_info,
    load_motifbench_cases,
    load_rfdiffusion_benchmark,
    load_structure,
    motif_segments,
    parse_motif_spec,
)


def _toy_protein() -> Protein:
    """Chain H: 50, 51, 52, 52A, 52B, 53, (54 gap), 55; chain L: 1..4."""
    keys = [("H", 50, ""), ("H", 51, ""), ("H", 52, ""), ("H", 52, "A"), ("H", 52, "B"),
            ("H", 53, ""), ("H", 54, ""), ("H", 55, ""),
            ("L", 1, ""), ("L", 2, ""), ("L", 3, ""), ("L", 4, "")]  # fmt: skip
    n = len(keys)
    chain_index = np.array([0 if k[0] == "H" else 1 for k in keys], np.int32)
    return Protein(
        X=np.zeros((n, 4, 3), np.float32),
        mask=np.array([0.0 if k[1] == 54 else 1.0 for k in keys], np.float32),
        S=np.zeros(n, np.int32),
        residue_idx=(100 * chain_index + np.arange(n)).astype(np.int32),
        chain_encoding=chain_index + 1,
        chain_id=np.array([k[0] for k in keys]),
        resnum=np.array([k[1] for k in keys], np.int32),
        icode=np.array([k[2] for k in keys]),
        chain_order=("H", "L"),
        source="toy",
    )


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("H52-53", [2, 3, 4, 5]),  # insertion codes between the endpoints are included
        ("H52A", [3]),
        ("H52A-52B", [3, 4]),
        ("H53-55", [5, 6, 7]),  # the numbering-gap placeholder 54 lies inside the range
        ("5-10,H50-51,3/L2-3,0", [0, 1, 9, 10]),  # scaffold lengths skipped, any separator
        ("[10-40/L4/10-40]", [11]),
        ("L1;H50", [0, 8]),
    ],
)
def test_parse_motif_spec_toy(spec, expected):
    mask = parse_motif_spec(spec, _toy_protein(), scaffold_lengths=True)
    assert mask.dtype == bool and mask.shape == (12,)
    assert np.flatnonzero(mask).tolist() == expected


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("", "no motif segment"),
        ("H50-", "cannot parse"),
        ("H5x0", "cannot parse"),
        ("H50-L52", "cannot parse"),
        ("H53-50", "ends before it starts"),
        ("H52B-52A", "ends before it starts"),
        ("Z1-5", r"chain 'Z' not among the loaded chains \['H', 'L'\]"),
        ("H40-52", r"H40 is outside chain H of toy \(residues 50-55\)"),
        ("L3-9", r"L9 is outside chain L"),
        ("H52C", "outside chain H"),
        ("H54", "selects only residues without backbone coordinates"),  # the placeholder alone
        ("H53,H54", "H54 selects only residues without backbone"),
    ],
)
def test_parse_motif_spec_errors(spec, match):
    with pytest.raises(MotifSpecError, match=match):
        parse_motif_spec(spec, _toy_protein())


def test_contig_without_motif_segment():
    with pytest.raises(MotifSpecError, match="no motif segment"):
        parse_motif_spec("10-40,20", _toy_protein(), scaffold_lengths=True)


def _digit_chain_protein() -> Protein:
    """Chain 1, residues 1-4; chain A, residues 5-7 (the case of a digit chain ID)."""
    keys = [("1", i) for i in range(1, 5)] + [("A", i) for i in range(5, 8)]
    n = len(keys)
    ci = np.array([0] * 4 + [1] * 3, np.int32)
    return Protein(
        X=np.zeros((n, 4, 3), np.float32), mask=np.ones(n, np.float32), S=np.zeros(n, np.int32),
        residue_idx=(100 * ci + np.arange(n)).astype(np.int32), chain_encoding=ci + 1,
        chain_id=np.array([k[0] for k in keys]), resnum=np.array([k[1] for k in keys], np.int32),
        icode=np.array([""] * n), chain_order=("1", "A"), source="digit",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("spec", "expected"),
    [("1:3", [2]), ("1:2-4", [1, 2, 3]), ("A5,1:1", [0, 4]), ("A:6-7", [5, 6]), ("1:1;A7", [0, 6])],
)
def test_digit_chain_ids(spec, expected):
    """``<chain>:<range>`` addresses any chain ID, digits included."""
    assert np.flatnonzero(parse_motif_spec(spec, _digit_chain_protein())).tolist() == expected
    assert str(MotifSegment("1", 5, 10)) == "1:5-10" and str(MotifSegment("A", 5, 5)) == "A5"
    assert motif_segments(str(MotifSegment("12", 3, 4, "", "B"))) == [
        MotifSegment("12", 3, 4, "", "B")
    ]


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        # a bare number in a motif spec names no chain: an error, never skipped
        ("13", r"'13' names no chain.*'1:13'"),
        ("A5,3", r"'3' names no chain"),
        ("1:9", r"residue 1:9 is outside chain 1 of digit \(residues 1-4\)"),
        ("2:1", r"chain '2' not among the loaded chains \['1', 'A'\]"),
        ("1:4-2", "ends before it starts"),
    ],
)
def test_spec_parts_that_select_nothing_are_errors(spec, match):
    with pytest.raises(MotifSpecError, match=match):
        parse_motif_spec(spec, _digit_chain_protein())


def test_descending_insertion_codes_follow_chain_order(tmp_path):
    """File order 1B, 1A, 1 (peptide-bonded): a segment runs in chain order, not code order."""
    text = "\n".join(
        f"ATOM  {i + 1:>5}  {a:<3} {rn} A   1{ic}   {x:>8.3f}{y:>8.3f}{z:>8.3f}  1.00 20.00"
        for i, (a, rn, ic, (x, y, z)) in enumerate(
            [(a, rn, ic, xyz) for (rn, ic, atoms) in _BONDED_3 for a, xyz in atoms]
        )
    )
    path = tmp_path / "desc.pdb"
    path.write_text(text + "\nEND\n")
    p = load_structure(path)
    assert p.icode.tolist() == ["B", "A", ""]
    assert np.flatnonzero(parse_motif_spec("A1B-1A", p)).tolist() == [0, 1]
    assert np.flatnonzero(parse_motif_spec("A1A-1", p)).tolist() == [1, 2]
    with pytest.raises(MotifSpecError, match="ends before it starts in the chain order"):
        parse_motif_spec("A1A-1B", p)


def test_absent_residue_inside_the_numbering():
    with pytest.raises(MotifSpecError, match=r"L5 is outside chain L"):
        parse_motif_spec("L5", _toy_protein())
    p = _digit_chain_protein()
    p = dataclasses.replace(p, resnum=np.array([1, 2, 6, 7, 5, 6, 7], np.int32))
    with pytest.raises(MotifSpecError, match=r"residue 1:4 is outside chain 1 .*; 4 is absent"):
        parse_motif_spec("1:4", p)


# Backbone of residues 1B, 1A, 1 from the case file descending_insertion_codes.pdb (C-N 1.33 Å).
_BONDED_3 = [
    ("GLY", "B", [("N", (0.0, 0.0, 0.0)), ("CA", (1.458, 0.0, 0.0)), ("C", (2.009, 1.422, 0.0)),
                  ("O", (2.910, 1.743, 0.776))]),
    ("SER", "A", [("N", (1.463, 2.263, -0.872)), ("CA", (1.899, 3.650, -0.974)),
                  ("C", (1.768, 4.370, 0.364)), ("O", (2.693, 5.057, 0.797))]),
    ("TRP", "", [("N", (0.618, 4.205, 1.008)), ("CA", (0.364, 4.838, 2.297)),
                 ("C", (1.421, 4.443, 3.323)), ("O", (1.958, 5.298, 4.027))]),
]  # fmt: skip


def test_motif_segments():
    assert motif_segments("10-40/A163-181/10-40", scaffold_lengths=True) == [
        MotifSegment("A", 163, 181)
    ]
    assert [str(s) for s in motif_segments("A1-7,20,A28-79;H52A-52C,B7", scaffold_lengths=True)] == [
        "A1-7", "A28-79", "H52A-52C", "B7"
    ]  # fmt: skip
    with pytest.raises(MotifSpecError, match="must be a string"):
        motif_segments(None)  # type: ignore[arg-type]


def test_rfdiffusion_rows_address_author_numbering(shared_data_dir):
    problems = {p.name: p for p in load_rfdiffusion_benchmark(shared_data_dir)}
    assert len(problems) == 26 and problems["5TPN"].length_fixed == 75
    pr = problems["1PRW"]
    assert pr.contig == "5-20,A16-35,10-25,A52-71,5-20"
    p = load_structure(pr.pdb_path, chains="A")
    fixed = parse_motif_spec(pr.contig, p, scaffold_lengths=True)
    assert p.resnum[fixed].tolist() == list(range(16, 36)) + list(range(52, 72))
    redesign = parse_motif_spec(pr.redesign, p)
    assert redesign.sum() == 30 and not (redesign & ~fixed).any()
    # multi-chain: 4JHW motif on chain F, author numbering
    pr = problems["4JHW"]
    p = load_structure(pr.pdb_path, chains=[s.chain for s in pr.segments()][:1])
    fixed = parse_motif_spec(pr.contig, p, scaffold_lengths=True)
    assert sorted(p.resnum[fixed].tolist()) == list(range(63, 70)) + list(range(196, 213))


def test_motifbench_cases(shared_data_dir):
    cases = load_motifbench_cases(shared_data_dir)
    assert len(cases) == 30 and [c.number for c in cases] == list(range(1, 31))
    c = cases[11]
    assert (c.name, c.pdb_id, c.length, c.group) == ("12_4JHW", "4JHW", 100, 2)
    assert [str(s) for s in c.segments()] == ["F63-69", "F196-212"]
    assert [str(s) for s in motif_segments(c.redesign)] == [
        "F63",
        "F69",
        "F196",
        "F198",
        "F203",
        "F211-212",
    ]
    # the motifbench folder itself is accepted too
    assert load_motifbench_cases(shared_data_dir / "protein" / "motifbench")[0].name == "01_1LDB"


@pytest.mark.parametrize("name", ["04_5WN9", "12_4JHW", "25_2RKX"])
def test_motif_info_places_the_motif(shared_data_dir, name):
    """The contig walk finds, in the reference chain, exactly the residues of the motif PDB
    (identical except at the redesignable positions, which the motif PDB writes as UNK)."""
    infos = {m.name: m for m in load_motif_info(shared_data_dir)}
    assert len(infos) == 30
    info = infos[name]
    ref = load_structure(info.pdb_path)
    motif = load_structure(
        shared_data_dir / "protein" / "motifbench" / "motif_pdbs" / f"{name}.pdb"
    )
    assert info.length == ref.length
    fixed, redesign = info.motif_mask(), info.redesign_mask()
    assert not (redesign & ~fixed).any()
    order = info.segment_order.split(";")
    # motif segments are placed in segment order along the chain
    motif_seq = "".join("".join(np.array(list(motif.sequence))[motif.chain_id == c]) for c in order)
    ref_seq = "".join(np.array(list(ref.sequence))[fixed])
    assert len(ref_seq) == len(motif_seq) == int(fixed.sum())
    red = redesign[fixed]
    assert all(a == b for a, b, r in zip(ref_seq, motif_seq, red, strict=True) if not r)
    assert all(b == "X" for b, r in zip(motif_seq, red, strict=True) if r)
    # same geometry up to a rigid motion (the motif PDBs are re-centred): CA distance matrices
    a = ref.X[fixed][:, 1]
    b = np.concatenate([motif.X[motif.chain_id == c][:, 1] for c in order])
    dist = lambda x: np.linalg.norm(x[:, None] - x[None], axis=-1)  # noqa: E731
    np.testing.assert_allclose(dist(a), dist(b), atol=5e-3)


def test_loader_errors(tmp_path, monkeypatch):
    monkeypatch.delenv("FIDIA_DATA_DIR", raising=False)
    with pytest.raises(DataError, match="FIDIA_DATA_DIR"):
        load_motifbench_cases()
    with pytest.raises(DataError, match="not found"):
        load_motifbench_cases(tmp_path / "absent")
    with pytest.raises(DataError, match="test_cases.csv"):
        load_motifbench_cases(tmp_path)
    (tmp_path / "test_cases.csv").write_text("pdb_id,motif_residues\n1ABC,A1-5\n")
    with pytest.raises(DataError, match="missing column"):
        load_motifbench_cases(tmp_path)
    (tmp_path / "test_cases.csv").write_text(
        "pdb_id,motif_residues,redesign_idcs,length,group\n1ABC,A1-5,,long,1\n"
    )
    with pytest.raises(DataError, match="'long' is not an integer"):
        load_motifbench_cases(tmp_path)
    monkeypatch.setenv("FIDIA_DATA_DIR", str(tmp_path))
    (tmp_path / "test_cases.csv").write_text(
        "pdb_id,motif_residues,redesign_idcs,length,group\n1ABC,A1-5,,80,1\n"
    )
    assert load_motifbench_cases()[0].length == 80
