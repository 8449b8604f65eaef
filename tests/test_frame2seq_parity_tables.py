"""The Frame2seq parity tables (issue 41): ``benchmarks/frame2seq_parity.py`` writes the rows that
docs/frame2seq.md renders from ``benchmarks/results/frame2seq_parity.json``. No model runs: the
record is made up, its values chosen so that each cell can be worked out by hand."""

from __future__ import annotations

import json

import pytest
from _scripts import load_script

bench = load_script("benchmarks/frame2seq_parity.py")
render = load_script("tools/render_tables.py")

RECORD = {
    "model1": {"single": 1.7e-3, "batch4_pad79": 1.6e-3, "batch8_pad79": 1.04e-3,
               "float64": 4.1e-6, "max_abs_logit": 24.0},
    "model2": {"single": 3.4e-3, "batch4_pad79": 3.45e-3, "batch8_pad79": 2.0e-3,
               "float64": 8.0e-6, "max_abs_logit": 20.0},
    "model3": {"single": 1.6e-3, "batch4_pad79": 1.6e-3, "batch8_pad79": 2.6e-3,
               "float64": 1.8e-5, "max_abs_logit": 22.0},
    "score": {
        "3a4rA": {"per_residue_max_err": [5.0e-4, 2.5e-4], "avg_ours": [1.30444, 8.0],
                  "avg_ref": [1.30445, 8.00002], "avg_max_err": 2e-5},
        "5PTI": {"per_residue_max_err": [1.0e-4, 3.0e-4], "avg_ours": [1.59304, 6.5],
                 "avg_ref": [1.59303, 6.5], "avg_max_err": 1e-5},
    },
}  # fmt: skip


def test_logit_table_rows_are_layouts_and_columns_models():
    t = bench.logit_table(RECORD)
    assert t["columns"] == ["", "model 1", "model 2", "model 3"]
    assert len(t["formats"]) == len(t["columns"])
    assert [r[0] for r in t["rows"]] == [
        "float32, each backbone alone",
        "float32, batch of 4 (padded to 79)",
        "float32, batch of 8 (padded to 79)",
        "float64 port (`jax.enable_x64`) vs Frame2seq in float64",
    ]
    # row = layout, column = model (not the transpose)
    assert t["rows"][1][1:] == [1.6e-3, 3.45e-3, 1.6e-3]
    assert t["rows"][2][1:] == [1.04e-3, 2.0e-3, 2.6e-3]
    assert t["rows"][3][3] == 1.8e-5


def test_logit_table_of_a_partial_run_has_the_models_it_measured():
    t = bench.logit_table({"model2": RECORD["model2"], "score": {}})
    assert t["columns"] == ["", "model 2"]
    assert t["rows"][0] == ["float32, each backbone alone", 3.4e-3]


def test_score_table_one_row_per_backbone_and_sequence_with_the_difference():
    t = bench.score_table(RECORD)
    assert len(t["formats"]) == len(t["columns"]) == 6
    assert [r[:2] for r in t["rows"]] == [
        ["3a4rA", "native"], ["3a4rA", "shuffled"], ["5PTI", "native"], ["5PTI", "shuffled"]
    ]  # fmt: skip
    assert t["rows"][0][2:5] == [5.0e-4, 1.30444, 1.30445]
    assert t["rows"][0][5] == pytest.approx(1e-5)  # |1.30444 - 1.30445|
    assert t["rows"][1][5] == pytest.approx(2e-5)
    assert t["rows"][2][5] == pytest.approx(1e-5)  # ours above Frame2seq: still positive
    assert t["rows"][3][2] == 3.0e-4 and t["rows"][3][5] == 0.0


def test_written_file_keeps_the_record_renders_and_re_tables(tmp_path, monkeypatch):
    monkeypatch.setenv("FIDIA_COMMIT", "abc123")
    out = tmp_path / "frame2seq_parity.json"
    bench.write_results("frame2seq_parity", bench.tables(RECORD), extra=RECORD, out=out,
                        command="python benchmarks/frame2seq_parity.py")  # fmt: skip
    doc = json.loads(out.read_text())
    assert doc["model3"] == RECORD["model3"] and doc["commit"] == "abc123"
    text = "\n".join(render.render(doc, "frame2seq_parity.json", "logits"))
    assert "| float32, batch of 8 (padded to 79) | 1.0e-03 | 2.0e-03 | 2.6e-03 |" in text
    text = "\n".join(render.render(doc, "frame2seq_parity.json", "score"))
    assert "| 3a4rA | native | 5.0e-04 | 1.30444 | 1.30445 | 1.0e-05 |" in text
    # --report: the tables are re-derived, the run's caption is kept
    doc["tables"] = {}
    doc["date"] = "2026-12-05 09:00 UTC"
    out.write_text(json.dumps(doc))
    assert bench.main(["--report", "--out", str(out)]) == 0
    again = json.loads(out.read_text())
    assert again["date"] == "2026-12-05 09:00 UTC" and again["commit"] == "abc123"
    assert again["tables"] == json.loads(json.dumps(bench.tables(RECORD)))
