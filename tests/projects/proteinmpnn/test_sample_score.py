"""``fidia-jax proteinmpnn sample | score`` (and the short forms ``sample | score``), in-process."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fidia_jax import cli
from fidia_jax.protein import (
    ALPHABET,
    default_backbone_path,
    load_structure,
    parse_motif_spec,
    read_fasta,
)

FIXED = "A10-20"


@pytest.fixture(scope="module")
def sampled(tmp_path_factory):
    """One ``fidia-jax proteinmpnn sample`` run on the default backbone (compiles the sampler once)."""
    out = tmp_path_factory.mktemp("cli") / "run"
    rc = cli.main(
        ["proteinmpnn", "sample", "--num-samples", "2", "--fixed", FIXED, "--seed", "3",
         "--out", str(out)]
    )  # fmt: skip
    return rc, out


def test_sample_writes_fasta_and_summary(sampled, capsys):
    rc, out = sampled
    assert rc == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "samples.fasta",
        "summary.json",
    ]  # no temp files
    records = read_fasta(out / "samples.fasta")
    summary = json.loads((out / "summary.json").read_text())
    protein = load_structure(default_backbone_path())
    fixed = parse_motif_spec(FIXED, protein)
    native = protein.sequence

    assert (
        len(records) == 3 and records[0][0].startswith("5PTI, score=") and records[0][1] == native
    )
    nat_fields = dict(kv.split("=", 1) for kv in records[0][0].split(", ")[1:])
    assert nat_fields["seed"] == "3" and nat_fields["model_name"] == "v_48_020"
    assert float(nat_fields["score"]) == pytest.approx(summary["native_score"], abs=1e-4)
    assert float(nat_fields["global_score"]) == pytest.approx(
        summary["native_global_score"], abs=1e-4
    )
    inp = summary["inputs"]
    assert inp["num_samples"] == 2 and inp["seed"] == 3 and inp["temperature"] == 0.1
    assert inp["checkpoint"] == "v_48_020" and inp["variant"] == "vanilla"
    assert inp["num_fixed"] == 11 and inp["num_designed"] == protein.length - 11
    assert inp["pdb"] == str(default_backbone_path()) and len(inp["pdb_sha256"]) == 64
    assert set(summary["timing_s"]) >= {"sample", "total"}
    designed = ~fixed & (protein.mask > 0)
    recs = []
    for i, ((header, seq), s) in enumerate(
        zip(records[1:], summary["samples"], strict=True), start=1
    ):
        assert s["index"] == i and s["sequence"] == seq and len(seq) == protein.length
        assert set(seq) <= set(ALPHABET[:20])  # X is never sampled
        arr = np.array(list(seq))
        nat = np.array(list(native))
        np.testing.assert_array_equal(arr[fixed], nat[fixed])  # motif kept
        rec = float((arr[designed] == nat[designed]).mean())
        assert s["recovery"] == pytest.approx(rec, abs=1e-12)
        recs.append(rec)
        fields = dict(kv.split("=") for kv in header.split(", "))
        assert list(fields) == ["T", "sample", "score", "global_score", "seq_recovery"]
        assert int(fields["sample"]) == i and float(fields["T"]) == 0.1
        assert float(fields["score"]) == pytest.approx(s["score"], abs=1e-4)
        assert float(fields["global_score"]) == pytest.approx(s["global_score"], abs=1e-4)
        assert float(fields["seq_recovery"]) == pytest.approx(rec, abs=1e-4)
        assert 0.0 < s["score"] < np.log(20.0)  # mean NLL at T=0.1 is well below uniform
    assert summary["mean_recovery"] == pytest.approx(np.mean(recs))
    assert summary["mean_score"] == pytest.approx(np.mean([s["score"] for s in summary["samples"]]))


def test_score_matches_library(sampled, tmp_path):
    """``fidia-jax score`` = mean NLL over designed positions of models.score in the same order.

    One ``(L,)`` order per key, shared by every record (issue 10 item 6; the order used to be
    drawn per record).
    """
    import jax

    from fidia_jax.models import MPNNInputs, ProteinMPNN, random_decoding_order, score

    _, out = sampled
    assert cli.main(["score", "--fasta", str(out / "samples.fasta"), "--fixed", FIXED, "--seed", "5",
                     "--out", str(tmp_path), "--quiet"]) == 0  # fmt: skip
    got = json.loads((tmp_path / "scores.json").read_text())
    records = read_fasta(out / "samples.fasta")
    assert [r["header"] for r in got["records"]] == [h for h, _ in records]
    assert got["records"][0]["recovery"] == 1.0

    protein = load_structure(default_backbone_path())
    designed = (~parse_motif_spec(FIXED, protein) & (protein.mask > 0)).astype(np.float32)
    toks = np.array([[ALPHABET.index(a) for a in s] for _, s in records], np.int32)
    (k,) = jax.random.split(jax.random.key(5), 1)
    order = np.broadcast_to(np.asarray(random_decoding_order(k, designed)), toks.shape)
    model = ProteinMPNN.from_checkpoint("v_48_020")
    res = score(model, MPNNInputs.from_protein(protein), toks, order)
    want = -(np.asarray(res.token_log_probs) * designed).sum(-1) / designed.sum()
    np.testing.assert_allclose([r["score"] for r in got["records"]], want, rtol=1e-5)


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--chains", "Z"], "chain(s) ['Z'] not found; available protein chains: ['A']"),
        (["--fixed", "A500-510"], "outside chain A"),
        (["--temperature", "0"], "--temperature must be a positive number"),
        (["--pdb", "/nonexistent/x.pdb"], "x.pdb: structure file not found"),
        (["--design-chains", "B"], "design chain(s) ['B'] not among loaded chains"),
    ],
)
def test_bad_input_exit_2_one_line_no_files(extra, needle, tmp_path, capsys):
    out = tmp_path / "out"
    rc = cli.main(["sample", "--num-samples", "2", "--out", str(out), *extra])
    captured = capsys.readouterr()
    assert rc == 2
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("fidia-jax: error: ") and needle in lines[0]
    assert not out.exists()


def test_score_bad_fasta(tmp_path, capsys):
    fasta = tmp_path / "x.fasta"
    fasta.write_text(">short\nACDE\n")
    assert cli.main(["score", "--fasta", str(fasta)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "has 4 residues; expected 58" in err[0]
    fasta.write_text(">bad\n" + "B" * 58 + "\n")
    assert cli.main(["score", "--fasta", str(fasta)]) == 2
    assert "letters outside" in capsys.readouterr().err
