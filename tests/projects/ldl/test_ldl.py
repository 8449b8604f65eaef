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
