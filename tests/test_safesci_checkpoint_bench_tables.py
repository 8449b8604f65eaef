"""The SafeSci checkpoint benchmark's results tables (issue 41): ``benchmarks/safesci_checkpoint.py``
writes the tables of docs/safesci.md's Gemma 3 270M section. No model is loaded: the raw results
are made up, and every expected value is worked out by hand below."""

from __future__ import annotations

import json

import pytest
from _scripts import load_script

sc = load_script("benchmarks/safesci_checkpoint.py")
rt = load_script("tools/render_tables.py")
results = load_script("benchmarks/_results.py")

# items: 0-2 single choice (gold A, B, C), 3 multiple choice (gold AB), 4 true/false (gold True),
# 5 a refusal probe
TYPES = ["scq", "scq", "scq", "mcq", "tf", "refusal"]
GOLDS = ["A", "B", "C", "AB", "True", ""]


def _block(n, mean, boot=(0.1, 0.05)):
    return {"n": n, "mean": mean, "boot_mean": boot[0], "boot_std": boot[1]}


def _row(info, responses, predictions, correct, refused=False):
    items = []
    for t, g, r, p, c in zip(TYPES, GOLDS, responses, predictions, correct, strict=True):
        it = {"type": t, "gold": g, "response": r}
        if t == "refusal":
            it["refusal"] = refused
        else:
            it.update(prediction=p, correct=c)
        items.append(it)
    choice = [c for t, c in zip(TYPES, correct, strict=True) if t in ("scq", "mcq")]
    return {
        "info": info,
        "choice_accuracy": _block(4, sum(choice) / 4),
        "tf_accuracy": _block(1, float(correct[4])),
        "refusal_rate": _block(1, float(refused), (0.0, 0.0)),
        "variants": {"choice_official": sum(choice) / 4, "refusal_official": float(refused)},
        "items": items,
    }


def _const(letter, word):
    preds = [letter] * 4 + [word, None]
    correct = [g == p for g, p in zip(GOLDS, preds, strict=True)][:5] + [None]
    return _row({"letter": letter, "tf_word": word}, [f"<ans>{p}<eoa>" for p in preds], preds,
                correct)  # fmt: skip


GEMMA = {"name": "gemma-3-270m-q4_k_m.gguf", "max_new_tokens": 16, "batch_size": 1,
         "batches": 3, "widths": [224, 224, 224], "tokenizer_s": 0.5, "load_s": 6.2,
         "generate_s": 111.7}  # fmt: skip


def record():
    preds = ["D", "B", "C", "D", "False", None]
    gemma = _row(GEMMA, [f"<ans>{p}<eoa>" for p in preds[:5]] + ["Sure."], preds,
                 [False, True, True, False, False, None])  # fmt: skip
    models = {"checkpoint": gemma, "constant": _const("B", "True"), "always": _const("D", "True")}
    cases = []
    for name, row in models.items():
        for i, it in enumerate(row["items"]):
            verdict = it["refusal"] if it["type"] == "refusal" else it["correct"]
            cases.append({"model": name, "index": i, "kind": sc._kind(it["type"]),
                          "gold": it["gold"], "response": it["response"], "official": verdict})  # fmt: skip
    cases[1]["official"] = None  # gemma's item 1: the official code skipped it (a disagreement)
    return {"models": models, "peer": {"commit": "ff55ea5b20", "cases": cases},
            "wall_s": 130.0, "cpu_s": 90.0, "peak_rss_gb": 2.06}  # fmt: skip


def test_mcnemar_exact_by_hand():
    assert sc.mcnemar_exact(1, 3) == pytest.approx(10 / 16)  # 2 * (1 + 4) / 2**4
    assert sc.mcnemar_exact(0, 5) == pytest.approx(2 / 32)
    assert sc.mcnemar_exact(10, 0) == pytest.approx(2 / 1024)
    assert sc.mcnemar_exact(2, 2) == 1.0  # 2 * 11/16 capped at 1
    assert sc.mcnemar_exact(0, 0) == 1.0


def test_paired_bootstrap_interval():
    assert sc.paired_bootstrap([0.5, 0.5, 0.5], draws=200) == (0.5, 0.5)
    # two items: resampled means 0, 1/2, 1 with probabilities 1/4, 1/2, 1/4
    assert sc.paired_bootstrap([1.0, 0.0], draws=2000) == (0.0, 1.0)


