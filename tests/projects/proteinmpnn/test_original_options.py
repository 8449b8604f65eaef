"""Issue 27: tied scores as the original computes them, ``score`` over a ``parsed_pdbs.jsonl``
(``--score_only`` with ``--jsonl_path``), and the original's flag names on ``sample``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fidia_jax import cli
from fidia_jax.projects.proteinmpnn import run_sample
from fidia_jax.protein import ALPHABET


@pytest.mark.integration
def test_tied_scores_are_the_originals_untied_forward(model, protein, tmp_path):
    """``score`` / ``global_score`` / native scores of a tied run: the plain teacher-forced
    forward in the grouped order (``protein_mpnn_run.py`` calls ``model(X, S_sample, ...,
    decoding_order=...)`` after ``tied_sample``); ``group_score`` keeps the group distribution."""
    from fidia_jax.models import MPNNInputs, score

    s = run_sample(tmp_path, model=model, num_samples=3, temperature=1.0, seed=8, quiet=True,
                   tie="A1-10:A21-30", save_probs=True)  # fmt: skip
    z = np.load(tmp_path / "probs.npz")
    seqs, orders, designed = z["sequences"], z["decoding_order"], z["designed"]
    assert (seqs[:, :10] == seqs[:, 20:30]).all()
    inputs = MPNNInputs.from_protein(protein)
    tok = np.asarray(score(model, inputs, seqs, orders).token_log_probs)
    ref = -(tok * designed).sum(-1) / designed.sum()
    np.testing.assert_allclose([x["score"] for x in s["samples"]], ref, atol=1e-5)
    full = -(tok * (protein.mask > 0)).sum(-1) / (protein.mask > 0).sum()
    np.testing.assert_allclose([x["global_score"] for x in s["samples"]], full, atol=1e-5)
    nat = np.broadcast_to(protein.S.astype(np.int32), seqs.shape)
    ntok = np.asarray(score(model, inputs, nat, orders).token_log_probs)
    assert s["native_score"] == pytest.approx(float((-(ntok * designed).sum(-1) / designed.sum()).mean()), abs=1e-5)  # fmt: skip
    groups = [[i, 20 + i] for i in range(10)]
    gtok = np.asarray(score(model, inputs, seqs, orders, tied=groups).token_log_probs)
    gref = -(gtok * designed).sum(-1) / designed.sum()
    np.testing.assert_allclose([x["group_score"] for x in s["samples"]], gref, atol=1e-4)
    # the two definitions differ (later members see earlier ones in the original's forward)
    assert np.abs(ref - gref).max() > 1e-3


def _record(protein, name, chains_from):
    """A ``parse_multiple_chains.py`` record of ``protein`` with its one chain named twice."""
    rec = {"name": name, "num_of_chains": len(chains_from)}
    seq = "".join(ALPHABET[int(t)] for t in protein.S)
    X = np.where(protein.mask[:, None, None] > 0, protein.X, np.nan)
    for c, shift in chains_from:
        rec[f"seq_chain_{c}"] = seq
        coords = {f"{a}_chain_{c}": (X[:, k] + shift).tolist() for k, a in enumerate("N CA C O".split())}  # fmt: skip
        rec[f"coords_chain_{c}"] = coords
    rec["seq"] = seq * len(chains_from)
    return json.dumps(rec)  # missing atoms as NaN, as parse_multiple_chains.py writes them


@pytest.mark.integration
def test_score_over_a_parsed_jsonl(model, protein, tmp_path):
    """``score --jsonl-path parsed.jsonl --chain-id-jsonl ... --fixed-positions-jsonl ...``
    (and ``sample --score_only 1 --jsonl_path``, the original's spelling) writes
    ``score_only/<name>_pdb.npz`` with per-residue, designed and global scores: a record with
    chain A designed next to a far-away copy B (visible) scores as the single chain, and its
    fixed positions leave the designed mean only."""
    from fidia_jax.projects.proteinmpnn.batch import run_score_only

    parsed = tmp_path / "parsed.jsonl"
    parsed.write_text(_record(protein, "mono", [("A", 0.0)]) + "\n"
                      + _record(protein, "two", [("A", 0.0), ("B", 500.0)]) + "\n")  # fmt: skip
    chains = tmp_path / "chains.jsonl"
    chains.write_text(json.dumps({"mono": [["A"], []], "two": [["A"], ["B"]]}) + "\n")
    fixed = tmp_path / "fixed.jsonl"
    fixed.write_text(json.dumps({"mono": {"A": [1, 2, 3]}, "two": {"A": [], "B": []}}) + "\n")
    out = tmp_path / "o"
    argv = ["sample", "--score_only", "1", "--jsonl_path", str(parsed), "--chain_id_jsonl",
            str(chains), "--fixed_positions_jsonl", str(fixed), "--num_seq_per_target", "2",
            "--seed", "3", "--quiet", "--out_folder", str(out)]  # fmt: skip
    assert cli.main(argv) == 0
    mono, two = (np.load(out / "score_only" / f"{n}_pdb.npz") for n in ("mono", "two"))
    assert mono["per_residue"].shape == (2, 58) and two["per_residue"].shape == (2, 116)
    assert str(mono["seq_str"]) == "".join(ALPHABET[int(t)] for t in protein.S)
    d = mono["designed"]
    assert not d[:3].any() and d[3:].all()
    np.testing.assert_allclose(mono["score"], mono["per_residue"][:, 3:].mean(-1), rtol=1e-5)
    np.testing.assert_allclose(mono["global_score"], mono["per_residue"].mean(-1), rtol=1e-5)
    # chain B is 500 Å away: no neighbour of A, so A's per-residue scores match the lone chain
    # under the same orders of A's slots (B is visible: decoded before A; A's order is drawn on
    # 116 slots, so compare the sets of values through a direct call)
    s = run_score_only(tmp_path / "o2", jsonl_path=parsed, chain_id_jsonl=chains,
                       num_orders=1, seed=3, model=model, quiet=True)  # fmt: skip
    assert [r["name"] for r in s["structures"]] == ["mono", "two"]
    two1 = np.load(tmp_path / "o2" / "score_only" / "two_pdb.npz")
    assert not two1["designed"][58:].any()
    assert abs(float(two1["score"][0]) - float(np.mean(two1["per_residue"][0, :58]))) < 1e-5
    rows = (out / "scores.tsv").read_text().splitlines()
    assert rows[0].split("\t")[:3] == ["name", "status", "length"] and len(rows) == 3
