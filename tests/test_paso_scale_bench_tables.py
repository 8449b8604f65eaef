"""The CPU PASO and SCALE-LLaMA benchmarks' results tables (issue 41): ``benchmarks/paso.py``
and ``benchmarks/scale_llama.py`` write the tables docs/benchmarks.md renders. No training:
the rows are made up."""

from __future__ import annotations

import json

import pytest
from _scripts import load_script

paso = load_script("benchmarks/paso.py")
sl = load_script("benchmarks/scale_llama.py")
rt = load_script("tools/render_tables.py")
results = load_script("benchmarks/_results.py")

ROW = {"task": "digits MLP", "optimizer": "adam(1e-3)", "mode": "exact", "T": 512, "window": 16,
       "K": 64, "grad_evals": 2048, "loss_init": 2.3, "loss_seq": 0.2, "loss_paso": 0.2001,
       "param_rel_diff": 1e-6, "wall_seq_s": 0.5, "wall_paso_s": 5.0, "T_over_K": 8.0}  # fmt: skip


def test_paso_table_cells():
    t = paso.paso_table([ROW])
    assert len(t["columns"]) == len(t["formats"]) == len(t["rows"][0])
    cells = dict(zip(t["columns"], t["rows"][0], strict=True))
    assert cells["T/K"] == 8.0 and cells["grad evals / T"] == 4.0
    assert cells["wall PASO / seq"] == pytest.approx(10.0)
    s = paso.sensitivity_table(
        [
            {
                "task": "digits MLP",
                "optimizer": "sgd(0.05)",
                "T": 512,
                "eps": 1e-7,
                "loss_seq": 0.27,
                "loss_seq_perturbed": 0.28,
                "param_rel_diff": 0.3,
            }
        ]  # fmt: skip
    )
    assert len(s["columns"]) == len(s["formats"]) == len(s["rows"][0])
    assert s["rows"][0][-2:] == [0.28, 0.3]


def test_paso_goal_counts_exact_rows_only():
    assert paso.goal_met([ROW])
    assert not paso.goal_met([ROW, dict(ROW, T_over_K=7.9)])
    assert not paso.goal_met([dict(ROW, loss_paso=0.21)])  # 5 % above sequential's loss
    assert paso.goal_met([ROW, dict(ROW, mode="adaptive, adaptivity=median", T_over_K=2.0)])


def test_scale_llama_columns_match_formats():
    cols = sl.opt_columns("adamw")
    assert len(cols) == len(sl.OPT_FORMATS)
    assert "val loss / adamw's" in cols and "step time / adamw's, paired" in cols


def test_paso_file_renders(tmp_path, monkeypatch):
    monkeypatch.setenv("FIDIA_COMMIT", "abc123")
    out = tmp_path / "paso.json"
    results.write_results("paso", {"paso": paso.paso_table([ROW])}, command="python p.py",
                          extra={"rows": [ROW]}, out=out)  # fmt: skip
    lines = rt.render(json.loads(out.read_text()), "benchmarks/results/paso.json", "paso")
    assert "`python p.py`" in lines[1] and "commit `abc123`" in lines[1]
    assert lines[5].startswith("| digits MLP | adam(1e-3) | exact | 512 | 64 | 8.00 | 4.00 |")
