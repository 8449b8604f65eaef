"""The Python API in three calls (issue 43): ``Designer.from_pdb`` / ``.sample`` / ``.score``
equal ``fidia-jax proteinmpnn sample`` and ``score`` with the same options, number for number."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fidia_jax import cli
from fidia_jax.errors import DataError
from fidia_jax.projects.proteinmpnn import Designer

FIXED = "A10-20"


@pytest.fixture(scope="module")
def designer(model):
    return Designer.from_pdb(fixed=FIXED, omit="CX", model=model)


def test_sample_and_score_equal_the_command_line(designer, tmp_path):
    designs = designer.sample(3, temperature=0.2, seed=4)
    assert cli.main(["proteinmpnn", "sample", "--num-samples", "3", "--temperature", "0.2",
                     "--seed", "4", "--fixed", FIXED, "--omit-aa", "CX", "--quiet",
                     "--out", str(tmp_path)]) == 0  # fmt: skip
    cli_summary = json.loads((tmp_path / "summary.json").read_text())
    assert list(designs.sequences) == [s["sequence"] for s in cli_summary["samples"]]
    assert designs.scores.tolist() == [s["score"] for s in cli_summary["samples"]]
    assert designs.recovery.tolist() == [s["recovery"] for s in cli_summary["samples"]]
    assert designs.native_score == cli_summary["native_score"]
    designed = designer.setup.designed  # one chain: string position = slot
    for seq in designs.sequences:  # omitted letters only at designed positions (motif native)
        assert isinstance(seq, str) and "C" not in {seq[i] for i in designed.nonzero()[0]}
    assert "fixed and visible positions first" in cli_summary["inputs"]["decoding_order"]

    assert cli.main(["score", "--fasta", str(tmp_path / "samples.fasta"), "--fixed", FIXED,
                     "--num-orders", "2", "--seed", "5", "--quiet", "--out", str(tmp_path)]) == 0  # fmt: skip
    records = json.loads((tmp_path / "scores.json").read_text())["records"]
    # the same records (the FASTA's first is the native sequence, then the samples): the same
    # numbers, bit for bit
    fasta = (tmp_path / "samples.fasta").read_text().splitlines()
    records_seqs = [line for line in fasta if line and not line.startswith(">")]
    assert records_seqs[1:] == list(designs.sequences)
    scores = designer.score(records_seqs, num_orders=2, seed=5)
    assert scores.scores.tolist() == [r["score"] for r in records]
    assert scores.recovery.tolist() == [r["recovery"] for r in records]
    # a sequence's score does not depend on the others scored with it, up to the last float32
    # bits (XLA:CPU's vectorisation over the batch; seen: 1.1e-7 relative)
    alone = designer.score(designs.sequences[1], num_orders=2, seed=5)
    np.testing.assert_allclose(alone.scores, scores.scores[2:3], rtol=1e-6)
    np.testing.assert_allclose(
        designer.score(designs.sequences, num_orders=2, seed=5).scores,
        scores.scores[1:],
        rtol=1e-6,
    )


def test_log_probs_and_unconditional_probs(designer):
    lp = designer.log_probs(seed=0)
    n = designer.setup.protein.length
    assert lp.shape == (n, 21)
    np.testing.assert_allclose(np.exp(lp).sum(-1), 1.0, atol=1e-5)
    # the native's mean NLL over the designed positions in that order = score(native, seed 0)
    d = designer.setup.designed
    native = designer.setup.chain_strings(designer.setup.protein.S)
    nll = -np.take_along_axis(lp, np.asarray(designer.setup.protein.S)[:, None], 1)[:, 0]
    np.testing.assert_allclose(nll[d].mean(), designer.score(native).scores[0], rtol=1e-5)
    probs = designer.unconditional_probs()
    assert probs.shape == (n, 21)
    np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-5)


def test_bad_sequences_are_refused(designer):
    with pytest.raises(DataError, match="letters outside"):
        designer.score("B" * designer.setup.protein.length)
    with pytest.raises(DataError, match="no sequences"):
        designer.score([])
