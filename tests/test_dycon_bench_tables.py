"""The DyCon benchmark's results tables (issue 41): ``benchmarks/dycon.py`` builds the tables
docs/dycon.md renders from its raw results. No training: the records are made up."""

from __future__ import annotations

import json

import pytest
from _scripts import load_script

bench = load_script("benchmarks/dycon.py")
rt = load_script("tools/render_tables.py")
results = load_script("benchmarks/_results.py")

# six test prompts: k = 2, 2, 3, 3, 4, 4 (buckets 2-3 and 4-4)
K = [2, 2, 3, 3, 4, 4]
RECORDS = {
    "baseline": {"correct": [1, 1, 1, 0, 1, 1], "num_tokens": [10, 12, 14, 16, 20, 22],
                 "redundant": [1, 1, 0, 1, 1, 2], "corrective": [0, 1, 0, 0, 1, 0],
                 "uncorrected": [0, 0, 0, 1, 0, 0], "num_operands": K},
    "nowait": {"correct": [1, 0, 1, 0, 0, 0], "num_tokens": [8, 8, 10, 10, 14, 14],
               "redundant": [0] * 6, "corrective": [0] * 6,
               "uncorrected": [0, 1, 0, 1, 1, 1], "num_operands": K},
    "static": {"correct": [1, 1, 1, 1, 1, 0], "num_tokens": [12, 12, 16, 16, 22, 24],
               "redundant": [2, 1, 1, 1, 2, 2], "corrective": [0, 1, 0, 1, 1, 0],
               "uncorrected": [0] * 6, "num_operands": K},
    "dycon": {"correct": [1, 1, 1, 1, 1, 0], "num_tokens": [9, 11, 13, 15, 19, 20],
              "redundant": [0, 0, 0, 1, 0, 1], "corrective": [0, 1, 0, 0, 1, 0],
              "uncorrected": [0, 0, 0, 1, 0, 1], "num_operands": K},
}  # fmt: skip


def _cell(n, acc, acc_se, tok, tok_se, rate):
    return {"n": n, "accuracy": acc, "accuracy_se": acc_se, "tokens": tok, "tokens_se": tok_se,
            "corrective": 0.25, "redundant": 0.5, "errors": 0.4, "uncorrected": 0.1,
            "malformed": 0.0, "finished": 1.0, "correction_rate": rate}  # fmt: skip


def _record():
    summary = {
        m: {"2-3": _cell(4, 0.75, 0.25, 13.0, 1.3, 0.5), "4-4": _cell(2, 1.0, 0.0, 21.0, 1.0, None),
            "all": _cell(6, 5 / 6, 0.17, 94 / 6, 1.9, 0.9 if m == "dycon" else 0.8)}
        for m in ("baseline", "nowait", "static", "dycon")
    }  # fmt: skip
    return {
        "probe": {
            "r2": [0.1, 0.4, 0.6],
            "r2_shuffled": [0.0, -0.1, -0.2],
            "best_layer": 2,
            "r2_first_boundary": None,
        },  # fmt: skip
        "control": {"static": {"lam": 2.0, "tau": 0.6}, "dycon": {"lam": 4.0, "tau": 0.45}},
        "summary": summary,
        "goals": {
            "accuracy_within_1se": {"baseline": 5 / 6, "baseline_se": 0.17, "met": True},
            "fewer_tokens": {"met": True},
            "beats_nowait_hardest": {"met": False},
        },
        "records": RECORDS,
        "config": {"control_form": "one_sided"},
    }


def test_probe_and_decoding_tables():
    rec = _record()
    p = bench.probe_table(rec)
    assert p["columns"] == ["hidden state", "embeddings", "after block 0", "after block 1",
                            "after block 1 (best), first boundaries only"]  # fmt: skip
    assert p["rows"][0] == ["probe (true targets)", 0.1, 0.4, 0.6, None]
    assert p["rows"][1][-1] is None
    d = bench.decoding_table(rec)
    assert d["columns"] == ["method", "k=2-3 acc (n=4)", "k=4 acc (n=2)", "all acc (n=6)",
                            "k=2-3 tokens", "k=4 tokens", "all tokens"]  # fmt: skip
    assert [r[0] for r in d["rows"]] == ["baseline", "NoWait", "static probe (λ=2, τ=0.6)",
                                         "DyCon (λ=4, τ=0.45)"]  # fmt: skip
    assert d["rows"][0][1] == [0.75, 0.25] and d["rows"][0][4] == [13.0, 1.3]
    assert len(d["formats"]) == len(d["columns"]) == len(d["rows"][0])
    r = bench.reflections_table(rec)
    assert r["rows"][0][r["columns"].index("errors followed by a reflection")] == 0.8
    assert r["rows"][3][r["columns"].index("errors followed by a reflection")] == 0.9


