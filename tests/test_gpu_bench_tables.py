"""The GPU benchmarks' results files (issues 41 and 44): the tables that docs/benchmarks.md renders
from ``benchmarks/gpu_attention.py`` and ``benchmarks/gpu_paso.py``, built from raw rows with
measured, failed and cut-off cells, written by ``benchmarks/_results.py`` and rendered by
``tools/render_tables.py``. No GPU and no measurement: the rows are made up."""

from __future__ import annotations

import json
import pathlib
import sys

import pytest
from _scripts import load_script

ROOT = pathlib.Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"


ga = load_script("benchmarks/gpu_attention.py")
gp = load_script("benchmarks/gpu_paso.py")
gr = sys.modules["_gpu_results"]
rt = load_script("tools/render_tables.py")

DECODE = [
    {"name": "copy_bandwidth", "status": "ok", "buffer_bytes": 2**30, "ms": 0.8, "GBps": 2684.0},
    {"name": "pallas_flash_decode", "status": "ok", "ms": 2.0, "GBps_kv": 67.0,
     "max_abs_err": 7.6e-6},
    {"name": "pallas_santa_S2048", "status": "ok", "S": 2048, "samples_per_tile": 8, "ms": 1.25,
     "GBps_kv": 107.0, "max_abs_err": 0.075, "distinct_v_rows": 59544, "v_rows_total": 262144},
    {"name": "dot_product_attention_xla", "status": "ok", "ms": 0.25, "GBps_kv": 537.0,
     "max_abs_err": 2.4e-4},
    {"name": "dot_product_attention_cudnn", "status": "failed",
     "error": "RuntimeError: cuDNN is not detected.\nmore lines"},
    {"name": "pallas_santa_S512", "status": "running", "S": 512, "samples_per_tile": 2},
]  # fmt: skip
TRAIN = [
    {"name": "attn_qat_pallas_fwd", "status": "ok", "T": 1024, "ms": 30.0},
    {"name": "bf16_dpa_cudnn_fwd", "status": "ok", "T": 1024, "ms": 0.25},
    {"name": "bf16_dpa_cudnn_fwd_bwd", "status": "ok", "T": 1024, "ms": 0.5},
    {"name": "attn_qat_pallas_fwd_bwd", "status": "running", "T": 1024},
]


def test_attention_tables_cells_errors_and_ratios():
    t = ga.tables(DECODE, TRAIN)
    rows = {r[0]: r[1:] for r in t["decode"]["rows"]}
    copy = next(k for k in rows if k.startswith("copy"))
    assert "1 GiB" in copy and rows[copy] == [0.8, 2684.0, None, None]
    assert rows["Pallas flash-decoding (ours, exact peer)"] == [2.0, 67.0, 7.6e-6, "all"]
    santa = rows["Pallas SANTA, S = 2048 (systematic, 8 per tile)"]
    assert santa[:3] == [1.25, 107.0, 0.075]
    assert santa[3] == "59\u2009544 / 262\u2009144 (22.7%)"
    assert rows["`jax.nn.dot_product_attention`, cudnn"] == [
        "failed: RuntimeError: cuDNN is not detected.", None, None, None]  # fmt: skip
    assert rows["Pallas SANTA, S = 512 (systematic, 2 per tile)"][0] == gr.NOT_FINISHED
    train = {r[0]: r[1:] for r in t["train"]["rows"]}
    assert train["Pallas Attn-QAT (ours, FP4)"] == [1024, 30.0, gr.NOT_FINISHED]
    assert train["`jax.nn.dot_product_attention` cudnn, bf16"] == [1024, 0.25, 0.5]
    assert len(train) == 2  # the xla peer was not run: no row
    ratios = {r[0]: r[1:] for r in t["ratios"]["rows"]}
    assert ratios["Pallas flash-decoding time / Pallas SANTA (S = 2048) time"] == [
        pytest.approx(1.6), ">= 1.3", True]  # fmt: skip
    assert ratios["Pallas flash-decoding KV GB/s / copy GB/s"][0] == pytest.approx(67 / 2684)
    assert ratios["Pallas SANTA (S = 2048) time / `dot_product_attention` xla time"][0] == 5.0
    assert ratios["Pallas Attn-QAT forward time / bf16 cudnn forward time"][0] == 120.0
    assert not any("forward + backward" in k for k in ratios)  # the QAT backward did not finish
    slow = [dict(r, ms=3.0) if r["name"] == "pallas_santa_S2048" else r for r in DECODE]
    first = ga.ratios_table(slow, [])["rows"][0]
    assert first[1] == pytest.approx(2 / 3) and first[3] is False


def test_long_errors_are_cut_to_one_line():
    cell = gr.cell_error("ValueError: " + "x" * 400 + "\nsecond line")
    assert cell.startswith("failed: ValueError: xxx") and len(cell) == 160 and "\n" not in cell


def test_paso_rows():
    ok = {"task": "digits MLP", "optimizer": "adam(1e-3)", "window": 16, "T": 2048,
          "status": "ok", "K": 512, "T_over_K": 4.0, "grad_evals": 6144, "loss_seq": 0.1,
          "loss_paso": 0.1, "param_rel_diff": 1e-6, "wall_seq_s": 2.0, "wall_paso_s": 0.5}  # fmt: skip
    row = gp.table_row(ok)
    assert len(row) == len(gp.COLUMNS) == len(gp.FORMATS)
    assert row[:7] == ["digits MLP", "adam(1e-3)", 16, 2048, 512, 4.0, 3.0]
    assert row[-3:] == [2.0, 0.5, 0.25]
    failed = dict(ok, status="failed", error="FileNotFoundError: no text/shakespeare")
    assert gp.table_row(failed)[4:6] == ["failed: FileNotFoundError: no text/shakespeare", None]
    assert gp.table_row(dict(ok, status="running"))[4] == gr.NOT_FINISHED


def test_written_file_renders_and_names_commit_and_append(tmp_path, monkeypatch):
    out = tmp_path / "benchmarks" / "results" / "gpu_attention.json"
    monkeypatch.setenv("FIDIA_COMMIT", "abc123+dirty")
    results = load_script("benchmarks/_results.py")
    results.write_results("gpu_attention", ga.tables(DECODE, TRAIN), command="python x.py",
                          extra={"raw": {"decode": DECODE, "train": TRAIN}}, out=out)  # fmt: skip
    doc = json.loads(out.read_text())
    assert doc["commit"] == "abc123+dirty" and " CPUs" in doc["machine"]
    page = tmp_path / "docs" / "p.md"
    page.parent.mkdir()
    page.write_text(
        "<!-- results: benchmarks/results/gpu_attention.json table=train -->\n<!-- /results -->\n"
    )
    assert rt.process_page(page, tmp_path, write=True, check_ignored=False) == []
    text = page.read_text()
    assert "| Pallas Attn-QAT (ours, FP4) | 1024 | 30.000 | not finished (" in text
    assert "commit `abc123+dirty`" in text
    # --append keeps the other rows and joins the commands
    args = type("A", (), {"out": str(out)})()
    run = ga.Run(args, {}, previous=doc)
    assert run.command.startswith("python x.py && python ")
    assert [r["name"] for r in run.train] == [r["name"] for r in TRAIN]
