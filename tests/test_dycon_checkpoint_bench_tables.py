"""The tables of DyCon on a released checkpoint (issue 41): ``benchmarks/dycon_checkpoint.py``
(the probe) and ``benchmarks/dycon_checkpoint_control.py`` (the control on generation) build
the tables docs/dycon.md renders from their raw records. No model: the records are made up."""

from __future__ import annotations

import json

import pytest
from _scripts import load_script

probe_bench = load_script("benchmarks/dycon_checkpoint.py")
control_bench = load_script("benchmarks/dycon_checkpoint_control.py")
rt = load_script("tools/render_tables.py")
results = load_script("benchmarks/_results.py")


def _probe_record(p_not_better=0.0):
    return {
        "checkpoint": "m.gguf",
        "load_s": 3.0,
        "wall_s": 9.0,
        "probe": {
            "num_traces": 10,  # 5 fit, 2 layer choice, 3 test
            "num_boundaries": 40,
            "num_test_boundaries": 12,
            "r2_test": [-0.001, 0.5, 0.75, 0.7],
            "r2_shuffled_test": [-0.001, -0.2, -0.3, -0.4],
            "layer": 2,
            "r2_layer": 0.75,
            "r2_position_baseline": 0.2,
            "r2_counter_baseline": 0.98,
            "paired": {
                "mse_difference": -0.125,
                "ci95": [-0.2, -0.06],
                "p_probe_not_better": p_not_better,
                "test": "bootstrap",
            },
            "seconds": 5.0,
        },  # fmt: skip
    }


def test_probe_table_one_row_per_hidden_state():
    t = probe_bench.probe_table(_probe_record())
    assert [r[0] for r in t["rows"]] == [
        "0: embeddings",
        "1: after block 0",
        "2: after block 1 (chosen on validation traces)",
        "3: after block 2 (last)",
    ]
    assert t["rows"][2][1:] == [0.75, -0.3]
    assert len(t["formats"]) == len(t["columns"]) == len(t["rows"][0])


def test_probe_baselines_and_paired():
    rec = _probe_record()
    b = probe_bench.baselines_table(rec)
    assert [r[1] for r in b["rows"]] == [0.75, 0.2, 0.98]
    assert b["rows"][0][0] == "probe at hidden state 2 (chosen on validation traces)"
    # 10 traces: the first 5 fit, the next 2 (up to 3 * 10 // 4 = 7) choose the layer, 3 test
    assert b["rows"][1][2:] == [12, 3]
    p = probe_bench.paired_table(rec)
    assert p["rows"] == [
        ["probe (hidden state 2) − position only", -0.125, -0.2, -0.06, "< 0.0005"]
    ]
    assert probe_bench.paired_table(_probe_record(0.0125))["rows"][0][-1] == 0.0125
    assert probe_bench._test_traces(60) == 15


def test_probe_cli_arguments():
    argv = probe_bench.cli_argv("m.gguf", 60, "/w", ["seed=1"])
    assert argv == ["dycon", "train", "--config", "default", "--workdir", "/w",
                    "--set", "checkpoint=m.gguf", "--set", "checkpoint_traces=60",
                    "--set", "seed=1"]  # fmt: skip


def _arm(name, tokens, correct, checks):
    return {"name": name, "tokens": tokens, "correct": correct, "checks": checks,
            "texts": [""] * len(tokens)}  # fmt: skip


def _test(mean, lo, hi, p):
    return {"mean": mean, "ci95": [lo, hi], "wilcoxon_p": p}


def _control_record():
    arms = [
        _arm("none", [10, 20, 30, 40], [True, False, False, False], [2, 2, 3, 1]),
        _arm("dycon lam=8 tau=1", [8, 16, 30, 30], [True, False, False, False], [1, 1, 3, 0]),
        _arm("constant c=0.5", [10, 20, 28, 40], [True, False, False, False], [2, 2, 2, 1]),
        _arm("constant c=1", [8, 18, 30, 32], [False, False, False, False], [1, 2, 3, 0]),
    ]
    paired = {
        "dycon lam=8 tau=1 - none": {
            "tokens": _test(-4.0, -8.0, -0.5, 0.1), "checks": _test(-0.75, -1.25, -0.25, 0.1),
            "accuracy": {"difference": 0.0, "a_only": 0, "b_only": 0, "mcnemar_p": 1.0},
        },
        "dycon lam=8 tau=1 - constant c=1": {
            "tokens": _test(-1.0, -3.0, 0.0, 0.5), "checks": _test(-0.25, -0.5, 0.0, 0.32),
            "accuracy": {"difference": 0.25, "a_only": 1, "b_only": 0, "mcnemar_p": 1.0},
        },
    }  # fmt: skip
    probe = {"layer": 3, "intercept": 0.1, "r2_heldout": [0.0, 0.4, 0.5, 0.6, 0.55],
             "r2_shuffled": [0.0, -0.1, -0.2, -0.3, -0.4], "num_traces": 4,
             "num_boundaries": 12}  # fmt: skip
    return {"arms": arms, "paired": paired, "probe": probe, "items": [], "seconds": 1.0}


