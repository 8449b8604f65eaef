"""The demo-time benchmark's tables (issue 41): ``benchmarks/demo_times.py`` writes the rows that
docs/optim.md, docs/multifidelity.md and docs/dycon.md render. No demo runs: the record is made
up, except one short fake process for the gap measurement."""

from __future__ import annotations

import sys

import pytest
from _scripts import load_script

dt = load_script("benchmarks/demo_times.py")

RUNS = [
    {"project": "optimizers", "command": "fidia-jax optimizers demo", "exit": 0, "wall": 61.2,
     "cpu": 90.4, "longest_gap": 3.25, "tail": []},
    {"project": "dycon", "command": "fidia-jax dycon demo", "exit": 1, "wall": 5.0, "cpu": 4.0,
     "longest_gap": 12.0, "tail": []},
]  # fmt: skip


def test_one_table_of_every_demo_and_one_per_project():
    t = dt.tables({"runs": RUNS})
    assert set(t) == {"demos", "optimizers", "dycon"}
    assert t["demos"]["rows"] == [
        ["`fidia-jax optimizers demo`", 0, 61.2, 90.4, 3.25],
        ["`fidia-jax dycon demo`", 1, 5.0, 4.0, 12.0],
    ]
    assert t["dycon"]["rows"] == [t["demos"]["rows"][1]]
    assert len(t["demos"]["columns"]) == len(t["demos"]["formats"]) == 5


def test_longest_silence_is_the_largest_gap_between_output_lines(tmp_path, monkeypatch):
    """A fake ``fidia-jax`` that prints, sleeps 1.2 s, prints: the longest gap is about 1.2 s."""
    fake = tmp_path / "bin"
    fake.mkdir()
    script = fake / "fidia-jax"
    script.write_text(f"#!{sys.executable}\nimport time\nprint('a', flush=True)\n"
                      "time.sleep(1.2)\nprint('b', flush=True)\n")  # fmt: skip
    script.chmod(0o755)
    monkeypatch.setattr(dt.sys, "executable", str(fake / "python"))
    r = dt.run_demo("optimizers", tmp_path, None)
    assert r["exit"] == 0 and r["command"] == "fidia-jax optimizers demo"
    assert r["longest_gap"] == pytest.approx(1.2, abs=0.5)
    assert r["tail"] == ["a", "b"]


def test_fidia_demo_table_from_the_demos_summary_only_when_it_ran():
    stats = {"max@1": -0.04, "max@8": 1.5, "max@32": 2.0, "success@8": 0.25, "precision": 0.0625,
             "identity": 0.6, "recovery": 0.46, "unique": 1.0}  # fmt: skip
    after = {**stats, "max@1": 3.4}
    fidia = {"project": "fidia", "command": "fidia-jax fidia demo", "exit": 0, "wall": 61.0,
             "cpu": 91.0, "longest_gap": 8.0, "tail": [],
             "summary": {"before": stats, "after": after}}  # fmt: skip
    t = dt.tables({"runs": [*RUNS, fidia]})["fidia_demo"]
    assert t["columns"][1] == "max@1" and t["columns"][4] == "success@8 (proxy)"
    assert t["rows"] == [
        ["ProteinMPNN (before)", -0.04, 1.5, 2.0, 0.25, 0.0625, 0.6, 0.46],
        ["FIDIA (after)", 3.4, 1.5, 2.0, 0.25, 0.0625, 0.6, 0.46],
    ]
    failed = {**fidia, "exit": 1}
    assert "fidia_demo" not in dt.tables({"runs": [failed]})
