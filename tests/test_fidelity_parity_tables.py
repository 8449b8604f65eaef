"""The fidelity parity table (issue 41): ``benchmarks/fidelity_parity.py`` measures the
assertions of the fixture tests and writes the rows that docs/fidelity.md renders from
``benchmarks/results/fidelity_parity.json``. No fixture test runs here: the measurements are
made on small hand-worked values, the records are made up."""

from __future__ import annotations

import ast
import json

import numpy as np
import pytest
from _scripts import ROOT, assert_report_retables, load_script

fp = load_script("benchmarks/fidelity_parity.py")
render = load_script("tools/render_tables.py")


# ---------------------------------------------------------------- what one assertion measures
def test_tolerance_stats_measure_what_assert_allclose_allows():
    # |a - d| = 0.5, 0, 0 (NaN = NaN); allowed = 0.2 + 0.1 |d| = 0.35, 0.4
    s = fp.tolerance_stats([1.0, 2.0, np.nan], [1.5, 2.0, np.nan], 0.1, 0.2)
    assert s["kind"] == "tolerance" and s["elements"] == 3
    assert s["max_abs"] == pytest.approx(0.5)
    assert s["max_rel"] == pytest.approx(0.5 / 1.5)
    assert s["share"] == pytest.approx(0.5 / 0.35)  # > 1: assert_allclose fails here
    assert s["rtol"] == [0.1, 0.1] and s["atol"] == [0.2, 0.2]
    # a difference where nothing is allowed, or NaN on one side only: no finite share
    assert fp.tolerance_stats([1.0, 1.0], [1.0, 2.0], 0, 0)["share"] == "inf"
    assert fp.tolerance_stats([np.nan], [1.0], 0, 1.0)["share"] == "inf"
    assert fp.tolerance_stats([1.0], [1.0], 0, 0)["share"] == 0.0
    # an array atol: its range is kept; a scalar against an array broadcasts
    s = fp.tolerance_stats([1.0, 1.0], 1.25, 0, np.array([0.5, 1.0]))
    assert s["atol"] == [0.5, 1.0] and s["share"] == pytest.approx(0.5) and s["elements"] == 2


def test_exact_stats_count_unequal_elements():
    assert fp.exact_stats([1, 2, 3], [1, 0, 3]) == {"kind": "exact", "elements": 3, "mismatches": 1}
    assert fp.exact_stats([1.0, np.nan], [1.0, np.nan])["mismatches"] == 0  # NaN equals NaN
    assert fp.exact_stats(np.array([True, None], object), [True, False])["mismatches"] == 1
    assert fp.exact_stats([[1, 2]], 1)["mismatches"] == 1  # broadcast like assert_array_equal
    assert fp.exact_stats([1, 2, 3], [1, 2])["mismatches"] == 3  # shapes that never match


def test_approx_and_bound_stats():
    s = fp.approx_stats(pytest.approx(2.0, rel=1e-3), 2.0005)  # tolerance 2e-3
    assert s["max_abs"] == pytest.approx(5e-4) and s["share"] == pytest.approx(0.25)
    assert s["rtol"] == [1e-3, 1e-3] and s["atol"] == [1e-12, 1e-12]  # pytest's default abs
    s = fp.approx_stats(pytest.approx(2.0, abs=0.1), 2.05)  # abs only: no relative part
    assert s["rtol"] == [0.0, 0.0] and s["share"] == pytest.approx(0.5)
    assert fp.approx_stats(pytest.approx([1.0, 2.0]), [1.0, 2.0]) is None
    s = fp.bound_stats([0.1, 0.3], [0.4, 0.5])
    assert s["share"] == pytest.approx(0.6) and s["bound"] == [0.4, 0.5]
    assert s["max_abs"] == pytest.approx(0.3) and "max_rel" not in s


