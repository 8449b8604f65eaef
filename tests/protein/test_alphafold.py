"""AlphaFold2 as a StructurePredictor, on random weights of a tiny configuration (no real weights).

The tiny configuration and its random parameters come from ``tiny_alphafold`` in
tests/conftest.py (shared with the multimer's tests and FIDIA's); the multimer models are tested in
test_alphafold_multimer.py.

* the configuration: single-sequence settings, overrides, refused names and keys;
* the params reader (``alphafold.model.data``'s) round-trips a file written in the release layout
  (flat ``scope//name`` arrays, the triangle-multiplication projections split left / right);
* features: padded to the length bucket (masked), chains joined with ``:`` get a residue gap;
* slow (one compilation each, about a minute on a 2-core CPU): coordinates ``(M, 4, 3)`` and
  pLDDT ``(M,)``, pTM and PAE, finite; a batch equals one-by-one folding; a bigger bucket
  changes nothing beyond float noise; ``structure_success`` on the prediction equals a
  brute-force Kabsch by hand.

Needs the ``fold`` extra; skipped with the reason otherwise.
"""

import dataclasses

import numpy as np
import pytest

pytest.importorskip(
    "alphafold",
    reason="needs the 'fold' extra: pip install 'fidia_jax[fold]' (alphafold-colabfold)",
)

from fidia_jax import protein as fp  # noqa: E402
from fidia_jax.errors import ConfigError, DataError  # noqa: E402

SEQ = "MKTAYIAKQRQISFVKSHFSRQ"


@pytest.fixture(scope="module")
def tiny_params(tiny_alphafold):
    return tiny_alphafold.params("model_1_ptm")


@pytest.fixture(scope="module")
def tiny_config(tiny_alphafold):
    return tiny_alphafold.config("model_1_ptm", num_recycles=1)


# ---------------------------------------------------------------------------- configuration
def test_config_is_single_sequence_and_takes_overrides(tiny_alphafold):
    cfg = tiny_alphafold.config("model_1_ptm", num_recycles=2)
    assert cfg.data.eval.max_msa_clusters == 1 and cfg.data.common.max_extra_msa == 1
    assert not cfg.model.embeddings_and_evoformer.template.enabled
    assert cfg.model.num_recycle == 2 and cfg.data.common.num_recycle == 2
    assert cfg.model.embeddings_and_evoformer.evoformer_num_block == 1
    assert cfg.model.global_config.bfloat16 is False
    with pytest.raises(ConfigError, match="unknown AlphaFold2 model.*model_5_multimer_v3"):
        fp.alphafold_config("model_9_ptm")
    with pytest.raises(ConfigError, match="no key"):
        fp.alphafold_config(overrides={"model.no_such_group.x": 1})
    with pytest.raises(ConfigError, match="num_recycles"):
        fp.alphafold_config(num_recycles=-1)
    assert fp.STRUCTURE_PREDICTORS["alphafold2"] is fp.AlphaFoldPredictor


@pytest.mark.parametrize(
    "override, needle",
    [
        ({"model.embeddings_and_evoformer.pair_channel": 8}, "pair_channel 8"),
        ({"model.embeddings_and_evoformer.evoformer_num_block": 2}, "2 Evoformer blocks"),
        ({"model.embeddings_and_evoformer.msa_channel": 16}, "msa_channel 16"),
    ],
)
def test_params_of_another_model_size_are_refused_at_construction(
    tiny_alphafold, tiny_params, override, needle
):
    """Issue 42: parameters made for another size fail before any fold, in one ConfigError that
    names the configuration and the first differing arrays (not a haiku shape error)."""
    cfg = fp.alphafold_config("model_1_ptm", overrides={**tiny_alphafold.overrides, **override})
    with pytest.raises(ConfigError, match=needle) as err:
        fp.AlphaFoldPredictor(tiny_params, cfg, buckets=(32,))
    assert "arrays differ" in str(err.value) and "//" in str(err.value)
    broken = {sc: dict(d) for sc, d in tiny_params.items()}
    scope = sorted(broken)[0]
    broken[scope].pop(sorted(broken[scope])[0])
    with pytest.raises(ConfigError, match="missing " + scope):
        fp.AlphaFoldPredictor(broken, tiny_alphafold.config("model_1_ptm"), buckets=(32,))


