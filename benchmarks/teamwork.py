"""TeamWork (reconstruction) vs ablations, a role-free masked transformer, PCA T2+Q and Isolation
Forest: F1, point-adjusted F1 (inflated), affiliation F1 and AUC-PR in one table per dataset.

Three parts, all measured in this run:

1. ``synthetic``: :func:`fidia_jax.projects.teamwork.make_synthetic` (6 channels, 2 dominant, periods 24 / 40,
   injected point / contextual / shapelet / seasonal / trend anomalies), every method.
2. ``skab_classic``: PCA T2+Q and Isolation Forest on all 34 SKAB runs with SKAB's protocol
   (train on the first 400 points of each run, UCL = 4/3 * q_0.999 of training scores, pooled
   binary F1 / FAR / MAR): checks our protocol against SKAB's leaderboard (T2+Q 0.76, IF 0.29).
3. ``skab``: TeamWork, the role-free transformer and the two classic baselines, one model per
   run, on every ``--skab-every``-th run (reduced protocol on the shared 2-core machine).
   SKAB anchor (leaderboard, outlier task): Conv-AE F1 0.78.

VUS-PR is not reported: no PyPI package that computes it installs cleanly here (``vus`` 0.0.6
pulls TensorFlow 2.21, ``TSB-AD`` 1.5 pulls torch 2.14 and downgrades numpy to 1.26); the
point-wise AUC-PR stands in as the threshold-free column.

Usage: python benchmarks/teamwork.py [--smoke] [--full] [--data-dir DIR] [--skab-every 4]
``--full`` runs the issue's protocol (default presets, all 34 runs for every method).
The results file has one table per part run (``tables.<part>``), with the command, date,
machine, commit and load average; docs/teamwork.md renders them (``tools/render_tables.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time

from fidia_jax.projects import teamwork

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _results import RESERVED, load_average, write_results  # noqa: E402

ALL = tuple(teamwork.METHODS)
# Reduced protocol that fits the shared 2-core CPU sandbox (declared in docs/teamwork.md).
REDUCED = {"dim": 16, "heads": 2, "batch_size": 16}


def results_table(res: dict) -> dict:
    """``res`` (:func:`teamwork.compare_methods`) as a results-file table: the columns of
    :func:`teamwork.format_table`, numbers kept as numbers."""
    rows = res["rows"]
    ref_name = next(iter(rows))
    ref = rows[ref_name]
    rules = [r for r in ("ratio", "oracle", "skab_ucl") if r in ref]
    keys = ("f1", "pa_f1", "affiliation_f1")
    cols = ["method", "AUC-PR"] + [f"{k} [{r}]" for r in rules for k in keys]
    fmts = [None] + [".3f"] * (len(cols) - 1)
    if "skab_ucl" in rules:
        cols += ["FAR % [skab_ucl]", "MAR % [skab_ucl]"]
        fmts += [".1f", ".1f"]
    cols.append(f"F1[oracle] / {ref_name.split(' (')[0]}'s")
    fmts.append(".2f")
    body = []
    for name, row in rows.items():
        cells = [name, row["oracle"]["auc_pr"], *(row[r][k] for r in rules for k in keys)]
        if "skab_ucl" in rules:
            cells += [row["skab_ucl"]["far"], row["skab_ucl"]["mar"]]
        cells.append(row["oracle"]["f1"] / max(ref["oracle"]["f1"], 1e-12))
        body.append(cells)
    return {"columns": cols, "rows": body, "formats": fmts}


def main():
    load_start = load_average()
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true", help="seconds-long run, numbers meaningless")
    ap.add_argument("--full", action="store_true", help="the issue's protocol (hours on 2 CPUs)")
    ap.add_argument("--parts", default="synthetic,skab_classic,skab")
    ap.add_argument("--data-dir", default=os.environ.get("FIDIA_DATA_DIR"))
    ap.add_argument("--skab-every", type=int, default=4)
    ap.add_argument("--out", default="benchmarks/results/teamwork.json")
    args = ap.parse_args()
    if args.smoke:
        configs = {
            "synthetic": teamwork.get_config("tiny", methods=("teamwork", "transformer", "pca")),
            "skab_classic": teamwork.get_config("skab", methods=("pca", "iforest"), skab_runs=3),
            "skab": teamwork.get_config(
                "skab", methods=("teamwork", "pca"), skab_runs=2, steps=5, **REDUCED
            ),
        }
    elif args.full:
        configs = {
            "synthetic": teamwork.get_config("default"),
            "skab_classic": teamwork.get_config("skab", methods=("pca", "iforest")),
            "skab": teamwork.get_config("skab"),
        }
    else:
        configs = {
            "synthetic": teamwork.get_config(
                "default", train_length=1500, test_length=1500, n_anomalies=8, steps=200, **REDUCED
            ),
            "skab_classic": teamwork.get_config("skab", methods=("pca", "iforest")),
            "skab": teamwork.get_config(
                "skab",
                methods=("teamwork", "transformer", "pca", "iforest"),
                skab_every=args.skab_every,
                steps=100,
                **REDUCED,
            ),
        }
    parts = [p for p in args.parts.split(",") if p]
    out = pathlib.Path(args.out)
    results = json.loads(out.read_text()) if out.is_file() and len(parts) < 3 else {}
    # the parts of an earlier run stay as raw results; only this run's parts are tables
    results = {k: v for k, v in results.items() if k not in RESERVED}
    tables = {}
    for part in parts:
        cfg = configs[part]
        if cfg.dataset == "skab":
            cfg = type(cfg)(**{**cfg.__dict__, "data_dir": args.data_dir})
        t0 = time.time()
        res = teamwork.compare_methods(cfg)
        table = teamwork.format_table(res)
        print(f"\n## {part}\n{table}")
        if "teamwork_beats_transformer" in res:
            print(
                f"TeamWork above the role-free transformer on every metric (ratio and oracle "
                f"thresholds): {res['teamwork_beats_transformer']}"
            )
        results[part] = {
            **res,
            "table": table,
            "config": cfg.__dict__,
            "wall_s": time.time() - t0,
            "smoke": args.smoke,
        }
        tables[part] = results_table(res)
        extra = json.loads(json.dumps(results, default=list))
        write_results(out.stem, tables, load_start=load_start, extra=extra, out=out)
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
