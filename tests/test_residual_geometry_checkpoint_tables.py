"""The Gemma 3 270M residual-geometry check's results tables (issue 41):
``benchmarks/residual_geometry_checkpoint.py`` writes the tables docs/residual_geometry.md
renders. No model: the run's record is made up."""

from __future__ import annotations

import json

import pytest
from _scripts import load_script

rgc = load_script("benchmarks/residual_geometry_checkpoint.py")
rt = load_script("tools/render_tables.py")
results = load_script("benchmarks/_results.py")


def _row(rid, mixig, per_seq, **extra):
    g = {
        "rid": rid,
        "delta_s": [-0.25, 0.125],
        "delta_d": [0.5, 0.0625],
        "rid_pooled": [1.5, 0.75],
        "delta_d_pooled": [0.5, 0.5],
        "mixig": mixig,
        "r2_self": [0.544, 0.9],
        "r2_mix": [0.98, 0.95],
        "tme": [0.6, 0.7],
        "rid_per_sequence": per_seq,
    }
    g.update(extra)
    return g


RUN = {
    "layers": [0, 5],
    "geometry": {
        # layer 0: attention above the FFN in all 4 sequences; layer 5: below in 3 of the 3
        # finite pairs (sequence 3's attention RID raised: null, its pair left out)
        "attention": _row(
            [1.0, 0.2],
            [1.5, 0.25],
            [[1.0, 1.2, 0.9, 0.9], [0.1, 0.2, 0.3, None]],
            tme_attention=[0.55, 0.8],
        ),  # fmt: skip
        "ffn": _row([0.5, 0.8], [0.5, -0.25], [[0.5, 0.4, 0.6, 0.5], [0.6, 0.9, 0.8, 0.9]]),
        "noise": _row([3.0, 0.5], [-0.05, 0.0], [[3.0] * 4, [0.5] * 4]),
    },
    "rid_failures": [{"layer": 5, "update": "attention", "sequence": 3, "error": "zero"}],
}


def test_layers_table_one_row_per_layer_and_update():
    t = rgc.layers_table(RUN)
    assert [(r[0], r[1]) for r in t["rows"]] == [
        (0, "attention"), (0, "FFN"), (0, "noise (control)"),
        (5, "attention"), (5, "FFN"), (5, "noise (control)"),
    ]  # fmt: skip
    att5 = dict(zip(t["columns"], t["rows"][3], strict=True))
    assert att5["RID"] == 0.2 and att5["ΔS (nats)"] == 0.125 and att5["RID pooled"] == 0.75
    assert att5["MixIG (nats)"] == 0.25 and att5["TME"] == 0.7
    assert att5["TME of the attention weights (ours)"] == 0.8
    assert t["rows"][0][7] == "0.54 → 0.98"
    ffn0 = dict(zip(t["columns"], t["rows"][1], strict=True))
    assert ffn0["TME of the attention weights (ours)"] is None  # attention only
    assert len(t["formats"]) == len(t["columns"])


def test_paired_table_attention_minus_ffn_per_layer():
    t = rgc.paired_table(RUN)
    r0 = dict(zip(t["columns"], t["rows"][0], strict=True))
    # differences 0.5, 0.8, 0.3, 0.4: all positive, exact two-sided Wilcoxon p = 2/2^4
    assert r0["sequences"] == 4 and r0["attention lower"] == "0/4"
    assert r0["RID attention − FFN, mean"] == pytest.approx(0.5)
    assert r0["median"] == pytest.approx(0.45)
    assert r0["Wilcoxon p"] == pytest.approx(0.125)
    assert r0["MixIG attention − FFN (nats)"] == pytest.approx(1.0)
    r5 = dict(zip(t["columns"], t["rows"][1], strict=True))
    # sequence 3 left out: differences -0.5, -0.7, -0.5; p = 2/2^3
    assert r5["layer"] == 5 and r5["sequences"] == 3 and r5["attention lower"] == "3/3"
    assert r5["RID attention − FFN, mean"] == pytest.approx(-1.7 / 3)
    assert r5["median"] == pytest.approx(-0.5)
    assert r5["Wilcoxon p"] == pytest.approx(0.25)
    assert r5["MixIG attention − FFN (nats)"] == pytest.approx(0.5)


def test_summary_counts_the_orderings():
    s = {r[0]: r[1:] for r in rgc.summary_table(RUN)["rows"]}
    assert s["attention RID below the FFN's (layer means)"] == [1, 2]  # layer 5 only
    assert s["attention RID below the FFN's, Wilcoxon p < 0.05"] == [0, 2]  # p 0.25 with 3 pairs
    assert s["attention RID above the FFN's, Wilcoxon p < 0.05"] == [0, 2]
    assert s["attention MixIG above the FFN's"] == [2, 2]
    assert s["attention MixIG above the noise's"] == [2, 2]
    assert s["noise RID above attention's and the FFN's"] == [1, 2]  # layer 5: 0.5 < 0.8
    assert s["per-sequence RIDs that raised (left out)"] == [1, None]


def test_results_file_renders_and_retables(tmp_path, monkeypatch):
    monkeypatch.setenv("FIDIA_COMMIT", "abc123")
    out = tmp_path / "residual_geometry_checkpoint.json"
    record = {"run": RUN}
    results.write_results("residual_geometry_checkpoint", rgc.tables(record),
                          command="python r.py", extra=record, out=out)  # fmt: skip
    doc = json.loads(out.read_text())
    lines = rt.render(doc, "benchmarks/results/residual_geometry_checkpoint.json", "layers")
    assert "`python r.py`" in lines[1]
    assert "| 0 | attention | 1.000 | -0.250 | 0.500 | 1.500 | +1.500 | 0.54 → 0.98 | 0.600 |" in (
        "\n".join(lines)
    )
    doc["tables"] = {}
    out.write_text(json.dumps(doc))
    assert rgc.main(["--report", "--out", str(out)]) == 0
    again = json.loads(out.read_text())
    assert again["tables"] == json.loads(json.dumps(rgc.tables(record)))
    assert again["command"] == "python r.py"


def test_fidia_command():
    assert rgc.fidia_argv("m.gguf", 8, "0,3", ["seed=1"], "w") == [
        "residual_geometry", "train", "--workdir", "w", "--set", "checkpoint=m.gguf",
        "--set", "checkpoint_sequences=8", "--set", "checkpoint_layers=[0,3]", "--set", "seed=1",
    ]  # fmt: skip
