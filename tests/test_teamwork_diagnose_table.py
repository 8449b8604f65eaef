"""TeamWork's ``--diagnose`` table (issue 41): ``benchmarks/teamwork_skab_seeds.py`` renders the
record of what roles and period masks see on SKAB into the table docs/teamwork.md renders. The
record is made up; the expected cells are worked out by hand."""

from __future__ import annotations

import json

from _scripts import load_script

bench = load_script("benchmarks/teamwork_skab_seeds.py")
results = load_script("benchmarks/_results.py")

RECORD = {
    "runs": 3,
    "dominant_count_histogram": [0, 1, 2, 0, 0, 0, 0, 0, 0],
    "influence_offdiag_mean_nats": 0.01234,
    "influence_largest_median_nats": 0.0876,
    "span_channels": 24,
    "window": 32,
    "period_beyond_window": 10,
    "span1_share": 0.25,
    "span_median": 16.0,
    "span_quartiles": [1.75, 16.0],
    "anomalous_share": 0.5,
}


def test_diagnose_table_cells():
    t = bench.diagnose_table(RECORD)
    cells = dict(t["rows"])
    assert cells["runs with 0, 1, ..., 8 dominant channels"] == "0, 1, 2, 0, 0, 0, 0, 0, 0"
    assert cells["channel influence U: mean off-diagonal (nats)"] == "0.0123"
    assert cells["channel influence U: median over runs of the largest (nats)"] == "0.088"
    assert cells["period-aware span over 24 channels: share of span 1 (= point masking)"] == "0.25"
    key = "channels whose strongest period lies beyond the 32-step window (their period taken as the window)"
    assert cells[key] == "10"
    assert cells["period-aware span: median [quartiles]"] == "16 [1.75, 16]"
    # flag everything at an anomalous share s: precision s, recall 1 -> F1 = 2s / (1 + s) = 2/3
    assert cells["flag everything: F1 = 2 share / (1 + share)"] == "0.667"


def test_retable_from_the_written_file(tmp_path):
    table = bench.diagnose_table(RECORD)
    out = results.write_results(
        "teamwork_skab_diagnose", {"diagnose": table}, extra=RECORD, out=tmp_path / "d.json"
    )
    back = json.loads(out.read_text())
    assert (
        bench.diagnose_table(back) == table == {**table, "rows": back["tables"]["diagnose"]["rows"]}
    )
