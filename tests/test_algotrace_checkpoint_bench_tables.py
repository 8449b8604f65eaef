"""The AlgoTrace-on-a-checkpoint benchmark's results tables (issue 41):
``benchmarks/algotrace_checkpoint.py`` writes the tables the Gemma 3 270M section of
docs/algotrace.md renders. No model: the run's record is made up, the rows worked by hand."""

from __future__ import annotations

import json

import pytest
from _scripts import load_script

acb = load_script("benchmarks/algotrace_checkpoint.py")
rt = load_script("tools/render_tables.py")
results = load_script("benchmarks/_results.py")

PRIMS = ["distance", "compare", "nearest", "verify", "path"]


def _agree(purity, nmi, ari):
    return {"purity": purity, "nmi": nmi, "ari": ari}


def _row(deltas, half=0.1):
    return [{"delta": d, "ci95": [d - half, d + half]} for d in deltas]


def _record():
    # injection: each vector raises its own share by 0.1 * (its index + 1); random lowers
    # distance by 0.5 and leaves the rest
    table = {
        p: _row([0.1 * (i + 1) if j == i else 0.0 for j in range(5)]) for i, p in enumerate(PRIMS)
    }
    table["random"] = _row([-0.5, 0.0, 0.0, 0.0, 0.0], half=0.05)
    run = {
        "checkpoint": "/somewhere/gemma-3-270m-q4_k_m.gguf",
        "load_s": 61.4,
        "wall_s": 1234.6,
        "doc_tokens": 200,
        "prompt_tokens": 120,
        "mean_vector_norm": 300.0,
        "config": {
            "checkpoint_docs": 24,
            "checkpoint_shots": 2,
            "checkpoint_ie_docs": 2,
            "n_clusters": 50,
            "seed": 0,
        },  # fmt: skip
        "clustering": {
            "n_points": 2752,
            "layer": 1,
            "kmeans": _agree(0.8, 0.4, 0.07),
            "random": _agree(0.43, 0.015, 0.001),
            "token_identity": _agree(0.66, 0.32, 0.09),
            "per_layer": [_agree(0.7, 0.3, 0.05), _agree(0.8, 0.4, 0.07), _agree(0.9, 0.5, 0.1)],
        },
        "vectors": {
            p: {
                "norm": 100.0 * (i + 1),
                "heads": [[i, 0], [2, i]],
                "keyword": f" {p}",
                "keyword_id": 7 + i,
                "onsets": 10 + i,
            }
            for i, p in enumerate(PRIMS)
        },  # fmt: skip
        "injection": {
            "layer": 1,
            "resid_norm": 200.0,
            "scale": 1.0,
            "n_prompts": 24,
            "new_tokens": 48,
            "baseline_rates": [0.5, 0.2, 0.1, 0.1, 0.1],
            "table": table,
            "diagonal_vs_random": {
                p: {
                    "diff": 0.1 * (i + 1) + (0.5 if i == 0 else 0.0),
                    "ci95": [0.01 * i, 0.02 * i + 0.0004],
                    "p_not_above": 0.0005 * i,
                }
                for i, p in enumerate(PRIMS)
            },  # fmt: skip
            "solved": {"none": 2 / 24, **{p: 0.0 for p in PRIMS}, "random": 1 / 24},
            "lines_per_prompt": {"none": 8.25, **{p: 5.0 for p in PRIMS}, "random": 0.0},
        },
    }
    return {"run": run}


def _cells(table, i):
    return dict(zip(table["columns"], table["rows"][i], strict=True))