def test_missing_params_file_names_what_is_there(tmp_path):
    (tmp_path / "params").mkdir()
    (tmp_path / "params" / "params_model_3_ptm.npz").write_bytes(b"")
    with pytest.raises(DataError, match="params_model_1_ptm.npz.*found params_model_3_ptm.npz"):
        fp.find_alphafold_params(tmp_path, "model_1_ptm")


# ------------------------------------------------------------------------------ params file
@pytest.mark.integration
@pytest.mark.parametrize("nested", [True, False])
def test_params_reader_round_trips_the_release_layout(
    tmp_path, tiny_alphafold, tiny_params, nested
):
    folder = tmp_path / "params" if nested else tmp_path
    folder.mkdir(exist_ok=True)
    path = folder / "params_model_1_ptm.npz"
    tiny_alphafold.write_release_layout(tiny_params, path)
    with np.load(path) as f:
        keys = set(f.files)
    tri = "alphafold/alphafold_iteration/evoformer/evoformer_iteration/triangle_multiplication_outgoing"
    assert f"{tri}/left_projection//weights" in keys and f"{tri}/projection//weights" not in keys
    back = fp.read_alphafold_params(tmp_path, "model_1_ptm")
    assert set(back) == set(tiny_params)
    for scope, d in tiny_params.items():
        assert set(back[scope]) == set(d), scope
        for name, v in d.items():
            np.testing.assert_array_equal(np.asarray(back[scope][name]), np.asarray(v))


# ---------------------------------------------------------------------------------- features
@pytest.mark.integration
def test_features_pad_to_the_bucket_and_gap_chains(tiny_params, tiny_config):
    pred = fp.AlphaFoldPredictor(tiny_params, tiny_config, buckets=(16, 32))
    assert pred.bucket(10) == 16 and pred.bucket(17) == 32 and pred.bucket(40) == 40
    f = pred.features("MKTAYIAK:QRQISF")
    assert f["aatype"].shape == (2, 16)  # num_recycles + 1 copies, 16 slots
    np.testing.assert_array_equal(f["seq_mask"][0], [1.0] * 14 + [0.0] * 2)
    np.testing.assert_array_equal(
        f["residue_index"][0, :14], list(range(8)) + list(range(208, 214))
    )
    with pytest.raises(ValueError, match="one-letter"):
        pred.features("MKT:")
    with pytest.raises(ValueError, match="one-letter"):
        pred.predict("MKTB")


# --------------------------------------------------------------------------------- prediction
@pytest.fixture(scope="module")
def predictor(tiny_alphafold, tiny_params, tiny_config):
    return fp.AlphaFoldPredictor(
        tiny_params,
        tiny_config,
        buckets=(32,),
        batch_size=2,
        compiler_options=tiny_alphafold.fast_compile,
    )


@pytest.mark.slow
def test_predictions_shapes_finite_and_batch_invariant(predictor):
    assert isinstance(predictor, fp.StructurePredictor)
    seqs = [SEQ, "ACDEFGHIKLMNPQRSTVWY", SEQ[:9]]
    full = predictor.fold_many(seqs)
    out = [(p.coords, p.plddt) for p in full]
    for s, (coords, plddt), p in zip(seqs, out, full, strict=True):
        assert coords.shape == (len(s), 4, 3) and plddt.shape == (len(s),)
        assert coords.dtype == np.float32 and np.isfinite(coords).all()
        assert np.isfinite(plddt).all() and (plddt >= 0).all() and (plddt <= 100).all()
        # a *_ptm model: pTM and the PAE matrix, no ipTM (no chains)
        assert 0.0 <= p.ptm <= 1.0 and p.iptm is None and p.chain_lengths == (len(s),)
        assert p.pae.shape == (len(s), len(s)) and (p.pae >= 0).all()
    # N-CA bond lengths come from the structure module's rigid frames (literature 1.46 A)
    n_ca = np.linalg.norm(out[0][0][:, 1] - out[0][0][:, 0], axis=-1)
    np.testing.assert_allclose(n_ca, 1.46, atol=0.02)
    # folded alone (its batch padded with a copy) = folded beside another sequence
    alone = predictor.predict(seqs[1])
    np.testing.assert_allclose(alone[0], out[1][0], atol=1e-4)
    np.testing.assert_allclose(alone[1], out[1][1], atol=1e-4)
    assert predictor.folds == 4 and predictor.seconds > 0


