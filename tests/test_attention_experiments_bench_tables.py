"""The attention experiments' results tables (issue 41): ``benchmarks/attention_experiments.py``
writes the Attn-QAT and SANTA tables docs/kernels.md renders. No training: the raw results
are made up."""

from __future__ import annotations

import json

import pytest
from _scripts import load_script

ae = load_script("benchmarks/attention_experiments.py")
rt = load_script("tools/render_tables.py")


def _qat(impl, curve, val, seconds, **kw):
    return {"impl": impl, "curve": curve, "val_loss": val, "seconds": seconds, **kw}


RAW = {
    "qat": [
        _qat("bf16", [[0, 6.0], [25, 3.0], [50, 2.6], [75, 2.4], [99, 2.2]], 2.0, 100.0),
        _qat("attn_qat_dropin", [[0, 6.0], [25, 3.0], [50, 3.4], [60, 9.0]], 3.0, 90.0,
             nonfinite_step=60),
        _qat("attn_qat", [[0, 6.0], [25, 3.1], [50, 2.7], [75, 2.5], [99, 2.3]], 2.05, 150.0),
    ],
    "santa": {
        "dense_ppl": 7.0,
        "context": 128,
        "rows": [
            {"method": m, "S": s, "ppl": 7.0 + 1.0 / s + i, "top1_agreement": 1 - 1.0 / s}
            for i, m in enumerate(["iid", "stratified"])
            for s in (128, 32)
        ],
    },
}  # fmt: skip


def test_qat_table_rows_steps_and_ratio():
    t = ae.qat_table(RAW["qat"])
    assert t["columns"][:5] == ["step", "0", "50", "99", "val"]  # every 50th step and the last
    assert len(t["formats"]) == len(t["columns"])
    names = [r[0] for r in t["rows"]]
    assert names == [ae.QAT_LABELS[i] for i in ("bf16", "attn_qat", "attn_qat_dropin")]
    bf16, qat, dropin = (dict(zip(t["columns"], r, strict=True)) for r in t["rows"])
    assert bf16["val vs bf16"] is None and bf16["within 2% of bf16"] is None
    assert qat["val vs bf16"] == pytest.approx(0.025)
    assert qat["within 2% of bf16"] == "no"  # 2.5 % > 2 %
    assert dropin["val vs bf16"] == pytest.approx(0.5)
    assert dropin["99"] is None  # stopped at 60: no loss at the last step
    assert dropin["stopped (non-finite) at"] == 60 and qat["stopped (non-finite) at"] is None
    assert qat["wall (s)"] == 150.0 and qat["50"] == 2.7


def test_qat_goal_met_within_two_percent():
    raw = [RAW["qat"][0], dict(RAW["qat"][2], val_loss=2.039)]
    row = ae.qat_table(raw)["rows"][1]
    assert row[-4] == pytest.approx(0.0195) and row[-3] == "yes"


def test_santa_table_layout():
    t = ae.santa_table(RAW["santa"])
    assert t["columns"] == ["method", "S=32 ppl / agree", "S=128 ppl / agree"]  # S ascending
    assert t["rows"][0] == ["dense (reference)", "7.000 / 1.000", "7.000 / 1.000"]
    assert t["rows"][1] == ["iid", "7.031 / 0.969", "7.008 / 0.992"]
    assert t["rows"][2][0] == "stratified" and t["rows"][2][1] == "8.031 / 0.969"


def test_report_retables_and_renders(tmp_path):
    results = load_script("benchmarks/_results.py")
    path = results.write_results("attention_experiments", ae.tables(RAW), extra=RAW,
                                 out=tmp_path / "attention_experiments.json")  # fmt: skip
    record = json.loads(path.read_text())
    record["tables"] = {}
    path.write_text(json.dumps(record))
    ae.main(["--report", "--out", str(path)])
    record = json.loads(path.read_text())
    assert set(record["tables"]) == {"attn_qat", "santa"}
    assert record["qat"] == RAW["qat"]
    lines = rt.render(record, "attention_experiments.json", "attn_qat")
    assert any("| +2.5% | no |" in line for line in lines)
