"""The accuracy tables of ``benchmarks/hist.py`` (issue 41) on a hand-made result whose means,
per-fold winners and paired differences are known."""

from __future__ import annotations

import numpy as np
import pytest
from _scripts import load_script

bench = load_script("benchmarks/hist.py")


def _fold(test, hist_pcc, ridge_pcc):
    return {
        "test": test,
        "hist": {"mean_gene_pcc": float(np.mean(hist_pcc)), "gene_pcc": hist_pcc},
        "ridge": {"mean_gene_pcc": float(np.mean(ridge_pcc)), "gene_pcc": ridge_pcc},
    }


def test_per_fold_and_paired_tables_read_the_folds():
    folds = [
        _fold("C2", [0.5, 0.6, 0.7], [0.4, 0.7, 0.8]),  # ridge higher on 2 of 3
        _fold("C3", [0.9, 0.8, float("nan")], [0.5, 0.6, 0.1]),  # the NaN item is left out
    ]
    mean = {m: {"mean_gene_pcc": float(np.nanmean([f[m]["mean_gene_pcc"] for f in folds]))}
            for m in ("hist", "ridge")}  # fmt: skip
    t = bench.accuracy_tables({"folds": folds, "mean": mean})
    per = t["per_fold"]
    assert per["columns"] == ["held-out section", "`hist`", "`ridge`", "highest"]
    assert per["rows"][0] == ["C2", pytest.approx(0.6), pytest.approx(19 / 30), "`ridge`"]
    assert per["rows"][-1][0] == "mean over folds"
    (row,) = t["paired"]["rows"]
    diffs = [0.1, -0.1, -0.1, 0.4, 0.2]  # hist minus ridge over the 5 finite items
    assert row[:2] == ["`ridge`", 5]
    assert row[2] == pytest.approx(np.mean(diffs))
    assert row[3] == pytest.approx(3 / 5)
    assert 0 < row[4] <= 1
