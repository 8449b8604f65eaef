"""The StreamFlow serving benchmarks' results tables (issue 41): ``benchmarks/streamflow.py`` and
``benchmarks/streamflow_pipeline.py`` build their tables from the raw record alone. No model:
the rows are made up, with hand-worked ratios."""

from __future__ import annotations

import json
import statistics

import pytest
from _scripts import load_script

sf = load_script("benchmarks/streamflow.py")
pipe = load_script("benchmarks/streamflow_pipeline.py")
sft = load_script("benchmarks/_streamflow_table.py")
rt = load_script("tools/render_tables.py")
results = load_script("benchmarks/_results.py")


def _row(ips, p50=0.1, p95=0.2, diff=0.0, calls=None):
    r = {"images_per_s": ips, "latency_p50_s": p50, "latency_p95_s": p95, "max_abs_diff_vs_a": diff}
    if calls is not None:
        r["cost_calls"] = calls
    return r


# probe rounds: a sequential step 1 ms; bucket 1: 1 ms, bucket 4: 2 ms, except round 2 (load)
PROBE = {"sequential_step": [1e-3, 1e-3, 3e-3], "1": [1e-3, 1e-3, 3e-3], "4": [2e-3, 2e-3, 3e-3]}


def _streamflow_record(fd=True):
    # burst, model clock: (a) 40 steps x 1 ms = 40 ms; (b) 10 calls of 4 = 20 ms;
    # (c) 8 calls of 4 + 4 calls of 1 = 20 ms
    model = {
        "burst": {
            "a": _row(100.0, calls={"sequential_step": 40}),
            "b": _row(200.0, p95=0.30, calls={"4": 10}),
            "c": _row(200.0, p95=0.15, diff=4e-7, calls={"4": 8, "1": 4}),
        },
        "low": {"a": _row(10.0), "b": _row(10.0), "c": _row(10.0)},
        "mid": {"a": _row(50.0), "b": _row(60.0, p95=0.4), "c": _row(70.0, p95=0.3)},
        "high": {"a": _row(100.0), "b": _row(150.0), "c": _row(210.0)},
    }
    measured = {
        k: {**v, "d": _row(5.0, diff=9e-7)} for k, v in json.loads(json.dumps(model)).items()
    }
    measured["mid"]["c"]["latency_p95_s"] = 0.5  # slower than (b) on this clock
    rec = {
        "serving": {"measured": measured, "model": model},
        "rates_images_per_s": {
            "measured": {"low": 50.0, "mid": 200.0, "high": 400.0},
            "model": {"low": 49.6, "mid": 200.4, "high": 400.0},
        },
        "probe_s": PROBE,
        "config": {
            "eval_steps": [4, 8],
            "train_steps": 1000,
            "reflow_rounds": 1,
            "reflow_train_steps": 300,
        },  # fmt: skip
        "training": {
            "eval": {
                "base": {
                    "steps": {"4": {"alexnet_fd_proxy": 20.0}, "8": {"alexnet_fd_proxy": 10.0}}
                },
                "reflow": {"steps": {"4": {"alexnet_fd_proxy": 15.0}, "8": {}}},
            },
            "fd_proxy_floor": 3.0,
        },
    }
    if not fd:
        for ev in rec["training"]["eval"].values():
            for row in ev["steps"].values():
                row.pop("alexnet_fd_proxy", None)
    return rec


def test_serving_table_model_clock_first_and_ratios():
    t = sf.tables(_streamflow_record())["serving"]
    assert len(t["columns"]) == len(t["formats"]) == len(t["rows"][0])
    assert [r[0] for r in t["rows"]] == ["model"] * 12 + ["measured"] * 16  # (d): measured only
    first = t["rows"][0]
    assert first[:3] == ["model", "burst (all at t=0)", "(a) sequential"] and first[4] == 1.0
    high_c = next(r for r in t["rows"] if r[0] == "model" and "high" in r[1] and "(c)" in r[2])
    assert high_c[1] == "Poisson high (400/s)" and high_c[4] == pytest.approx(2.1)
    d = next(r for r in t["rows"] if r[2].startswith("(d)"))
    assert d[4] == pytest.approx(0.05) and d[-1] == 9e-7


