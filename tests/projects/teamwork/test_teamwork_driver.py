"""TeamWork driver: evaluation by hand counts, bad input, the tiny run end to end."""

import json

import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax import metrics
from fidia_jax.errors import ConfigError, DataError, TrainingError
from fidia_jax.projects import PROJECTS, teamwork


def test_evaluate_scores_hand_counts():
    # Run A: anomaly at the start [0, 2); run B: anomaly at the end [4, 6) of 6 steps.
    s_a = np.array([0.9, 0.2, 0.1, 0.3, 0.1, 0.1])
    y_a = np.array([1, 1, 0, 0, 0, 0])
    s_b = np.array([0.1, 0.8, 0.1, 0.1, 0.2, 0.7])
    y_b = np.array([0, 0, 0, 0, 1, 1])
    train = np.array([0.0, 0.3])  # q_0.999 = 0.2997 -> UCL = 0.3996
    out = teamwork.evaluate_scores([(s_a, y_a, train), (s_b, y_b, train)], anomaly_ratio=2 / 6)
    # skab_ucl: A flags {0}, B flags {1, 5}: TP=2, FP=1, FN=2, TN=7 (pooled) -> F1 = 4 / 7.
    r = out["skab_ucl"]
    assert r["f1"] == pytest.approx(4 / 7)
    assert r["far"] == pytest.approx(100 / 8) and r["mar"] == pytest.approx(50.0)
    # point-adjusted: both events touched -> TP=4, FP=1, FN=0 -> 8 / 9.
    assert r["pa_f1"] == pytest.approx(8 / 9)
    # ratio 1/3: top 2 per run, A {0, 3}, B {1, 5} -> TP=2, FP=2, FN=2 -> F1 = 0.5.
    assert out["ratio"]["f1"] == pytest.approx(0.5)
    # AUC-PR is the mean over runs.
    expect = (metrics.auc_pr(s_a, y_a) + metrics.auc_pr(s_b, y_b)) / 2
    assert out["oracle"]["auc_pr"] == pytest.approx(expect)
    aff = [
        metrics.affiliation_metrics(s >= t, y)
        for s, y, t in ((s_a, y_a, 0.3996), (s_b, y_b, 0.3996))
    ]
    p = np.mean([a["precision"] for a in aff])
    rec = np.mean([a["recall"] for a in aff])
    assert r["affiliation_f1"] == pytest.approx(2 * p * rec / (p + rec))
    assert "skab_ucl" not in teamwork.evaluate_scores([(s_a, y_a, None)], 0.5)


def test_evaluate_scores_with_single_class_series():
    """Issue 29 item 3: a series with one class only adds no AUC-PR (undefined), the oracle
    flags nothing (all normal) or everything (all anomalous) there, and with no two-class series
    AUC-PR is None (printed n/a), never NaN or a number."""
    s_a = np.array([0.9, 0.2, 0.1, 0.3, 0.1, 0.1])
    y_a = np.array([1, 1, 0, 0, 0, 0])
    s_n = np.array([0.5, 0.9, 0.1, 0.2])  # all normal
    s_p = np.array([0.3, 0.1, 0.2])  # all anomalous
    out = teamwork.evaluate_scores(
        [(s_a, y_a, None), (s_n, np.zeros(4, int), None), (s_p, np.ones(3, int), None)], 0.5
    )
    assert out["oracle"]["auc_pr"] == pytest.approx(metrics.auc_pr(s_a, y_a))
    # oracle: A at its best-F1 threshold 0.2 (flags 0, 1, 3: TP 2, FP 1, TN 3), nothing on the
    # normal series (TN 4), all 3 steps of the anomalous one (TP 3): TP 5, FP 1, FN 0, TN 7.
    assert out["oracle"]["f1"] == pytest.approx(10 / 11)
    assert out["oracle"]["far"] == pytest.approx(100 / 8) and out["oracle"]["mar"] == 0.0
    one = teamwork.evaluate_scores([(s_n, np.zeros(4, int), None)], 0.5)
    assert one["oracle"]["auc_pr"] is None and one["ratio"]["auc_pr"] is None
    results = {"dataset": "x", "n_series": 1, "rows": {"A (x)": one}}
    assert "| A (x) | n/a |" in teamwork.format_table(results)


def test_bad_input_is_a_clear_error_and_writes_nothing(tmp_path):
    cfg = teamwork.get_config("tiny", window=16)
    x = np.random.default_rng(0).normal(size=(10, 3))
    with pytest.raises(DataError, match="window 16 is longer than the series \\(10 steps\\)"):
        teamwork.fit_detector("teamwork", x, cfg)
    x = np.random.default_rng(0).normal(size=(100, 3))
    x[:, 1] = 2.5
    with pytest.raises(DataError, match="channel 1 is constant"):
        teamwork.fit_detector("pca", x, cfg)
    x[:, 1] = np.nan
    with pytest.raises(DataError, match="channel 1 holds 100 NaN"):
        teamwork.fit_detector("iforest", x, cfg)
    big = teamwork.get_config("tiny", window=1000)
    with pytest.raises(DataError, match="longer than the series"):
        teamwork.train_and_evaluate(big, tmp_path)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ConfigError, match="methods"):
        teamwork.get_config("tiny", methods=("lstm",))


