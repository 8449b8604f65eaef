"""``fidia-jax score`` / ``run_score`` orders and chain checks, and the sample FASTA scores
(issue 10 items 5 and 6)."""

from __future__ import annotations

import os
import pathlib

import jax
import numpy as np
import pytest

from fidia_jax.errors import DataError
from fidia_jax.projects.proteinmpnn import run_sample, run_score
from fidia_jax.protein import ALPHABET, load_structure


def _fasta(path, seqs):
    path.write_text("".join(f">r{i}\n{s}\n" for i, s in enumerate(seqs)))
    return path


def _mutant(seq, i, a):
    return seq[:i] + a + seq[i + 1 :]


def test_identical_records_score_identically_any_order(model, protein, tmp_path):
    nat = protein.sequence
    seqs = [nat, _mutant(nat, 5, "W"), nat, _mutant(nat, 30, "P"), nat]
    a = run_score(_fasta(tmp_path / "a.fa", seqs), model=model, num_orders=2, seed=1, quiet=True)
    sa = np.array([r["score"] for r in a["records"]])
    assert sa[0] == sa[2] == sa[4]  # same sequence, same orders: bit-identical
    perm = [3, 0, 4, 1, 2]
    b = run_score(_fasta(tmp_path / "b.fa", [seqs[i] for i in perm]), model=model, num_orders=2,
                  seed=1, quiet=True)  # fmt: skip
    np.testing.assert_allclose([r["score"] for r in b["records"]], sa[perm], rtol=1e-6)

    # the score is the mean over the num_orders shared orders of models.score's NLL
    from fidia_jax.models import MPNNInputs, random_decoding_order, score

    toks = np.array([[ALPHABET.index(c) for c in s] for s in seqs], np.int32)
    design = (protein.mask > 0).astype(np.float32)
    want = np.mean(
        [
            score(model, MPNNInputs.from_protein(protein), toks,
                  np.broadcast_to(np.asarray(random_decoding_order(k, design)), toks.shape)).nll
            for k in jax.random.split(jax.random.key(1), 2)
        ], axis=0,
    )  # fmt: skip
    np.testing.assert_allclose(sa, want, rtol=1e-5)


DATA = pathlib.Path(
    os.environ.get(
        "FIDIA_DATA_DIR", pathlib.Path(__file__).resolve().parents[3].parent / "shared/data"
    )
)
YCR = DATA / "protein" / "motif_problems" / "1YCR.pdb"


@pytest.mark.skipif(not YCR.is_file(), reason=f"{YCR} not found (set FIDIA_DATA_DIR)")
def test_chain_length_mismatch_names_the_chain(tmp_path):
    p = load_structure(YCR, chains="A,B")
    n_a, n_b = (int((np.asarray(p.chain_id) == c).sum()) for c in "AB")
    fa = _fasta(tmp_path / "x.fa", ["G" * n_a + "/" + "G" * (n_b + 1)])
    with pytest.raises(DataError, match=f"chain B has {n_b + 1} residues in the FASTA but {n_b}"):
        run_score(fa, pdb=YCR, chains="A,B", quiet=True)
    fa = _fasta(tmp_path / "y.fa", ["G" * (n_a - 1) + "/" + "G" * n_b])
    with pytest.raises(DataError, match=f"chain A has {n_a - 1} residues"):
        run_score(fa, pdb=YCR, chains="A,B", quiet=True)
    fa = _fasta(tmp_path / "z.fa", ["G/G/G"])
    with pytest.raises(
        DataError, match=r"3 '/'-separated chains; expected 1 \(design chains \['B'\]\)"
    ):
        run_score(fa, pdb=YCR, chains="A,B", design_chains="B", quiet=True)


def test_sample_scores_equal_recomputed_nll(model, protein):
    """``score`` / ``global_score`` / native scores of run_sample = models.score recomputed."""
    from fidia_jax.models import MPNNInputs, sample, score

    s = run_sample(None, model=model, num_samples=4, temperature=0.5, seed=11, fixed="A1-5",
                   omit_aas="C", quiet=True, write=False)  # fmt: skip
    inputs = MPNNInputs.from_protein(protein)
    fixed = np.zeros(58, bool)
    fixed[:5] = True
    res = sample(model, jax.random.key(11), inputs, num_samples=4, temperature=0.5,
                 fixed_mask=fixed, omit_aas="CX")  # fmt: skip
    seqs = np.asarray(res.sequences)
    assert [x["sequence"] for x in s["samples"]] == ["".join(ALPHABET[t] for t in r) for r in seqs]
    designed = ~fixed & (protein.mask > 0)
    present = protein.mask > 0
    for toks, key in ((seqs, "score"), (np.broadcast_to(protein.S, seqs.shape), "native")):
        lp = np.asarray(score(model, inputs, toks, res.decoding_order).token_log_probs)
        nll_d = -(lp * designed).sum(-1) / designed.sum()
        nll_g = -(lp * present).sum(-1) / present.sum()
        if key == "score":
            np.testing.assert_allclose([x["score"] for x in s["samples"]], nll_d, atol=1e-4)
            np.testing.assert_allclose([x["global_score"] for x in s["samples"]], nll_g, atol=1e-4)
        else:
            assert s["native_score"] == pytest.approx(nll_d.mean(), abs=1e-4)
            assert s["native_global_score"] == pytest.approx(nll_g.mean(), abs=1e-4)
    assert s["inputs"]["omit_aas"] == "CX"
