"""Every table of measured numbers in docs/ is rendered from its results file (issue 41).

``tools/render_tables.py --check`` on the repository: a page whose marked region differs from
its ``benchmarks/results/*.json`` (a hand-typed number, a stale row) or whose file is missing or
git-ignored fails here, so CI fails. The rest tests the renderer on a temporary page."""

from __future__ import annotations

import json
import pathlib

import pytest
from _scripts import load_script

ROOT = pathlib.Path(__file__).resolve().parent.parent


rt = load_script("tools/render_tables.py")
results_lib = load_script("benchmarks/_results.py")


def test_repository_pages_agree_with_their_results_files(capsys):
    rc = rt.run(ROOT, write=False)
    assert rc == 0, capsys.readouterr().err


def _results(tmp_path, rows=((1000, 0.0123, "a|b"), (3000, None, "c"))):
    path = tmp_path / "benchmarks" / "results" / "demo.json"
    written = results_lib.write_results(
        "demo",
        {"t": {"columns": ["spots", "time (s)", "note"], "rows": [list(r) for r in rows],
               "formats": [None, ".3f", None]},
         "u": {"columns": ["x"], "rows": [[[0.9171, 0.0042]]], "formats": [".3f"]}},
        command="python benchmarks/demo.py --sizes 1000,3000", load_start=1.5, out=path,
    )  # fmt: skip
    assert written == path
    return path


def _page(tmp_path, body="| stale |\n"):
    page = tmp_path / "docs" / "p.md"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(
        "# P\n\nText 0.5 stays.\n\n<!-- results: benchmarks/results/demo.json table=t -->\n"
        f"{body}<!-- /results -->\n\nAfter.\n"
    )
    return page


def test_write_then_check_round_trip(tmp_path):
    _results(tmp_path)
    page = _page(tmp_path)
    problems = rt.process_page(page, tmp_path, write=False, check_ignored=False)
    assert len(problems) == 1 and "differs from benchmarks/results/demo.json" in problems[0]
    assert "-| stale |" in problems[0]  # the diff names the stale line
    assert rt.process_page(page, tmp_path, write=True, check_ignored=False) == []
    text = page.read_text()
    assert text.startswith("# P\n\nText 0.5 stays.\n\n<!-- results:") and text.endswith(
        "<!-- /results -->\n\nAfter.\n"
    )
    assert "| spots | time (s) | note |\n|---|---|---|\n" in text
    assert "| 1000 | 0.012 | a\\|b |\n| 3000 | — | c |\n" in text  # format, null, escaped pipe
    caption = next(line for line in text.splitlines() if line.startswith("*`"))
    assert caption.startswith("*`python benchmarks/demo.py --sizes 1000,3000` · ")
    assert " UTC · " in caption and " CPUs" in caption and " · commit `" in caption
    assert "load average 1.5 -> " in caption and "(table `t`)" in caption
    assert rt.process_page(page, tmp_path, write=False, check_ignored=False) == []


def test_a_hand_edited_number_is_caught(tmp_path):
    _results(tmp_path)
    page = _page(tmp_path)
    rt.process_page(page, tmp_path, write=True, check_ignored=False)
    page.write_text(page.read_text().replace("| 0.012 |", "| 0.011 |"))
    (problem,) = rt.process_page(page, tmp_path, write=False, check_ignored=False)
    assert "-| 1000 | 0.011 | a\\|b |" in problem and "+| 1000 | 0.012 | a\\|b |" in problem


def test_a_new_run_makes_the_page_stale(tmp_path):
    _results(tmp_path)
    page = _page(tmp_path)
    rt.process_page(page, tmp_path, write=True, check_ignored=False)
    _results(tmp_path, rows=((1000, 0.0456, "a|b"),))  # the benchmark re-ran
    (problem,) = rt.process_page(page, tmp_path, write=False, check_ignored=False)
    assert "differs" in problem and "+| 1000 | 0.046 |" in problem


def test_missing_file_table_and_markers_are_reported(tmp_path):
    page = _page(tmp_path)
    (problem,) = rt.process_page(page, tmp_path, write=False, check_ignored=False)
    assert "p.md:5: results file benchmarks/results/demo.json is missing" in problem
    _results(tmp_path)
    page.write_text(page.read_text().replace("table=t", "table=nope"))
    (problem,) = rt.process_page(page, tmp_path, write=False, check_ignored=False)
    assert "has no table 'nope'" in problem
    page.write_text(page.read_text().replace(" table=nope", ""))  # two tables: name one
    (problem,) = rt.process_page(page, tmp_path, write=False, check_ignored=False)
    assert "name one with table=<key>" in problem
    page.write_text("<!-- results: benchmarks/results/demo.json table=t -->\nno end\n")
    (problem,) = rt.process_page(page, tmp_path, write=False, check_ignored=False)
    assert "has no '<!-- /results -->'" in problem


def test_mean_spread_cells_and_written_file(tmp_path):
    path = _results(tmp_path)
    doc = json.loads(path.read_text())
    assert set(doc) >= {"command", "date", "machine", "commit", "load_average", "tables"}
    assert doc["commit"] == "unknown" or len(doc["commit"].split("+")[0]) == 40
    lines = rt.render(doc, "benchmarks/results/demo.json", "u")
    assert lines[-2] == "| 0.917 ± 0.004 |"


def test_write_results_rejects_bad_tables(tmp_path):
    with pytest.raises(ValueError, match="row 0 has 1 cells for 2 columns"):
        results_lib.write_results("x", {"t": {"columns": ["a", "b"], "rows": [[1]]}},
                                  out=tmp_path / "x.json")  # fmt: skip
    with pytest.raises(ValueError, match="non-finite"):
        results_lib.write_results("x", {"t": {"columns": ["a"], "rows": [[float("nan")]]}},
                                  out=tmp_path / "x.json")  # fmt: skip
    assert not (tmp_path / "x.json").exists()


def test_check_cli_exit_code(tmp_path, monkeypatch):
    _results(tmp_path)
    page = _page(tmp_path)
    monkeypatch.setattr(rt, "ROOT", tmp_path)
    assert rt.main(["--check", str(page)]) == 1
    assert rt.main(["--write", str(page)]) == 0
    assert rt.main(["--check", str(page)]) == 0
