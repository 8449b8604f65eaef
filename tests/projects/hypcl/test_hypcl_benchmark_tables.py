"""The results-file tables of ``benchmarks/hypcl.py`` (issue 41), on hand-made per-seed results
whose means, spreads and pairings are known."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
from _scripts import load_script

ROOT = pathlib.Path(__file__).resolve().parents[3]


bench = load_script("benchmarks/hypcl.py")
render = load_script("tools/render_tables.py")


def _run(aa, la=0.5, fg=0.1):
    return {"average_accuracy": aa, "last_accuracy": la, "average_forgetting": fg}


def _seed(seed, hyp, euc, ncm, sweep_gap=0.0):
    trials = [
        {"method": m, "learning_rate": lr, "distill_weight": 0.0, "val_aa": v}
        for m, lr, v in (
            ("euclidean", 0.01, 0.8),
            ("euclidean", 0.03, 0.9),
            ("hypcl", 0.01, 0.7),
            ("hypcl", 0.03, 0.6),
        )
    ]
    return {
        "seed": seed,
        "methods": {
            "ncm": {"orders": [_run(v) for v in ncm]},
            "euclidean": {"orders": [_run(v) for v in euc]},
            "hypcl": {"orders": [_run(v) for v in hyp]},
        },
        "validation_trials": trials,
        "validation_choice": {
            "euclidean": {"learning_rate": 0.03, "distill_weight": 0.0},
            "hypcl": {"learning_rate": 0.01, "distill_weight": 0.0},
        },
        "depth_sweep": [
            {"depth": 2, "num_classes": 4, "euclidean": 0.9, "hypcl": 0.9 + sweep_gap,
             "gap": sweep_gap},
        ],
    }  # fmt: skip


PER_SEED = [
    _seed(0, hyp=[0.9, 0.8], euc=[0.85, 0.82], ncm=[0.7, 0.6], sweep_gap=0.02),
    _seed(1, hyp=[0.7, 0.95], euc=[0.6, 0.9], ncm=[0.5, 0.5], sweep_gap=-0.04),
]
METHODS = ("ncm", "euclidean", "hypcl")


def test_methods_table_pools_every_seed_and_order():
    t = bench.methods_table(PER_SEED, METHODS)
    rows = {r[0]: r for r in t["rows"]}
    hyp = rows["HypCL (hyperbolic adapter + prototypes)"]
    v = np.array([0.9, 0.8, 0.7, 0.95])
    assert hyp[1] == pytest.approx([v.mean(), v.std()])
    e = np.array([0.85, 0.82, 0.6, 0.9]).mean()
    assert hyp[4] == pytest.approx(v.mean() / e)
    assert hyp[5] == 4
    assert rows["Euclidean adapter + prototypes"][4] == pytest.approx(1.0)
    assert len(t["formats"]) == len(t["columns"]) == len(hyp)


def test_paired_table_pairs_hypcl_with_each_method_and_each_seed():
    from scipy import stats

    t = bench.paired_table(PER_SEED, METHODS)
    rows = {r[0]: r for r in t["rows"]}
    hyp, euc = np.array([0.9, 0.8, 0.7, 0.95]), np.array([0.85, 0.82, 0.6, 0.9])
    pooled = rows["HypCL − Euclidean adapter + prototypes, all seeds"]
    assert pooled[1] == 4
    assert pooled[2] == pytest.approx((hyp - euc).mean())
    assert pooled[3] == 3  # 0.05, -0.02, 0.1, 0.05
    assert pooled[4] == pytest.approx(stats.ttest_rel(hyp, euc).pvalue)
    ncm = rows["HypCL − NCM on frozen features, all seeds"]
    assert ncm[2] == pytest.approx((hyp - np.array([0.7, 0.6, 0.5, 0.5])).mean())
    s1 = rows["HypCL − Euclidean adapter, seed 1"]
    assert s1[1] == 2 and s1[2] == pytest.approx(0.075)
    assert "HypCL − HypCL (hyperbolic adapter + prototypes), all seeds" not in rows


def test_validation_and_depth_tables():
    v = bench.validation_table(PER_SEED)
    assert v["columns"] == ["seed", "method", "lr 0.01", "lr 0.03", "chosen lr"]
    assert v["rows"][0] == [0, "Euclidean adapter + prototypes", 0.8, 0.9, "0.03"]
    d = bench.depth_table(PER_SEED)
    assert d["rows"][0][0] == "2 (4)"
    assert d["rows"][0][3] == pytest.approx([-0.01, 0.03])
    assert d["rows"][0][4] == 2


def test_tables_render_through_the_results_file(tmp_path):
    """The tables survive write_results and render_tables (a page region made from them)."""
    results = load_script("benchmarks/_results.py")
    path = results.write_results(
        "hypcl",
        bench.tables(PER_SEED, METHODS),
        command="python benchmarks/hypcl.py --smoke",
        out=tmp_path / "benchmarks" / "results" / "hypcl.json",
    )
    doc = json.loads(path.read_text())
    assert set(doc["tables"]) == {"methods", "paired", "validation", "depth_sweep"}
    page = tmp_path / "docs" / "p.md"
    page.parent.mkdir()
    page.write_text(
        "<!-- results: benchmarks/results/hypcl.json table=methods -->\n<!-- /results -->\n"
    )
    assert render.run(tmp_path, write=True) == 0
    text = page.read_text()
    assert "| HypCL (hyperbolic adapter + prototypes) | 0.838 ± 0.096 |" in text


def test_report_rebuilds_the_tables_from_the_per_seed_results(tmp_path):
    """``--report`` retabulates a finished run's file without training, keeping the run's own
    command, date and machine under ``"run"``."""
    results = load_script("benchmarks/_results.py")
    path = results.write_results(
        "hypcl",
        {"methods": {"columns": ["stale"], "rows": [[1.0]]}},
        command="python benchmarks/hypcl.py --seeds 0 1",
        extra={"per_seed": PER_SEED, "config": {"methods": list(METHODS)}},
        out=tmp_path / "hypcl.json",
    )
    before = json.loads(path.read_text())
    assert bench.main(["--report", "--out", str(path)]) == 0
    doc = json.loads(path.read_text())
    assert doc["tables"] == json.loads(json.dumps(bench.tables(PER_SEED, METHODS)))
    assert doc["run"]["date"] == before["date"]
    assert doc["command"].startswith("python benchmarks/hypcl.py --seeds 0 1 ; python ")
    assert doc["command"].endswith("benchmarks/hypcl.py --report --out " + str(path))
