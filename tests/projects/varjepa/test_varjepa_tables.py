"""The printed and the rendered tables of Var-JEPA put each number under its own column (issue 41).

The CLI once printed the baselines' MLP-probe and LightGBM accuracies under "linear acc" with a
ratio to T-JEPA's *linear* probe, and ``nan`` under "MLP acc". Here: :func:`format_table` and
the CLI's baseline rows keep the probes apart and LightGBM (supervised) in a column of its own;
``benchmarks/varjepa.py``'s results tables give mean ± sample s.d. over seeds and paired t-tests
that match a direct computation.
"""

from __future__ import annotations

import pathlib

import numpy as np
import pytest
from _scripts import load_script

from fidia_jax.projects import varjepa
from fidia_jax.projects.varjepa.train import _baseline_rows

ROOT = pathlib.Path(__file__).resolve().parents[3]


def _bench():
    return load_script("benchmarks/varjepa.py")


BASELINES = {
    "raw_linear_acc": 0.97,
    "raw_mlp_acc": 0.91,
    "pca_linear_acc": 0.95,
    "pca_mlp_acc": 0.92,
    "lightgbm_acc": 0.96,
}


def _run(seed, tj, vj, base=BASELINES, mlp=True, dataset="bc"):
    methods = {}
    for name, (lin, m) in (("T-JEPA", tj), ("Var-T-JEPA", vj)):
        row = {"linear_acc": lin, "final_effective_rank": 5.0 + seed, "aurc_probe_confidence": 0.01,
               "aurc_random": 1 - lin, "history": {"effective_rank": [6.0, 5.0 + seed]}}  # fmt: skip
        if mlp:
            row["mlp_acc"] = m
        methods[name] = row
    methods["Var-T-JEPA"]["aurc_posterior_variance"] = 0.05
    return {"dataset": dataset, "seed": seed, "n_train": 426, "n_test": 143, "methods": methods,
            "baselines": dict(base), "wall_s": 100.0}  # fmt: skip


def test_format_table_puts_baselines_under_their_own_probe():
    table = varjepa.format_table(_run(0, (0.90, 0.80), (0.93, 0.88)))
    assert "nan" not in table
    lines = {line.split(" | ")[0].lstrip("| "): line for line in table.splitlines()}
    # raw features: the linear probe (ratio to T-JEPA's linear 0.90), then the MLP probe (ratio
    # to T-JEPA's MLP 0.80), nothing in the supervised column
    assert lines["raw features"].startswith("| raw features | 0.9700 (1.078) | 0.9100 (1.137) |  |")
    assert "| PCA features | 0.9500 (1.056) | 0.9200 (1.150) |  |" in table
    assert "| LightGBM (supervised, raw features) |  |  | 0.9600 |" in table
    assert "| Var-T-JEPA | 0.9300 (1.033) | 0.8800 (1.100) | |" in table


def test_format_table_without_mlp_probe_says_not_run():
    table = varjepa.format_table(
        _run(0, (0.90, None), (0.93, None), base={"raw_linear_acc": 0.97}, mlp=False)
    )
    assert "nan" not in table
    assert "| T-JEPA | 0.9000 (1.000) | not run |" in table
    assert "| raw features | 0.9700 (1.078) |  |  |" in table


def test_cli_baseline_rows_keep_probes_and_lightgbm_apart():
    assert _baseline_rows(BASELINES) == [
        ["raw features", 0.97, 0.91, None],
        ["PCA features", 0.95, 0.92, None],
        ["LightGBM (supervised, raw features)", None, None, 0.96],
    ]
    assert _baseline_rows({"lightgbm_acc": 0.5}) == [
        ["LightGBM (supervised, raw features)", None, None, 0.5]
    ]


def test_benchmark_tables_mean_sd_and_paired_test():
    from scipy import stats

    bench = _bench()
    tj_lin, vj_lin = [0.90, 0.93, 0.95], [0.92, 0.93, 0.97]
    raw_lin = [0.96, 0.97, 0.99]
    runs = [
        _run(
            s, (tj_lin[s], 0.8), (vj_lin[s], 0.85), base={**BASELINES, "raw_linear_acc": raw_lin[s]}
        )
        for s in range(3)
    ]
    tables = bench.results_tables(runs, bench.summarise(runs))
    acc = {r[2]: r for r in tables["accuracy"]["rows"]}
    assert acc["T-JEPA-like (authors' settings)"][1] == 3
    mean, sd = acc["T-JEPA-like (authors' settings)"][3]
    assert mean == pytest.approx(np.mean(tj_lin)) and sd == pytest.approx(np.std(tj_lin, ddof=1))
    assert acc["raw features, same probes"][3][0] == pytest.approx(np.mean(raw_lin))
    lgbm = acc["LightGBM (supervised, raw features)"]
    assert lgbm[3] is None and lgbm[4] is None and lgbm[5] == pytest.approx([0.96, 0.0])
    assert acc["Var-T-JEPA (reconstruction)"][7] == pytest.approx([0.05, 0.0])
    paired = {(r[1], r[2]): r for r in tables["paired"]["rows"]}
    row = paired[("linear", "Var-T-JEPA - T-JEPA")]
    assert row[3] == pytest.approx(np.mean(np.subtract(vj_lin, tj_lin)))
    assert row[4] == pytest.approx(stats.ttest_rel(vj_lin, tj_lin).pvalue)
    assert row[5] == "2 / 1 / 0"
    row = paired[("linear", "T-JEPA - raw features (best label-free)")]
    assert row[4] == pytest.approx(stats.ttest_rel(tj_lin, raw_lin).pvalue)
    assert row[5] == "0 / 0 / 3"
    # the MLP probe: PCA (0.92) is the best label-free baseline; equal MLP accuracies of the
    # two methods on every seed give no p (null), not nan
    assert ("mlp", "Var-T-JEPA - PCA features (best label-free)") in paired
    assert paired[("mlp", "Var-T-JEPA - T-JEPA")][3] == pytest.approx(0.05)
    assert paired[("mlp", "Var-T-JEPA - T-JEPA")][4] is None
    assert [r[:2] for r in tables["per_seed"]["rows"]] == [["bc", 0], ["bc", 1], ["bc", 2]]
