"""Residual-update geometry of a tiny vision-language model: RID / MixIG table and interventions.

Runs :func:`fidia_jax.projects.residual_geometry.train_and_evaluate` for each seed (a LlamaVL
trained on synthetic digit questions + text-only arithmetic) and writes
``benchmarks/results/residual_geometry.json`` through :func:`_results.write_results`;
``docs/residual_geometry.md`` renders its tables from that file
(``python tools/render_tables.py --write docs/residual_geometry.md``). Tables (cells
``seed 0 / seed 1 / ...`` where a column says "per seed"):

* ``geometry``: the paper's table on our model: RID, ΔS, ΔD, ΔD in our earlier (page) form,
  MixIG, held-out R² and TME of the attention and FFN updates of the plain model and of the
  attention update under each intervention on the visual tokens of every layer (mean over
  layers, per seed);
* ``layers``: RID, ΔS, ΔD and MixIG per layer, and RID with the page ΔD, the note's RID and
  MixIG (per seed);
* ``paired``: attention − FFN RID per layer and seed (and of each sequence's mean over
  layers), paired over the analysed sequences (:func:`_stats.paired_tests`), and the attention
  − FFN MixIG;
* ``accuracy``: visual / text-only / per-kind test accuracy, plain and under each intervention
  (all layers, one layer at a time);
* ``ratios``: the ratios the paper's claims are about, each against the plain model or the FFN of
  the same run (mean ± sd over seeds, per seed);
* ``rank``: ΔD per layer of the attention and FFN updates under each rank rule (the default
  cutoff, ``rtol`` and fixed-``rank`` grids), per seed;
* ``forms``: RID in our form (default and page ΔD) beside the third-party note's RID, ΔS, ΔD
  and MixIG, on the same captures and rank rule (mean over layers, per seed).

There is no peer implementation (the authors' code needs a pretrained LVLM); the reference of
every ratio is the plain model (or the FFN update) of the same run.

Declared protocol of the documented run (2-core CPU shared with other jobs): the ``demo``
preset (2 layers, 800 AdamW steps, 4000 training questions, 400 test questions, 100 analysed
sequences) for seeds 0 and 1. The full protocol is the ``default`` preset (4 layers, 3000
steps, 8000 / 1000 questions, 200 analysed sequences) for seeds 0, 1, 2:
``python benchmarks/residual_geometry.py --config default --seeds 0,1,2``.

Usage: python benchmarks/residual_geometry.py [--smoke] [--config demo] [--seeds 0,1]
       [--set key=value ...] [--out benchmarks/results/residual_geometry.json]
       python benchmarks/residual_geometry.py --report [--out PATH]   # re-table, no run
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _results import command_line, default_out, load_average, retable, write_results  # noqa: E402
from _stats import paired_cells, paired_tests  # noqa: E402

ROW_NAMES = {
    "attention": "attention",
    "ffn": "FFN",
    "noise_delta": "Noise Δ",
    "noise_qkv": "Noise QKV",
    "sap": "SAP (uniform visual attention)",
}
"""Display names of the geometry rows (the configs' ``INTERVENTIONS`` plus the plain updates)."""

KINDS = ("which", "even", "plus")
"""The visual question kinds of the accuracy table (``questions.DIGIT_QA_KINDS`` less ``add``,
the text-only kind, which the ``text_only`` column covers)."""


def _per_seed(values: Sequence[float | None], fmt: str = ".3f") -> str:
    """``"v0 / v1 / ..."``; ``None`` as a dash."""
    return " / ".join("—" if v is None else format(v, fmt) for v in values)


def _name(row: str) -> str:
    return ROW_NAMES.get(row, row)


def _geo(runs: Sequence[Mapping], row: str, key: str) -> list[list[float]] | None:
    """Per seed, the per-layer list of ``geometry[row][key]`` (``None`` when a run lacks it)."""
    out = []
    for r in runs:
        g = r["results"]["geometry"].get(row, {})
        if key not in g:
            return None
        out.append(list(g[key]))
    return out


def _mean_cell(runs, row, key, fmt=".3f") -> str | None:
    v = _geo(runs, row, key)
    return None if v is None else _per_seed([float(np.mean(x)) for x in v], fmt)


def geometry_table(runs: Sequence[Mapping]) -> dict:
    """Per update: RID, ΔS, ΔD, ΔD (page form), MixIG, R² self → self+mix and TME of the
    authors' form, each the mean over layers, ``seed 0 / seed 1 / ...``."""
    rows = []
    for row in runs[0]["results"]["geometry"]:
        r2_self, r2_mix = _geo(runs, row, "r2_self"), _geo(runs, row, "r2_mix")
        r2 = " / ".join(
            f"{np.mean(a):.2f} → {np.mean(b):.2f}" for a, b in zip(r2_self, r2_mix, strict=True)
        )
        rows.append(
            [
                _name(row),
                _mean_cell(runs, row, "rid"),
                _mean_cell(runs, row, "delta_s", "+.3f"),
                _mean_cell(runs, row, "delta_d"),
                _mean_cell(runs, row, "delta_d_page"),
                _mean_cell(runs, row, "mixig", "+.3f"),
                r2,
                _mean_cell(runs, row, "tme"),
            ]
        )
    return {
        "columns": [
            "update",
            "RID (per seed)",
            "ΔS (nats)",
            "ΔD",
            "ΔD, page form",
            "MixIG (nats)",
            "held-out R² self → self+mix",
            "TME",
        ],
        "rows": rows,
    }


def layers_table(runs: Sequence[Mapping]) -> dict:
    """Per layer and update: RID, ΔS, ΔD and MixIG, then RID with the page ΔD and the note's RID
    and MixIG, ``seed 0 / seed 1 / ...``."""
    geo0 = runs[0]["results"]["geometry"]
    n_layers = len(geo0["attention"]["rid"])
    rows = []
    for layer in range(n_layers):
        for row in geo0:
            cells = []
            for key, fmt in (("rid", ".3f"), ("delta_s", "+.3f"), ("delta_d", ".3f"),
                             ("mixig", "+.3f"), ("rid_page", ".3f"), ("rid_note", ".3f"),
                             ("mixig_note", "+.4f")):  # fmt: skip
                cells.append(_per_seed([v[layer] for v in _geo(runs, row, key)], fmt))
            rows.append([layer, _name(row), *cells])
    return {
        "columns": [
            "layer",
            "update",
            "RID (per seed)",
            "ΔS",
            "ΔD",
            "MixIG (nats)",
            "RID, page ΔD",
            "RID note",
            "MixIG note",
        ],  # fmt: skip
        "rows": rows,
    }


def paired_table(runs: Sequence[Mapping]) -> dict:
    """Per seed, each layer and then the mean over layers: attention − FFN RID paired over the
    analysed sequences (mean and median difference, sequences with attention lower, Wilcoxon
    and t-test p), and attention − FFN MixIG (pooled, one number per layer; their mean)."""
    rows = []
    for r in runs:
        geo = r["results"]["geometry"]
        att, ffn = geo["attention"], geo["ffn"]
        a_seq = np.asarray(att["rid_per_sequence"], dtype=float)  # (layers, sequences)
        f_seq = np.asarray(ffn["rid_per_sequence"], dtype=float)
        mixig = np.asarray(att["mixig"], dtype=float) - np.asarray(ffn["mixig"], dtype=float)
        cases = [(layer, a_seq[layer], f_seq[layer], mixig[layer]) for layer in range(len(a_seq))]
        cases.append(("mean", a_seq.mean(0), f_seq.mean(0), mixig.mean()))
        for layer, a, f, dm in cases:
            rows.append([r["seed"], layer, *paired_cells(paired_tests(a, f)), float(dm)])
    return {
        "columns": [
            "seed",
            "layer",
            "sequences",
            "RID attention − FFN, mean",
            "median",
            "attention lower",
            "Wilcoxon p",
            "paired t-test p",
            "MixIG attention − FFN (nats)",
        ],
        "rows": rows,
        "formats": [None, None, None, "+.3f", "+.3f", None, ".2g", ".2g", "+.3f"],
    }


def _accuracy_rows(accuracy: Mapping[str, Any]) -> list[tuple[str, Mapping]]:
    rows = [("plain", accuracy["plain"])]
    for name, by_layers in accuracy.items():
        if name == "plain":
            continue
        for where, a in by_layers.items():
            label = "all layers" if where == "all_layers" else where.replace("_", " ") + " only"
            rows.append((f"{_name(name)}, {label}", a))
    return rows


def accuracy_table(runs: Sequence[Mapping]) -> dict:
    """Test accuracy (visual, text-only, each visual kind), plain and under each intervention,
    ``seed 0 / seed 1 / ...``."""
    per_run = [_accuracy_rows(r["results"]["accuracy"]) for r in runs]
    rows = []
    for i, (label, _) in enumerate(per_run[0]):
        cells = [
            _per_seed([pr[i][1][k] for pr in per_run]) for k in ("visual", "text_only", *KINDS)
        ]
        rows.append([label, *cells])
    return {
        "columns": ["model", "visual (per seed)", "text-only", "which", "even", "plus k"],
        "rows": rows,
    }


def ratio_rows(results: Mapping) -> list[tuple[str, float]]:
    """``(label, value)`` ratios of one run (attention / FFN geometry; intervention / plain
    accuracy, all layers)."""
    geo, acc = results["geometry"], results["accuracy"]
    rows = [
        (
            "RID attention / FFN (mean over layers)",
            float(np.mean(geo["attention"]["rid"]) / np.mean(geo["ffn"]["rid"])),
        ),
        (
            "MixIG attention − FFN (nats, mean over layers)",
            float(np.mean(geo["attention"]["mixig"]) - np.mean(geo["ffn"]["mixig"])),
        ),
    ]
    for name, by_layer in acc.items():
        if name == "plain":
            continue
        for part, label in (("visual", "visual"), ("text_only", "text-only")):
            rows.append(
                (
                    f"accuracy {_name(name)}, all layers / plain, {label}",
                    by_layer["all_layers"][part] / max(acc["plain"][part], 1e-9),
                )
            )
    return rows


def ratios_table(runs: Sequence[Mapping]) -> dict:
    """Each ratio of :func:`ratio_rows`: ``[mean, sd]`` over seeds and the per-seed values."""
    per_seed = [dict(ratio_rows(r["results"])) for r in runs]
    rows = []
    for label in per_seed[0]:
        v = np.asarray([p[label] for p in per_seed], dtype=float)
        rows.append([label, [float(v.mean()), float(v.std())], _per_seed(v.tolist())])
    return {
        "columns": ["quantity", "mean ± sd over seeds", "per seed"],
        "rows": rows,
        "formats": [None, ".3f", None],
    }


def rank_table(runs: Sequence[Mapping]) -> dict:
    """ΔD per layer of the attention and FFN updates under each rank rule: the run's own rule
    (``geometry``'s ``delta_d``), then every rule of ``rank_sensitivity``; one row per rule and
    seed, with attention − FFN (mean over layers)."""
    rows = []
    rules = ["default"] + list(runs[0]["results"]["rank_sensitivity"])
    n_layers = len(runs[0]["results"]["geometry"]["attention"]["delta_d"])
    for rule in rules:
        for r in runs:
            res = r["results"]
            if rule == "default":
                rtol = r["config"].get("rtol")
                label = (
                    "the run's rule ("
                    + ("authors' cutoff" if rtol is None else f"rtol={rtol:g}")
                    + ")"
                )
                att, ffn = (
                    res["geometry"]["attention"]["delta_d"],
                    res["geometry"]["ffn"]["delta_d"],
                )
            else:
                label = rule
                att = res["rank_sensitivity"][rule]["attention"]
                ffn = res["rank_sensitivity"][rule]["ffn"]
            rows.append([label, r["seed"], *att, *ffn, float(np.mean(att) - np.mean(ffn))])
    cols = [f"attention, layer {i}" for i in range(n_layers)]
    cols += [f"FFN, layer {i}" for i in range(n_layers)]
    return {
        "columns": ["rule", "seed", *cols, "attention − FFN (mean)"],
        "rows": rows,
        "formats": [None, None, *[".3f"] * (2 * n_layers), "+.3f"],
    }


def forms_table(runs: Sequence[Mapping]) -> dict:
    """Per update, mean over layers, ``seed 0 / seed 1 / ...``: RID in our form (the run's ΔD
    form, and the page form) and MixIG (ours), beside the third-party note's RID, ΔS, ΔD and
    MixIG on the same captures and rank rule."""
    rows = []
    for row in runs[0]["results"]["geometry"]:
        rows.append(
            [
                _name(row),
                _mean_cell(runs, row, "rid"),
                _mean_cell(runs, row, "rid_page"),
                _mean_cell(runs, row, "mixig", "+.3f"),
                _mean_cell(runs, row, "rid_note"),
                _mean_cell(runs, row, "delta_s_note"),
                _mean_cell(runs, row, "delta_d_note"),
                _mean_cell(runs, row, "mixig_note", "+.4f"),
            ]
        )
    return {
        "columns": [
            "update",
            "RID ours (per seed)",
            "RID ours, page ΔD",
            "MixIG ours (nats)",
            "RID note",
            "ΔS note",
            "ΔD note",
            "MixIG note (nats)",
        ],
        "rows": rows,
    }


def tables(record: Mapping[str, Any]) -> dict[str, dict]:
    """Every table of the page from a results record's raw ``runs`` (a pure function of them)."""
    runs = record["runs"]
    return {
        "geometry": geometry_table(runs),
        "layers": layers_table(runs),
        "paired": paired_table(runs),
        "accuracy": accuracy_table(runs),
        "ratios": ratios_table(runs),
        "rank": rank_table(runs),
        "forms": forms_table(runs),
    }


def main(argv=None) -> int:
    load_start = load_average()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="the tiny preset, one seed (seconds)")
    ap.add_argument("--config", default="demo")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--set", dest="assignments", action="append", default=[])
    ap.add_argument(
        "--out",
        default=None,
        help="results file (default: benchmarks/results/residual_geometry.json; --smoke: a "
        "temp file)",
    )
    ap.add_argument(
        "--report", action="store_true", help="no run: rebuild the tables of --out from its runs"
    )
    args = ap.parse_args(argv)
    out = args.out or default_out("residual_geometry", args.smoke)
    if args.report:
        retable(out, tables)
        return 0

    from fidia_jax.config import config_to_dict, override_config
    from fidia_jax.projects import residual_geometry as rg

    command = command_line(None if argv is None else [str(pathlib.Path(__file__).resolve()), *argv])
    name = "tiny" if args.smoke else args.config
    seeds = [0] if args.smoke else [int(s) for s in args.seeds.split(",")]
    runs, t0 = [], time.time()
    for seed in seeds:
        config = override_config(rg.load_config(name), [*args.assignments, f"seed={seed}"])
        t_seed = time.time()
        with tempfile.TemporaryDirectory() as workdir:
            results = rg.train_and_evaluate(config, workdir)
        runs.append(
            {
                "seed": seed,
                "wall_s": time.time() - t_seed,
                "config": config_to_dict(config),
                "results": results,
            }
        )
        record = {"runs": runs}
        path = write_results(
            "residual_geometry",
            tables(record),
            command=command,
            load_start=load_start,
            extra={
                "config_name": name,
                "seeds": seeds,
                "seeds_done": [r["seed"] for r in runs],
                "wall_s": time.time() - t0,
                "paper_ordering_every_layer": [
                    r["results"]["ordering"]["paper_ordering_every_layer"] for r in runs
                ],
                **record,
            },
            out=out,
        )
        print(f"seeds done {[r['seed'] for r in runs]}; wrote {path}", flush=True)
    for label, mean_sd, per in tables({"runs": runs})["ratios"]["rows"]:
        print(f"| {label} | {mean_sd[0]:.3f} ± {mean_sd[1]:.3f} | {per} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
