"""The CausalEGM gap tables (issue 41): ``benchmarks/causalegm_gap.py`` writes the rows that
docs/causal.md renders from ``benchmarks/results/causalegm_gap.json``, and ``--report`` converts
a file of the format before issue 41 without running anything. No fitting: the record is made up,
its values chosen so that each cell can be worked out by hand."""

from __future__ import annotations

import copy
import json

import pytest
from _scripts import load_script

bench = load_script("benchmarks/causalegm_gap.py")
render = load_script("tools/render_tables.py")


def _entry(n_iter, pehe, cmd, date="2026-12-04T12:00:00+00:00", extra=None):
    runs = {str(s): {"sqrt_pehe": v, "ate_error": 0.1, "best_iter": n_iter, **(extra or {}).get(s, {})}
            for s, v in pehe.items()}  # fmt: skip
    return {"runs": runs, "ihdp_replication": 1, "n_iter": n_iter, "units": 747,
            "commands": [cmd], "date_utc": date}  # fmt: skip


# old format: entries only, no caption keys (as the file of 2026-12-04)
OLD = {
    "ours_default_ihdp1_500": _entry(500, {1: 1.0, 2: 2.0, 3: 3.0}, "python g.py ours",
                                     date="2026-12-04T12:20:08+00:00"),
    "package_ihdp1_500": _entry(500, {1: 2.0, 2: 4.0, 3: 6.0}, "python g.py peer",
                                date="2026-12-04T12:28:03+00:00"),
    "replay_ihdp1_500": _entry(
        500, {1: 2.1, 3: 5.9}, "python g.py replay", date="2026-12-04T12:12:16+00:00",
        extra={1: {"max_abs_ite_diff_vs_package": 0.02, "evals": [[0, 10.0], [500, 0.5]]},
           3: {"max_abs_ite_diff_vs_package": 0.05, "evals": [[0, 9.0], [500, 0.3]]}}),
    "package_ihdp1_3000": _entry(3000, {123: 0.6, 1: 0.4}, "python g.py peer --n-iter 3000",
                                 date="2026-12-04T12:42:04+00:00"),
    "fixture_variants": {"command": "python g.py fixture", "runs": {
        "adam=keras,critic_tf_moments=True": {"max_abs_param_diff": 8e-7,
            "max_rel_eval_mse_diff": 1e-7, "max_abs_best_ite_diff": 2e-7},
        "adam=optax,critic_tf_moments=False": {"max_abs_param_diff": 4e-2,
            "max_rel_eval_mse_diff": 1.4e-4, "max_abs_best_ite_diff": 1.8e-3}}},
    "compare_ours_default_ihdp1_500_vs_package_ihdp1_500": {
        "a": "ours_default_ihdp1_500", "b": "package_ihdp1_500", "mannwhitney_u_p": 0.4,
        "welch_t_p": 0.3, "command": "python g.py compare"},
    "package_runs": {"commands": ["venv/bin/python _causalegm_peer.py in out 500 1 2 3"],
                     "machine": "shared 2-core CPU sandbox"},
}  # fmt: skip
OLD["package_ihdp1_500"]["runs"]["1"]["evals"] = [[0.0, 10.0], [500.0, 0.4]]
OLD["package_ihdp1_500"]["runs"]["3"]["evals"] = [[0.0, 9.0], [500.0, 0.3]]


def test_seed_labels_join_consecutive_runs_in_the_runs_order():
    assert bench.seed_label(list(range(1, 13))) == "1-12"
    assert bench.seed_label([123, 1, 2, 3]) == "123, 1-3"
    assert bench.seed_label([1, 2, 5]) == "1, 2, 5"
    assert bench.seed_label([7]) == "7"


def test_runs_table_rows_by_iterations_then_package_ours_replay():
    t = bench.runs_table(OLD)
    assert len(t["columns"]) == len(t["formats"]) == 9
    assert [r[0] for r in t["rows"]] == [
        "package (`package_ihdp1_500`)",
        "ours, default (`ours_default_ihdp1_500`)",
        "ours replaying the package's run from its initial and mixing weights (`replay_ihdp1_500`)",
        "package (`package_ihdp1_3000`)",
    ]
    package, ours, replay, package3000 = t["rows"]
    # 2, 4, 6: mean 4, sd (ddof 1) = sqrt((4 + 0 + 4) / 2) = 2
    assert package[1:5] == [500, "1-3", pytest.approx([4.0, 2.0]), "2.000, 4.000, 6.000"]
    assert package[5:] == [None, None, None, None]
    # ours: the tests against the package at the same iterations
    assert ours[3] == pytest.approx([2.0, 1.0]) and ours[7:] == [0.4, 0.3]
    # replay of seeds 1 and 3: the package's values of those seeds, the largest ITE difference
    assert replay[2] == "1, 3" and replay[3] == pytest.approx([4.0, 2.6870057685088806])
    assert replay[5:7] == ["2.000, 6.000", 0.05]
    # one seed per run in the file's order; 0.6 and 0.4: mean 0.5, sd sqrt(0.02)
    assert package3000[2] == "123, 1" and package3000[3] == pytest.approx([0.5, 0.02**0.5])


