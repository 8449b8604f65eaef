"""Planted leak: every fitted preprocessing step (PCA, z-scoring) sees only a fold's training rows.

A column that is zero on the training rows of the one fold run and carries the held-out labels'
argmax (x 100) on its test rows is invisible to a PCA fitted on the training rows, so the scores
must not move (tolerance 1e-4: the same float32 fit up to SVD round-off). A PCA fitted on all
rows (the pre-issue-41 driver, rebuilt here on purpose) picks that column as its first component
and the scores move by far more, so the test can fail.
"""

import dataclasses

import numpy as np

from fidia_jax.projects import ldl

TOL = 1e-4


def _run(cfg, ds, x):
    res = ldl.cross_validate(cfg, dataclasses.replace(ds, features=x.astype(np.float32)))
    return np.array([[r[m] for m in ldl.METRICS] for r in res["folds"]])


def test_planted_test_only_feature_does_not_move_the_scores():
    base = ldl.get_config("tiny")
    cfg = dataclasses.replace(
        base, alphas=(0.0,), folds_per_repeat=1, epochs=40, baselines=(), max_features=5
    )
    ds = ldl.load_config_data(cfg)
    x = ds.features.astype(np.float64)
    _, te = ldl.kfold_splits(len(x), cfg.n_folds, cfg.seed + 1)[0]
    plant = np.zeros(len(x))
    plant[te] = 100.0 * (1 + np.argmax(ds.labels[te], axis=1))
    x_planted = np.concatenate([x, plant[:, None]], axis=1)

    clean = _run(cfg, ds, x)
    planted = _run(cfg, ds, x_planted)
    np.testing.assert_allclose(planted, clean, atol=TOL)

    # the deliberately leaky pipeline: PCA fitted on all rows, then the driver without PCA
    def all_rows_pca(z):
        zc = z - z.mean(0)
        return zc @ np.linalg.svd(zc, full_matrices=False)[2][: cfg.max_features].T

    leaky_cfg = dataclasses.replace(cfg, max_features=0)
    leaky_clean = _run(leaky_cfg, ds, all_rows_pca(x))
    leaky_planted = _run(leaky_cfg, ds, all_rows_pca(x_planted))
    assert np.max(np.abs(leaky_planted - leaky_clean)) > 100 * TOL
