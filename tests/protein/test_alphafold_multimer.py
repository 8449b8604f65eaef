"""AlphaFold-Multimer (``model_*_multimer_v3``) as a StructurePredictor, on random weights of the
tiny configuration (``tiny_alphafold`` in tests/conftest.py; no real weights).

* the configuration: one MSA cluster + one extra row, no templates, no ``data`` group;
* :func:`join_chains` and bad chain input;
* the params reader round-trips a file in the multimer release layout (fused triangle
  projections); monomer parameters under a multimer configuration are refused by name;
* features from the package's multimer pipeline: per-chain ``residue_index``, ``asym_id`` /
  ``entity_id`` / ``sym_id``, identical chains grouped, padded slots with ``entity_id = 0``;
* slow (one compilation each, one to two minutes on a loaded 2-core CPU): coordinates, pLDDT,
  pTM, ipTM and PAE of the right shapes and ranges, finite; chains come back in input order (a
  permuted complex that the pipeline groups into the same input gives the same residues);
  chain breaks change the fold; a batch equals one-by-one folding; a bigger bucket changes
  nothing beyond float noise.

Needs the ``fold`` extra; skipped with the reason otherwise.
"""

import numpy as np
import pytest

pytest.importorskip(
    "alphafold",
    reason="needs the 'fold' extra: pip install 'fidia_jax[fold]' (alphafold-colabfold)",
)

from fidia_jax import protein as fp  # noqa: E402
from fidia_jax.errors import ConfigError  # noqa: E402

MULTIMER = "model_1_multimer_v3"
P, Q = "MKTAYIAK", "QRQISF"  # two chains of 8 and 6 residues


@pytest.fixture(scope="module")
def params(tiny_alphafold):
    return tiny_alphafold.params(MULTIMER)


@pytest.fixture(scope="module")
def config(tiny_alphafold):
    return tiny_alphafold.config(MULTIMER, num_recycles=1)


# ---------------------------------------------------------------------------- configuration
def test_multimer_config_is_single_sequence(tiny_alphafold):
    cfg = tiny_alphafold.config(MULTIMER, num_recycles=2)
    evo = cfg.model.embeddings_and_evoformer
    assert cfg.model.global_config.multimer_mode and "data" not in cfg
    assert (evo.num_msa, evo.num_extra_msa, evo.template.enabled) == (1, 1, False)
    assert cfg.model.num_recycle == 2 and evo.evoformer_num_block == 1
    with pytest.raises(ConfigError, match=r"model_1_multimer_v3\) has no key 'data.common"):
        fp.alphafold_config(MULTIMER, overrides={"data.common.max_extra_msa": 2})
    with pytest.raises(ConfigError, match="valid: model_1_ptm.*model_1_multimer_v3"):
        fp.alphafold_config("model_1_multimer_v9")


def test_join_chains_cuts_by_length_and_refuses_mismatches():
    assert fp.join_chains(P + Q, [8, 6]) == f"{P}:{Q}"
    assert fp.join_chains(P, [8]) == P
    with pytest.raises(ValueError, match="sum to 13, but the sequence has 14"):
        fp.join_chains(P + Q, [8, 5])
    with pytest.raises(ValueError, match=">= 1"):
        fp.join_chains(P + Q, [14, 0])
    with pytest.raises(ValueError, match="already holds"):
        fp.join_chains(f"{P}:{Q}", [8, 6])


# ------------------------------------------------------------------------------ params file
@pytest.mark.integration
def test_params_reader_round_trips_the_multimer_layout(tmp_path, tiny_alphafold, params, config):
    (tmp_path / "params").mkdir()
    path = tmp_path / "params" / f"params_{MULTIMER}.npz"
    tiny_alphafold.write_release_layout(params, path, MULTIMER)
    with np.load(path) as f:
        keys = set(f.files)
    tri = "alphafold/alphafold_iteration/evoformer/evoformer_iteration/triangle_multiplication_outgoing"
    assert f"{tri}/projection//weights" in keys and f"{tri}/left_projection//weights" not in keys
    back = fp.read_alphafold_params(tmp_path, MULTIMER)
    assert set(back) == set(params)
    for scope, d in params.items():
        assert set(back[scope]) == set(d), scope
        for name, v in d.items():
            np.testing.assert_array_equal(np.asarray(back[scope][name]), np.asarray(v))
    assert fp.AlphaFoldPredictor(back, config).multimer
    # monomer parameters under the multimer configuration: refused by name, not a KeyError
    with pytest.raises(ConfigError, match="do not fit its multimer configuration"):
        fp.AlphaFoldPredictor(tiny_alphafold.params("model_1_ptm"), config)
    with pytest.raises(ConfigError, match="do not fit its monomer configuration"):
        fp.AlphaFoldPredictor(params, tiny_alphafold.config("model_1_ptm"))


