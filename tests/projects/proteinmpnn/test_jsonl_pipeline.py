"""``fidia-jax proteinmpnn sample --jsonl-path`` with the original helper scripts' files (issue 10,
item 3): chain assignments, fixed, tied, per-residue bias and omission, global bias."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from fidia_jax import cli
from fidia_jax.protein import ALPHABET, write_parsed_chains_jsonl


def _dimer(p):
    """5PTI chain A and a copy 40 Å away as chain B (a two-chain structure of our own)."""
    cat = lambda a, b: np.concatenate([a, b])  # noqa: E731
    return dataclasses.replace(
        p, X=cat(p.X, p.X + np.float32([40.0, 0, 0])), mask=cat(p.mask, p.mask), S=cat(p.S, p.S),
        residue_idx=cat(p.residue_idx, p.residue_idx + 100 + p.length),
        chain_encoding=cat(p.chain_encoding, p.chain_encoding + 1),
        chain_id=cat(p.chain_id, np.full(p.length, "B")), resnum=cat(p.resnum, p.resnum),
        icode=cat(p.icode, p.icode), chain_order=("A", "B"), missing=(),
    )  # fmt: skip


def _write(path, obj):
    path.write_text(json.dumps(obj) + "\n")
    return str(path)


def _files(n):
    bias_rows = np.zeros((n, 21))
    bias_rows[19, ALPHABET.index("W")] = 100.0  # A20 -> W
    return {
        "chain-id": {"both": [["B", "A"], []], "designA": [["A"], ["B"]]},  # none for "broken"
        "fixed-positions": {
            "both": {"A": [1, 2, 3], "B": [1, 2, 3]},
            "designA": {"A": [5], "B": []},
        },
        "tied-positions": {"both": [{"A": [k], "B": [k]} for k in range(1, n + 1)]},
        "omit-aa": {"both": {"A": [[[10], "GC"]], "B": [[[10], "A"]]}},
        "bias-by-res": {"designA": {"A": bias_rows.tolist(), "B": np.zeros((n, 21)).tolist()}},
        "bias-aa": {"C": -100.0},
    }


def _args(d, protein, files):
    write_parsed_chains_jsonl(
        [_dimer(protein)] * 3, d / "parsed.jsonl", names=["both", "designA", "broken"]
    )
    args = ["proteinmpnn", "sample", "--jsonl-path", str(d / "parsed.jsonl"), "--num-samples", "4",
            "--temperature", "1.0", "--quiet", "--out", str(d / "out")]  # fmt: skip
    for k, v in files.items():
        args += [f"--{k}-jsonl", _write(d / f"{k}.jsonl", v)]
    return args


def test_pipeline_files_resolve_to_the_right_slots(protein, tmp_path, monkeypatch):
    """What each record hands to run_sample (no sampling): chains designed-then-visible, sorted;
    fixed / tied / omit / bias carried to the selected chains' slots."""
    from fidia_jax.projects.proteinmpnn import batch

    calls = {}

    def fake_run_sample(out, **kw):
        calls[out.name] = kw
        return {"inputs": {"length": kw["pdb"].length, "num_designed": 1}, "mean_score": 1.0,
                "mean_recovery": 0.5}  # fmt: skip

    monkeypatch.setattr(batch, "run_sample", fake_run_sample)
    from fidia_jax.models import ProteinMPNN

    monkeypatch.setattr(
        ProteinMPNN, "from_checkpoint", lambda *a, **k: type("M", (), {"k_neighbors": 48})
    )
    n = protein.length
    rc = cli.main(_args(tmp_path, protein, _files(n)))
    assert rc == 2 and set(calls) == {"both", "designA"}  # "broken" has no chain assignment
    both, one = calls["both"], calls["designA"]
    assert both["pdb"].chain_order == ("A", "B") and both["design_chains"] == ["A", "B"]
    assert both["tie"] == [[k, n + k] for k in range(n)]
    np.testing.assert_array_equal(np.flatnonzero(both["fixed"]), [0, 1, 2, n, n + 1, n + 2])
    omit = both["omit_by_res"]
    assert [ALPHABET[j] for j in np.flatnonzero(omit[9])] == ["C", "G"]
    assert [ALPHABET[j] for j in np.flatnonzero(omit[n + 9])] == ["A"] and omit.sum() == 3
    assert both["bias_aa"] == {"C": -100.0} == one["bias_aa"]
    assert one["pdb"].chain_order == ("A", "B") and one["design_chains"] == ["A"]
    assert np.flatnonzero(one["fixed"]).tolist() == [4] and "tie" not in one
    assert np.argwhere(one["bias_by_res"]).tolist() == [[19, ALPHABET.index("W")]]
    # a chain assignment with the visible chain first still puts the designed chains first
    files = _files(n)
    files["chain-id"]["designA"] = [["B"], ["A"]]
    files["bias-by-res"] = {}
    calls.clear()
    cli.main(_args(tmp_path, protein, files))
    sel = calls["designA"]["pdb"]
    assert sel.chain_order == ("B", "A") and list(sel.chain_id[:n]) == ["B"] * n
    np.testing.assert_array_equal(np.flatnonzero(calls["designA"]["fixed"]), [n + 4])


