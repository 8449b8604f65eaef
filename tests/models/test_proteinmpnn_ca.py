"""CA-only ProteinMPNN: parity with the original torch model, CA-only structure loading, CLI.

Fixtures (``tests/data/proteinmpnn_ca/``, made by ``tools/mpnn_ca_make_fixture.py`` with torch
2.13.0+cpu and proteinmpnn 0.1.3): two CA-only PDB files and the original CA model's
teacher-forced log-probabilities. Compile budget (default tests): one forward at shape (2, 84)
(both fixtures, the shorter padded); the sampler and CLI checks are ``slow``.
"""

from __future__ import annotations

import json
import pathlib

import jax
import numpy as np
import pytest

from fidia_jax.errors import StructureError
from fidia_jax.models import MPNNInputs, ProteinMPNN, load_checkpoint, log_probs, sample
from fidia_jax.protein import load_structure

DATA = pathlib.Path(__file__).resolve().parents[1] / "data" / "proteinmpnn_ca"
CASES = ("2xcjA_ca", "2cviA_ca_gap_2chains")
L_PAD = 84


@pytest.fixture(scope="module")
def model():
    return ProteinMPNN.from_checkpoint("v_48_020", variant="ca")


@pytest.fixture(scope="module")
def fixtures():
    return [dict(np.load(DATA / f"{c}.npz")) for c in CASES]


def _from_file(fx) -> MPNNInputs:
    p = load_structure(DATA / str(fx["pdb_file"]), chains=str(fx["chain_order"]), ca_only=True)
    return MPNNInputs.from_protein(p, design_chains="A")


def _padded(inp: MPNNInputs, order, length):
    n = inp.S.shape[0]
    p = length - n
    out = MPNNInputs(
        X=np.concatenate([np.asarray(inp.X), np.zeros((p,) + inp.X.shape[1:], np.float32)]),
        S=np.concatenate([inp.S, np.full(p, 20, np.int32)]),
        mask=np.concatenate([inp.mask, np.zeros(p, np.float32)]),
        chain_mask=np.concatenate([inp.chain_mask, np.zeros(p, np.float32)]),
        residue_idx=np.concatenate([inp.residue_idx, 1000 + np.arange(p, dtype=np.int32)]),
        chain_encoding=np.concatenate([inp.chain_encoding, np.full(p, 9, np.int32)]),
    )
    return out, np.concatenate([np.arange(n, length), order]).astype(np.int32)


@pytest.fixture(scope="module")
def parity(model, fixtures):
    """Both CA-only PDB files, loaded with ``load_structure(ca_only=True)``, in one padded batch."""
    ins, orders = zip(
        *[_padded(_from_file(fx), fx["decoding_order"], L_PAD) for fx in fixtures], strict=True
    )
    batch = MPNNInputs(*[np.stack(a) for a in zip(*ins, strict=True)])
    return batch, np.stack(orders), np.asarray(log_probs(model, batch, np.stack(orders)))


def test_checkpoint_is_ca_model(model):
    sd = load_checkpoint("v_48_020", variant="ca")
    assert model.ca_only and sd["features.edge_embedding.weight"].shape == (128, 167)
    np.testing.assert_array_equal(
        np.asarray(model.features.edge_embedding.kernel[...]),
        sd["features.edge_embedding.weight"].T,
    )
    assert "W_v.weight" in sd and not hasattr(model, "W_v")  # never read by the original forward


def test_ca_only_loading_matches_original_featurisation(fixtures):
    for fx in fixtures:
        inp = _from_file(fx)
        np.testing.assert_array_equal(np.asarray(inp.X)[:, 1], fx["X"])
        for k in ("S", "mask", "chain_mask", "residue_idx", "chain_encoding"):
            np.testing.assert_array_equal(np.asarray(getattr(inp, k)), fx[k], err_msg=k)
    assert fixtures[1]["mask"].sum() == fixtures[1]["mask"].size - 3  # the 3-residue numbering gap


def test_log_probs_match_original(parity, fixtures):
    _, _, lp = parity
    for b, fx in enumerate(fixtures):
        n = fx["S"].shape[0]
        got = lp[b, :n]  # padded slots are at the end
        np.testing.assert_allclose(got, fx["log_probs"], atol=1e-4, rtol=0)
        w = fx["mask"] * fx["chain_mask"]
        nll = -(got[np.arange(n), fx["S"]] * w).sum() / w.sum()
        np.testing.assert_allclose(nll, float(fx["nll"]), rtol=0, atol=1e-5)


@pytest.mark.slow  # the sampler compile (~7 s CPU); the sampler code is shared with the full model
def test_sampler_log_probs_match_teacher_forcing(model, parity, fixtures):
    inp = _from_file(fixtures[0])  # L = 84 = L_PAD: the forward compiled above is reused
    res = sample(model, jax.random.key(0), inp, num_samples=2, temperature=0.1)
    seqs, order = np.asarray(res.sequences), np.asarray(res.decoding_order)
    batch = MPNNInputs(*[np.broadcast_to(np.asarray(a), (2,) + np.shape(a)) for a in inp])._replace(
        S=seqs
    )
    tf = np.asarray(log_probs(model, batch, order))
    np.testing.assert_allclose(np.asarray(res.log_probs), tf, atol=1e-4)
    assert (seqs != 20).all()  # X is never sampled


def test_full_backbone_model_refuses_ca_input():
    from flax import nnx

    full = nnx.eval_shape(lambda: ProteinMPNN(rngs=nnx.Rngs(0)))  # shapes only: no init
    with pytest.raises(ValueError, match="CA-only inputs use"):
        full.features(
            np.zeros((1, 5, 1, 3), np.float32),
            np.ones((1, 5), np.float32),
            np.arange(5)[None],
            np.ones((1, 5), np.int32),
        )


def test_load_structure_ca_only_errors(tmp_path):
    path = DATA / "2xcjA_ca.pdb"
    with pytest.raises(StructureError, match=r"complete N/CA/C/O.*ca_only=True"):
        load_structure(path)
    no_ca = tmp_path / "no_ca.pdb"
    no_ca.write_text(path.read_text().replace(" CA ", " CB "))
    with pytest.raises(StructureError, match="no residue with a finite CA"):
        load_structure(no_ca, ca_only=True)


@pytest.mark.slow  # a second sampler compile and a scoring compile (~30 s under load)
def test_cli_ca_only_sample(tmp_path):
    from fidia_jax.cli import main

    out = tmp_path / "out"
    rc = main(
        [
            "proteinmpnn",
            "sample",
            "--ca-only",
            "--pdb",
            str(DATA / "2xcjA_ca.pdb"),
            "--num-samples",
            "2",
            "--out",
            str(out),
            "--quiet",
        ]
    )
    assert rc in (0, None)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["inputs"]["variant"] == "ca"
    assert len(summary["samples"]) == 2 and all(
        len(s["sequence"]) == 84 for s in summary["samples"]
    )


def test_ca_features_refuse_other_atom_layouts(model):
    """Only (B, L, 4, 3) and (B, L, 1, 3) are read (CA = atom 1 or atom 0); an atom14 layout
    (atom 0 = N) would silently give wrong features."""
    x = np.zeros((1, 8, 14, 3), np.float32)
    with pytest.raises(ValueError, match=r"CA-only ProteinMPNN: X must be"):
        model.features(x, np.ones((1, 8)), np.arange(8)[None], np.ones((1, 8)))