def test_goals_per_clock():
    rec = _streamflow_record()
    g = sf.tables(rec)["goals"]
    assert [r[0] for r in g["rows"]] == ["model", "measured"]
    model, measured = (dict(zip(g["columns"], r, strict=True)) for r in g["rows"])
    assert model["(c) / (a) images/s, burst"] == 2.0
    assert model["goal (c) >= 2x (a), burst"] == "met"  # 2.0 >= 2 and max diff 9e-7 <= 1e-5
    assert model["(c) / (a) images/s, Poisson high"] == pytest.approx(2.1)
    assert model["(b) / (a) images/s, Poisson high"] == pytest.approx(1.5)
    assert model["(c) p95 / (b) p95, Poisson mid"] == pytest.approx(0.75)
    assert model["goal (c) p95 < (b) p95"] == "met"
    assert measured["(c) p95 / (b) p95, Poisson mid"] == pytest.approx(1.25)
    assert measured["goal (c) p95 < (b) p95"] == "NOT met"
    assert model["max abs diff vs (a), all rows"] == 9e-7
    rec["serving"]["model"]["burst"]["c"]["max_abs_diff_vs_a"] = 2e-5  # not the same images
    model = dict(zip(g["columns"], sf.tables(rec)["goals"]["rows"][0], strict=True))
    assert model["goal (c) >= 2x (a), burst"] == "NOT met"


def test_paired_burst_prices_each_round():
    p = sf.tables(_streamflow_record())["paired"]
    rows = {r[0]: dict(zip(p["columns"], r, strict=True)) for r in p["rows"]}
    ca = rows["(c) stream batch, AOT / (a) sequential"]
    # medians: step 1 ms, b1 1 ms, b4 2 ms -> (a) 40 ms, (c) 20 ms
    assert ca["probe rounds"] == 3 and ca["at median costs"] == pytest.approx(2.0)
    # round 3: (a) 40 x 3 = 120 ms, (c) 8 x 3 + 4 x 3 = 36 ms -> 3.33
    assert ca["per-round max"] == pytest.approx(120 / 36) and ca["per-round min"] == 2.0
    assert ca["per-round median"] == pytest.approx(2.0) and ca["rounds x faster"] == 3
    cb = rows["(c) stream batch, AOT / (b) naive, same t"]
    # (b) 10 x b4: rounds 20, 20, 30 ms; (c): 20, 20, 36 ms -> (c) slower in round 3 only
    assert cb["at median costs"] == pytest.approx(1.0)
    assert cb["per-round min"] == pytest.approx(30 / 36) and cb["rounds x faster"] == 0


def test_paired_median_matches_the_model_clock():
    burst = {"a": {"cost_calls": {"sequential_step": 40}}, "c": {"cost_calls": {"4": 8, "1": 4}}}
    med = {k: statistics.median(v) for k, v in PROBE.items()}
    t = sft.paired_burst_table(burst, PROBE, [("c", "a")])
    assert t["rows"][0][2] == pytest.approx(
        (40 * med["sequential_step"]) / (8 * med["4"] + 4 * med["1"])
    )


def test_call_cost_and_fd_proxy_tables():
    t = sf.tables(_streamflow_record())
    cc = t["call_cost"]
    assert cc["rows"][0] == ["sequential step (batch 1)", 1.0, 1.0, 3.0, 3]
    assert [r[0] for r in cc["rows"]] == ["sequential step (batch 1)", "stream call, bucket 1",
                                          "stream call, bucket 4"]  # fmt: skip
    fd = t["fd_proxy"]
    assert fd["columns"] == ["model", "4 steps", "8 steps"]
    assert fd["rows"] == [["base (1000 steps)", 20.0, 10.0],
                          ["reflow (+ 1 reflow round, 300 steps)", 15.0, None],
                          ["floor: training digits vs held-out", 3.0, None]]  # fmt: skip
    assert "fd_proxy" not in sf.tables(_streamflow_record(fd=False))


