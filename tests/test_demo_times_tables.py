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


def test_causal_demo_table_ranks_the_methods_by_sqrt_pehe():
    summary = {"dataset": "ihdp", "summary": {"2": {
        "tarnet": {"sqrt_pehe_mean": 1.48, "ate_error_mean": 0.04},
        "s_gbm": {"sqrt_pehe_mean": 0.54, "ate_error_mean": 0.002}}}}  # fmt: skip
    causal = {"project": "causal", "command": "fidia-jax causal demo", "exit": 0, "wall": 60.0,
              "cpu": 90.0, "longest_gap": 7.5, "tail": [], "summary": summary}  # fmt: skip
    t = dt.tables({"runs": [causal]})["causal_demo"]
    assert t["rows"] == [["`s_gbm`", 0.54, 0.002], ["`tarnet`", 1.48, 0.04]]


def test_the_committed_causal_demo_equals_the_headline_benchmarks_replication_1():
    """docs/causal.md says the demo prints the headline table's replication-1 values: the two
    committed results files (two runs, two processes) must agree to the last digit when one
    machine made both, and to 1e-5 relative when the CPUs differ (XLA:CPU generates other code
    for another instruction set, so float rounding differs; 2026-12-05: 4e-7 relative)."""
    import json
    import pathlib

    results = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "results"
    demo = json.loads((results / "demo_times.json").read_text())
    (run,) = [r for r in demo["runs"] if r["project"] == "causal"]
    (by_method,) = run["summary"]["summary"].values()
    headline = json.loads((results / "causal_headline.json").read_text())
    per_rep = headline["tables"]["per_replication"]
    rel = 1e-9 if demo["machine"] == headline["machine"] else 1e-5
    cols, rep1 = per_rep["columns"], per_rep["rows"][0]
    assert rep1[0] == 1
    compared = 0
    for i, col in enumerate(cols):
        name = col.strip("`")
        if col.startswith("`") and name in by_method:
            assert by_method[name]["sqrt_pehe_mean"] == pytest.approx(rep1[i], rel=rel), name
            compared += 1
    assert compared >= 5


def test_unknown_or_partial_project_lists_are_refused_before_any_run(tmp_path):
    with pytest.raises(SystemExit):
        dt.main(["--projects", "nope"])
    with pytest.raises(SystemExit):  # a subset must not replace the committed file
        dt.main(["--projects", "hist"])


def test_every_projects_demo_is_timed():
    """``DEMOS`` holds exactly the projects whose command line has a ``demo`` verb (the CLI's
    own parser, one project at a time), so a new demo cannot go untimed."""
    from fidia_jax import cli
    from fidia_jax.projects import PROJECTS

    with_demo = set()
    for name in PROJECTS:
        project = cli._parser(name, help_only=True)._subparsers._group_actions[0].choices[name]
        verbs = project._subparsers._group_actions[0].choices
        if "demo" in verbs:
            with_demo.add(name)
    assert "proteinmpnn" not in with_demo and "td" in with_demo  # the check sees both kinds
    assert set(dt.DEMOS) == with_demo
