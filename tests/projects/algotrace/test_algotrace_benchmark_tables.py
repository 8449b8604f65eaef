"""The results-file tables of ``benchmarks/algotrace.py`` (issue 41), on a hand-made result
whose cells are known: each table reads the number it names (not a neighbour's, not another
variant's)."""

from __future__ import annotations

import numpy as np
from _scripts import load_script

bench = load_script("benchmarks/algotrace.py")
PRIMS = bench.ALGOTRACE_PRIMITIVES


def _agree(x):
    return {"purity": x, "nmi": x / 2, "ari": x / 4}


def _variant(offset):
    table = {p: [offset + 0.01 * (i + 1) + 0.1 * j for j in range(5)] for i, p in enumerate(PRIMS)}
    table["random"] = [offset - 0.001 * j for j in range(5)]
    comp = {"distance+verify": {"delta_a": {"distance": 0.3, "verify": -0.1, "distance+verify": 0.2},
                                "delta_b": {"distance": -0.2, "verify": 0.6, "distance+verify": 0.4},
                                "sum_raises_both": True}}  # fmt: skip
    transfer = {p: {"tsp->nav": offset + i, "nav->nav": -i, "nav->tsp": 2.0 * i, "tsp->tsp": 0.5}
                for i, p in enumerate(PRIMS)}  # fmt: skip
    solved = {c: {"solved": {"tsp": offset + 0.25 * i, "nav": 0.5}}
              for i, c in enumerate(["none", *PRIMS, "random", "distance@tsp"])}  # fmt: skip
    return {"injection": {"table": table, "composition": comp, "transfer": transfer},
            "conditions": solved}  # fmt: skip


def _results():
    variants = {"tokens@1": _variant(0.0), "onset@1": _variant(1.0)}
    summary = {n: {"diagonal_positive": 3 + i, "diagonal_row_max": 2, "diagonal_beats_random": 4,
                   "transfer_positive": 7, "composition_raises_both": i}
               for i, n in enumerate(variants)}  # fmt: skip
    rates = {"all": [0.4, 0.25, 0.125, 0.13, 0.1]}
    return {
        "clustering": {"n_points": 2000, "layer": 2, "kmeans": _agree(0.8), "meta": _agree(0.6),
                       "token_identity": _agree(0.7), "random": _agree(0.4),
                       "per_layer": [_agree(0.5), _agree(0.6), _agree(0.8)]},
        "conditions": {"none": {"rates": rates, "solved": {"tsp": 0.25, "nav": 0.625}}},
        "train": {"first_loss": 3.9, "final_loss": 0.17},
        "injection": variants["tokens@1"]["injection"],
        "variant_summary": summary,
        "variants": variants,
    }  # fmt: skip


def test_every_table_reads_its_own_cells():
    t = bench.tables(_results())
    assert set(t) == {"clustering", "per_layer", "run", "variants"} | {
        f"{kind}_{v}" for kind in ("injection", "composition", "transfer", "solved")
        for v in ("tokens_1", "onset_1")}  # fmt: skip
    rows = {r[0]: r[1:] for r in t["clustering"]["rows"]}
    assert rows["k-means clusters"] == [0.8, 0.4, 0.2]
    assert rows["token identity (control)"] == [0.7, 0.35, 0.175]
    assert [r[1] for r in t["per_layer"]["rows"]] == [0.5, 0.6, 0.8]
    onset = {r[0]: r[1:] for r in t["injection_onset_1"]["rows"]}
    np.testing.assert_allclose(onset["compare"], [1.02, 1.12, 1.22, 1.32, 1.42])
    np.testing.assert_allclose(onset["random"], [1.0, 0.999, 0.998, 0.997, 0.996])
    assert t["composition_onset_1"]["rows"] == [
        ["distance+verify", "+0.300 / -0.200", "-0.100 / +0.600", "+0.200 / +0.400", "yes"]
    ]
    assert t["transfer_tokens_1"]["rows"][2] == ["nearest", 2.0, -2, 4.0, 0.5]
    assert t["variants"]["rows"][1] == ["`onset@1`", "4/5", "2/5", "4/5", "1/1", "7/10"]
    run = dict(t["run"]["rows"])
    assert run["uninjected prompts that write the exact solution path: TSP / navigation"] == (
        "0.250 / 0.625"
    )
    assert run["training loss (trace tokens), first step -> mean of the last 20"] == "3.90 -> 0.170"
    solved = t["solved_onset_1"]["rows"]  # the table's rows only (not the transfer conditions)
    assert [r[0] for r in solved] == ["none", *PRIMS, "random"]
    assert solved[2] == ["compare", 1.5, 0.5]
