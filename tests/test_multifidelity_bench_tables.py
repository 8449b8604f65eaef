"""The multi-fidelity benchmark's results tables (issue 41): ``benchmarks/multifidelity.py``
writes the tables docs/multifidelity.md renders, as a pure function of the per-run RMSEs it
keeps. No training: the runs are made up."""

from __future__ import annotations

import json

import numpy as np
import pytest
from _scripts import load_script
from scipy import stats

mfb = load_script("benchmarks/multifidelity.py")
rt = load_script("tools/render_tables.py")
results = load_script("benchmarks/_results.py")


def _row(name, rmse, ref_mean):
    rmse = np.asarray(rmse, np.float64)
    return {"name": name, "rmse": rmse.tolist(), "mean": float(rmse.mean()),
            "std": float(rmse.std(ddof=1)), "ratio_vs_hf_only": float(rmse.mean()) / ref_mean}  # fmt: skip


HF = [1.0, 2.0, 1.5, 1.2]
OURS = [0.5, 0.9, 0.8, 0.6]  # below HF-only on every run


def _task(gp_two_stage, cok=None, affine=None):
    ref = float(np.mean(HF))
    methods = {
        "trusted_subsets": _row("ours", OURS, ref),
        "ts_no_interval": _row("interval off", [1.0, 1.8, 1.6, 1.2], ref),
        "hf_only": _row("HF-only MLP", HF, ref),
        "gp_two_stage": _row("two-stage GP", gp_two_stage, ref),
    }
    if cok is not None:  # co-kriging on the first runs only
        methods["cokriging"] = _row("co-kriging, first 2 runs", cok, float(np.mean(HF[:2])))
    out = {"methods": methods}
    if affine:
        out["affine_fit_of_lower_fidelities"] = {"lf": affine}
    return out


def _record():
    affine = {"a": 0.5, "b": -5.0, "r2": 0.52, "resid_sd_over_hf_sd": 0.64}
    return {
        "n_hf": 16,
        "tasks": {
            "forrester": _task([0.1, 0.2, 0.1, 0.3], cok=[0.001, 0.002], affine=affine),
            "park": _task([0.45, 1.0, 0.7, 0.7]),  # the GP as good as ours, within noise
        },
    }


def test_ratio_table_cells_and_order():
    t = mfb.ratio_table(_record())
    assert t["columns"] == ["method", "forrester", "park"]
    names = [r[0] for r in t["rows"]]
    assert names == ["ours", "interval off", "HF-only MLP", "two-stage GP",
                     "co-kriging, first 2 runs"]  # fmt: skip
    ours = t["rows"][0]
    ratio = np.mean(OURS) / np.mean(HF)
    std = np.std(OURS, ddof=1)
    assert ours[1] == f"{ratio:.3f} ({np.mean(OURS):.3g} ± {std:.2g})"
    assert t["rows"][2][1].startswith("1.000 (")
    assert t["rows"][-1][2] is None  # co-kriging not run on park


def test_paired_tests_pick_the_best_full_baseline():
    rec = _record()
    tests = mfb.paired_tests(rec["tasks"]["forrester"])
    # co-kriging is best on its 2 runs but was not run on all 4: not the "best" of the goal
    assert tests["vs_best"]["method"] == "gp_two_stage"
    p_t = stats.ttest_rel(np.log(OURS), np.log(HF)).pvalue
    assert tests["vs_hf_only"]["p_t"] == pytest.approx(p_t)
    assert tests["vs_hf_only"]["ratio"] == pytest.approx(np.mean(OURS) / np.mean(HF))
    assert tests["goal_best"] == "NOT met (significantly worse)"
    assert "cokriging" not in tests["all"]


def test_paired_table_rows_and_verdicts():
    t = mfb.paired_table(_record())
    assert len(t["columns"]) == len(t["formats"]) == len(t["rows"][0])
    cells = dict(zip(t["columns"][:5], t["rows"][0][:5], strict=True))
    assert cells["task"] == "forrester"
    assert cells["ours / HF-only MLP"] == pytest.approx(np.mean(OURS) / np.mean(HF))
    # all four runs lower, ratio 0.54 <= 0.8: met only because p_t < 0.05
    assert cells["p_t"] < 0.05 and cells["goal ≤ 0.8 × HF-only"] == "met"
    assert t["rows"][0][5] == "two-stage GP"
    park = t["rows"][1]
    assert park[0] == "park" and park[-1] == "NOT met (within noise)"


def test_ablation_and_affine_tables():
    rec = _record()
    a = mfb.ablation_table(rec)
    assert [r[0] for r in a["rows"]] == ["interval off"]  # only the ablations present
    assert len(a["columns"]) == len(a["formats"]) == 5
    assert a["rows"][0][1] == pytest.approx(np.mean([1.0, 1.8, 1.6, 1.2]) / np.mean(OURS))
    assert a["rows"][0][2] == pytest.approx(
        stats.ttest_rel(np.log([1.0, 1.8, 1.6, 1.2]), np.log(OURS)).pvalue
    )
    f = mfb.affine_table(rec)
    assert f["rows"] == [["forrester", 0.5, -5.0, 0.52, 0.64]]  # park has no affine record
    assert set(mfb.tables(rec)) == {"ratios", "paired", "baselines", "ablations", "affine"}


def test_baseline_table_skips_partial_runs():
    b = mfb.baseline_table(_record())
    # HF-only MLP and the two-stage GP; co-kriging ran 2 of 4 runs on forrester only: no row
    assert [r[0] for r in b["rows"]] == ["HF-only MLP", "two-stage GP"]
    assert b["columns"][1:3] == ["forrester: ours / baseline", "p_t"]
    gp = b["rows"][1]
    assert gp[1] == pytest.approx(np.mean(OURS) / np.mean([0.1, 0.2, 0.1, 0.3]))
    assert gp[3] == pytest.approx(np.mean(OURS) / np.mean([0.45, 1.0, 0.7, 0.7]))


def test_results_file_renders_and_retables(tmp_path, monkeypatch):
    monkeypatch.setenv("FIDIA_COMMIT", "abc123")
    rec = _record()
    out = tmp_path / "multifidelity.json"
    results.write_results("multifidelity", {"ratios": {"columns": ["x"], "rows": [["stale"]]}},
                          command="python m.py", extra=rec, out=out)  # fmt: skip
    results.retable(out, mfb.tables)  # --report: the tables from the raw record, caption kept
    doc = json.loads(out.read_text())
    assert doc["command"] == "python m.py" and set(doc["tables"]) == set(mfb.tables(rec))
    lines = rt.render(doc, "benchmarks/results/multifidelity.json", "paired")
    assert lines[5].startswith(
        "| forrester | 0.491 | 0.00027 | 0.12 | met | two-stage GP | 4.000 |"
    )
