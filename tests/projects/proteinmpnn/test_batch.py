"""Many backbones per run: padding to length buckets, ``--pdb-dir`` with a bad file."""

from __future__ import annotations

import gzip
import json
import shutil

import jax
import numpy as np
import pytest

from fidia_jax import cli
from fidia_jax.projects.proteinmpnn.buckets import bucket_length, bucketed, pad_inputs
from fidia_jax.protein import default_backbone_path, load_structure


@pytest.fixture(scope="module")
def model():
    from fidia_jax.models import ProteinMPNN

    return ProteinMPNN.from_checkpoint("v_48_020", variant="vanilla")


def test_bucket_length():
    assert [bucket_length(n) for n in (10, 47, 48, 58, 64, 65, 200)] == [
        10,
        47,
        64,
        64,
        64,
        128,
        256,
    ]
    assert bucket_length(58, bucket=16) == 64 and bucket_length(58, bucket=1) == 58


def test_padding_never_changes_real_positions(model):
    """The random stream differs with the padded length; the scores at real slots do not."""
    from fidia_jax.models import MPNNInputs, score

    protein = load_structure(default_backbone_path())  # 58 slots -> bucket 64
    inputs = MPNNInputs.from_protein(protein)
    padded = pad_inputs(inputs, 64)
    assert (
        padded.X.shape == (64, 4, 3)
        and not padded.mask[58:].any()
        and not padded.chain_mask[58:].any()
    )
    p_sample, p_score = bucketed(64)
    fixed = np.zeros(58, bool)
    fixed[:5] = True
    res = p_sample(
        model, jax.random.key(1), inputs, num_samples=2, temperature=0.1, fixed_mask=fixed
    )
    seqs = np.asarray(res.sequences)
    order = np.asarray(res.decoding_order)
    assert seqs.shape == (2, 58) and np.array_equal(
        np.sort(order, 1), np.tile(np.arange(58), (2, 1))
    )
    assert (seqs[:, :5] == protein.S[:5]).all()
    # the unpadded teacher-forced forward in the same order reproduces the padded sampler
    ref = score(model, inputs, seqs, order)
    np.testing.assert_allclose(res.token_log_probs, ref.token_log_probs, atol=2e-4)
    # padded scoring equals unpadded scoring at every real slot
    got = p_score(model, inputs, seqs, order)
    np.testing.assert_allclose(got.token_log_probs, ref.token_log_probs, atol=2e-5)
    np.testing.assert_allclose(got.nll, ref.nll, atol=2e-5)


def test_a_new_real_length_in_a_known_bucket_compiles_nothing(model, caplog):
    """Cutting the results back to the real length happens on the host: no program per length.

    Slicing the device arrays, or ``jnp.asarray`` of the host arrays, compiled one small program
    per real length (about 0.05-0.15 s each; 80 backbones have about 80 lengths)."""
    import logging

    from fidia_jax.models import MPNNInputs

    inputs = MPNNInputs.from_protein(load_structure(default_backbone_path()))  # 58 slots
    p_sample, _ = bucketed(64)
    run = lambda n: jax.block_until_ready(  # noqa: E731
        p_sample(model, jax.random.key(0), jax.tree.map(lambda a: np.asarray(a)[:n], inputs),
                 num_samples=2, temperature=0.1, score_native=True)
    )  # fmt: skip
    run(58)  # compiles the bucket's sampler (and the eager helpers) once
    caplog.set_level(logging.WARNING)
    with jax.log_compiles(True):
        res = run(53)
    compiled = [r.getMessage()[:60] for r in caplog.records if "Compiling" in r.getMessage()]
    assert compiled == []
    assert res.sequences.shape == res.native_token_log_probs.shape == (2, 53)
    assert res.log_probs.shape == (2, 53, 21)