def test_merge_adds_counts_and_widens_ranges():
    a = fp.tolerance_stats([1.0], [1.1], 0.0, 0.2)  # share 0.5
    b = fp.tolerance_stats([3.0], [3.0], 0.0, 0.05)
    e = fp.exact_stats([1, 2], [1, 3])
    m = fp.merge(fp.merge(fp.merge(None, a), b), e)
    assert (m["calls"], m["elements"], m["mismatches"], m["exact_elements"]) == (3, 4, 1, 2)
    assert m["atol"] == [0.05, 0.2] and m["share"] == pytest.approx(0.5)
    assert m["max_abs"] == pytest.approx(0.1)
    assert fp.merge(m, fp.tolerance_stats([1.0], [2.0], 0, 0))["share"] == "inf"
    assert fp.merge(m, m)["calls"] == 6  # a merged record merges with its counts


# ---------------------------------------------------------------------------------- the words
@pytest.mark.parametrize(
    "x, text",
    [(1e-4, "1e-4"), (2.5e-5, "2.5e-5"), (4.5e-16, "4.5e-16"), (9.96e-5, "1e-4"),
     (0.0039, "0.0039"), (0.005, "0.005"), (0.063, "0.063"), (2.0, "2"), (0.0, "0")],
)  # fmt: skip
def test_numbers_have_two_significant_digits(x, text):
    assert fp._num(x) == text


def test_tolerance_text():
    assert fp.tolerance_text(None) is None
    assert fp.tolerance_text(fp.exact_stats([1], [1])) == "exact"
    s = fp.tolerance_stats([1.0], [1.0], 1e-6, 1e-6)
    assert fp.tolerance_text(s) == "rtol 1e-6, atol 1e-6"
    s = fp.merge(fp.merge(None, fp.tolerance_stats([1.0], [1.0], 0, 1.5e-4)),
                 fp.tolerance_stats([1.0], [1.0], 0, 6.9e-4))  # fmt: skip
    assert fp.tolerance_text(s) == "atol 1.5e-4 to 6.9e-4"  # rtol 0 is not named
    assert (
        fp.tolerance_text(fp.merge(s, fp.exact_stats([1], [1]))) == "exact; atol 1.5e-4 to 6.9e-4"
    )
    assert fp.tolerance_text(fp.bound_stats([0.0], [0.25])) == "bound 0.25"


def _group(items, stats):
    return {"items": items, "stats": stats}


def test_verdict_from_measured_against_tolerance():
    ok = {"t[a]": {"outcome": "passed"}}
    inside = fp.tolerance_stats([1.0], [1.1], 0, 0.2)
    assert fp.verdict(_group(ok, inside)) == "parity"
    assert fp.verdict(_group(ok, fp.tolerance_stats([1.0], [1.3], 0, 0.2))) == "outside tolerance"
    assert fp.verdict(_group(ok, fp.exact_stats([1], [2]))) == "outside tolerance"
    assert fp.verdict(_group(ok, fp.tolerance_stats([1.0], [2.0], 0, 0))) == "outside tolerance"
    assert fp.verdict(_group({"t[a]": {"outcome": "failed"}}, inside)) == "failed: t[a]"
    assert fp.verdict(_group(ok, None)) == "no comparison recorded"
    skipped = {"t[a]": {"outcome": "skipped", "reason": "fixture missing"},
               "t[b]": {"outcome": "skipped", "reason": "fixture missing"}}  # fmt: skip
    assert fp.verdict(_group(skipped, None)) == "not run here: fixture missing"
    assert fp.verdict(_group({}, None)) == "not run here: no test item collected"
    # a share of exactly 1 is inside (assert_allclose allows |a - d| <= atol + rtol |d|)
    assert fp.verdict(_group(ok, fp.tolerance_stats([1.0], [1.25], 0, 0.25))) == "parity"


# ----------------------------------------------------------------------------------- the table
SPEC = (
    fp.Method("m", "Method M", "tests/data/m", (
        fp.Comparison("values", "tests/t.py::test_a", "want"),
        fp.Comparison(None, "tests/t.py::test_a"),
        fp.Comparison("indices", "tests/t.py::test_b"),
        fp.Comparison("indices", "tests/t.py::test_c", fixture="tests/data/m2"),
    )),
    fp.Method("n", "Method N", "../shared/fixtures/n", (
        fp.Comparison("logits", "tests/u.py::test_x"),
    )),
)  # fmt: skip


