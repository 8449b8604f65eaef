"""``benchmarks/hitvar.py``'s results tables (issue 41): built from a run's raw record alone.
No training: the record is made up."""

from __future__ import annotations

import json

import pytest
from _scripts import load_script

hv = load_script("benchmarks/hitvar.py")
results = load_script("benchmarks/_results.py")
rt = load_script("tools/render_tables.py")

# scipy's t-test warns on the made-up near-constant differences; only the tables are checked
pytestmark = pytest.mark.filterwarnings("ignore:Precision loss:RuntimeWarning")

RUN_METHODS = list(hv.LABELS)  # the run's order (hitvar.METHODS)
N = 6


def _record() -> dict:
    # per crop: HIT-VAR's LPIPS 0.30 everywhere; bicubic 0.10 + i / 100 (lower on every crop);
    # conv SR equal to HIT-VAR on every crop (no difference); the others spread around 0.30
    lpips = {m: [0.30 + 0.01 * ((i * (k + 1)) % 3 - 1) for i in range(N)]
             for k, m in enumerate(RUN_METHODS)}  # fmt: skip
    lpips["HIT-VAR"] = [0.30] * N
    lpips["bicubic"] = [0.10 + i / 100 for i in range(N)]
    lpips["conv SR"] = [0.30] * N
    psnr = {m: [20.0] * N for m in RUN_METHODS}
    psnr["HIT-VAR"] = [20.0 + i for i in range(N)]  # higher than bicubic on crops 1..5
    psnr["bicubic"] = [20.5] * N
    per_crop = {m: {"lpips": lpips[m], "psnr": psnr[m]} for m in RUN_METHODS}
    metrics = {
        m: {
            "x1": {"psnr": 1.0, "ssim": 0.1, "lpips": None},
            "x4": {"psnr": sum(psnr[m]) / N, "ssim": 0.5, "lpips": sum(lpips[m]) / N},
        }
        for m in RUN_METHODS
    }
    return {
        "config": {"max_scale": 4},
        "metrics": metrics,
        "per_crop": per_crop,
        "params": {
            "HIT-VAR (inference)": 272138,
            "plain RQ+VAR (inference)": 260000,
            "conv SR": 269883,
        },  # fmt: skip
        "num_tokens": 85,
        "prefix_lengths": {"x1": 2, "x2": 3, "x3": 3, "x4": 4},
        "dpo_valid_frac": 0.5,
        "dpo_lpips_valid_frac": None,
        "goals": {
            "tokens_matter": False,
            "lpips_top_beats_bicubic": False,
            "lpips_top_beats_plain_var": True,
            "dpo_helps": False,
            "met": False,
        },  # fmt: skip
        "wall_s": {"total": 1234.4},
    }


def test_top_table_rows_in_run_order_with_ratio_to_hitvar():
    t = hv.top_table(_record())
    assert len(t["columns"]) == len(t["formats"]) == len(t["rows"][0])
    assert [r[0] for r in t["rows"]] == [hv.LABELS[m] for m in RUN_METHODS]
    rows = {r[0]: r for r in t["rows"]}
    assert rows["HIT-VAR (DPO on the (LR, HR) pair)"][4] == pytest.approx(1.0)
    bic = rows["bicubic"]
    assert bic[3] == pytest.approx(0.125)  # mean of 0.10 .. 0.15
    assert bic[4] == pytest.approx(0.125 / 0.30)
    assert bic[1] == pytest.approx(20.5)


def test_paired_table_differences_counts_and_verdicts():
    t = hv.paired_table(_record())
    assert len(t["columns"]) == len(t["formats"]) == len(t["rows"][0])
    assert [r[0] for r in t["rows"]] == [c[0] for c in hv.COMPARISONS]
    rows = {r[0]: dict(zip(t["columns"], r, strict=True)) for r in t["rows"]}
    b = rows["HIT-VAR vs bicubic"]
    assert b["crops"] == N
    assert b["LPIPS a"] == pytest.approx(0.30) and b["LPIPS b"] == pytest.approx(0.125)
    assert b["LPIPS a − b"] == pytest.approx(0.175)  # a - b, not b - a
    assert b["crops a lower"] == 0
    assert b["p (LPIPS)"] == pytest.approx(2 / 2**N)  # exact two-sided signed-rank, all one sign
    assert b["LPIPS verdict"] == "b better"
    assert b["PSNR a − b (dB)"] == pytest.approx(22.5 - 20.5)
    assert b["crops a higher"] == 5
    c = rows["HIT-VAR vs conv SR"]  # equal on every crop: no p, a tie
    assert c["LPIPS a − b"] == 0 and c["p (LPIPS)"] is None and c["LPIPS verdict"].startswith("tie")


def test_run_table_and_report_round_trip(tmp_path, monkeypatch):
    monkeypatch.setenv("FIDIA_COMMIT", "abc123")
    rec = _record()
    t = hv.run_table(rec)
    cells = dict(t["rows"])
    assert cells["parameters: conv SR"] == 269883
    assert cells["token scales read by the x4 prefix"] == 4
    assert cells["held-out crops"] == N
    assert "LPIPS-ranked DPO pairs valid (fraction)" not in cells  # None: left out
    assert cells["HIT-VAR beats plain RQ+VAR (LPIPS, p < 0.05)"] == "yes"
    assert cells["goal met (beats bicubic and plain RQ+VAR)"] == "no"
    assert cells["training + scoring wall time (s)"] == 1234
    out = tmp_path / "hitvar.json"
    results.write_results("hitvar", {"top": {"columns": ["x"], "rows": [[1]]}},
                          command="python benchmarks/hitvar.py", extra=rec, out=out)  # fmt: skip
    assert hv.main(["--report", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert set(doc["tables"]) == {"top", "paired", "run"}
    assert doc["commit"] == "abc123" and doc["per_crop"] == rec["per_crop"]
    lines = rt.render(doc, "benchmarks/results/hitvar.json", "top")
    assert "`python benchmarks/hitvar.py`" in lines[1]
    assert any(ln.startswith("| bicubic | 20.50 | 0.500 | 0.125 | 0.42 |") for ln in lines)
