"""The results-file tables of ``benchmarks/causal.py`` (issue 41), on a hand-made record of the
driver's runs whose means, medians, pairings and choices are known."""

from __future__ import annotations

import json

import numpy as np
import pytest
from _scripts import load_script

bench = load_script("benchmarks/causal.py")
render = load_script("tools/render_tables.py")
results = load_script("benchmarks/_results.py")

REPS = (1, 2, 3, 4)
# held-out sqrt(PEHE) per replication
PEHE = {
    "tarnet": [1.5, 1.3, 1.3, 1.4],
    "cfr_pairwise": [1.4, 1.3, 1.2, 1.4],
    "cfr_pairwise@val": [1.2, 1.0, 1.1, 1.0],
    "tarnet@es": [1.1, 0.9, 0.6, 1.1],
    "cfr_pairwise@val_es": [0.7, 0.6, 0.65, 0.9],
    "t_ridge": [0.6, 0.3, 0.6, 0.5],
    "s_gbm": [0.5, 0.5, 0.5, 1.2],
    "x_ridge": [0.7, 0.5, 0.7, 0.9],
    "t_gbm": [0.8, 0.7, 0.6, 1.0],
    "t_gbm@val": [0.8, 0.8, 0.7, 1.0],
    "constant_effect": [0.9, 0.9, 0.9, 2.0],
    "mean_outcome": [4.0, 4.1, 4.1, 4.6],
}
# per replication, the grid fits: alpha -> (validation MSE, held-out sqrt(PEHE))
GRID = {0.1: (1.7, 1.6), 1.0: (1.6, 1.2), 10.0: (1.9, 0.9)}


def _row(method, r, i):
    row = {"K": 2, "replication": r, "method": method, "sqrt_pehe": PEHE[method][i],
           "ate_error": 0.1 * (i + 1), "wall_s": 1.0, "alpha": None}  # fmt: skip
    if method == "tarnet" or method == "tarnet@es":
        row["alpha"] = 0.0
    if method == "cfr_pairwise":
        row["alpha"] = 0.05 + 0.01 * i
    if method in ("cfr_pairwise@val", "cfr_pairwise@val_es"):
        row["alpha"] = 1.0
        row["grid"] = {f"{a:g}": {"val_mse": v, "sqrt_pehe": p, "ate_error": 0.2}
                       for a, (v, p) in GRID.items()}  # fmt: skip
    if method.endswith("@es"):
        row["best_step"], row["stopped_step"] = 40, 140
    if method == "cfr_pairwise@val_es":
        row["best_step"], row["stopped_step"] = 90, 190
    return row


HEADLINE = {
    "runs": [_row(m, r, i) for m in PEHE for i, r in enumerate(REPS)],
    "iterations": 600,
    "alpha_grid": [0.1, 1.0, 10.0],
    "validation_fraction": 0.2,
    "early_stopping": True,
    "wall_s": 10.0,
}


def test_headline_table_sorts_by_mean_and_adds_the_oracles():
    t = bench.headline_tables(HEADLINE)["headline"]
    assert len(t["formats"]) == len(t["columns"])
    rows = {r[0]: r for r in t["rows"]}
    es = rows["CFR early-stopped, alpha by validation (`cfr_pairwise@val_es`)"]
    v = np.array(PEHE["cfr_pairwise@val_es"])
    assert es[1] == "network" and es[2] == 1.0
    assert es[3] == pytest.approx([v.mean(), v.std()])
    assert es[4] == pytest.approx(np.median(v))
    assert es[5] == pytest.approx([0.25, np.std([0.1, 0.2, 0.3, 0.4])])
    assert es[6] == 4
    # the oracle picks alpha = 10 on every replication (held-out 0.9)
    oracle = rows["CFR, oracle alpha (chosen on the held-out units: not usable) "
                  "(`cfr_pairwise@oracle`)"]  # fmt: skip
    assert oracle[1] == "network, not usable" and oracle[2] == 10.0
    assert oracle[3] == pytest.approx([0.9, 0.0])
    assert rows["TARNet, 600 iterations (`tarnet`)"][2] == 0.0
    ce = rows["constant effect (training arms' mean difference; ignores x) (`constant_effect`)"]
    assert ce[1] == "ignores x" and ce[2] is None
    assert rows["T-learner, gradient boosting, learning rate by validation (`t_gbm@val`)"][1] == (
        "meta-learner"
    )
    means = [r[3][0] for r in t["rows"]]
    assert means == sorted(means)
    assert t["rows"][0][0].endswith("(`t_ridge`)")  # mean 0.5, the lowest


def test_paired_table_pairs_the_best_network_with_the_strongest_baselines():
    from scipy import stats

    rows = {(r[0], r[1]): r for r in bench.headline_tables(HEADLINE)["paired"]["rows"]}
    es, ridge = np.array(PEHE["cfr_pairwise@val_es"]), np.array(PEHE["t_ridge"])
    r = rows[("`cfr_pairwise@val_es`", "`t_ridge`")]
    # t_ridge: the best baseline by mean (0.5); s_gbm by median (0.5 against t_ridge's 0.55)
    assert r[2] == "best network by mean, best baseline by mean"
    assert rows[("`cfr_pairwise@val_es`", "`s_gbm`")][2] == (
        "best network by mean, best baseline by median"
    )
    assert r[3] == pytest.approx((es - ridge).mean())
    assert r[4] == pytest.approx(np.median(es - ridge))
    assert r[5] == pytest.approx(stats.wilcoxon(es, ridge).pvalue)
    assert r[6] == pytest.approx(stats.ttest_rel(es, ridge).pvalue)
    assert r[7] == "0/4"
    ce = rows[("`tarnet`", "`constant_effect`")]  # loses on 1-3, wins on 4
    assert ce[7] == "1/4" and ce[2] is None
    assert ("`cfr_pairwise@val_es`", "`mean_outcome`") in rows
    assert ("`tarnet@es`", "`tarnet`") in rows
    assert rows[("`cfr_pairwise@val_es_oracle`", "`cfr_pairwise@val_es`")][3] == pytest.approx(
        (0.9 - es).mean()
    )


