"""The original ProteinMPNN helper scripts' JSONL files: parsed chains, chain assignments, fixed positions."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fidia_jax.errors import ChainError, DataError
from fidia_jax.protein import (
    default_backbone_path,
    load_structure,
    read_chain_assignments,
    read_fixed_positions,
    read_parsed_chains_jsonl,
    write_parsed_chains_jsonl,
)

# a two-chain example in the helper scripts' format (our own numbers; chain B residue 2 lacks O)
_NAN = float("nan")
EXAMPLE = {
    "seq_chain_A": "GA",
    "coords_chain_A": {
        "N_chain_A": [[0.0, 0.0, 0.0], [3.3, 0.0, 0.0]],
        "CA_chain_A": [[1.5, 0.0, 0.0], [4.8, 0.0, 0.0]],
        "C_chain_A": [[2.0, 1.4, 0.0], [5.3, 1.4, 0.0]],
        "O_chain_A": [[1.5, 2.4, 0.0], [4.8, 2.4, 0.0]],
    },
    "seq_chain_B": "WK",
    "coords_chain_B": {
        "N_chain_B": [[0.0, 9.0, 0.0], [3.3, 9.0, 0.0]],
        "CA_chain_B": [[1.5, 9.0, 0.0], [4.8, 9.0, 0.0]],
        "C_chain_B": [[2.0, 10.4, 0.0], [5.3, 10.4, 0.0]],
        "O_chain_B": [[1.5, 11.4, 0.0], [_NAN, _NAN, _NAN]],
    },
    "name": "toy",
    "num_of_chains": 2,
    "seq": "GAWK",
}


def test_round_trip_equals_the_structure(tmp_path):
    protein = load_structure(default_backbone_path())
    path = tmp_path / "parsed.jsonl"
    write_parsed_chains_jsonl([protein, protein], path, names=["a", "b"])
    back = read_parsed_chains_jsonl(path)
    assert [p.source for p in back] == ["a", "b"]
    p = back[0]
    np.testing.assert_array_equal(p.X, np.where(protein.mask[:, None, None] > 0, protein.X, 0.0))
    np.testing.assert_array_equal(p.mask, protein.mask)
    assert p.sequence == protein.sequence and p.chain_order == protein.chain_order
    np.testing.assert_array_equal(p.residue_idx, protein.residue_idx)
    np.testing.assert_array_equal(p.chain_encoding, protein.chain_encoding)
    np.testing.assert_array_equal(p.resnum, np.arange(1, protein.length + 1))


def test_example_file_fields(tmp_path):
    path = tmp_path / "parsed.jsonl"
    path.write_text(json.dumps(EXAMPLE) + "\n\n")
    (p,) = read_parsed_chains_jsonl(path)
    assert p.sequence == "GAWK" and p.chain_order == ("A", "B") and list(p.chain_id) == list("AABB")
    np.testing.assert_array_equal(p.mask, [1, 1, 1, 0])
    assert p.missing == ("B2",) and (p.X[3, 3] == 0).all()
    np.testing.assert_array_equal(p.X[1, 1], np.float32([4.8, 0.0, 0.0]))
    np.testing.assert_array_equal(p.residue_idx, [0, 1, 102, 103])
    np.testing.assert_array_equal(p.chain_encoding, [1, 1, 2, 2])
    bad = dict(EXAMPLE, num_of_chains=3)
    path.write_text(json.dumps(bad) + "\n")
    with pytest.raises(DataError, match="num_of_chains"):
        read_parsed_chains_jsonl(path)


def test_chain_assignments_and_fixed_positions(tmp_path):
    parsed = tmp_path / "parsed.jsonl"
    parsed.write_text(json.dumps(EXAMPLE) + "\n")
    (p,) = read_parsed_chains_jsonl(parsed)
    chains = tmp_path / "chains.jsonl"
    chains.write_text(json.dumps({"toy": [["B"], ["A"]]}) + "\n")
    assert read_chain_assignments(chains) == {"toy": (("B",), ("A",))}
    fixed = tmp_path / "fixed.jsonl"
    fixed.write_text(json.dumps({"toy": {"A": [], "B": [2]}}) + "\n")
    assert read_fixed_positions(fixed) == {"toy": {"A": [], "B": [2]}}
    masks = read_fixed_positions(fixed, {"toy": p})
    np.testing.assert_array_equal(masks["toy"], [False, False, False, True])  # B2 = 4th slot
    fixed.write_text(json.dumps({"toy": {"A": [1, 2], "B": [1]}}) + "\n")
    np.testing.assert_array_equal(read_fixed_positions(fixed, {"toy": p})["toy"], [1, 1, 1, 0])
    fixed.write_text(json.dumps({"toy": {"A": [3]}}) + "\n")
    with pytest.raises(DataError, match="out of range"):
        read_fixed_positions(fixed, {"toy": p})
    fixed.write_text(json.dumps({"toy": {"C": [1]}}) + "\n")
    with pytest.raises(ChainError, match="no chain 'C'"):
        read_fixed_positions(fixed, {"toy": p})
    chains.write_text(json.dumps({"toy": ["B", "A"]}) + "\n")
    with pytest.raises(DataError, match="designed chains"):
        read_chain_assignments(chains)


def _write(path, obj):
    path.write_text(json.dumps(obj) + "\n")
    return path


def test_tied_bias_omit_and_global_bias_files(tmp_path):
    from fidia_jax.protein import (
        ALPHABET,
        read_bias_aa,
        read_bias_by_res,
        read_omit_aa_by_res,
        read_tied_positions,
    )

    (p,) = read_parsed_chains_jsonl(_write(tmp_path / "parsed.jsonl", EXAMPLE))
    toy = {"toy": p}
    # one item = one group over all its chains and positions (as the original's tied_featurize)
    tied = _write(tmp_path / "tied.jsonl", {"toy": [{"A": [1, 2], "B": [2]}]})
    assert read_tied_positions(tied) == {"toy": [{"A": [1, 2], "B": [2]}]}
    assert read_tied_positions(tied, toy) == {"toy": [[0, 1, 3]]}
    # the pos/neg helper's weighted form: weight 1.0 is a plain tie, others are refused
    _write(tied, {"toy": [{"A": [[1], [1.0]], "B": [[1], [1.0]]}]})
    assert read_tied_positions(tied, toy) == {"toy": [[0, 2]]}
    _write(tied, {"toy": [{"A": [[1], [1.0]], "B": [[1], [-0.5]]}]})
    with pytest.raises(DataError, match=r"tie weights \[-0.5\]"):
        read_tied_positions(tied, toy)
    _write(tied, {"toy": [{"A": [1], "B": [1]}, {"A": [1], "B": [2]}]})
    with pytest.raises(DataError, match=r"\['A1'\] already tied"):
        read_tied_positions(tied, toy)

    rows_a = np.zeros((2, 21))
    rows_a[1, ALPHABET.index("W")] = 2.5
    bias = _write(tmp_path / "bias.jsonl", {"toy": {"A": rows_a.tolist()}})
    got = read_bias_by_res(bias, toy)["toy"]
    assert got.shape == (4, 21) and got[1, ALPHABET.index("W")] == 2.5 and got.sum() == 2.5
    _write(bias, {"toy": {"B": rows_a[:1].tolist()}})
    with pytest.raises(DataError, match="chain B has 2 residues but 1 bias rows"):
        read_bias_by_res(bias, toy)
    _write(bias, {"toy": {"A": [[0.0] * 20] * 2}})
    with pytest.raises(DataError, match=r"expected \(residues, 21\)"):
        read_bias_by_res(bias)

    omit = _write(tmp_path / "omit.jsonl", {"toy": {"A": [[[1, 2], "GP"], [[2], "W"]], "B": []}})
    m = read_omit_aa_by_res(omit, toy)["toy"]
    want = np.zeros((4, 21), bool)
    want[np.ix_([0, 1], [ALPHABET.index("G"), ALPHABET.index("P")])] = True
    want[1, ALPHABET.index("W")] = True
    np.testing.assert_array_equal(m, want)
    _write(omit, {"toy": {"A": [[[1], "GZ"]]}})
    with pytest.raises(DataError, match=r"unknown amino-acid letters \['Z'\]"):
        read_omit_aa_by_res(omit)

    aa = _write(tmp_path / "aa.jsonl", {"A": -0.01, "G": 0.02})
    assert read_bias_aa(aa) == {"A": -0.01, "G": 0.02}
    _write(aa, {"A": "x"})
    with pytest.raises(DataError, match="finite number"):
        read_bias_aa(aa)


def test_select_chains_reorders_and_renumbers(tmp_path):
    from fidia_jax.protein import select_chains

    (p,) = read_parsed_chains_jsonl(_write(tmp_path / "p.jsonl", EXAMPLE))
    q, slots = select_chains(p, ["B", "A"])
    np.testing.assert_array_equal(slots, [2, 3, 0, 1])
    assert q.sequence == "WKGA" and q.chain_order == ("B", "A") and q.missing == ("B2",)
    np.testing.assert_array_equal(q.residue_idx, [0, 1, 102, 103])  # as if read in that order
    np.testing.assert_array_equal(q.chain_encoding, [1, 1, 2, 2])
    with pytest.raises(ChainError, match="cannot select chains"):
        select_chains(p, ["A", "A"])
