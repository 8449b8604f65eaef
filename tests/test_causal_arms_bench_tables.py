"""The K-arm tables of ``benchmarks/causal.py`` (parts C, D, E, T; issue 41), which
docs/causal.md renders from ``benchmarks/results/causal_arms.json``. No training: a made-up
record of the driver's runs whose values are known."""

from __future__ import annotations

import json

import pytest
from _scripts import load_script

bench = load_script("benchmarks/causal.py")
render = load_script("tools/render_tables.py")


def _res(rows):
    """A driver result (``runs`` and its ``summary``) from (K, method, alpha, pehe, ate, s/ep)."""
    runs = [{"K": k, "replication": 0, "method": m, "alpha": a, "sqrt_pehe": p, "ate_error": e,
             "wall_s": 1.0, **({} if s is None else {"s_per_epoch": s})}
            for k, m, a, p, e, s in rows]  # fmt: skip
    summary = bench._summarise(runs)
    for k, m, _, _, _, s in rows:
        if s is not None:
            summary[str(k)][m]["s_per_epoch"] = s
    return {"runs": runs, "summary": summary}


MULTIARM = _res([
    (2, "tarnet", 0.0, 1.30, 0.30, None),
    (2, "cfr_pairwise", 0.05, 1.32, 0.31, 0.02),
    (2, "t_ridge", None, 0.90, 0.20, None),
    (8, "tarnet", 0.0, 1.60, 0.40, None),
    (8, "cfr_aggregation", 0.03, 1.61, 0.39, 0.05),
    (8, "x_ridge", None, 1.10, 0.50, None),
])  # fmt: skip


def test_one_draw_tables_show_values_not_mean_and_zero_std():
    t = bench.summary_table(MULTIARM, per_epoch=True)
    assert t["columns"] == ["K", "method", "alpha", "sqrt(PEHE)", "ATE error", "draws",
                            "s per epoch"]  # fmt: skip
    assert len(t["formats"]) == len(t["columns"])
    # row order: K, then the driver's method order; baselines have no alpha, TARNet alpha 0
    assert [(r[0], r[1]) for r in t["rows"]] == [
        (2, "`tarnet`"), (2, "`cfr_pairwise`"), (2, "`t_ridge`"),
        (8, "`tarnet`"), (8, "`cfr_aggregation`"), (8, "`x_ridge`")]  # fmt: skip
    cfr = t["rows"][4]
    assert cfr[2:] == [pytest.approx(0.03), 1.61, 0.39, 1, 0.05]
    assert t["rows"][2][2] is None and t["rows"][2][6] is None
    assert t["rows"][0][2] == 0.0


def test_several_draws_keep_mean_and_std():
    res = _res([(4, "cfr_pairwise", 0.1, 1.0, 0.2, None), (4, "cfr_pairwise", 0.3, 2.0, 0.4, None)])
    for run, r in zip(res["runs"], (1, 2), strict=True):
        run["replication"] = r
    t = bench.summary_table(res)
    assert t["columns"][3] == "sqrt(PEHE) mean ± std"
    row = t["rows"][0]
    assert row[2] == pytest.approx(0.2)  # median alpha over the draws
    assert row[3] == pytest.approx([1.5, 0.5]) and row[4] == pytest.approx([0.3, 0.1])
    assert row[5] == 2


def test_timing_table_ratios_to_the_smallest_k():
    t = bench.timing_table({"pairwise": {"2": 0.003, "4": 0.0045, "8": 0.0368},
                            "aggregation": {"2": 0.0095, "4": 0.0121, "8": 0.0096}})  # fmt: skip
    assert t["columns"] == ["scheme", "K=2 (ms)", "K=4 (ms)", "K=8 (ms)", "K=4 / K=2",
                            "K=8 / K=2"]  # fmt: skip
    assert len(t["formats"]) == len(t["columns"])
    assert t["rows"][0] == ["pairwise", pytest.approx(3.0), pytest.approx(4.5),
                            pytest.approx(36.8), pytest.approx(1.5),
                            pytest.approx(36.8 / 3.0)]  # fmt: skip
    assert t["rows"][1][-1] == pytest.approx(0.0096 / 0.0095)


def test_arms_record_tables_and_render(tmp_path, monkeypatch):
    monkeypatch.setenv("FIDIA_COMMIT", "abc123")
    raw = {"multiarm": MULTIARM, "multiarm_egm": _res([(8, "causalegm", None, 0.98, 0.52, None)]),
           "alpha_grid": _res([(4, "cfr_pairwise", 0.064, 1.305, 0.178, None),
                               (4, "cfr_pairwise@10", 10.0, 1.150, 0.568, None)]),
           "term_timing": {"pairwise": {"2": 0.003, "8": 0.03}}}  # fmt: skip
    assert set(bench.tables(raw)) == {"multiarm", "multiarm_egm", "alpha_grid", "term_timing"}
    out = tmp_path / "causal_arms.json"
    bench.write(out, raw, command="python benchmarks/causal.py --parts C")
    doc = json.loads(out.read_text())
    assert doc["multiarm_egm"] == raw["multiarm_egm"]  # the raw record is kept
    text = "\n".join(render.render(doc, "causal_arms.json", "alpha_grid"))
    assert "| 4 | `cfr_pairwise@10` | 10 | 1.150 | 0.568 | 1 |" in text
