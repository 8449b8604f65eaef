"""FIDIA's fold-cost and update-profile results tables (issue 41): ``benchmarks/fidia_fold_cost.py``
and ``benchmarks/fidia_update_profile.py`` build the tables docs/fidia.md renders from their raw
records. Nothing is lowered or timed: the records are made up and the rows worked by hand."""

from __future__ import annotations

import json

import pytest
from _scripts import load_script

fold = load_script("benchmarks/fidia_fold_cost.py")
prof = load_script("benchmarks/fidia_update_profile.py")
rt = load_script("tools/render_tables.py")
results = load_script("benchmarks/_results.py")

FOLD = {
    "model": "model_1_ptm",
    "recycles": 3,
    "parameters": 92_900_000,
    "rows": [
        {"length": 64, "flops_per_pass": 1.12e11, "bytes_per_pass": 5e10, "lowering_s": 9.0},
        {"length": 256, "flops_per_pass": 1.958e12, "bytes_per_pass": 7e11, "lowering_s": 60.0},
    ],
}

# B = 2, N = 3: 6 rows; three timed calls per part
PROFILE = {
    "shape": {"B": 2, "N": 3, "L": 16},
    "repeats": 3,
    "parts": [
        {"part": "matmul", "seconds": [0.030, 0.010, 0.020], "flops": 2e9, "bytes": 8e6},
        {"part": "forward", "seconds": [0.5, 0.4, 2.0], "flops": 3e9, "bytes": 1.2e9},
        {"part": "axpy", "seconds": [0.1, 0.1, 0.1], "flops": 0.0, "bytes": 0.0},
    ],
}


def test_results_names():
    assert fold.results_name("model_1_ptm") == "fidia_fold_cost"
    assert fold.results_name("model_1_multimer_v3") == "fidia_fold_cost_multimer"
    assert fold.results_name("model_2_ptm") == "fidia_fold_cost_model_2_ptm"


def test_fold_cost_rows_by_hand():
    t = fold.tables(FOLD)["fold_cost"]
    assert t["columns"] == ["padded length L", "TFLOP per pass", "TFLOP per fold (4 passes)"]
    assert len(t["formats"]) == len(t["columns"])
    (l64, p64, f64), (l256, p256, f256) = t["rows"]
    assert (l64, l256) == (64, 256)
    assert p64 == pytest.approx(0.112) and f64 == pytest.approx(0.448)  # 4 passes
    assert p256 == pytest.approx(1.958) and f256 == pytest.approx(7.832)
    one = fold.tables({**FOLD, "recycles": 0})["fold_cost"]
    assert one["columns"][2] == "TFLOP per fold (1 passes)" and one["rows"][0][2] == p64


def test_profile_rows_by_hand():
    t = prof.tables(PROFILE)["profile"]
    assert t["columns"][1] == "min ms (3)" and len(t["formats"]) == len(t["columns"])
    matmul, forward, axpy = t["rows"]  # the record's order, not the labels'
    # min / median / max 10 / 20 / 30 ms; 2 GFLOP in 20 ms = 100 GFLOP/s, 8 MB -> 0.4 GB/s
    assert matmul[0] == "peer: 1024^3 float32 matmul (compute)"
    assert matmul[1:] == pytest.approx([10.0, 20.0, 30.0, 2.0, 0.008, 100.0, 0.4, 250.0])
    # median 0.5 s, not the mean (0.967 s): 6 GFLOP/s, 2.4 GB/s, 2.5 FLOP/byte
    assert forward[0] == "policy forward, 6 rows"
    assert forward[1:] == pytest.approx([400.0, 500.0, 2000.0, 3.0, 1.2, 6.0, 2.4, 2.5])
    assert axpy[-1] is None and axpy[6] == 0.0  # no bytes counted: no intensity


def test_derived_rows_by_hand():
    """The ratios docs/fidia.md reads off the profile, worked by hand on round numbers (B = 2,
    N = 3: 6 rows, 4 besides one per backbone)."""
    record = {
        "shape": {"B": 2, "N": 3, "L": 16},
        "parts": [
            {"part": "matmul", "seconds": [0.01] * 3, "flops": 1e9, "bytes": 1e6},
            {"part": "forward", "seconds": [0.5, 0.4, 0.6], "flops": 10e9, "bytes": 1e9},
            {"part": "backward", "seconds": [1.5] * 3, "flops": 25e9, "bytes": 1e9},
            {"part": "encoder", "seconds": [0.1] * 3, "flops": 2e9, "bytes": 1e8},
            {"part": "reference", "seconds": [0.25] * 3, "flops": 10e9, "bytes": 1e9},
            {"part": "update", "seconds": [1.65] * 3, "flops": 25.5e9, "bytes": 2e9},
        ],
    }
    t = prof.tables(record)["derived"]
    assert t["columns"] == ["quantity", "value"] and len(t["formats"]) == 2
    values = dict(t["rows"])
    assert values["the other 4 rows, GFLOP/s"] == pytest.approx(20.0)  # 8 GFLOP in 0.4 s
    assert [v for _, v in t["rows"]] == pytest.approx([
        20.0, 100 * (25 / 1.5) / 100, 100 * (25.5 / 1.65) / 100,  # rates vs 100 GFLOP/s
        2.5, 3.0, 1.5 / 0.6, 1.5 / 0.4,  # operations, median time, pairs of calls
        15.0, 1.0, 15.0,  # backward alone: GFLOP, s, GFLOP/s
        20.0, 20.0, 20.0, 2.0,  # encoder shares of time and operations; the other rows
        2.0, 40.0,  # reference: 0.5 s under the defaults / 0.25 s; 10 GFLOP in 0.25 s
        25.0, 0.5, 10.0,  # floor, update minus floor, 1.65 s vs 1.5 s
    ])  # fmt: skip
    assert "derived" not in prof.tables(PROFILE)  # parts missing: no derived table


def test_results_files_render_and_retable(tmp_path, monkeypatch):
    monkeypatch.setenv("FIDIA_COMMIT", "abc123")
    for mod, record, key, name in (
        (fold, FOLD, "fold_cost", "fidia_fold_cost"),
        (prof, PROFILE, "profile", "fidia_update_profile"),
    ):
        out = tmp_path / f"{name}.json"
        results.write_results(name, mod.tables(record), command="python x.py", extra=record,
                              out=out)  # fmt: skip
        doc = json.loads(out.read_text())
        lines = rt.render(doc, f"benchmarks/results/{name}.json", key)
        assert "`python x.py`" in lines[1]
        doc["tables"] = {}
        out.write_text(json.dumps(doc))
        assert mod.main(["--report", "--out", str(out)]) == 0
        again = json.loads(out.read_text())
        assert again["tables"] == json.loads(json.dumps(mod.tables(record)))
        assert again["command"] == "python x.py"
    body = rt.render(json.loads((tmp_path / "fidia_fold_cost.json").read_text()), "f", "fold_cost")
    assert "| 256 | 1.958 | 7.83 |" in body
    body = rt.render(
        json.loads((tmp_path / "fidia_update_profile.json").read_text()), "p", "profile"
    )
    assert (
        "| policy forward, 6 rows | 400.0 | 500.0 | 2000.0 | 3.00 | 1.20 | 6.0 | 2.40 | 2.5 |"
        in body
    )
    assert [r for r in body if r.startswith("| peer: axpy")][0].endswith("| 0.0 | 0.00 | — |")