def test_pdb_dir_three_folders_one_error(tmp_path):
    from biotite.structure.io import pdb as bpdb

    from fidia_jax.models.proteinmpnn._sampling import _sample_jit

    d = tmp_path / "in"
    d.mkdir()
    shutil.copy(default_backbone_path(), d / "full.cif.gz")
    import biotite.structure.io.pdbx as pdbx

    with gzip.open(default_backbone_path(), "rt") as fh:
        atoms = pdbx.get_structure(pdbx.CIFFile.read(fh), model=1)
    atoms = atoms[atoms.hetero == False]  # noqa: E712
    for name, lo, hi in (("crop52", 1, 52), ("crop49", 5, 53)):
        f = bpdb.PDBFile()
        f.set_structure(atoms[(atoms.res_id >= lo) & (atoms.res_id <= hi)])
        f.write(str(d / f"{name}.pdb"))
    (d / "bad.pdb").write_text("this is not a structure\n")
    out = tmp_path / "out"
    before = _sample_jit.program(True)._cache_size()
    rc = cli.main(["proteinmpnn", "sample", "--pdb-dir", str(d), "--num-samples", "2",
                   "--quiet", "--out", str(out)])  # fmt: skip
    assert rc == 2
    summary = json.loads((out / "summary.json").read_text())
    rows = {r["name"]: r for r in summary["backbones"]}
    assert set(rows) == {"bad", "crop49", "crop52", "full"}
    assert rows["bad"]["status"] == "error" and rows["bad"]["error"]
    assert {n: rows[n]["length"] for n in ("full", "crop52", "crop49")} == {
        "full": 58,
        "crop52": 52,
        "crop49": 49,
    }
    assert summary["num_failed"] == 1 and summary["buckets"] == {"64": 3}
    assert sorted(p.name for p in out.iterdir()) == [
        "crop49",
        "crop52",
        "full",
        "summary.json",
        "summary.tsv",
    ]
    for n in ("full", "crop52", "crop49"):
        s = json.loads((out / n / "summary.json").read_text())
        assert len(s["samples"]) == 2 and len(s["native"].replace("/", "")) == rows[n]["length"]
    tsv = (out / "summary.tsv").read_text().splitlines()
    assert len(tsv) == 5 and sum("\terror\t" in line for line in tsv) == 1
    # three lengths, one bucket: at most one new compilation of the sampler (0 if already cached)
    assert _sample_jit.program(True)._cache_size() - before <= 1
    # the default runs on two threads; one thread, in file order, writes the same files
    out1 = tmp_path / "out1"
    rc = cli.main(["proteinmpnn", "sample", "--pdb-dir", str(d), "--num-samples", "2",
                   "--quiet", "--workers", "1", "--out", str(out1)])  # fmt: skip
    assert rc == 2
    for n in ("full", "crop52", "crop49"):
        assert (out1 / n / "samples.fasta").read_text() == (out / n / "samples.fasta").read_text()


def test_run_by_bucket_schedule():
    """Every job runs once, results in job order; a bucket's later jobs start only after its
    first has finished, and every bucket's first job starts before any later job."""
    import threading
    import time

    from fidia_jax.projects.proteinmpnn.buckets import run_by_bucket

    keys = [64, 128, 64, None, 128, 64, 192, None]
    lock = threading.Lock()
    log = []

    def run_one(i):
        with lock:
            log.append(("start", i))
        time.sleep(0.01 * (1 + i % 3))
        with lock:
            log.append(("end", i))
        return i * i

    for workers in (1, 2, 3):
        log.clear()
        assert run_by_bucket(run_one, keys, workers) == [i * i for i in range(len(keys))]
        starts = [i for e, i in log if e == "start"]
        assert sorted(starts) == list(range(len(keys)))
        if workers == 1:
            assert starts == list(range(len(keys)))
            continue
        firsts = [0, 1, 3, 6, 7]  # first job of 64, 128, own, 192, own
        assert sorted(starts[: len(firsts)]) == firsts
        for later, first in ((2, 0), (5, 0), (4, 1)):
            assert log.index(("end", first)) < log.index(("start", later))

    def failing(i):
        if i == 2:
            raise ValueError("job 2")
        return i

    with pytest.raises(ValueError, match="job 2"):
        run_by_bucket(failing, keys, 2)