def _site(source, passed=None, failed=None):
    out = {"source": source}
    if passed is not None:
        out["passed"] = passed
    if failed is not None:
        out["failed"] = failed
    return out


RECORD = {
    "methods": ["m", "n"],
    "items": {
        "tests/t.py::test_a[1]": {"outcome": "passed", "sites": {
            "10": _site("np.testing.assert_allclose(got, want, atol=0.2)",
                        passed=fp.tolerance_stats([1.0], [1.1], 0, 0.2)),  # share 0.5
            # an expected failure inside a passing test (pytest.raises): not counted
            "12": _site("np.testing.assert_allclose(bad, want, atol=0.2)",
                        failed=fp.tolerance_stats([1.0], [9.0], 0, 0.2)),
            "14": _site("np.testing.assert_allclose(ours, ours_again)",  # not a fixture check
                        passed=fp.tolerance_stats([1.0], [2.0], 0, 5.0)),
        }},
        "tests/t.py::test_a[2]": {"outcome": "passed", "sites": {
            "10": _site("np.testing.assert_allclose(got, want, atol=0.2)",
                        passed=fp.tolerance_stats([2.0], [2.05], 0, 0.1)),  # share 0.5
        }},
        "tests/t.py::test_b": {"outcome": "failed", "sites": {
            "20": _site("np.testing.assert_array_equal(idx, ref)",
                        passed=fp.exact_stats([1, 2], [1, 2]), failed=fp.exact_stats([1], [0])),
        }},
        "tests/t.py::test_c": {"outcome": "passed", "sites": {
            "30": _site("np.testing.assert_array_equal(idx, ref)",
                        passed=fp.exact_stats([1, 2, 3], [1, 2, 3])),
        }},
        "tests/u.py::test_x": {"outcome": "skipped", "reason": "wheel not installed", "sites": {}},
    },
}  # fmt: skip


def test_rows_take_each_assertion_once_and_give_the_verdicts():
    t = fp.parity_table(RECORD, SPEC)
    assert t["columns"] == fp.COLUMNS and len(t["formats"]) == len(t["columns"])
    rows = {(r[0], r[1]): r for r in t["rows"]}
    assert [(r[0], r[1]) for r in t["rows"]] == [
        ("Method M", "values"), ("Method M", "indices"), ("Method N", "logits")
    ]  # fmt: skip
    values = rows["Method M", "values"]
    # two items, one passed assertion each (the expected failure and line 14 left out)
    assert values[2:6] == ["`tests/data/m`", 2, 2, "atol 0.1 to 0.2"]
    assert values[6] == pytest.approx(0.1) and values[8] == pytest.approx(0.5)
    assert values[9] is None and values[10] == "parity"
    indices = rows["Method M", "indices"]
    # test_b failed: its failing assertion counts (1 unequal of 1), with the passing ones
    assert indices[3:6] == [2, 3, "exact"]
    assert indices[9] == "1 of 6" and indices[10] == "outside tolerance"
    assert indices[6] is None and indices[8] is None  # nothing toleranced
    logits = rows["Method N", "logits"]
    assert logits[3:5] == [0, 0] and logits[10] == "not run here: wheel not installed"


def test_a_file_that_cannot_be_collected_is_not_run_here():
    record = {"methods": ["n"], "items": {"tests/u.py": {
        "sites": {}, "outcome": "error", "reason": "collection failed: FileNotFoundError: x.npz"}}}  # fmt: skip
    (row,) = fp.parity_table(record, SPEC)["rows"]
    assert row[3] == 0 and row[10] == "not run here: collection failed: FileNotFoundError: x.npz"


def test_a_partial_record_has_the_rows_it_ran():
    t = fp.parity_table({**RECORD, "methods": ["n"]}, SPEC)
    assert [r[0] for r in t["rows"]] == ["Method N"]


