"""The pure parts of ``benchmarks/lm_methods.py`` and ``benchmarks/lm_load.py`` (issue 39): the
silence and load-time parsers on synthetic timestamped logs, the goal verdict, the table of
``lm_load.py --retable``, and ``_peers.run_timestamped`` timing lines as they arrive."""

import json
import os
import pathlib
import sys

import pytest
from _scripts import load_script

BENCH = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name):
    return load_script(f"benchmarks/{name}.py")


@pytest.fixture(scope="module")
def bench():
    return _load("lm_methods")


def test_longest_gap_between_lines_names_the_line_before(bench):
    lines = [(11.0, "a"), (12.0, "b: compiling …"), (24.5, "c"), (25.0, "d")]
    gap, where, at = bench.longest_gap(10.0, lines, 30.0)
    assert gap == pytest.approx(12.5)
    assert where == "b: compiling …"
    assert at == pytest.approx(2.0)


def test_longest_gap_at_the_start_and_at_the_end(bench):
    gap, where, at = bench.longest_gap(0.0, [(9.0, "first"), (10.0, "second")], 11.0)
    assert (gap, where, at) == (pytest.approx(9.0), "(start)", 0.0)
    gap, where, at = bench.longest_gap(0.0, [(1.0, "first"), (2.0, "last")], 20.0)
    assert (gap, where, at) == (pytest.approx(18.0), "last", pytest.approx(2.0))
    assert bench.longest_gap(5.0, [], 7.5) == (pytest.approx(2.5), "(start)", 0.0)


def _log():
    return [
        (4.0, "fidia-jax dycon train: config default"),
        (4.1, "DyCon: loading the tokenizer of /m.gguf …"),
        (5.0, "load_tokenizer: loaded from cache /c/gguf-tokenizer-1 in 0.6 s"),
        (5.1, "  DyCon: loading the tokenizer of /m.gguf: done in 1.0 s"),
        (5.2, "DyCon: loading the weights of /m.gguf …"),
        (9.0, "load_gguf: loaded from cache /c/gguf-model-1 in 3.2 s"),
        (9.4, "  DyCon: loading the weights of /m.gguf: done in 4.2 s"),
        (9.5, "DyCon: residual stream: compiling …"),
    ]


def test_load_time_from_the_stage_lines(bench):
    out = bench.load_time(_log())
    assert out["load_s"] == pytest.approx(5.3)
    assert out["from"].startswith("DyCon: loading the tokenizer")
    assert out["to"].endswith("done in 4.2 s")
    assert out["cache_s"] == pytest.approx(3.8)


def test_load_time_without_a_weights_stage_ends_at_the_line_after_the_cache_hit(bench):
    lines = [
        (1.0, "SafeSci: reading the tokenizer of m.gguf …"),
        (2.0, "load_gguf: loaded from cache /c/x in 7.5 s"),
        (6.0, "SafeSci: model 'checkpoint' on 4 records …"),
    ]
    out = bench.load_time(lines)
    assert out["load_s"] == pytest.approx(5.0) and out["cache_s"] == pytest.approx(7.5)
    assert bench.load_time([(1.0, "training …"), (2.0, "done")])["load_s"] is None


def test_goal_verdict(bench):
    assert bench.goal_verdict(4.6, 8.2, True, 0) == "met"
    assert bench.goal_verdict(15.0, 8.2, True, 0) == "not met: load >= 15 s"
    assert bench.goal_verdict(3.0, 10.5, False, 1) == (
        "not met: exit 1, silence > 10 s, figure missing"
    )
    assert bench.goal_verdict(None, 1.0, True, 0) == "not met: load not found"


def test_table_has_one_row_per_method_in_order(bench):
    run = {
        "settings": {"checkpoint": "PATH", "checkpoint_traces": "8"},
        "load": {"load_s": 4.6, "cache_s": 3.8},
        "longest_silence_s": 12.0,
        "silence_after": "x | y",
        "wall_s": 30.0,
        "cpu_s": 20.0,
        "figures": {"a.png": True, "b.png": False},
        "exit": 0,
        "load_average": "3.0 -> 4.0",
        "goal": "not met: silence > 10 s, figure missing",
    }
    t = bench.table({"safesci": run, "dycon": run})
    assert [r[0] for r in t["rows"]] == ["dycon", "safesci"]
    row = t["rows"][0]
    assert len(row) == len(t["columns"]) == len(t["formats"])
    assert row[1] == "checkpoint_traces=8" and row[8] == "no: b.png"


def test_run_timestamped_times_lines_as_they_arrive(tmp_path):
    peers = _load("_peers")
    code = (
        "import time; print('one', flush=True); time.sleep(0.4); print('two'); raise SystemExit(3)"
    )
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    run = peers.run_timestamped([sys.executable, "-c", code], env=env, cwd=tmp_path)
    assert [s for _, s in run.lines] == ["one", "two"] and run.returncode == 3
    assert run.lines[1][0] - run.lines[0][0] >= 0.35
    assert run.start <= run.lines[0][0] <= run.end and run.cpu_s >= 0.0


def test_lm_load_retable_keeps_the_original_caption(tmp_path):
    lm_load = _load("lm_load")
    runs = [
        {"mode": "uncached", "load_wall_s": 144.3, "load_cpu_s": 26.6, "import_wall_s": 12.9,
         "peak_rss_mib": 3440.9, "loadavg_before": [23.5, 1, 1], "loadavg_after": [26.5, 1, 1],
         "messages": []},
        {"mode": "warm1", "load_wall_s": 10.2, "load_cpu_s": 2.1, "import_wall_s": 6.5,
         "peak_rss_mib": 2466.2, "loadavg_before": [18.0, 1, 1], "loadavg_after": [19.5, 1, 1],
         "messages": ["load_gguf: loaded from cache /c/m in 7.2 s",
                      "load_tokenizer: loaded from cache /c/t in 2.1 s"]},
    ]  # fmt: skip
    record = {
        "command": "python benchmarks/lm_load.py X.gguf",
        "date": "2026-12-04T15:35:10Z",
        "git_commit": "abc",
        "git_uncommitted": ["M x.py"],
        "machine": {"platform": "Linux-x", "cpu_count": 2, "affinity": 2, "python": "3.11.7"},
        "runs": runs,
    }
    out = tmp_path / "lm_load.json"
    out.write_text(json.dumps(record))
    assert lm_load.main(["--retable", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["command"] == record["command"] and doc["date"] == "2026-12-04 15:35 UTC"
    assert doc["commit"] == "abc+dirty" and doc["load_average"] == "23.5 -> 19.5"
    assert doc["machine"].startswith("Linux-x, 2 CPUs") and doc["machine_details"]["python"]
    rows = doc["tables"]["loads"]["rows"]
    assert [r[0] for r in rows] == ["uncached", "warm1"]
    assert rows[0][5] is None and rows[1][5] == pytest.approx(9.3)
    assert rows[1][2:5] == [10.2, 2.1, 6.5] and rows[1][6] == 2466.2
    first = out.read_text()
    lm_load.main(["--retable", "--out", str(out)])
    assert out.read_text() == first  # re-deriving again changes nothing