def test_control_arms_table():
    t = control_bench.arms_table(_control_record())
    assert [r[0] for r in t["rows"]] == ["no control", "DyCon λ = 8, τ = 1", "constant c = 0.5",
                                         "constant c = 1"]  # fmt: skip
    none = t["rows"][0]
    # tokens 10, 20, 30, 40: mean 25, SD sqrt(500 / 3), SE sqrt(500 / 3 / 4)
    assert none[1] == pytest.approx([25.0, (500 / 12) ** 0.5])
    assert none[2:5] == [2.0, 0.25, "1/4"]
    assert none[5] is None
    assert t["rows"][3][3] == 0.0 and t["rows"][3][4] == "0/4"
    assert t["rows"][3][5] == "DyCon λ = 8, τ = 1"  # the matched constant
    assert t["rows"][2][5] is None
    assert len(t["formats"]) == len(t["columns"]) == len(t["rows"][0])


def test_control_paired_and_probe_tables():
    rec = _control_record()
    t = control_bench.paired_table(rec)
    assert t["rows"][0] == ["DyCon λ = 8, τ = 1 − no control", -4.0, -8.0, -0.5, 0.1,
                            -0.75, -1.25, -0.25, 0.1, 0.0, 1.0]  # fmt: skip
    assert t["rows"][1][0] == "DyCon λ = 8, τ = 1 − constant c = 1"
    assert t["rows"][1][-2] == 0.25
    assert len(t["formats"]) == len(t["columns"]) == len(t["rows"][0])
    p = control_bench.probe_table(rec)
    assert p["rows"] == [["hidden state 3 (after block 2), the best on the held-out half",
                          5, 0.6, -0.3, 4, 12]]  # fmt: skip
    assert control_bench.arm_label("dycon lam=8 tau=0.5") == "DyCon λ = 8, τ = 0.5"


def test_files_render_and_retable(tmp_path, monkeypatch):
    monkeypatch.setenv("FIDIA_COMMIT", "abc123")
    out = tmp_path / "dycon_checkpoint_control.json"
    rec = _control_record()
    results.write_results("x", control_bench.tables_of(rec), command="python c.py", extra=rec,
                          out=out)  # fmt: skip
    doc = json.loads(out.read_text())
    lines = rt.render(doc, "benchmarks/results/dycon_checkpoint_control.json", "paired")
    assert "`python c.py`" in lines[1]
    assert lines[5].startswith("| DyCon λ = 8, τ = 1 − no control | -4.0 | -8.0 | -0.5 | 0.1 |")
    arms = rt.render(doc, "benchmarks/results/dycon_checkpoint_control.json", "arms")
    assert arms[5] == "| no control | 25.0 ± 6.5 | 2.00 | 0.250 | 1/4 | — |"
    # --report: the tables rebuilt from the raw record, the caption kept
    doc["tables"] = {}
    out.write_text(json.dumps(doc))
    control_bench.main(["--report", str(out)])
    again = json.loads(out.read_text())
    assert again["tables"]["arms"]["rows"][0][0] == "no control"
    assert again["command"] == "python c.py"
    pout = tmp_path / "dycon_checkpoint.json"
    prec = _probe_record()
    results.write_results("y", probe_bench.tables_of(prec), command="python p.py", extra=prec,
                          out=pout)  # fmt: skip
    pdoc = json.loads(pout.read_text())
    plines = rt.render(pdoc, "benchmarks/results/dycon_checkpoint.json", "paired")
    assert (
        plines[5]
        == "| probe (hidden state 2) − position only | -0.125 | -0.200 | -0.060 | < 0.0005 |"
    )
    probe_bench.main(["--report", str(pout)])
    assert json.loads(pout.read_text())["tables"] == pdoc["tables"]