def test_written_file_renders_and_re_tables(tmp_path, monkeypatch):
    monkeypatch.setenv("FIDIA_COMMIT", "abc123")
    monkeypatch.setattr(fp, "SPEC", SPEC)
    monkeypatch.setattr(fp, "tables", lambda record: {"parity": fp.parity_table(record, SPEC)})
    out = tmp_path / "fidelity_parity.json"
    fp.write_results("fidelity_parity", fp.tables(RECORD), extra=RECORD, out=out,
                     command="python benchmarks/fidelity_parity.py")  # fmt: skip
    doc = json.loads(out.read_text())
    text = "\n".join(render.render(doc, "fidelity_parity.json", "parity"))
    assert ("| Method M | values | `tests/data/m` | 2 | 2 | atol 0.1 to 0.2 | 1.0e-01 | 9.1e-02 "
            "| 0.5 | — | parity |") in text  # fmt: skip
    assert "| Method M | indices | `tests/data/m` | 2 | 3 | exact | — | — | — | 1 of 6 |" in text
    assert doc["commit"] == "abc123"
    assert_report_retables(fp.main, out, fp.tables(RECORD))


def test_a_line_per_parametrisation_takes_that_item_only():
    spec = (fp.Method("lm", "LM", "tests/data/lm", fp.comparisons("""
        Llama | tests/h.py::test_f[llama] |  | tests/data/lm/llama
        Qwen | tests/h.py::test_f[qwen]
        ids | tests/h.py::test_g | encode
        - | tests/h.py::test_g
    """)),)  # fmt: skip
    assert spec[0].comparisons[0].fixture == "tests/data/lm/llama"
    assert spec[0].comparisons[0].site is None and spec[0].comparisons[3].label is None
    assert fp.selected(spec) == ["tests/h.py::test_f[llama]", "tests/h.py::test_f[qwen]",
                                 "tests/h.py::test_g"]  # fmt: skip
    record = {"methods": ["lm"], "items": {
        "tests/h.py::test_f[llama]": {"outcome": "passed", "sites": {
            "5": _site("np.testing.assert_allclose(got, want, rtol=0, atol=tol)",
                       passed=fp.tolerance_stats([1.0, 2.0], [1.0, 2.1], 0, 0.4)),  # 0.25
            "6": _site("np.testing.assert_array_equal(got.argmax(-1), want.argmax(-1))",
                       passed=fp.exact_stats([3, 1], [3, 1])),
        }},
        "tests/h.py::test_f[qwen]": {"outcome": "failed", "sites": {
            "5": _site("np.testing.assert_allclose(got, want, rtol=0, atol=tol)",
                       failed=fp.tolerance_stats([1.0], [1.5], 0, 0.25)),  # share 2
        }},
        "tests/h.py::test_g": {"outcome": "passed", "sites": {
            "9": _site("np.testing.assert_array_equal(tok.encode(p), ids[i])",
                       passed=fp.exact_stats([2, 7, 9], [2, 7, 9])),
            "11": _site("np.testing.assert_array_equal(other, ids[i])",  # a "-" line
                        passed=fp.exact_stats([1], [1])),
        }},
    }}  # fmt: skip
    rows = {r[1]: r for r in fp.parity_table(record, spec)["rows"]}
    assert list(rows) == ["Llama", "Qwen", "ids"]
    # each parametrisation's line has its own item and assertions only
    assert rows["Llama"][2:6] == ["`tests/data/lm/llama`", 1, 2, "exact; atol 0.4"]
    assert rows["Llama"][8] == pytest.approx(0.25) and rows["Llama"][9] == "0 of 2"
    assert rows["Llama"][10] == "parity"
    assert rows["Qwen"][3:5] == [1, 1] and rows["Qwen"][8] == pytest.approx(2.0)
    assert rows["Qwen"][10] == "outside tolerance"
    assert rows["ids"][3:5] == [1, 1] and rows["ids"][9] == "0 of 3"
    # a file that cannot be collected: every line of that file is not run here
    broken = {"methods": ["lm"], "items": {"tests/h.py": {
        "sites": {}, "outcome": "error", "reason": "collection failed: x"}}}  # fmt: skip
    assert {r[10] for r in fp.parity_table(broken, spec)["rows"]} == {
        "not run here: collection failed: x"
    }


