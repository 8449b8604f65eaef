"""The results-file tables of ``benchmarks/fidia_methods.py`` (issue 41) on hand-made runs
whose means, paired differences and p-values are known."""

from __future__ import annotations

import json

import numpy as np
import pytest
from _scripts import load_script
from scipy import stats

bench = load_script("benchmarks/fidia_methods.py")

MAX8 = {"bon": [1.9, 2.0, 1.8], "grpo": [3.3, 3.2, 3.4], "fidia": [3.0, 3.1, 3.3]}


def _runs():
    runs = []
    for m, vals in MAX8.items():
        for seed, v in enumerate(vals):
            summary = {"max@8": v, "success": 0.5 + 0.01 * seed, "precision": 0.4,
                       "identity": 0.6}  # fmt: skip
            runs.append({"method": m, "seed": seed, "summary": summary, "by_kind": {},
                         "per_backbone": []})  # fmt: skip
    return runs


def _result(tmp_path):
    out = tmp_path / "fidia_methods.json"
    meta = {"command": "python benchmarks/fidia_methods.py --seeds 0 1 2", "config": {}}
    bench._write(out, meta, _runs(), 0.0)
    return out, json.loads(out.read_text())


def test_methods_and_paired_tables(tmp_path):
    _, doc = _result(tmp_path)
    assert doc["command"] == "python benchmarks/fidia_methods.py --seeds 0 1 2"
    rows = {r[0]: r for r in doc["tables"]["methods"]["rows"]}
    assert rows["`grpo`"][1] == 3
    assert rows["`grpo`"][2] == pytest.approx([3.3, 0.1])  # mean, std (ddof 1)
    assert rows["`grpo`"][3] == pytest.approx(3.3 - 1.9)  # paired difference to bon
    paired = {(r[0], r[1], r[2]): r[3:] for r in doc["tables"]["paired"]["rows"]}
    d, higher, t_p, w_p = paired[("`fidia`", "`grpo`", "max@8")]
    assert d == pytest.approx(np.mean([-0.3, -0.1, -0.1]))
    assert higher == "0/3"
    assert t_p == pytest.approx(stats.ttest_rel(MAX8["fidia"], MAX8["grpo"]).pvalue)
    assert w_p == pytest.approx(0.25)  # exact, n = 3, every difference one sign
    # success is the same function of the seed for every method: no difference, no p-value
    assert paired[("`fidia`", "`grpo`", "success")][1:] == ["0/3", None, None]
    assert ("`bon`", "`bon`", "max@8") not in paired


def test_report_rewrites_the_same_tables(tmp_path):
    out, doc = _result(tmp_path)
    bench.main(["--report", "--out", str(out)])
    again = json.loads(out.read_text())
    assert again["tables"] == doc["tables"]
    assert again["date"] == doc["date"] and again["command"] == doc["command"]
