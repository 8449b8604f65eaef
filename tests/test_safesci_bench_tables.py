"""The SafeSci benchmark's results tables (issue 41): ``benchmarks/safesci.py`` writes the
tables docs/safesci.md renders. No model is trained: the raw results are made up."""

from __future__ import annotations

import json

import pytest
from _scripts import load_script

ss = load_script("benchmarks/safesci.py")
rt = load_script("tools/render_tables.py")
results = load_script("benchmarks/_results.py")


def _block(n, mean, boot=None):
    return {"n": n, "mean": mean, "boot_mean": None if boot is None else boot[0],
            "boot_std": None if boot is None else boot[1]}  # fmt: skip


def _row(info, correct, choice=0.5, by_seed=(0.5, 0.5)):
    items = [{"type": "scq", "correct": c} for c in correct] + [
        {"type": "refusal", "refusal": False}
    ]
    return {
        "info": info,
        "choice_accuracy": _block(3, choice, (0.4, 0.1)),
        "tf_accuracy": _block(1, 1.0),
        "refusal_rate": _block(1, 0.0, (0.0, 0.0)),
        "variants": {"choice_official": 0.75, "refusal_official": 1.0},
        "split_accuracy": {"train": {"n": 3, "mean": 2 / 3}, "heldout": {"n": 1, "mean": 0.0}},
        "official_prompt_choice_accuracy": 0.25,
        "choice_accuracy_by_shuffle_seed": list(by_seed),
        "items": items,
    }


LLAMA = {"params": 128832, "steps": 300, "vocab": 428, "rows": 200, "first_loss": 6.59,
         "final_loss": 0.0008, "train_s": 200.0, "heldout": [1, 3]}  # fmt: skip


def record():
    return {
        "order_seeds": [0, 1000, 1001],
        "models": {
            # items 0..3; item 2 skipped (empty response); held out: 1 and 3
            "llama": _row(LLAMA, [True, True, None, False], by_seed=(0.2, 0.4, 0.6)),
            "constant": _row({"letter": "B", "tf_word": "True"}, [False, True, True, True]),
        },
        "parity": {
            "source": "run here",
            "commit": "ff55ea5b20",
            "cases": 429,
            "agree": 428,
            "max_bootstrap_abs_diff": 0.0,
            "same_as_stored": True,
        },  # fmt: skip
        "wall_s": 300.0,
        "cpu_s": 120.0,
    }


def test_scores_and_orders_tables():
    t = ss.tables(record())
    assert list(t) == ["scores", "orders", "bootstrap", "split", "paired", "llama", "peer"]
    s = t["scores"]
    assert len(s["columns"]) == len(s["formats"]) == len(s["rows"][0])
    assert s["columns"][1] == "choice acc, strict (3)" and s["columns"][4] == "refusal, strict (1)"
    llama, const = s["rows"]  # the order of the raw results
    assert llama[0].startswith("llama (trained here, 129 k params, 300 steps)")
    assert const[0] == 'constant "B" / "True" (best of A-D, True/False on these items)'
    assert llama[1:] == [0.5, [0.4, 0.1], 1.0, 0.0, [0.0, 0.0], 0.75, 1.0]
    o = t["orders"]
    assert "3 option orders (seeds 0, 1000, 1001)" in o["columns"][2]
    assert o["rows"][0][1] == 0.25
    assert o["rows"][0][2] == pytest.approx([0.4, 0.2])  # mean, std with ddof 1


def test_paired_rows_split_by_heldout_and_skip_unscored_items():
    parts = {p["part"]: p for p in ss.paired_rows(record())}
    # item 2 is unscored for the llama: dropped from every part
    assert parts["all"]["n"] == 3 and parts["all"]["mean_diff"] == pytest.approx(0.0)
    assert (parts["all"]["a_higher"], parts["all"]["a_lower"]) == (1, 1)
    assert parts["trained records"]["n"] == 1 and parts["trained records"]["mean_diff"] == 1.0
    assert parts["held-out records"]["n"] == 2
    assert parts["held-out records"]["mean_diff"] == pytest.approx(-0.5)
    rows = ss.paired_table(record())["rows"]
    assert [r[0] for r in rows] == ["llama − constant, all", "llama − constant, trained records",
                                    "llama − constant, held-out records"]  # fmt: skip


def test_llama_and_peer_tables():
    t = ss.tables(record())
    assert t["llama"]["rows"][0][:4] == [128832, 428, 200, 300]
    assert t["llama"]["rows"][0][-2:] == [300.0, 120.0]
    peer = t["peer"]["rows"][0]
    assert peer[1] == "ff55ea5" and peer[3] == 428
    assert peer[4] == pytest.approx(428 / 429) and peer[6] is True
    stored = record()
    stored["parity"].update(source="stored", same_as_stored=None)
    assert ss.peer_table(stored)["rows"][0][0].startswith("stored fixture")


def test_split_table_and_render(tmp_path, monkeypatch):
    sp = ss.split_table(record())
    assert "(3 items)" in sp["columns"][1] and "(1 items)" in sp["columns"][2]
    assert sp["rows"][0][1:] == [pytest.approx(2 / 3), 0.0]
    monkeypatch.setenv("FIDIA_COMMIT", "abc123")
    out = tmp_path / "safesci.json"
    rec = record()
    results.write_results("safesci", ss.tables(rec), command="python benchmarks/safesci.py",
                          extra=rec, out=out)  # fmt: skip
    doc = json.loads(out.read_text())
    assert ss.tables(doc) == doc["tables"]  # re-tabling the file gives the same tables
    lines = rt.render(doc, "benchmarks/results/safesci.json", "scores")
    assert "commit `abc123`" in lines[1]
    assert lines[5].startswith(
        "| llama (trained here, 129 k params, 300 steps) | 0.500 | 0.400 ± 0.100 |"
    )


def test_bootstrap_rows_over_seeds():
    rows = ss.bootstrap_rows(record(), seeds=50)
    llama = rows[0]
    assert llama["model"] == "llama" and llama["n"] == 3  # the unscored item is left out
    assert llama["mean"] == pytest.approx(2 / 3)
    # int(0.34 * 3) = 1: each subsample is one item, so every estimate is a multiple of 1/5
    assert llama["seed0"] == ss.safesci_bootstrap([1.0, 1.0, 0.0], seed="0:Overall")[0]
    assert 0.0 <= llama["lo"] <= llama["boot_mean"] <= llama["hi"] <= 1.0
    assert llama["boot_mean"] == pytest.approx(2 / 3, abs=0.1)
    t = ss.bootstrap_table(record())
    assert len(t["columns"]) == len(t["formats"]) == len(t["rows"][0])
    assert "seeds 0-499" in t["columns"][4]