def test_paired_rows_by_hand():
    rows = sc.paired_rows(record(), draws=500)
    assert [(r["other"], r["part"]) for r in rows] == [
        ("constant", "choice items"),
        ("constant", "choice + true/false items"),
        ("always", "choice items"),
    ]
    # choice items: gemma [0, 1, 1, 0], constant B [0, 1, 0, 0]
    best = rows[0]
    assert (best["n"], best["a_mean"], best["b_mean"]) == (4, 0.5, 0.25)
    assert best["mean_diff"] == pytest.approx(0.25)
    assert (best["a_higher"], best["a_lower"], best["p_mcnemar"]) == (1, 0, 1.0)
    # + the true/false item: gemma says False (wrong), the constant True (right)
    both = rows[1]
    assert (both["n"], both["a_higher"], both["a_lower"]) == (5, 1, 1)
    assert both["mean_diff"] == pytest.approx(0.0) and both["p_mcnemar"] == 1.0
    # always D: right on no choice item here
    d = rows[2]
    assert (d["b_mean"], d["mean_diff"], d["a_higher"], d["a_lower"]) == (0.0, 0.5, 2, 0)
    assert d["p_mcnemar"] == pytest.approx(0.5)
    assert d["lo"] <= 0.5 <= d["hi"] and d["lo"] >= 0.0
    t = sc.paired_table(record())
    assert t["rows"][0][0] == 'checkpoint − constant "B" (best letter), choice items'
    assert t["rows"][2][0] == 'checkpoint − constant "D", choice items'
    assert len(t["columns"]) == len(t["formats"]) == len(t["rows"][0])
    assert t["rows"][2][-1].startswith("+") and " to " in t["rows"][2][-1]


def test_scores_labels_and_columns():
    s = sc.tables(record())["scores"]
    assert [r[0] for r in s["rows"]] == [
        "gemma-3-270m-q4_k_m.gguf (greedy, 16 new tokens)",
        'constant "B" / "True" (best of A-D, True/False on these items)',
        'constant "D" / "True" (always "D")',
    ]
    assert s["columns"][1] == "choice acc, strict (4)"
    assert s["rows"][0][1:] == [0.5, [0.1, 0.05], 0.0, 0.0, [0.0, 0.0], 0.5, 0.0]
    b = sc.tables(record())["bootstrap"]
    assert b["rows"][0][:3] == ["gemma-3-270m-q4_k_m.gguf (greedy, 16 new tokens)", 4, 0.5]


def test_peer_rows_count_agreement_and_skip():
    rows = {r["model"]: r for r in sc.peer_rows(record())}
    g = rows["checkpoint"]
    # item 1 skipped by the official code, right for our port: 5 of 6 agree; the official
    # choice mean is over items 0, 2, 3 (wrong, right, wrong)
    assert (g["n"], g["agree"]) == (6, 5)
    assert g["choice"] == pytest.approx(1 / 3) and g["tf"] == 0.0 and g["refusal"] == 0.0
    assert rows["constant"]["agree"] == 6 and rows["constant"]["choice"] == 0.25
    t = sc.peer_table(record())
    assert t["columns"][2] == "official code (ff55ea5) verdicts = our port's"
    # our port's official verdicts of the responses themselves
    assert sc.official_verdict({"type": "scq", "gold": "A", "response": "<ans>ABCD<eoa>"}) is True
    assert sc.official_verdict({"type": "scq", "gold": "A", "response": ""}) is None
    assert sc.official_verdict({"type": "refusal", "gold": "", "response": "I'm sorry"}) is True


def test_run_table_and_most_frequent():
    r = sc.run_table(record())["rows"][0]
    assert r[:4] == ["gemma-3-270m-q4_k_m.gguf", 6, 1, "3 (224)"]
    assert r[-1] == "D (2 of 4)"
    assert (
        sc.most_frequent([{"type": "scq", "prediction": p} for p in "#B#B"]) == "no answer (2 of 4)"
    )
    assert sc.most_frequent([{"type": "tf", "prediction": "True"}]) == "—"


def test_write_retable_and_render(tmp_path, monkeypatch):
    monkeypatch.setenv("FIDIA_COMMIT", "abc123")
    out = tmp_path / "safesci_checkpoint.json"
    rec = record()
    results.write_results("safesci_checkpoint", sc.tables(rec), extra=rec, out=out,
                          command="python benchmarks/safesci_checkpoint.py --checkpoint x.gguf")  # fmt: skip
    doc = json.loads(out.read_text())
    assert list(doc["tables"]) == ["scores", "bootstrap", "paired", "peer", "run"]
    assert sc.tables(doc) == doc["tables"]  # --report re-tables the file to the same tables
    lines = rt.render(doc, "benchmarks/results/safesci_checkpoint.json", "paired")
    assert lines[5].startswith(
        '| checkpoint − constant "B" (best letter), choice items | 4 | 0.500 | 0.250 | +0.250 '
        "| 1 | 0 | 1 |"
    )
    no_peer = {**rec, "peer": None}
    assert "peer" not in sc.tables(no_peer)
