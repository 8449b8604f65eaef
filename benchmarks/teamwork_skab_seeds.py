"""TeamWork on all 34 SKAB runs over several seeds, with its peers and ablations, paired tests.

Rows (one model per run and seed, SKAB's protocol: train on the first 400 points of each run,
``UCL = 4/3 q_0.999`` of the training scores, predictions pooled over the runs):

* TeamWork (ours, reconstruction) and two ablations: ``no_roles`` (all-to-all gated messages,
  roles off) and ``random_mask`` (i.i.d. point masks, period masks off);
* Conv-AE, the architecture of SKAB's leaderboard notebook (leaderboard F1 0.78);
* PCA T2+Q (deterministic; the leaderboard gives 0.76) and "flag everything" (every test point
  anomalous: F1 = 2p / (1 + p) with p the anomalous share).

Paired tests: Wilcoxon signed-rank over the 34 runs on the per-run F1 (SKAB's UCL rule) and
the per-run AUC-PR, each averaged over the seeds, TeamWork against every other row; and the
pooled F1 of each seed (mean, sd over seeds).

Usage (one process per seed and group of methods keeps each run short; the results of a seed
accumulate in its file; ``--report`` merges the seeds):
    python benchmarks/teamwork_skab_seeds.py --seed 0 [--methods teamwork,no_roles]
        [--steps 50] [--convae-steps 150]
    python benchmarks/teamwork_skab_seeds.py --report [--seeds 0,1,2]
    python benchmarks/teamwork_skab_seeds.py --diagnose   # what roles / period masks see
    python benchmarks/teamwork_skab_seeds.py --diagnose --report   # its table from its file
Writes ``benchmarks/results/teamwork_skab_seed<k>.json`` (each method's rows with the command
that ran them) and ``teamwork_skab_seeds.json``: the tables ``skab_seeds`` and ``per_seed`` that
docs/teamwork.md renders (``tools/render_tables.py``), whose ``command`` lists every command
that made the seed files and the report; ``--diagnose`` writes ``teamwork_skab_diagnose.json``
(table ``diagnose``).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time

import numpy as np

from fidia_jax import metrics
from fidia_jax._io import atomic_write_text
from fidia_jax.projects import teamwork
from fidia_jax.projects.teamwork import train as tw

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _results import command_line, default_out, load_average, retable, write_results  # noqa: E402

NEURAL = ("teamwork", "no_roles", "random_mask", "convae")
ROWS = {**{m: teamwork.METHODS[m] for m in (*NEURAL, "pca")}, "all": "flag everything"}
OUT = pathlib.Path("benchmarks/results")


def _counts(pred: np.ndarray, y: np.ndarray) -> list[int]:
    f = metrics.point_f1(pred, y)
    return [int(f["tp"]), int(f["fp"]), int(f["fn"]), int(f["tn"])]


def run_seed(args) -> None:
    runs, _ = teamwork.load_skab(args.data_dir)
    if args.runs:
        runs = runs[: args.runs]
    cfg = teamwork.get_config(
        "skab",
        seed=args.seed,
        dim=16,
        heads=2,
        batch_size=16,
        steps=args.steps,
        convae_steps=args.convae_steps,
        data_dir=args.data_dir,
    )
    k = teamwork.SKAB_TRAIN_SIZE
    path = OUT / f"teamwork_skab_seed{args.seed}.json"
    out: dict = json.loads(path.read_text()) if path.is_file() else {}
    cfg_json = json.loads(json.dumps(cfg.__dict__))  # tuples as lists, as read back
    if out.get("runs") != [r.name for r in runs] or out.get("config") != cfg_json:
        out = {"seed": args.seed, "config": cfg.__dict__, "runs": [r.name for r in runs]}
    for method in args.methods.split(","):
        if method != "all" and args.seed > 0 and method == "pca":
            continue  # deterministic: seed 0 holds it
        t0 = time.time()
        rows = []
        for r in runs:
            x_tr, x_te, y = r.values[:k], r.values[k:], r.anomaly[k:]
            if method == "all":
                rows.append({"ucl": _counts(np.ones_like(y, bool), y), "auc_pr": None})
                continue
            det = tw.fit_detector(method, x_tr, cfg)
            s, s_tr = det.score(x_te), det.score(x_tr)
            ucl = float(np.quantile(s_tr, 0.999)) * 4.0 / 3.0
            rows.append({"ucl": _counts(s >= ucl, y), "auc_pr": metrics.auc_pr(s, y)})
        out[method] = {"per_run": rows, "wall_s": time.time() - t0, "command": command_line(),
                       "load_average": load_average()}  # fmt: skip
        print(f"{method}: {time.time() - t0:.0f} s", flush=True)
        atomic_write_text(path, json.dumps(out, indent=1))


def _f1(c) -> float:
    tp, fp, fn, _ = np.asarray(c, float).sum(axis=0) if np.ndim(c) == 2 else c
    return float(tp / (tp + (fn + fp) / 2)) if tp + fp + fn else 1.0


def report(args) -> None:
    from scipy.stats import wilcoxon

    seeds = [int(s) for s in args.seeds.split(",")]
    res = [json.loads((OUT / f"teamwork_skab_seed{s}.json").read_text()) for s in seeds]
    names = res[0]["runs"]
    table, per_run_f1, per_run_ap = {}, {}, {}
    for m in ROWS:
        have = [r for r in res if m in r]
        if not have:
            continue
        pooled = [_f1([row["ucl"] for row in r[m]["per_run"]]) for r in have]
        counts = np.mean([[row["ucl"] for row in r[m]["per_run"]] for r in have], axis=0)
        far = 100 * counts[:, 1].sum() / (counts[:, 1].sum() + counts[:, 3].sum())
        mar = 100 * counts[:, 2].sum() / (counts[:, 2].sum() + counts[:, 0].sum())
        per_run_f1[m] = np.mean(
            [[_f1(row["ucl"]) for row in r[m]["per_run"]] for r in have], axis=0
        )
        aps = [[row["auc_pr"] for row in r[m]["per_run"]] for r in have]
        per_run_ap[m] = None if aps[0][0] is None else np.mean(np.asarray(aps, float), axis=0)
        table[m] = {
            "name": ROWS[m],
            "seeds": len(have),
            "f1_pooled_mean": float(np.mean(pooled)),
            "f1_pooled_sd": float(np.std(pooled, ddof=1)) if len(pooled) > 1 else 0.0,
            "f1_pooled_per_seed": pooled,
            "far": float(far),
            "mar": float(mar),
            "auc_pr_mean": None if per_run_ap[m] is None else float(np.nanmean(per_run_ap[m])),
            "f1_per_run_mean": float(np.mean(per_run_f1[m])),
        }
    tests = {}
    for m in table:
        if m == "teamwork":
            continue
        d = per_run_f1["teamwork"] - per_run_f1[m]
        t = {"f1_mean_diff": float(np.mean(d)), "f1_wins": int((d > 0).sum()),
             "f1_losses": int((d < 0).sum())}  # fmt: skip
        t["f1_p"] = float(wilcoxon(d).pvalue) if np.any(d != 0) else 1.0
        if per_run_ap[m] is not None:
            da = per_run_ap["teamwork"] - per_run_ap[m]
            t.update(auc_pr_mean_diff=float(np.nanmean(da)), auc_pr_p=float(wilcoxon(da).pvalue))
        tests[m] = t
    lines = [
        f"SKAB, {len(names)} runs, seeds {seeds}; F1 / FAR / MAR under SKAB's UCL rule, pooled "
        "over runs (mean +- sd over seeds); AUC-PR mean over runs",
        "| method | F1 (pooled) | FAR % | MAR % | AUC-PR | TeamWork - row: per-run F1 "
        "(Wilcoxon p, wins/losses) | TeamWork - row: AUC-PR (p) |",
        "|---|---|---|---|---|---|---|",
    ]
    for m, row in table.items():
        ap = "n/a" if row["auc_pr_mean"] is None else f"{row['auc_pr_mean']:.3f}"
        t = tests.get(m)
        c1 = "—" if t is None else (
            f"{t['f1_mean_diff']:+.3f} (p={t['f1_p']:.2g}, {t['f1_wins']}/{t['f1_losses']})"
        )  # fmt: skip
        c2 = "—" if t is None or "auc_pr_p" not in t else (
            f"{t['auc_pr_mean_diff']:+.3f} (p={t['auc_pr_p']:.2g})"
        )  # fmt: skip
        lines.append(
            f"| {row['name']} | {row['f1_pooled_mean']:.3f} +- {row['f1_pooled_sd']:.3f} | "
            f"{row['far']:.1f} | {row['mar']:.1f} | {ap} | {c1} | {c2} |"
        )
    text = "\n".join(lines)
    print(text)
    cols = ["method", "F1 (pooled)", "FAR %", "MAR %", "AUC-PR",
            "TeamWork - row: per-run F1 (Wilcoxon p, wins/losses)",
            "TeamWork - row: AUC-PR (p)"]  # fmt: skip
    body, per_seed = [], []
    for m, row in table.items():
        t = tests.get(m)
        c1 = None if t is None else (
            f"{t['f1_mean_diff']:+.3f} (p={t['f1_p']:.2g}, {t['f1_wins']}/{t['f1_losses']})"
        )  # fmt: skip
        c2 = None if t is None or "auc_pr_p" not in t else (
            f"{t['auc_pr_mean_diff']:+.3f} (p={t['auc_pr_p']:.2g})"
        )  # fmt: skip
        body.append([row["name"], [row["f1_pooled_mean"], row["f1_pooled_sd"]], row["far"],
                     row["mar"], row["auc_pr_mean"], c1, c2])  # fmt: skip
        per_seed.append([row["name"], row["seeds"],
                         ", ".join(f"{v:.3f}" for v in row["f1_pooled_per_seed"])])  # fmt: skip
    made = list(dict.fromkeys(r[m]["command"] for r in res for m in ROWS
                              if m in r and r[m].get("command")))  # fmt: skip
    write_results(
        "teamwork_skab_seeds",
        {"skab_seeds": {"columns": cols, "rows": body,
                        "formats": [None, ".3f", ".1f", ".1f", ".3f", None, None]},
         "per_seed": {"columns": ["method", "seeds", "pooled F1 per seed"], "rows": per_seed}},
        command=" ; ".join([*made, command_line()]), load_start=args.load_start,
        extra={"table": table, "tests": tests, "markdown": text, "seeds": seeds},
    )  # fmt: skip


def diagnose(args) -> dict:
    """What TeamWork's roles and period masks see on SKAB's training parts (numpy, seconds).

    Prints and writes ``benchmarks/results/teamwork_skab_diagnose.json`` (table ``diagnose``,
    :func:`diagnose_table`; the raw record beside it) and returns the record."""
    from fidia_jax.projects.teamwork import model

    runs, _ = teamwork.load_skab(args.data_dir)
    cfg = teamwork.get_config("skab", data_dir=args.data_dir)  # the window and lags trained with
    k = teamwork.SKAB_TRAIN_SIZE
    spans, ndom, infl_max, infl_mean, clipped = [], [], [], [], 0
    for r in runs:
        x = r.values[:k]
        z = (x - x.mean(0)) / x.std(0)
        u = model.channel_influence(z, lags=cfg.lags)
        ndom.append(int(model.channel_roles(u).sum()))
        infl_max.append(float(u.max()))
        infl_mean.append(float(u[~np.eye(u.shape[0], dtype=bool)].mean()))
        per, beyond = tw.channel_periods_beyond(z, cfg.window)  # training's period rule
        clipped += len(beyond)
        spans.append(np.maximum(per // 2, 1))
    spans = np.asarray(spans)
    y = np.concatenate([r.anomaly[k:] for r in runs])
    record = {
        "runs": len(runs),
        "dominant_count_histogram": np.bincount(ndom, minlength=9).tolist(),
        "influence_offdiag_mean_nats": float(np.mean(infl_mean)),
        "influence_largest_median_nats": float(np.median(infl_max)),
        "span_channels": int(spans.size),
        "window": cfg.window,
        "period_beyond_window": int(clipped),
        "span1_share": float((spans == 1).mean()),
        "span_median": float(np.median(spans)),
        "span_quartiles": np.percentile(spans, [25, 75]).tolist(),
        "anomalous_share": float(y.mean()),
    }
    table = diagnose_table(record)
    for name, value in table["rows"]:
        print(f"{name}: {value}")
    write_results(
        "teamwork_skab_diagnose", {"diagnose": table}, load_start=args.load_start, extra=record
    )
    return record


def diagnose_table(record: dict) -> dict:
    """The ``--diagnose`` table (quantity, value) of a record (:func:`diagnose`'s)."""
    hist = record["dominant_count_histogram"]
    share = record["anomalous_share"]
    q1, q3 = record["span_quartiles"]
    rows = [
        ["runs (training parts: the first 400 points)", str(record["runs"])],
        ["runs with 0, 1, ..., 8 dominant channels", ", ".join(map(str, hist))],
        ["channel influence U: mean off-diagonal (nats)",
         f"{record['influence_offdiag_mean_nats']:.4f}"],
        ["channel influence U: median over runs of the largest (nats)",
         f"{record['influence_largest_median_nats']:.3f}"],
        [f"period-aware span over {record['span_channels']} channels: share of span 1 "
         "(= point masking)", f"{record['span1_share']:.2f}"],
        [f"channels whose strongest period lies beyond the {record['window']}-step window "
         "(their period taken as the window)", str(record["period_beyond_window"])],
        ["period-aware span: median [quartiles]",
         f"{record['span_median']:.0f} [{q1:g}, {q3:g}]"],
        ["anomalous share of the test parts", f"{share:.3f}"],
        ["flag everything: F1 = 2 share / (1 + share)", f"{2 * share / (1 + share):.3f}"],
    ]  # fmt: skip
    return {"columns": ["quantity", "value"], "rows": rows}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--convae-steps", type=int, default=150)
    ap.add_argument("--runs", type=int, default=0, help="first N runs only (0 = all 34)")
    ap.add_argument("--data-dir", default=os.environ.get("FIDIA_DATA_DIR"))
    ap.add_argument("--methods", default=",".join((*NEURAL, "pca", "all")))
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--diagnose", action="store_true", help="roles / periods on SKAB, no fit")
    ap.add_argument("--seeds", default="0,1,2")
    args = ap.parse_args()
    args.load_start = load_average()
    if args.diagnose:
        if args.report:
            retable(
                default_out("teamwork_skab_diagnose"), lambda r: {"diagnose": diagnose_table(r)}
            )
        else:
            diagnose(args)
    elif args.report:
        report(args)
    else:
        run_seed(args)


if __name__ == "__main__":
    main()
