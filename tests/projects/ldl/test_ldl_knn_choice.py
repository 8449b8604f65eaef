"""AA-kNN's ``k`` is chosen on an inner split of each training fold (issue 41 follow-up).

``choose_knn_k`` equals a brute-force choice over the same inner split, and in
``cross_validate`` a signal planted in one fold's test rows (features and label
distributions) leaves that fold's chosen ``k`` unchanged, while choosing ``k`` on those test
rows (the leak, rebuilt here) follows the plant. The neural fits are replaced by a stub (uniform
predictions): only the baselines are under test.
"""

import dataclasses

import numpy as np
import pytest

from fidia_jax import metrics
from fidia_jax.projects import ldl
from fidia_jax.projects.ldl import train as ldl_train

GRID = (3, 5, 10, 20)


def _dataset(n=150):
    cfg = ldl.get_config("tiny", n_samples=n)
    return cfg, ldl.load_config_data(cfg)


def _brute_force(x, d, pos, neg, seed, metric="divisiveness_error"):
    n = len(x)
    perm = np.random.default_rng(seed).permutation(n)
    n_val = int(np.ceil(0.2 * n))
    val, fit = perm[:n_val], perm[n_val:]
    best = None
    for k in GRID:  # brute force: every k, strict improvement keeps the first of ties
        p = ldl.baseline_predict("aa_knn", x[fit], d[fit], x[val], k=k)
        v = metrics.ldl_metrics(d[val], p, pos, neg)[metric]
        v = -v if metric in metrics.LDL_METRICS_HIGHER_BETTER else v
        if best is None or v < best[0]:
            best = (v, k)
    return best[1]


@pytest.mark.parametrize("metric", ["divisiveness_error", "kl_divergence", "intersection"])
def test_choice_equals_brute_force_on_the_inner_split(metric):
    _, ds = _dataset()
    x = ldl_train.fold_features(ds.features, np.arange(len(ds.labels)))
    for seed in range(4):
        k, scores = ldl_train.choose_knn_k(
            x, ds.labels, ds.pos, ds.neg, grid=GRID, metric=metric, seed=seed
        )
        assert k == _brute_force(x, ds.labels, ds.pos, ds.neg, seed, metric)
        assert set(scores) == set(GRID)


def test_choice_skips_k_above_the_fitting_part_and_rejects_bad_input():
    _, ds = _dataset()
    x, d = ds.features[:12], ds.labels[:12]  # 3 validation rows, 9 fitting rows
    _, scores = ldl_train.choose_knn_k(x, d, ds.pos, ds.neg, grid=GRID)
    assert set(scores) == {3, 5}
    with pytest.raises(ValueError, match="no k of grid"):
        ldl_train.choose_knn_k(x, d, ds.pos, ds.neg, grid=(10, 20))
    with pytest.raises(ValueError, match="metric"):
        ldl_train.choose_knn_k(x, d, ds.pos, ds.neg, metric="accuracy")


def _stub_fits(monkeypatch):
    def fake(xs, d_pad, w, pos, neg, alphas, keys, *, config, c, **kw):
        f, n = w.shape
        preds = np.full((f, len(config.alphas), n, c), 1.0 / c)
        return preds, np.zeros((f, len(config.alphas), config.epochs))

    monkeypatch.setattr(ldl_train, "_fit_predict_folds", fake)


def _knn_rows(res):
    return {r["fold"]: r for r in res["baseline_folds"] if r["baseline"] == "aa_knn"}


def test_planted_test_only_signal_cannot_change_k(monkeypatch):
    _stub_fits(monkeypatch)
    cfg, ds = _dataset()
    cfg = dataclasses.replace(cfg, baselines=("aa_knn",), epochs=2)
    clean = _knn_rows(ldl.cross_validate(cfg, ds))
    tr, te = ldl.kfold_splits(len(ds.labels), cfg.n_folds, cfg.seed + 1)[0]
    x = ldl_train.fold_features(ds.features, tr)
    # the plant: fold 1's test labels become the k=20 predictions of its (shifted) test rows
    # from the training rows, so k=20 is perfect on them
    feats = ds.features.copy()
    feats[te] += 0.01 * np.random.default_rng(5).standard_normal(feats[te].shape)
    labels = ds.labels.copy()
    labels[te] = ldl.baseline_predict("aa_knn", x[tr], ds.labels[tr], x[te], k=20)
    planted_ds = dataclasses.replace(ds, features=feats, labels=labels)
    planted = _knn_rows(ldl.cross_validate(cfg, planted_ds))

    def leaky(lab):  # k chosen on fold 1's test rows: the leak
        xt = ldl_train.fold_features(feats if lab is labels else ds.features, tr)
        score = {
            k: metrics.ldl_metrics(
                lab[te],
                ldl.baseline_predict("aa_knn", xt[tr], lab[tr], xt[te], k=k),
                ds.pos, ds.neg,
            )["divisiveness_error"]
            for k in GRID
        }  # fmt: skip
        return min(GRID, key=score.get)

    assert leaky(labels) == 20 != leaky(ds.labels)  # the plant is strong enough to move a leak
    assert planted[1]["knn_k"] == clean[1]["knn_k"]  # ... and cannot move the inner choice
    assert planted[1]["divisiveness_error"] != clean[1]["divisiveness_error"]
    # the recorded k is the inner choice on fold 1's training rows (brute force)
    want = _brute_force(x[tr], ds.labels[tr], ds.pos, ds.neg, [cfg.seed, 1, 0])
    assert clean[1]["knn_k"] == want


def test_empty_grid_keeps_the_fixed_k(monkeypatch):
    _stub_fits(monkeypatch)
    cfg, ds = _dataset(90)
    cfg = dataclasses.replace(cfg, baselines=("aa_knn",), epochs=2, knn_k_grid=(), knn_k=7)
    assert {r["knn_k"] for r in _knn_rows(ldl.cross_validate(cfg, ds)).values()} == {7}
