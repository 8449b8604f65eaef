"""LDL driver: k-fold splits, configs, the tiny cross-validation run, fit_predict, the CLI."""

import json

import jax
import numpy as np
import pytest

from fidia_jax import cli, metrics
from fidia_jax.errors import ConfigError, DataError
from fidia_jax.projects import ldl


def test_kfold_splits_partition_rows():
    splits = ldl.kfold_splits(23, 5, seed=1)
    tests = np.concatenate([te for _, te in splits])
    np.testing.assert_array_equal(np.sort(tests), np.arange(23))
    for tr, te in splits:
        assert len(te) in (4, 5) and not set(tr) & set(te) and len(tr) + len(te) == 23
    with pytest.raises(ValueError, match="n_folds"):
        ldl.kfold_splits(3, 5, seed=0)


def test_configs_validate():
    assert ldl.get_config("default").hidden == (64,)  # the authors' MLP
    with pytest.raises(ConfigError, match="include 0.0"):
        ldl.get_config("tiny", alphas=(0.1,))
    with pytest.raises(ConfigError, match="mode"):
        ldl.get_config("tiny", mode="ova")
    with pytest.raises(ConfigError, match="folds_per_repeat"):
        ldl.get_config("tiny", folds_per_repeat=9)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("ldl")
    return ldl.train_and_evaluate(ldl.get_config("tiny"), workdir), workdir


@pytest.mark.integration  # a tiny driver run (make test-integration, CI)
def test_tiny_run_scores_every_fold(tiny_run):
    res, workdir = tiny_run
    cfg = ldl.get_config("tiny")
    assert res["runs_per_alpha"] == cfg.n_folds * cfg.n_repeats
    assert len(res["folds"]) == cfg.n_folds * cfg.n_repeats * len(cfg.alphas)
    written = json.loads((workdir / "ldl_results.json").read_text())
    assert written["config"]["dataset"] == "synthetic"
    # the summary is the mean of the per-fold rows, the ratio its quotient by KL-only
    for alpha, s in res["summary"].items():
        rows = [r for r in res["folds"] if str(r["alpha"]) == alpha]
        for m in ldl.METRICS:
            np.testing.assert_allclose(s[m]["mean"], np.mean([r[m] for r in rows]), rtol=1e-12)
            np.testing.assert_allclose(
                res["ratio_vs_kl"][alpha][m], s[m]["mean"] / res["summary"]["0.0"][m]["mean"]
            )
    # training reduced the loss, and the model beats predicting the mean distribution
    for curve in res["loss_curves"].values():
        assert curve[-1] < 0.5 * curve[0]
    ds = ldl.load_config_data(cfg)
    mean_pred = np.broadcast_to(ds.labels.mean(0), ds.labels.shape)
    assert res["summary"]["0.0"]["kl_divergence"]["mean"] < float(
        metrics.ldl_kl_divergence(ds.labels, mean_pred)
    )


@pytest.mark.integration  # a tiny driver run (make test-integration, CI)
def test_fit_predict_matches_cross_validate_fold(tiny_run):
    """fit_predict on fold 1's rows reproduces cross_validate's scores of that fold."""
    res, _ = tiny_run
    cfg = ldl.get_config("tiny")
    ds = ldl.load_config_data(cfg)
    tr, te = ldl.kfold_splits(len(ds.labels), cfg.n_folds, cfg.seed + 1)[0]
    x = ds.features
    mu, sd = x[tr].mean(0), x[tr].std(0)
    key = jax.random.split(jax.random.fold_in(jax.random.key(cfg.seed), 1), cfg.n_folds)[0]
    preds, curves = ldl.fit_predict(
        (x[tr] - mu) / sd, ds.labels[tr], (x[te] - mu) / sd, ds.pos, ds.neg, cfg, key=key
    )
    assert preds.shape == (len(cfg.alphas), len(te), ds.num_labels)
    for a, alpha in enumerate(cfg.alphas):
        row = next(r for r in res["folds"] if (r["repeat"], r["fold"], r["alpha"]) == (1, 1, alpha))
        got = metrics.ldl_metrics(ds.labels[te], preds[a], ds.pos, ds.neg)
        for m in ldl.METRICS:
            np.testing.assert_allclose(got[m], row[m], rtol=1e-3, err_msg=f"{alpha} {m}")
    np.testing.assert_allclose(preds.sum(-1), 1.0, rtol=1e-5)
    assert curves.shape == (len(cfg.alphas), cfg.epochs)
    with pytest.raises(ValueError, match="same number of features"):
        ldl.fit_predict(x[tr], ds.labels[tr], x[te, :2], ds.pos, ds.neg, cfg)
    with pytest.raises(ValueError, match="d_train"):
        ldl.fit_predict(x[tr], ds.labels[te], x[te], ds.pos, ds.neg, cfg)