def test_clustering_and_per_layer():
    t = acb.tables(_record())
    cl = t["clustering"]
    assert [r[0] for r in cl["rows"]] == [
        "k-means (k = 50)",
        "random clusters, same sizes (control)",
        "token identity (control)",
    ]
    assert cl["rows"][0][1:] == [0.8, 0.4, 0.07]  # the headline layer's k-means (layer 1)
    assert cl["rows"][2][1:] == [0.66, 0.32, 0.09]
    assert [r[:3] for r in t["per_layer"]["rows"]] == [[0, 0.7, 0.3], [1, 0.8, 0.4], [2, 0.9, 0.5]]
    run = dict(t["run"]["rows"])
    assert run["checkpoint"] == "gemma-3-270m-q4_k_m.gguf"
    assert run["headline layer (resid_post after block ...)"] == "1 of 3"
    assert run["documents x solved examples (tokens per document, at most)"] == "24 x 2 (200)"
    assert run["load / wall time (s)"] == "61 / 1235"


def test_injection_cells_bold_diagonal_and_random_row():
    t = acb.tables(_record())["injection"]
    assert t["columns"] == ["vector", *PRIMS]
    assert [r[0] for r in t["rows"]] == [*PRIMS, "random (same norm)"]
    # verify (index 3): its own share +0.4, interval +0.4 -/+ 0.1 to two decimals
    assert _cells(t, 3)["verify"] == "**+0.400** [+0.30, +0.50]"
    assert _cells(t, 3)["distance"] == "+0.000 [-0.10, +0.10]"
    assert _cells(t, 5)["distance"] == "-0.500 [-0.55, -0.45]"  # random: never bold
    assert sum("**" in c for r in t["rows"] for c in r[1:]) == 5


def test_own_rate_minus_random_and_baseline():
    t = acb.tables(_record())
    vs = _cells(t["vs_random"], 0)
    # distance: own +0.1, random's change of distance -0.5: difference +0.6
    assert vs["its vector's change of its rate"] == pytest.approx(0.1)
    assert vs["random vector's change"] == pytest.approx(-0.5)
    assert vs["difference"] == pytest.approx(0.6)
    assert _cells(t["vs_random"], 2)["95% CI"] == "[+0.020, +0.040]"
    assert _cells(t["vs_random"], 4)["P(difference <= 0)"] == pytest.approx(0.002)
    assert t["baseline"]["rows"][0] == ["distance", 0.5]
    cond = {r[0]: r[1:] for r in t["conditions"]["rows"]}
    assert list(cond) == ["none", *PRIMS, "random (same norm)"]
    assert cond["none"] == [8.25, "2 / 24"] and cond["random (same norm)"] == [0.0, "1 / 24"]
    vec = {r[0]: r[1:] for r in t["vectors"]["rows"]}
    assert vec["compare"][:4] == [200.0, 1.0, "1.0, 2.1", "`compare`"]  # norm / resid 200
    assert vec["random (the mean norm)"][:2] == [300.0, 1.5]


def test_results_file_renders_and_retables(tmp_path, monkeypatch):
    monkeypatch.setenv("FIDIA_COMMIT", "abc123")
    out = tmp_path / "algotrace_checkpoint.json"
    record = _record()
    results.write_results("algotrace_checkpoint", acb.tables(record), command="python a.py",
                          extra=record, out=out)  # fmt: skip
    doc = json.loads(out.read_text())
    lines = rt.render(doc, "benchmarks/results/algotrace_checkpoint.json", "vs_random")
    assert "`python a.py`" in lines[1]
    assert lines[5] == "| distance | +0.100 | -0.500 | +0.600 | [+0.000, +0.000] | 0.0000 |"
    doc["tables"] = {}
    out.write_text(json.dumps(doc))
    assert acb.main(["--report", "--out", str(out)]) == 0
    again = json.loads(out.read_text())
    assert again["tables"] == json.loads(json.dumps(acb.tables(record)))
    assert again["command"] == "python a.py"


def test_cli_argv_names_the_protocol():
    argv = acb.cli_argv("m.gguf", "/w", ["seed=1"])
    assert argv[:4] == ["algotrace", "train", "--workdir", "/w"]
    sets = argv[5::2]
    assert sets[0] == "checkpoint=m.gguf" and sets[-1] == "seed=1"  # later --set wins
    assert "checkpoint_max_seq_len=256" in sets and "checkpoint_prompts=24" in sets