def test_the_caption_names_the_gguf_when_it_is_set(monkeypatch):
    argv = [str(ROOT / "benchmarks/fidelity_parity.py")]
    monkeypatch.delenv("FIDIA_GEMMA3_GGUF", raising=False)
    assert fp.run_command(argv) == "python benchmarks/fidelity_parity.py"
    monkeypatch.setenv("FIDIA_GEMMA3_GGUF", "/tmp/my dir/g.gguf")
    assert fp.run_command(argv) == (
        "FIDIA_GEMMA3_GGUF='/tmp/my dir/g.gguf' python benchmarks/fidelity_parity.py"
    )


def test_only_refuses_to_replace_the_committed_file(capsys):
    with pytest.raises(SystemExit):
        fp.main(["--only", "hist"])
    assert "--out" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        fp.main(["--only", "nothing", "--out", "/tmp/never_written.json"])


# ------------------------------------------------------------------------------ the recorder
def test_recorder_measures_the_calls_of_the_running_test_and_still_asserts():
    rec = fp.Recorder()
    originals = (np.testing.assert_allclose, np.testing.assert_array_equal, pytest.approx)

    def test_fake():
        np.testing.assert_allclose([1.0, 2.0], [1.0, 2.5], atol=1.0)
        with pytest.raises(AssertionError):
            np.testing.assert_array_equal([1, 2], [1, 3])
        assert 1.05 == pytest.approx(1.0, abs=0.1)
        assert 3.0 != pytest.approx(1.0)  # a difference asserted: not measured
        np.testing.assert_array_less([0.1], [0.2])

    class Item:
        nodeid = "tests/fake.py::test_fake"
        function = test_fake

    rec.pytest_configure(None)
    try:
        rec.pytest_runtest_setup(Item)
        test_fake()
        rec.pytest_runtest_teardown(Item)
        np.testing.assert_allclose(1.0, 1.0)  # no test running: not recorded
    finally:
        rec.pytest_unconfigure(None)
    assert (np.testing.assert_allclose, np.testing.assert_array_equal, pytest.approx) == originals
    sites = rec.items["tests/fake.py::test_fake"]["sites"]
    assert len(sites) == 4
    by_source = {s["source"].split("(")[0].split()[-1]: s for s in sites.values()}
    close = by_source["np.testing.assert_allclose"]["passed"]
    assert close["max_abs"] == pytest.approx(0.5) and close["share"] == pytest.approx(0.5)
    equal = by_source["np.testing.assert_array_equal"]
    assert "passed" not in equal and equal["failed"]["mismatches"] == 1
    approx = next(s for s in sites.values() if "approx" in s["source"])["passed"]
    assert approx["share"] == pytest.approx(0.5)
    assert by_source["np.testing.assert_array_less"]["passed"]["share"] == pytest.approx(0.5)


# ------------------------------------------------------------------------------- the spec
def test_every_comparison_names_a_test_function_that_exists():
    for m in fp.SPEC:
        assert any(c.label for c in m.comparisons), m.key
        for c in m.comparisons:
            path, name = c.test.split("::")
            tree = ast.parse((ROOT / path).read_text())
            names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
            assert name.split("[")[0] in names, c.test
            assert (ROOT / (c.fixture or m.fixture)).exists() or (
                c.fixture or m.fixture
            ).startswith("../shared/"), c
    assert len({m.key for m in fp.SPEC}) == len(fp.SPEC)
    # a test serves one method only (its assertions are assigned within that method's rows)
    owners = {}
    for m in fp.SPEC:
        for c in m.comparisons:
            assert owners.setdefault(c.test, m.key) == m.key, c.test