def test_cli_errors_name_the_problem(tmp_path, capsys):
    code = cli.main(
        [
            "ldl",
            "train",
            "--config",
            "tiny",
            "--set",
            "dataset=SJAFFE",
            "--data-dir",
            str(tmp_path),
            "--workdir",
            str(tmp_path),
        ]
    )
    assert code == 2
    assert "LDL data folder not found" in capsys.readouterr().err
    with pytest.raises(DataError, match="no polarity preset"):
        ldl.cross_validate(
            ldl.get_config("tiny"),
            dataset=ldl.load_config_data(ldl.get_config("tiny")).__class__(
                "x", np.ones((6, 2), np.float32), np.full((6, 2), 0.5, np.float32)
            ),
        )


def test_aa_knn_is_the_mean_of_the_k_nearest_label_rows():
    rng = np.random.default_rng(0)
    x_tr, x_te = rng.standard_normal((30, 4)), rng.standard_normal((5, 4))
    d_tr = rng.dirichlet(np.ones(3), size=30)
    got = ldl.baseline_predict("aa_knn", x_tr, d_tr, x_te, k=4)
    dist = ((x_te[:, None, :] - x_tr[None, :, :]) ** 2).sum(-1)  # brute force
    want = np.stack([d_tr[np.argsort(row)[:4]].mean(0) for row in dist])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    with pytest.raises(ValueError, match="k <= 30"):
        ldl.baseline_predict("aa_knn", x_tr, d_tr, x_te, k=31)


def test_ridge_baseline_is_clipped_and_renormalised():
    rng = np.random.default_rng(1)
    x_tr, x_te = rng.standard_normal((200, 3)), rng.standard_normal((50, 3))
    w = 0.5 * np.array([[0.1, -0.1, 0.0], [0.0, 0.05, -0.05], [0.02, 0.0, -0.02]])

    def target(x):  # exactly linear, rows sum to 1, entries > 0 on the data
        return np.array([1 / 3, 1 / 3, 1 / 3]) + x @ w

    got = ldl.baseline_predict("ridge", x_tr, target(x_tr), x_te)
    # a linear target is recovered up to the (small, leave-one-out) penalty
    np.testing.assert_allclose(got, target(x_te), atol=2e-3)
    # far outside the data a label goes negative: clipped at 0, the row renormalised
    far = ldl.baseline_predict("ridge", x_tr, target(x_tr), np.array([[40.0, 0.0, 0.0]]))
    raw = np.clip(target(np.array([[40.0, 0.0, 0.0]])), 0, None)
    np.testing.assert_allclose(far, raw / raw.sum(), atol=2e-2)
    assert far.min() == 0.0 and far.sum() == pytest.approx(1.0)
    with pytest.raises(DataError, match="label row 0 sums to 1.5"):
        ldl.baseline_predict("ridge", x_tr[:2], np.array([[0.5, 0.5, 0.5], [0.2, 0.3, 0.5]]), x_te)
    with pytest.raises(ValueError, match="unknown baseline"):
        ldl.baseline_predict("svm", x_tr, target(x_tr), x_te)


def test_paired_tests_match_the_textbook_t_statistic():
    from scipy import stats

    a = np.array([0.10, 0.12, 0.09, 0.11, 0.13])
    b = np.array([0.11, 0.12, 0.10, 0.13, 0.13])
    got = ldl.paired_tests(a, b)
    d = a - b
    t = d.mean() / (d.std(ddof=1) / np.sqrt(len(d)))
    assert got["mean_diff"] == pytest.approx(d.mean())
    assert got["t_p"] == pytest.approx(2 * stats.t.sf(abs(t), df=len(d) - 1))
    assert got["n"] == 5 and 0 < got["wilcoxon_p"] <= 1
    with pytest.raises(ValueError, match="equal length"):
        ldl.paired_tests(a, b[:4])


@pytest.mark.integration  # a tiny driver run (make test-integration, CI)
def test_tiny_run_scores_the_baselines_on_the_same_folds(tiny_run):
    res, _ = tiny_run
    cfg = ldl.get_config("tiny")
    ds = ldl.load_config_data(cfg)
    tr, te = ldl.kfold_splits(len(ds.labels), cfg.n_folds, cfg.seed + 1)[1]
    x = ds.features
    mu, sd = x[tr].mean(0), x[tr].std(0)
    row = [r for r in res["baseline_folds"] if r["baseline"] == "aa_knn" and r["fold"] == 2][0]
    k = row["knn_k"]  # chosen on an inner split of the fold's training rows (test_ldl_knn_choice)
    p = ldl.baseline_predict("aa_knn", (x[tr] - mu) / sd, ds.labels[tr], (x[te] - mu) / sd, k=k)
    want = metrics.ldl_metrics(ds.labels[te], p, ds.pos, ds.neg)
    for m in ldl.METRICS:
        np.testing.assert_allclose(row[m], want[m], rtol=1e-5)
    model = [r["divisiveness_error"] for r in res["folds"] if r["alpha"] == 1.0]
    base = [r["divisiveness_error"] for r in res["baseline_folds"] if r["baseline"] == "ridge"]
    got = res["paired_vs_baselines"]["1.0"]["ridge"]["divisiveness_error"]
    assert got == ldl.paired_tests(model, base)
