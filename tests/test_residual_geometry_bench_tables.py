"""The residual-geometry benchmark's results tables (issue 41): ``benchmarks/residual_geometry.py``
writes the tables docs/residual_geometry.md renders. No training: the raw runs are made up."""

from __future__ import annotations

import json

import pytest
from _scripts import load_script

rgb = load_script("benchmarks/residual_geometry.py")
rt = load_script("tools/render_tables.py")
results = load_script("benchmarks/_results.py")


def _geo(rid, mixig, per_seq=None, **extra):
    g = {
        "rid": rid,
        "delta_s": [0.1, -0.2],
        "delta_d": [0.5, 0.7],
        "delta_d_page": [0.4, 0.6],
        "rid_page": [0.6, 0.8],
        "mixig": mixig,
        "r2_self": [0.2, 0.4],
        "r2_mix": [0.9, 1.0],
        "tme": [0.6, 0.8],
        "rid_note": [0.3, 0.5],
        "delta_s_note": [0.1, 0.1],
        "delta_d_note": [0.2, 0.4],
        "mixig_note": [0.001, 0.003],
    }
    if per_seq is not None:
        g["rid_per_sequence"] = per_seq
    g.update(extra)
    return g


def _acc(visual, text_only=1.0):
    return {"all": 0.9, "visual": visual, "text_only": text_only, "which": 0.8, "even": 0.9,
            "plus": 0.7, "add": text_only}  # fmt: skip


def _run(seed, att_rid, ffn_rid):
    return {
        "seed": seed,
        "config": {"rtol": None},
        "results": {
            "geometry": {
                "attention": _geo(att_rid, [2.0, 3.0], [[1.0, 1.2, 1.4], [0.1, 0.2, 0.9]]),
                "ffn": _geo(ffn_rid, [0.1, 0.0], [[0.5, 0.6, 0.7], [0.3, 0.4, 0.5]]),
                "noise_delta": _geo([1.5, 1.5], [-0.1, 0.0]),
            },
            "accuracy": {
                "plain": _acc(0.8),
                "noise_delta": {"all_layers": _acc(0.4, 0.5), "layer_1": _acc(0.8)},
            },
            "rank_sensitivity": {
                "rtol=0.01": {"attention": [0.9, 0.8], "ffn": [0.7, 0.6], "noise_delta": [1, 1]},
                "rank=4": {"attention": [0.5, 0.5], "ffn": [0.6, 0.8], "noise_delta": [1, 1]},
            },
        },
    }


RUNS = [_run(0, [1.0, 0.5], [0.8, 0.6]), _run(1, [2.0, 0.4], [1.0, 0.6])]


def test_geometry_table_means_over_layers_per_seed():
    t = rgb.geometry_table(RUNS)
    assert [r[0] for r in t["rows"]] == ["attention", "FFN", "Noise Δ"]
    cells = dict(zip(t["columns"], t["rows"][0], strict=True))
    assert cells["RID (per seed)"] == "0.750 / 1.200"  # mean of [1.0, 0.5] and of [2.0, 0.4]
    assert cells["MixIG (nats)"] == "+2.500 / +2.500"
    assert cells["ΔS (nats)"] == "-0.050 / -0.050"
    assert cells["held-out R² self → self+mix"] == "0.30 → 0.95 / 0.30 → 0.95"
    layers = rgb.layers_table(RUNS)
    assert layers["rows"][0][:3] == [0, "attention", "1.000 / 2.000"]
    assert layers["rows"][3][:3] == [1, "attention", "0.500 / 0.400"]  # layer-major order


def test_paired_table_attention_minus_ffn():
    t = rgb.paired_table(RUNS)
    assert [(r[0], r[1]) for r in t["rows"]] == [
        (0, 0), (0, 1), (0, "mean"), (1, 0), (1, 1), (1, "mean")
    ]  # fmt: skip
    cells = dict(zip(t["columns"], t["rows"][0], strict=True))
    assert cells["sequences"] == 3
    assert cells["RID attention − FFN, mean"] == pytest.approx(0.6)
    assert cells["attention lower"] == "0/3"
    row1 = dict(zip(t["columns"], t["rows"][1], strict=True))
    assert row1["attention lower"] == "2/3"  # [0.1, 0.2, 0.9] vs [0.3, 0.4, 0.5]
    assert row1["MixIG attention − FFN (nats)"] == pytest.approx(3.0)
    mean = dict(zip(t["columns"], t["rows"][2], strict=True))  # per-sequence mean over layers
    assert mean["RID attention − FFN, mean"] == pytest.approx((0.6 + 0.0) / 2)
    assert mean["attention lower"] == "0/3"  # [0.55, 0.7, 1.15] vs [0.4, 0.5, 0.6]
    assert mean["MixIG attention − FFN (nats)"] == pytest.approx((1.9 + 3.0) / 2)


def test_accuracy_and_ratio_tables():
    t = rgb.accuracy_table(RUNS)
    assert [r[0] for r in t["rows"]] == ["plain", "Noise Δ, all layers", "Noise Δ, layer 1 only"]
    assert t["rows"][1][1:3] == ["0.400 / 0.400", "0.500 / 0.500"]
    r = {row[0]: row for row in rgb.ratios_table(RUNS)["rows"]}
    rid = r["RID attention / FFN (mean over layers)"]
    assert rid[1][0] == pytest.approx((0.75 / 0.7 + 1.2 / 0.8) / 2)
    assert rid[1][1] == pytest.approx(abs(0.75 / 0.7 - 1.2 / 0.8) / 2)  # population sd of 2
    assert r["accuracy Noise Δ, all layers / plain, visual"][1][0] == pytest.approx(0.5)


def test_rank_and_forms_tables():
    t = rgb.rank_table(RUNS)
    assert [(r[0], r[1]) for r in t["rows"]] == [
        ("the run's rule (authors' cutoff)", 0),
        ("the run's rule (authors' cutoff)", 1),
        ("rtol=0.01", 0),
        ("rtol=0.01", 1),
        ("rank=4", 0),
        ("rank=4", 1),
    ]
    assert t["rows"][0][2:] == [0.5, 0.7, 0.5, 0.7, pytest.approx(0.0)]
    assert t["rows"][4][-1] == pytest.approx(0.5 - 0.7)
    assert len(t["columns"]) == len(t["formats"]) == len(t["rows"][0])
    f = rgb.forms_table(RUNS)
    cells = dict(zip(f["columns"], f["rows"][1], strict=True))
    assert (
        cells["RID note"] == "0.400 / 0.400" and cells["MixIG note (nats)"] == "+0.0020 / +0.0020"
    )


def test_results_file_renders_and_retables(tmp_path, monkeypatch):
    monkeypatch.setenv("FIDIA_COMMIT", "abc123")
    out = tmp_path / "residual_geometry.json"
    record = {"runs": RUNS}
    results.write_results("residual_geometry", rgb.tables(record), command="python r.py",
                          extra=record, out=out)  # fmt: skip
    doc = json.loads(out.read_text())
    lines = rt.render(doc, "benchmarks/results/residual_geometry.json", "geometry")
    assert "`python r.py`" in lines[1]
    assert lines[5].startswith("| attention | 0.750 / 1.200 |")
    doc["tables"] = {}
    out.write_text(json.dumps(doc))
    assert rgb.main(["--report", "--out", str(out)]) == 0
    again = json.loads(out.read_text())
    assert again["tables"] == json.loads(json.dumps(rgb.tables(record)))
    assert again["command"] == "python r.py"