def test_a_single_run_has_its_value_not_a_zero_spread():
    rec = {"replay_ihdp1_3000": _entry(3000, {123: 0.58}, "x", extra={123: {
        "max_abs_ite_diff_vs_package": 1.1, "evals": []}})}  # fmt: skip
    row = bench.runs_table(rec)["rows"][0]
    assert row[3] == 0.58 and row[5] is None and row[6] == 1.1  # no package entry: no values


def test_replay_evals_pair_each_evaluation_with_the_packages():
    rows = bench.replay_evals_table(OLD)["rows"]
    assert rows == [
        ["`replay_ihdp1_500`", 1, 0, 10.0, 10.0, 0.0],
        ["`replay_ihdp1_500`", 1, 500, 0.4, 0.5, pytest.approx(0.25)],  # 0.5 / 0.4 - 1
        ["`replay_ihdp1_500`", 3, 0, 9.0, 9.0, 0.0],
        ["`replay_ihdp1_500`", 3, 500, 0.3, 0.3, pytest.approx(0.0)],
    ]


def test_fixture_table_one_row_per_option_setting():
    rows = bench.fixture_table(OLD)["rows"]
    assert rows[0] == ["`keras`", "TensorFlow's (`critic_tf_moments=True`)", 8e-7, 1e-7, 2e-7]
    assert rows[1][:3] == ["`optax`", "exact (`critic_tf_moments=False`)", 4e-2]


def test_run_commands_package_venv_first_then_entries_once_each():
    assert bench.run_commands(OLD) == [
        "venv/bin/python _causalegm_peer.py in out 500 1 2 3",
        "python g.py ours", "python g.py peer", "python g.py replay",
        "python g.py peer --n-iter 3000", "python g.py fixture", "python g.py compare",
    ]  # fmt: skip


def test_report_converts_an_old_file_without_running(tmp_path):
    out = tmp_path / "causalegm_gap.json"
    out.write_text(json.dumps(OLD))
    bench.main(["--report", "--out", str(out)])
    doc = json.loads(out.read_text())
    assert doc["date"] == "2026-12-04 (the entries' date_utc: 12:12-12:42 UTC)"
    assert doc["command"] == " ; ".join(bench.run_commands(OLD))
    assert doc["commit"] == bench.LEGACY_CAPTION["commit"]
    assert doc["machine"] == bench.LEGACY_CAPTION["machine"]
    assert doc["conversion"]["filled"] == ["command", "commit", "date", "load_average", "machine"]
    assert doc["package_ihdp1_500"] == OLD["package_ihdp1_500"]  # the raw record is kept
    assert set(doc["tables"]) == {"runs", "replay_evals", "fixture"}
    text = "\n".join(render.render(doc, "causalegm_gap.json", "runs"))
    assert (
        "| package (`package_ihdp1_500`) | 500 | 1-3 | 4.000 ± 2.000 | 2.000, 4.000, 6.000 |"
        in text
    )
    assert "commit `unknown+not recorded, file converted 2026-12-05`" in text
    # a second --report keeps the caption and the conversion note as they are
    first = out.read_text()
    bench.main(["--retable", "--out", str(out)])
    assert out.read_text() == first


def test_a_run_after_the_conversion_keeps_the_earlier_caption(tmp_path, monkeypatch):
    monkeypatch.setenv("FIDIA_COMMIT", "abc123")
    out = tmp_path / "causalegm_gap.json"
    out.write_text(json.dumps(OLD))
    bench.main(["--report", "--out", str(out)])
    record, caption = bench.read(out)
    record = copy.deepcopy(record)
    record["compare_x_vs_y"] = {"command": "python g.py compare --a x --b y"}
    bench.save(out, record, caption)
    doc = json.loads(out.read_text())
    assert doc["commit"] == "abc123" and doc["command"].endswith(
        " ; python g.py compare --a x --b y"
    )
    assert doc["earlier_captions"] == [{k: v for k, v in caption.items() if k != "command"}]


def test_report_refuses_a_subcommand_and_a_missing_file(tmp_path):
    with pytest.raises(SystemExit):
        bench.main(["ours", "--report", "--out", str(tmp_path / "x.json")])
    with pytest.raises(SystemExit):
        bench.main(["--report", "--out", str(tmp_path / "missing.json")])
