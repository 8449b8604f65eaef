"""Issue 41: nothing about the held-out section is fitted when ``gene_selection`` is
``"training_sections"``: a gene planted to be highly expressed only in the held-out section
changes neither that fold's genes nor its ridge score, while the field's protocol
(``"all_sections"``, the default, as the HiST code's precomputed gene indices) takes it in."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fidia_jax.projects.hist import data
from fidia_jax.projects.hist.configs import get_config
from fidia_jax.projects.hist.train import _prepare, fit_predict, section_metrics


def _sections(plant: bool):
    secs = data.synthetic_sections(3, shape=(10, 10), n_features=6, n_genes=12, seed=3)
    if not plant:
        return secs
    out = []
    for i, s in enumerate(secs):  # huge counts in the held-out section 0 only
        col = np.full((len(s.coords), 1), 5e3 if i == 0 else 0.0, np.float32)
        out.append(dataclasses.replace(s, counts=np.concatenate([s.counts, col], 1),
                                       genes=(*s.genes, "PLANTED")))  # fmt: skip
    return out


def _ridge_score(prep, config):
    view = prep.for_fold(0)
    pred, _ = fit_predict("ridge", view, [1, 2], 0, config)
    return view.genes, section_metrics(view.y[0], pred, config.eval_genes)["pooled_pcc"]


def test_a_gene_planted_in_the_held_out_section_never_reaches_its_fold():
    config = get_config("tiny", num_genes=6, eval_genes=3, gene_selection="training_sections")
    clean = _prepare(_sections(False), 6, "training_sections", folds=3)
    planted = _prepare(_sections(True), 6, "training_sections", folds=3)
    genes_c, score_c = _ridge_score(clean, config)
    genes_p, score_p = _ridge_score(planted, config)
    assert "PLANTED" not in genes_p and genes_p == genes_c
    assert score_p == pytest.approx(score_c, abs=1e-6)
    # the other folds train on section 0, so there the planted gene is a training gene
    assert "PLANTED" in planted.for_fold(1).genes


def test_the_fields_protocol_takes_the_held_out_section_in():
    planted = _prepare(_sections(True), 6, "all_sections")
    assert planted.fold_genes is None and planted.genes[0] == "PLANTED"
    assert planted.for_fold(0) is planted


def test_gene_selection_is_validated():
    with pytest.raises(ValueError, match="gene_selection"):
        get_config("tiny", gene_selection="held_out")


def test_a_wrong_feature_width_is_one_clear_error():
    """Issue 41: HiST / the dense transformer given features of another width name it (a raw
    TypeError from inside the first layer before)."""
    import jax.numpy as jnp
    from flax import nnx

    from fidia_jax.errors import DataError
    from fidia_jax.projects.hist import lattice
    from fidia_jax.projects.hist.model import DenseSpotTransformer, HiST

    coords = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], np.int32)
    model = HiST(6, 3, dim=8, heads=2, enc_depths=(1,), dec_depths=(), window=2, rngs=nnx.Rngs(0))
    plan = lattice.plan_hierarchy(coords, levels=1, window=2)
    with pytest.raises(DataError, match=r"HiST: feats_NxF must be \(n, 6\).*got \(4, 5\)"):
        model(jnp.zeros((4, 5)), plan)
    dense = DenseSpotTransformer(6, 3, dim=8, heads=2, depth=1, rngs=nnx.Rngs(0))
    with pytest.raises(DataError, match=r"DenseSpotTransformer: feats_NxF must be \(n, 6\)"):
        dense(jnp.zeros((4, 7)), coords, np.ones(4, bool))