def test_goals_paired_differences():
    g = bench.goals_table(_record())
    acc, tok, hard = g["rows"]
    assert acc[0].startswith("accuracy") and acc[1] == pytest.approx(5 / 6)
    assert acc[3] == pytest.approx(5 / 6 - 0.17)  # threshold: baseline − 1 SE
    # dycon − baseline per prompt = [0, 0, 0, +1, 0, −1]: mean 0, SE sqrt(2/5) / sqrt(6)
    assert acc[4] == pytest.approx([0.0, (2 / 5) ** 0.5 / 6**0.5])
    assert acc[5] == pytest.approx(1.0) and acc[-1] is True
    # tokens: dycon − baseline per prompt = [-1, -1, -1, -1, -1, -2]
    assert tok[1] == pytest.approx(87 / 6) and tok[2] == pytest.approx(94 / 6)
    assert tok[4][0] == pytest.approx(-7 / 6)
    assert tok[4][1] == pytest.approx(0.40824829 / 6**0.5)
    assert tok[6] < 0.01  # paired t-test: every prompt saves a token
    # the hardest bucket (k = 4): DyCon [1, 0], NoWait [0, 0]
    assert hard[0] == "accuracy above NoWait (k=4)"
    assert hard[1:3] == [0.5, 0.0] and hard[4][0] == pytest.approx(0.5) and hard[-1] is False


def test_paired_table_rows():
    t = bench.paired_table(_record())
    assert [r[0] for r in t["rows"]] == ["DyCon − baseline", "DyCon − NoWait",
                                         "DyCon − static probe"]  # fmt: skip
    static = t["rows"][2]
    i = t["columns"].index("Δ redundant (± SE)")
    assert static[i][0] == pytest.approx((0 - 7) / 6)  # 2 vs 9 redundant in all
    assert static[t["columns"].index("Δ accuracy (± SE)")] == pytest.approx([0.0, 0.0])


def test_forms_compare_pairs_prompt_by_prompt():
    one = {**_record(), "date": "d1", "commit": "c1"}
    two = json.loads(json.dumps(one))
    two["config"].update(control_form="two_sided", end_scale=1.0)
    two["control"]["dycon"] = {"lam": 8.0, "tau": 0.3}
    two["records"]["dycon"]["num_tokens"] = [10, 12, 14, 16, 20, 22]
    two["records"]["dycon"]["correct"] = [1, 1, 1, 1, 1, 1]
    three = json.loads(json.dumps(two))
    three["config"]["end_scale"] = 0.0
    three["records"]["dycon"]["num_tokens"] = [11, 13, 15, 17, 21, 24]
    comp = bench.compare_record([one, two, three], ["a.json", "b.json", "c.json"])
    assert comp["baselines_identical"]
    t = bench.forms_table(comp)
    assert t["columns"][:5] == [
        "decoder: quantity (per test prompt)",
        "prompts",
        "A: one_sided (DyCon λ=4, τ=0.45)",
        "B: two_sided, end_scale=1 (DyCon λ=8, τ=0.3)",
        "C: two_sided, end_scale=0 (DyCon λ=8, τ=0.3)",
    ]
    assert t["columns"][5::2] == [
        "A − B (paired ± SE)",
        "A − C (paired ± SE)",
        "B − C (paired ± SE)",
    ]
    assert len(t["formats"]) == len(t["columns"]) == len(t["rows"][0])
    rows = {r[0]: r for r in t["rows"]}
    tok = rows["DyCon: tokens"]
    assert tok[1] == 6 and tok[2] == pytest.approx(87 / 6) and tok[3] == pytest.approx(94 / 6)
    assert tok[5][0] == pytest.approx(-7 / 6)  # A − B
    assert tok[9] == pytest.approx([-7 / 6, 1 / 6])  # B − C: [-1, -1, -1, -1, -1, -2]
    hard = rows["DyCon: accuracy, k=4"]
    assert hard[1] == 2 and hard[2:4] == [0.5, 1.0]
    assert rows["static probe: tokens"][5] == pytest.approx([0.0, 0.0])
    two["records"]["baseline"]["correct"][0] = 0
    assert not bench.compare_record([one, two], ["a", "b"])["baselines_identical"]


def test_file_renders(tmp_path, monkeypatch):
    monkeypatch.setenv("FIDIA_COMMIT", "abc123")
    out = tmp_path / "dycon.json"
    rec = _record()
    results.write_results("dycon", bench.tables_of(rec), command="python d.py", extra=rec,
                          out=out)  # fmt: skip
    doc = json.loads(out.read_text())
    assert sorted(doc["tables"]) == ["decoding", "goals", "paired", "probe", "reflections"]
    lines = rt.render(doc, "benchmarks/results/dycon.json", "decoding")
    assert "`python d.py`" in lines[1] and "commit `abc123`" in lines[1]
    assert lines[5].startswith("| baseline | 0.750 ± 0.250 | 1.000 ± 0.000 | 0.833 ± 0.170 |")
    goals = rt.render(doc, "benchmarks/results/dycon.json", "goals")
    assert goals[5].endswith("| yes |") and goals[7].endswith("| no |")


def test_packed_records_give_the_same_tables():
    packed = bench.pack(RECORDS)
    assert packed["dycon"]["num_tokens"] == "9 11 13 15 19 20"
    back = bench.unpack(packed)
    assert back["baseline"]["correct"].tolist() == RECORDS["baseline"]["correct"]
    rec = _record()
    assert bench.tables_of({**rec, "records": packed}) == bench.tables_of(rec)