def test_paired_p_values_are_none_when_they_cannot_be_computed():
    assert bench._paired([1.0, 2.0], [1.0, 2.0])[2:4] == (None, None)
    assert bench._paired([1.0], [2.0]) == (-1.0, -1.0, None, None, 1)


def test_per_replication_and_alpha_tables():
    tabs = bench.headline_tables(HEADLINE)
    per = tabs["per_replication"]
    assert per["columns"][-3:] == ["best baseline here", "its sqrt(PEHE)",
                                   "`cfr_pairwise@val_es` lower"]  # fmt: skip
    # replication 4: best baseline is t_ridge (0.5) against the network's 0.9
    assert per["rows"][3][0] == 4 and per["rows"][3][-3:] == ["`t_ridge`", 0.5, False]
    assert per["rows"][0][-3:] == ["`s_gbm`", 0.5, False]
    alpha = tabs["alpha"]
    assert len(alpha["columns"]) == len(alpha["formats"]) == len(alpha["rows"][0])
    assert alpha["rows"][1][:5] == [2, pytest.approx(0.06), 1.3, 1.0, 1.0]
    assert alpha["rows"][1][5] == "1.700 / 1.600 / 1.900"
    assert alpha["rows"][1][6:8] == [10.0, 0.9]
    assert alpha["rows"][1][8:] == [1.0, "90 / 190", "1.700 / 1.600 / 1.900", "40 / 140"]


def test_reference_and_timing_tables():
    ref = {"runs": [r for r in HEADLINE["runs"]
                    if r["method"] in ("t_ridge", "constant_effect", "mean_outcome")]}  # fmt: skip
    tabs = bench.reference_tables(ref)
    assert [r[0].split("`")[1] for r in tabs["reference"]["rows"]] == [
        "t_ridge", "constant_effect", "mean_outcome"]  # fmt: skip
    assert tabs["reference"]["rows"][1][2] == pytest.approx([1.175, np.std([0.9] * 3 + [2.0])])
    assert tabs["reference_per_replication"]["rows"][3] == [4, 0.5, 2.0, 4.6]
    t = bench.timing_table({"pairwise": {"2": 0.003, "16": 0.195}, "aggregation":
                            {"2": 0.0095, "16": 0.0135}})  # fmt: skip
    assert t["columns"] == ["scheme", "K=2 (ms)", "K=16 (ms)", "K=16 / K=2"]
    assert t["rows"][0] == ["pairwise", pytest.approx(3.0), pytest.approx(195.0),
                            pytest.approx(65.0)]  # fmt: skip


def test_tables_render_and_report_keeps_the_caption(tmp_path):
    """The tables survive write_results and render_tables; ``--report`` rewrites them from the
    raw record and keeps the run's own command and date."""
    raw = {"ihdp_headline": HEADLINE, "term_timing": {"pairwise": {"2": 0.003, "4": 0.0045}}}
    path = results.write_results(
        "causal_x",
        {"headline": {"columns": ["stale"], "rows": [[1.0]]}},
        command="python benchmarks/causal.py --parts H,T",
        extra=raw,
        out=tmp_path / "benchmarks" / "results" / "causal_x.json",
    )
    before = json.loads(path.read_text())
    bench.main(["--report", "--out", str(path)])
    doc = json.loads(path.read_text())
    assert set(doc["tables"]) == {"headline", "per_replication", "paired", "alpha", "term_timing"}
    assert doc["command"] == "python benchmarks/causal.py --parts H,T"
    assert doc["date"] == before["date"] and doc["ihdp_headline"]["iterations"] == 600
    page = tmp_path / "docs" / "p.md"
    page.parent.mkdir()
    page.write_text(
        "<!-- results: benchmarks/results/causal_x.json table=headline -->\n<!-- /results -->\n"
    )
    assert render.run(tmp_path, write=True) == 0
    assert "| T-learner, ridge (`t_ridge`) | meta-learner | — | 0.500 ± 0.122 | 0.550 |" in (
        page.read_text()
    )


def test_report_refuses_a_file_without_a_caption(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"ihdp_headline": HEADLINE}))
    with pytest.raises(SystemExit, match="no caption"):
        bench.main(["--report", "--out", str(path)])


def test_committed_reference_run_equals_the_headline_runs_baselines():
    """docs/causal.md says the part-R file (baselines alone) equals the headline run's baseline
    rows (same splits): every method the two committed files share, replication by replication,
    to 12 digits (the ridge solves differ in the last bits between the two processes)."""
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[3] / "benchmarks" / "results"
    head, _ = bench.read(root / "causal_headline.json")
    ref, _ = bench.read(root / "causal_reference.json")
    by_h, reps_h = bench._by_method(head["ihdp_headline"])
    by_r, reps_r = bench._by_method(ref["ihdp_reference"])
    shared = set(by_h) & set(by_r)
    assert reps_h == reps_r == list(range(1, 11))
    assert {"t_ridge", "t_gbm", "t_gbm@val", "constant_effect", "mean_outcome"} <= shared
    for m in shared:
        for r in reps_h:
            for key in ("sqrt_pehe", "ate_error"):
                assert by_h[m][r][key] == pytest.approx(by_r[m][r][key], rel=1e-12), (m, r, key)
