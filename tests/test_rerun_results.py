"""``tools/rerun_results.py``: the one command that remakes every results file the docs cite
(issue 41). On a made-up repository in a temporary folder: which files are cited, what each
command needs, the order, and a whole ``--run`` that rewrites a file and re-renders its page."""

from __future__ import annotations

import json
import pathlib

import pytest
from _scripts import load_script

rr = load_script("tools/rerun_results.py")


def _results(root: pathlib.Path, name: str, command: str, value: float = 1.0, **extra) -> None:
    path = root / "benchmarks" / "results" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "command": command, "date": "2026-12-05 00:00 UTC", "machine": "Linux x86_64, 2 CPUs",
        "commit": "abc", "load_average": "1 -> 1",
        "tables": {"t": {"columns": ["x"], "rows": [[value]]}}, **extra}))  # fmt: skip


def _page(root: pathlib.Path, name: str, *files: str) -> None:
    docs = root / "docs"
    docs.mkdir(exist_ok=True)
    regions = "".join(f"<!-- results: benchmarks/results/{f}.json table=t -->\n<!-- /results -->\n"
                      for f in files)  # fmt: skip
    (docs / f"{name}.md").write_text(f"# {name}\n\n{regions}")


@pytest.fixture
def repo(tmp_path):
    exists = tmp_path / "peer" / "bin"
    exists.mkdir(parents=True)
    (exists / "python").write_text("")
    _results(tmp_path, "a", "python benchmarks/a.py --out benchmarks/results/a.json "
                            "(via python benchmarks/run_all.py --only a)")  # fmt: skip
    _results(tmp_path, "b", "python benchmarks/b.py --compare benchmarks/results/a.json")
    _results(tmp_path, "c", f"python benchmarks/c.py --peer {exists}/python --workdir /tmp/run_c")
    _results(tmp_path, "d", "python benchmarks/d.py --peer /tmp/peer_mpnn_torch_absent/bin/python")
    _results(
        tmp_path, "g", "python benchmarks/g.py", machine="Linux, jax 0.11 gpu, 1 x NVIDIA H200"
    )
    _page(tmp_path, "one", "b", "a")
    _page(tmp_path, "two", "c", "d", "g", "a")
    return tmp_path


def test_plan_lists_cited_files_with_their_pages_and_what_they_lack(repo):
    steps = {pathlib.Path(s.results).stem: s for s in rr.plan(repo)}
    assert set(steps) == {"a", "b", "c", "d", "g"}
    assert steps["a"].pages == ("docs/one.md", "docs/two.md")
    assert steps["a"].command == "python benchmarks/a.py --out benchmarks/results/a.json"
    assert steps["a"].missing == () and steps["c"].missing == ()  # /tmp/run_c is an output
    assert steps["d"].missing == ("needs /tmp/peer_mpnn_torch_absent/bin/python "
                                  "(build it with tools/mpnn_make_peer_venvs.sh)",)  # fmt: skip
    assert "pass --gpu" in steps["g"].missing[0]
    assert rr.plan(repo, gpu=True, only=["g"])[0].missing == ()


def test_a_command_that_reads_other_cited_files_runs_after_them(repo):
    order = [pathlib.Path(s.results).stem for s in rr.plan(repo)]
    assert order.index("b") > order.index("a") and order[-1] == "b"


def test_unknown_name_in_only_is_refused_with_the_cited_names(repo):
    with pytest.raises(SystemExit, match="not a cited results file: nope"):
        rr.plan(repo, only=["nope"])


def test_run_remakes_the_file_and_renders_the_page_and_reports_the_skipped(repo):
    writer = repo / "benchmarks" / "a.py"
    writer.write_text(
        "import json, pathlib\n"
        "p = pathlib.Path('benchmarks/results/a.json')\n"
        "d = json.loads(p.read_text()); d['tables']['t']['rows'] = [[42.0]]\n"
        "p.write_text(json.dumps(d))\n"
    )
    code = rr.main(["--run", "--only", "a,d"], root=repo)
    assert code == 1  # d was skipped: its peer is missing
    assert "| 42 |" in (repo / "docs" / "one.md").read_text()
    assert "| 42 |" in (repo / "docs" / "two.md").read_text()