@pytest.fixture(scope="module")
def run(protein, tmp_path_factory):
    d = tmp_path_factory.mktemp("jsonl")
    args = _args(d, protein, _files(protein.length))
    rc = cli.main(args)
    return rc, d / "out", protein


def _sequences(folder):
    lines = (folder / "samples.fasta").read_text().splitlines()
    return [s for h, s in zip(lines[2::2], lines[3::2], strict=True) if h.startswith(">T=")]


@pytest.mark.slow  # three sampler compilations at length 128 (~40 s on 2 idle cores)
def test_pipeline_files_applied_per_structure(run):
    rc, out, protein = run
    rows = {r["name"]: r for r in json.loads((out / "summary.json").read_text())["backbones"]}
    assert rc == 2 and rows["broken"]["status"] == "error"  # one bad record, the others written
    assert "no chain assignment for 'broken'" in rows["broken"]["error"]
    native = protein.sequence
    # "both": chains A/B (designed chains sorted), tied position by position
    seqs = _sequences(out / "both")
    assert len(seqs) == 4
    for s in seqs:
        a, b = s.split("/")
        assert a == b and a[:3] == native[:3]  # tied slots equal; fixed positions native
        assert a[9] not in "GCA"  # A10 omits G, C; its tie partner B10 omits A: the group omits all
        assert "C" not in a[3:]  # the global bias file: C at -100
    # "designA": chain B visible only, A20 biased to W, A5 fixed
    seqs = _sequences(out / "designA")
    for s in seqs:
        assert "/" not in s and len(s) == protein.length
        assert s[19] == "W" and s[4] == native[4]
    summary = json.loads((out / "designA" / "summary.json").read_text())
    assert summary["inputs"]["design_chains"] == ["A"]


def test_jsonl_path_with_the_ca_only_model_is_refused(tmp_path, capsys):
    rc = cli.main(["proteinmpnn", "sample", "--jsonl-path", str(tmp_path / "p.jsonl"), "--ca-only",
                   "--out", str(tmp_path / "o")])  # fmt: skip
    assert rc == 2 and "--jsonl-path with the CA-only model" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_pipeline_file_without_jsonl_path_is_an_error(tmp_path, capsys):
    rc = cli.main(["proteinmpnn", "sample", "--tied-positions-jsonl", str(tmp_path / "t.jsonl"),
                   "--out", str(tmp_path / "o")])  # fmt: skip
    assert rc == 2 and "--tied-positions-jsonl need --jsonl-path" in capsys.readouterr().err


def test_pdb_dir_passes_every_sampling_option(tmp_path, monkeypatch):
    """--pdb-dir hands --tie / --homo-oligomer (and the other options) to each backbone's run:
    none is dropped silently."""
    import shutil

    from fidia_jax.models import ProteinMPNN
    from fidia_jax.projects.proteinmpnn import batch
    from fidia_jax.protein import default_backbone_path

    calls = []

    def fake_run_sample(out, **kw):
        calls.append(kw)
        return {
            "inputs": {"length": 58, "num_designed": 1},
            "mean_score": 1.0,
            "mean_recovery": 0.5,
        }

    monkeypatch.setattr(batch, "run_sample", fake_run_sample)
    monkeypatch.setattr(
        ProteinMPNN, "from_checkpoint", lambda *a, **k: type("M", (), {"k_neighbors": 48})
    )
    d = tmp_path / "in"
    d.mkdir()
    shutil.copy(default_backbone_path(), d / "a.cif.gz")
    base = ["proteinmpnn", "sample", "--pdb-dir", str(d), "--quiet", "--out", str(tmp_path / "o")]
    assert cli.main([*base, "--tie", "A1-3:A4-6", "--omit-aa", "CX", "--bias-aa", "W:1"]) == 0
    assert calls[-1]["tie"] == ["A1-3:A4-6"] and calls[-1]["homo_oligomer"] is False
    assert calls[-1]["omit_aas"] == "CX" and calls[-1]["bias_aa"] == "W:1"
    assert cli.main([*base, "--homo-oligomer"]) == 0 and calls[-1]["homo_oligomer"] is True