def test_pipeline_tables_ratio_to_the_authors_pipeline():
    burst = {
        "a": _row(20.0, calls={"a_step": 256}),
        "b": _row(40.0, calls={"c4": 16}),
        "c": _row(40.0, calls={"c4": 16}),
        "e": _row(32.0, calls={"e4": 67}),
    }
    rec = {
        "serving": {
            "measured": {"burst": burst, "mid": {"rate": 41.6, **burst}},
            "model": {"burst": burst, "high": {"rate": 80.0, **burst}},
        },
        "probe_s": {
            "a_step": [1e-3, 1e-3, 1.5e-3],
            "c1": [1e-3] * 3,
            "c16": [9e-3] * 3,
            "c4": [3e-3] * 3,
            "e4": [3e-3, 3e-3, 4e-3],
        },  # fmt: skip
    }
    t = pipe.tables(rec)
    s = t["serving"]
    assert s["columns"][4:6] == ["ratio to (a)", "ratio to (e)"]
    assert [r[1] for r in s["rows"][:5]] == ["burst (all at t=0)"] * 4 + ["Poisson high (80/s)"]
    assert s["rows"][2][2] == "(c) stream batch, AOT" and s["rows"][2][4:6] == [2.0, 1.25]
    assert any(r[1] == "Poisson mid (42/s)" for r in s["rows"])
    paired = {r[0]: r for r in t["paired"]["rows"]}
    ce = paired["(c) stream batch, AOT / (e) authors' fixed pipeline"]
    # (e) 67 calls of e4: 201, 201, 268 ms; (c) 16 of c4: 48 ms each round
    assert ce[2] == pytest.approx(67 / 16) and ce[5] == pytest.approx(268 / 48) and ce[6] == 3
    assert ce[7] == pytest.approx(0.25)  # exact signed-rank, 3 pairs of one sign
    labels = [r[0] for r in t["call_cost"]["rows"]]
    assert labels == ["(a) one sequential step", "(b)/(c) call of bucket 1 (rows)",
                      "(b)/(c) call of bucket 4 (rows)", "(b)/(c) call of bucket 16 (rows)",
                      "(e) pipeline call of 4 rows"]  # fmt: skip


def test_file_renders(tmp_path, monkeypatch):
    monkeypatch.setenv("FIDIA_COMMIT", "abc123")
    rec = _streamflow_record()
    out = tmp_path / "streamflow.json"
    results.write_results("streamflow", sf.tables(rec), command="python s.py", extra=rec, out=out)
    doc = json.loads(out.read_text())
    lines = rt.render(doc, "benchmarks/results/streamflow.json", "serving")
    assert "`python s.py`" in lines[1] and "(table `serving`)" in lines[1]
    assert (
        lines[5]
        == "| model | burst (all at t=0) | (a) sequential | 100.0 | 1.00 | 0.100 | 0.200 | 0.0e+00 |"
    )
    # --report: the same tables from the file's own raw record
    sf.retable(out, sf.tables)
    assert json.loads(out.read_text())["tables"] == doc["tables"]


def test_a_kind_probed_in_some_rounds_keeps_its_rounds():
    # a guided pipeline probe: 4 rows in rounds 0-1, 8 rows in rounds 2-4
    probe = {"a_step": [1.0, 2.0, 3.0, 4.0, 5.0], "e4": [10.0, 20.0], "e8": [7.0, 8.0, 9.0]}
    rounds = {"a_step": [0, 1, 2, 3, 4], "e4": [0, 1], "e8": [2, 3, 4]}
    s = sft.round_series(probe, rounds)
    assert s["e4"] == [10.0, 20.0, 15.0, 15.0, 15.0]  # its median where it was not probed
    assert s["e8"] == [8.0, 8.0, 7.0, 8.0, 9.0]
    assert sft.round_series(probe)["e8"] == [8.0] * 5  # rounds unknown: the median throughout
    assert sft.per_round_seconds({"e4": 1, "e8": 2}, s) == [26.0, 36.0, 29.0, 31.0, 33.0]


def test_latency_paired_over_the_same_requests():
    rec = _streamflow_record()
    mid = rec["serving"]["model"]["mid"]
    mid["b"]["latency_s"] = [0.30, 0.20, 0.40, 0.50, 0.10]
    mid["c"]["latency_s"] = [0.10, 0.25, 0.10, 0.20, 0.05]  # sooner for 4 of the 5 requests
    mid["a"]["latency_s"] = [0.10, 0.25, 0.10, 0.20, 0.05]  # equal to (c): no test
    t = sf.tables(rec)["latency_paired"]
    assert len(t["rows"]) == 2 and len(t["columns"]) == len(t["formats"]) == len(t["rows"][0])
    cb = dict(zip(t["columns"], t["rows"][0], strict=True))
    assert cb["arrivals"] == "Poisson mid (200/s)"
    assert cb["latency of"] == "(c) stream batch, AOT − (b) naive, same t"
    assert cb["median difference s"] == pytest.approx(-0.2)  # diffs -.2 .05 -.3 -.3 -.05
    assert (cb["requests sooner"], cb["requests later"]) == (4, 1)
    assert cb["Wilcoxon p"] == pytest.approx(0.125)  # exact: ranks 1.5+.. of one positive
    ca = dict(zip(t["columns"], t["rows"][1], strict=True))
    assert ca["Wilcoxon p"] is None and ca["requests sooner"] == 0
    assert "latency_paired" not in sf.tables(_streamflow_record())
