"""The tables of the ProteinMPNN speed benchmarks (issues 41 and 44): per-round ratios against
the original, the goals' verdicts, and ``--retable`` keeping the run's own caption.

The numbers are made up; each expected value is worked out by hand below."""

from __future__ import annotations

import json

import pytest
from _scripts import load_script


def _script(name):
    return load_script(f"benchmarks/{name}.py")


CAPTION = {
    "command": "python benchmarks/x.py --rounds 2",
    "date": "2026-12-04 21:01 UTC",
    "machine": "Linux x86_64, 2 CPUs (test)",
    "commit": "abc+dirty",
    "load_average": "0.35 -> 1.26",
}


def test_one_backbone_ratios_are_per_round_and_judged_on_both_times(tmp_path):
    one = _script("mpnn_one_backbone")
    runs = {  # [wall, cpu] per round
        "original": [[16.0, 30.0], [12.0, 24.0]],
        "cold": [[4.0, 5.0], [2.0, 4.0]],  # wall ratios 4, 6 -> median 5; cpu 6, 6
        "warm": [[2.0, 3.0], [1.0, 3.0]],  # wall 8, 12 -> 10; cpu 10, 8 -> 9
    }
    rows = {r[0]: r for r in one.one_backbone_table(runs)["rows"]}
    cold, warm = rows["fidia_jax cold"], rows["fidia_jax warm"]
    assert cold[1] == 2 and cold[2:5] == [2.0, 3.0, 4.0] and cold[5:8] == [4.0, 4.5, 5.0]
    assert cold[8] == pytest.approx(5.0) and cold[9] == pytest.approx(6.0)
    assert cold[10].startswith("met")
    assert warm[8] == pytest.approx(10.0) and warm[9] == pytest.approx(9.0)
    assert warm[10].startswith("met")
    runs["warm"][1] = [1.0, 4.0]  # cpu ratios 10, 6 -> median 8: still >= 8
    assert one.one_backbone_table(runs)["rows"][2][10].startswith("met")
    runs["warm"][1] = [1.0, 5.0]  # cpu 10, 4.8 -> 7.4 < 8: the CPU side fails the goal
    assert one.one_backbone_table(runs)["rows"][2][10].startswith("not met")
    assert rows["original (protein_mpnn_run.py)"][8:] == [None, None, None]

    out = tmp_path / "one.json"
    out.write_text(json.dumps({**CAPTION, "runs_wall_cpu_s": runs, "rounds": 2}))
    assert one.main(["--retable", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert {k: doc[k] for k in CAPTION} == CAPTION and doc["rounds"] == 2
    assert doc["tables"]["one_backbone"]["rows"][2][10].startswith("not met")


def _tool(wall, cpu, recovery):
    return {"wall_s": wall, "cpu_s": cpu, "recovery": recovery,
            "recovery_wilcoxon_p_vs_fidia": None}  # fmt: skip


def test_throughput_goal_is_judged_only_on_the_full_protocol(tmp_path):
    tp = _script("mpnn_design_throughput")
    record = {
        **CAPTION,
        "backbones": [f"b{i}" for i in range(80)],
        "smoke": False,
        "tools": {
            "original (torch CPU)": _tool(1000.0, 1900.0, 0.446),
            "ColabDesign 1.1.1": _tool(600.0, None, 0.447),
            "fidia_jax": _tool(100.0, 180.0, 0.444),
        },
    }
    rows = {r[0]: r for r in tp.throughput_table(record)["rows"]}
    orig = rows["original (torch CPU)"]
    assert orig[4] == pytest.approx(3600 * 80 / 1000.0) and orig[5] == pytest.approx(10.0)
    assert orig[6] == pytest.approx(1900.0 / 180.0) and orig[8] == pytest.approx(0.002)
    assert orig[10].startswith("met")  # 10.0x wall and 10.6x CPU
    assert rows["ColabDesign 1.1.1"][6] is None and rows["ColabDesign 1.1.1"][10] is None
    record["tools"]["original (torch CPU)"]["cpu_s"] = 1700.0  # 9.4x in CPU time
    assert tp.throughput_table(record)["rows"][0][10].startswith("not met")
    record["backbones"] = record["backbones"][:8]  # a --quick run is not judged
    assert tp.throughput_table(record)["rows"][0][10] is None

    out = tmp_path / "tp.json"
    out.write_text(json.dumps(record))
    assert tp.main(["--retable", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert {k: doc[k] for k in CAPTION} == CAPTION and len(doc["tables"]["throughput"]["rows"]) == 3


def test_sampling_ratio_is_against_the_fastest_torch_configuration():
    sampling = _script("mpnn_sampling")
    raw = {
        "num_samples": 16,
        "fidia_times_s": [2.0, 4.0, 3.0],  # median 3 s -> 16/3 seq/s
        "torch": [
            {"version": "2.13", "threads": 1, "times_s": [24.0]},
            {"version": "2.13", "threads": 2, "times_s": [16.0, 48.0]},  # median 32 s
        ],
    }
    rows = sampling.sampling_table(raw)["rows"]
    assert rows[0][1:5] == [3, 2.0, 3.0, 4.0]
    assert rows[0][5] == pytest.approx(16 / 3) and rows[0][6] == pytest.approx(24.0 / 3.0)
    assert rows[2][3] == 32.0 and rows[1][6] is None
    raw["torch"] = []
    assert sampling.sampling_table(raw)["rows"][0][6] is None


def test_log_probs_ratio_is_per_round():
    lp = _script("mpnn_log_probs_many")
    times = {
        "shared_encoder": [[1.0, 2.0], [2.0, 3.0], [4.0, 5.0]],
        "repeated_structures": [[3.0, 6.0], [10.0, 20.0], [4.0, 8.0]],  # ratios 3, 5, 1
    }
    rows = lp.log_probs_table(times)["rows"]
    assert rows[0][1:6] == [3, 1.0, 2.0, 4.0, 3.0] and rows[0][6] == pytest.approx(3.0)
    assert rows[1][6] == pytest.approx(1.0)
