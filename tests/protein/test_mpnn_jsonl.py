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