@pytest.mark.integration  # a tiny driver run (make test-integration, CI)
def test_tiny_run(tmp_path):
    assert PROJECTS["teamwork"].module == "fidia_jax.projects.teamwork"
    cfg = teamwork.get_config("tiny")
    results = teamwork.train_and_evaluate(cfg, tmp_path)
    saved = json.loads((tmp_path / "teamwork.json").read_text())
    assert saved["config"]["steps"] == cfg.steps
    rows = saved["rows"]
    assert set(rows) == {teamwork.METHODS["teamwork"], teamwork.METHODS["pca"]}
    for row in rows.values():
        assert set(row) == {"ratio", "ratio_train", "oracle"}  # no SKAB rule off SKAB
        for m in row.values():
            assert all(0.0 <= m[k] <= 1.0 for k in ("f1", "pa_f1", "affiliation_f1", "auc_pr"))
        # Point adjustment never lowers F1; the oracle's F1 is at least the fixed ratio's.
        assert row["oracle"]["pa_f1"] >= row["oracle"]["f1"]
        assert row["oracle"]["f1"] >= row["ratio"]["f1"] - 1e-12
    # Roles recovered from the tiny training data: the generator's two dominant channels.
    syn = teamwork.make_synthetic(
        cfg.seed,
        train_length=cfg.train_length,
        test_length=cfg.test_length,
        n_anomalies=cfg.n_anomalies,
    )
    assert results["info"]["teamwork"]["dominant"] == syn.dominant.tolist()
    # PCA's row equals a recomputation from its own scores.
    det = teamwork.fit_detector("pca", syn.train, cfg)
    again = teamwork.evaluate_scores([(det.score(syn.test), syn.labels, None)], cfg.anomaly_ratio)
    assert rows[teamwork.METHODS["pca"]]["oracle"]["f1"] == pytest.approx(again["oracle"]["f1"])
    assert "TeamWork (ours, reconstruction)" in teamwork.format_table(results)
    # The files of a run: the fit's metrics (one record per step), summary, pictures.
    records = [json.loads(s) for s in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in records if r["run"] == "teamwork" and "loss" in r]
    assert len(losses) == cfg.steps
    final = float(np.mean(np.asarray(losses[-10:], np.float32)))
    assert results["info"]["teamwork"]["final_loss"] == final
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [r["method"] for r in summary["table"]] == list(rows)
    assert summary["table"][0]["F1 [oracle]"] == rows[teamwork.METHODS["teamwork"]]["oracle"]["f1"]
    for png in ("teamwork_comparison.png", "teamwork_scores.png", "curves.png"):
        assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "checkpoints" / "teamwork").is_dir()


def test_a_non_finite_loss_stops_the_fit_naming_the_step(monkeypatch):
    """The library's policy (fidia_jax.train.fit): the step is skipped, training stops."""
    from fidia_jax.projects.teamwork import losses

    monkeypatch.setattr(losses, "gaussian_nll", lambda *args: jnp.float32(jnp.nan))
    # a learning rate of its own: a fresh trace of the (cached) step sees the patched loss
    cfg = teamwork.get_config("tiny", steps=3, learning_rate=1.2345e-3)
    x = teamwork.make_synthetic(0, train_length=200, test_length=100, n_anomalies=1).train
    with pytest.raises(TrainingError, match="teamwork: the loss or update at step 1"):
        teamwork.fit_detector("teamwork", x, cfg)


def test_convae_config_validation():
    assert "convae" in teamwork.get_config("skab").methods
    assert "convae" not in teamwork.get_config("demo").methods
    with pytest.raises(ConfigError, match="convae_window must be a multiple of 4"):
        teamwork.get_config("tiny", convae_window=30)


@pytest.mark.integration  # fits a Conv-AE (one compilation)
def test_convae_detector_scores_a_level_shift():
    syn = teamwork.make_synthetic(0, train_length=300, test_length=200, n_anomalies=2)
    cfg = teamwork.get_config("tiny", convae_window=16, convae_steps=60, methods=("convae",))
    det = teamwork.fit_detector("convae", syn.train, cfg)
    test = syn.test.copy()
    test[120:160] += 6.0  # a level shift far outside training: every covering window sees it
    s = det.score(test)
    assert s.shape == (200,)
    assert s[125:155].min() > 3 * np.median(s[:100])