# ---------------------------------------------------------------------------------- features
@pytest.mark.integration
def test_features_number_chains_as_the_package_does(params, config):
    from alphafold.common import residue_constants

    pred = fp.AlphaFoldPredictor(params, config, buckets=(32,))
    f = pred.features(f"{P}:{Q}:{P}")
    pad = [0] * 10
    # the pipeline groups identical chains into one entity: P (A_1), P (A_2), then Q (B_1)
    np.testing.assert_array_equal(f["asym_id"], [1] * 8 + [2] * 8 + [3] * 6 + pad)
    np.testing.assert_array_equal(f["entity_id"], [1] * 16 + [2] * 6 + pad)
    np.testing.assert_array_equal(f["sym_id"], [1] * 8 + [2] * 8 + [1] * 6 + pad)
    np.testing.assert_array_equal(f["residue_index"], [*range(8), *range(8), *range(6), *pad])
    np.testing.assert_array_equal(f["seq_mask"], [1.0] * 22 + [0.0] * 10)
    order = [residue_constants.restype_order[a] for a in P + P + Q]
    np.testing.assert_array_equal(f["aatype"][:22], order)
    # MSA: the query row, then one fully masked row (num_msa + num_extra_msa = 2)
    assert f["msa"].shape == (2, 32) and f["msa_mask"].shape == (2, 32)
    np.testing.assert_array_equal(f["msa"][0, :22], order)
    np.testing.assert_array_equal(f["msa_mask"], [[1.0] * 22 + [0.0] * 10, [0.0] * 32])
    # bad input: a clear error before anything is folded
    for bad in (f"{P}::{Q}", f"{P}:QRB", ""):
        with pytest.raises(ValueError, match="non-empty"):
            pred.fold_many([bad])
    with pytest.raises(ValueError, match="bucket 16 is shorter"):
        pred.features(f"{P}:{Q}:{P}", bucket=16)


# --------------------------------------------------------------------------------- prediction
@pytest.fixture(scope="module")
def predictor(tiny_alphafold, params, config):
    return fp.AlphaFoldPredictor(
        params, config, buckets=(32,), batch_size=2, compiler_options=tiny_alphafold.fast_compile
    )


#: folded together at 32 slots, two per call: (P:Q, P:Q:P) and (P:P:Q, PQ)
SEQS = (f"{P}:{Q}", f"{P}:{Q}:{P}", f"{P}:{P}:{Q}", P + Q)


@pytest.fixture(scope="module")
def folds(predictor):
    return predictor.fold_many(SEQS)


@pytest.mark.slow
def test_multimer_predictions(predictor, folds):
    assert isinstance(predictor, fp.StructurePredictor)
    for s, p in zip(SEQS, folds, strict=True):
        m = len(s.replace(":", ""))
        assert p.coords.shape == (m, 4, 3) and p.plddt.shape == (m,) and p.pae.shape == (m, m)
        assert p.chain_lengths == tuple(len(c) for c in s.split(":"))
        assert np.isfinite(p.coords).all() and ((p.plddt >= 0) & (p.plddt <= 100)).all()
        assert 0.0 <= p.ptm <= 1.0 and (p.pae >= 0).all()
        if ":" in s:
            assert 0.0 <= p.iptm <= 1.0
        else:
            assert p.iptm is None  # one chain: no interface
    # N-CA bonds come from the structure module's rigid frames (literature 1.46 A)
    n_ca = np.linalg.norm(folds[1].coords[:, 1] - folds[1].coords[:, 0], axis=-1)
    np.testing.assert_allclose(n_ca, 1.46, atol=0.02)
    # P:Q:P and P:P:Q are the same model input once the pipeline groups the identical chains:
    # the same residues come back, each in its own input order
    idx = np.r_[0:8, 14:22, 8:14]  # P:Q:P's residues in P:P:Q's order
    a, b = folds[1], folds[2]
    np.testing.assert_allclose(a.coords[idx], b.coords, atol=1e-4)
    np.testing.assert_allclose(a.plddt[idx], b.plddt, atol=1e-4)
    np.testing.assert_allclose(a.pae[np.ix_(idx, idx)], b.pae, atol=1e-4)
    assert (a.ptm, a.iptm) == pytest.approx((b.ptm, b.iptm), abs=1e-5)
    # the chain break is seen: P:Q (two asym ids, residue_index restarts) folds differently
    # from PQ (one chain). Random weights react weakly to the relative-position features (0.016
    # Å measured), but far above the float noise of the checks here and below (< 1e-4 Å).
    assert np.abs(folds[0].coords - folds[3].coords).max() > 5e-3
    # folded alone (its batch padded with a copy) = folded beside another sequence
    (alone,) = predictor.fold_many([SEQS[0]])
    np.testing.assert_allclose(alone.coords, folds[0].coords, atol=1e-4)
    np.testing.assert_allclose(alone.plddt, folds[0].plddt, atol=1e-4)
    assert alone.iptm == pytest.approx(folds[0].iptm, abs=1e-5)
    coords, plddt = predictor.predict(SEQS[0])
    np.testing.assert_allclose(coords, alone.coords, atol=1e-5)
    assert predictor.folds == len(SEQS) + 2


@pytest.mark.slow
def test_multimer_bucket_padding_is_masked(predictor, folds):
    # P:Q:P at 32 slots (10 padded) and at its own length 22: one more program
    (exact,) = predictor.fold_many([SEQS[1]], bucket=22)
    padded = folds[1]
    np.testing.assert_allclose(padded.coords, exact.coords, atol=1e-3)
    np.testing.assert_allclose(padded.plddt, exact.plddt, atol=1e-3)
    np.testing.assert_allclose(padded.pae, exact.pae, atol=1e-3)
    assert (padded.ptm, padded.iptm) == pytest.approx((exact.ptm, exact.iptm), abs=1e-4)