@pytest.mark.slow
def test_bucket_padding_is_masked(predictor):
    # the same sequence at 32 slots and at its own length (22): one program each
    (a,), (b,) = predictor.fold_many([SEQ]), predictor.fold_many([SEQ], bucket=len(SEQ))
    # Padding only reorders float32 sums (masked slots add exact zeros); a read padded slot moves
    # outputs by whole bins. The heads are expectations over bins (PAE: 64 bins of 0.5 Å over
    # 0-32 Å; pLDDT: 50 bins of 2 units; pTM in [0, 1]), so agreement to 5 % of a bin is the
    # float32 tolerance here (issue 42: not a figure from one run), and 0.01 Å for coordinates.
    np.testing.assert_allclose(a.coords, b.coords, atol=1e-2)
    np.testing.assert_allclose(a.plddt, b.plddt, atol=0.05 * 2.0)
    np.testing.assert_allclose(a.pae, b.pae, atol=0.05 * 0.5)
    assert a.ptm == pytest.approx(b.ptm, abs=0.05 / 64)
    with pytest.raises(ValueError, match="bucket 8 is shorter"):
        predictor.fold_many([SEQ], bucket=8)


def _kabsch_rmsd(p, q):
    p, q = p - p.mean(0), q - q.mean(0)
    u, _, vt = np.linalg.svd(p.T @ q)
    d = np.sign(np.linalg.det(u @ vt))
    r = u @ np.diag([1, 1, d]) @ vt
    return float(np.sqrt(((p @ r - q) ** 2).sum(-1).mean()))


@pytest.mark.slow
def test_structure_success_on_a_prediction_by_hand(predictor):
    from fidia_jax.protein._tasks import _make_task

    bpti = fp.load_structure(fp.default_backbone_path())
    idx = np.arange(20, 50)
    fields = ("X", "mask", "S", "residue_idx", "chain_encoding", "chain_id", "resnum", "icode")
    sub = dataclasses.replace(bpti, **{f: np.asarray(getattr(bpti, f))[idx] for f in fields})
    motif = np.zeros(30, bool)
    motif[5:10] = True
    task = _make_task("hand", sub, tuple(sub.chain_order), motif, np.zeros(30, bool), "motif",
                      "HAND", "file")  # fmt: skip
    seq = "".join(fp.ALPHABET[int(t)] for t in np.asarray(sub.S))
    coords, plddt = predictor.predict(seq)
    got = fp.structure_success(task, coords, plddt)
    native = np.asarray(sub.X, np.float64)
    sc = _kabsch_rmsd(coords[:, 1].astype(np.float64), native[:, 1])
    mr = _kabsch_rmsd(coords[motif].reshape(-1, 3).astype(np.float64), native[motif].reshape(-1, 3))
    assert got["scrmsd"] == pytest.approx(sc, abs=1e-3)
    assert got["motif_rmsd"] == pytest.approx(mr, abs=1e-3)
    assert got["plddt"] == pytest.approx(float(plddt.mean()), abs=1e-4)
    assert got["success"] == (sc < 2 and mr < 1 and plddt.mean() > 70)
    # the prediction itself as the design backbone, moved rigidly: every RMSD ~0
    q, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(3, 3)))
    q = q if np.linalg.det(q) > 0 else -q
    own = dataclasses.replace(task, protein=dataclasses.replace(sub, X=coords @ q.T + 3.0))
    same = fp.structure_success(own, coords, plddt, min_plddt=float(plddt.mean()) - 1)
    assert same["scrmsd"] < 1e-2 and same["motif_rmsd"] < 1e-2 and same["success"]
    assert not fp.structure_success(own, coords, plddt, min_plddt=float(plddt.max()))["success"]
