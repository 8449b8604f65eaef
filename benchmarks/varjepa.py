"""Var-T-JEPA vs T-JEPA: frozen-embedding probes on Adult, breast_cancer and digits.

For every dataset and seed the driver (:func:`fidia_jax.projects.varjepa.run`, ``default``
preset) pretrains T-JEPA (the authors' EMA ramp, multi-mask views, raw targets, one extra token)
and Var-T-JEPA, probes their frozen embeddings with logistic regression and an MLP, runs the
same two probes on the raw features and on their first ``dim`` principal components (label-free
baselines) and fits LightGBM (supervised) in the same run, records the embeddings'
effective rank over training, and scores Var-T-JEPA's posterior variance by the area under the
risk-coverage curve (AURC) of the linear probe's errors.

It writes ``benchmarks/results/varjepa.json`` (``--out``) with ``_results.write_results``: the
tables that ``docs/varjepa.md`` renders (``tools/render_tables.py``), with the command, date,
machine, commit and load average, and the raw per-run results (``runs``, ``summary``):

* ``accuracy``: per dataset, mean +- sample s.d. over seeds of each method's linear / MLP probe
  accuracy, effective rank and AURCs; the raw and PCA features under the same probes;
  LightGBM (supervised) in a column of its own;
* ``paired``: paired t-tests over seeds (Var-T-JEPA vs T-JEPA; each method vs the best
  label-free baseline under the same probe) and on how many seeds each side is above;
* ``per_seed``: every accuracy of every run, and its wall time.

No method or baseline is tuned: every one runs with its preset / library defaults, on the same
split, so none gets a validation budget the others lack. ``<out stem>.partial.json`` keeps the
finished runs of an interrupted benchmark.

Usage:
  python benchmarks/varjepa.py [--datasets adult,breast_cancer,digits] [--seeds 0,1,2,3,4]
                               [--steps 300] [--adult-max-train 4000] [--smoke] [--out PATH]
  python benchmarks/varjepa.py --combine a.json,b.json   # tables of earlier runs together
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

import numpy as np

from fidia_jax._io import atomic_write_text, json_text
from fidia_jax.projects import varjepa

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _results import RESERVED, load_average, write_results  # noqa: E402

ROWS = ("T-JEPA", "Var-T-JEPA")


def summarise(runs: list[dict]) -> dict:
    """Per dataset: mean/std of every accuracy, effective rank and AURC over seeds, and the
    goal check (Var-T-JEPA mean >= T-JEPA mean, linear and MLP probe)."""
    out = {}
    for ds in sorted({r["dataset"] for r in runs}):
        rs = [r for r in runs if r["dataset"] == ds]
        entry: dict = {
            "seeds": [r["seed"] for r in rs],
            "n_train": rs[0]["n_train"],
            "n_test": rs[0]["n_test"],
            "rows": {},
        }
        for name in ROWS:
            rows = [r["methods"][name] for r in rs if name in r["methods"]]
            if not rows:
                continue
            entry["rows"][name] = {
                k: [row.get(k) for row in rows]
                for k in (
                    "linear_acc",
                    "mlp_acc",
                    "final_effective_rank",
                    "aurc_posterior_variance",
                    "aurc_probe_confidence",
                    "aurc_random",
                )
            }
            entry["rows"][name]["effective_rank_curve"] = [
                row["history"]["effective_rank"] for row in rows
            ]
        for base in sorted({k for r in rs for k in r.get("baselines", {})}):
            entry["rows"][base] = {"acc": [r["baselines"][base] for r in rs if "baselines" in r]}
        if all(n in entry["rows"] for n in ROWS):
            t, v = entry["rows"]["T-JEPA"], entry["rows"]["Var-T-JEPA"]
            entry["var_ge_t_linear"] = bool(np.mean(v["linear_acc"]) >= np.mean(t["linear_acc"]))
            if all(x is not None for x in v["mlp_acc"] + t["mlp_acc"]):
                entry["var_ge_t_mlp"] = bool(np.mean(v["mlp_acc"]) >= np.mean(t["mlp_acc"]))
        entry["paired"] = _paired(entry["rows"])
        out[ds] = entry
    return out


def _ttest(a, b) -> dict:
    """Paired t-test over seeds of ``a - b`` (two-sided p; ``nan`` with < 2 seeds or no spread)."""
    from scipy import stats

    a, b = np.asarray(a, float), np.asarray(b, float)
    d = a - b
    p = float(stats.ttest_rel(a, b).pvalue) if len(d) > 1 and np.ptp(d) > 0 else float("nan")
    return {"mean_diff": float(d.mean()), "p": p, "n": int(len(d))}


def _paired(rows: dict) -> dict:
    """Per probe: Var-T-JEPA vs T-JEPA, and each method vs the best label-free baseline (raw or
    PCA features under the same probe, best by mean), paired over seeds."""
    out = {}
    for probe in ("linear", "mlp"):
        key = f"{probe}_acc"
        cands = {b: rows[b]["acc"] for b in (f"raw_{key}", f"pca_{key}") if b in rows}
        res: dict = {}
        if all(n in rows and None not in rows[n][key] for n in ROWS):
            res["var_vs_t"] = _ttest(rows["Var-T-JEPA"][key], rows["T-JEPA"][key])
        if cands:
            best = max(cands, key=lambda b: np.mean(cands[b]))
            res["best_baseline"] = best
            for n in ROWS:
                if n in rows and None not in rows[n][key]:
                    res[f"{n}_vs_best"] = _ttest(rows[n][key], cands[best])
        out[probe] = res
    return out


def _spread(values) -> list[float] | float | None:
    """``[mean, sample s.d.]`` over seeds (a lone value with one seed; ``None`` with none)."""
    values = [float(v) for v in values if v is not None and np.isfinite(v)]
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return [float(np.mean(values)), float(np.std(values, ddof=1))]


#: Row labels of the results tables (``summarise`` keys -> page text).
LABELS = {
    "T-JEPA": "T-JEPA-like (authors' settings)",
    "Var-T-JEPA": "Var-T-JEPA (reconstruction)",
    "raw": "raw features, same probes",
    "pca": "PCA features, same probes",
    "lightgbm": "LightGBM (supervised, raw features)",
}


def results_tables(runs: list[dict], summary: dict) -> dict:
    """The results file's tables (numbers kept as numbers, ``[mean, s.d.]`` over seeds):

    * ``accuracy``: per dataset, both methods' linear / MLP probe accuracy, effective rank and
      AURCs; the raw and PCA features under the same probes; LightGBM (its own column: it is
      supervised, not a probe of a frozen representation).
    * ``paired``: paired t-tests over seeds (Var-T-JEPA vs T-JEPA; each method vs the best
      label-free baseline under that probe, best by its mean test accuracy), with the number of
      seeds on which the first is above the second.
    * ``per_seed``: every accuracy of every run.
    """
    acc_cols = ["dataset", "seeds", "model", "linear probe acc", "MLP probe acc",
                "supervised acc", "eff. rank (end)", "AURC post. var",
                "AURC probe conf.", "AURC random"]  # fmt: skip
    acc_fmt = [None, None, None, ".4f", ".4f", ".4f", ".1f", ".3f", ".3f", ".3f"]
    acc_rows = []
    for ds, entry in summary.items():
        rows, n = entry["rows"], len(entry["seeds"])
        for name in ROWS:
            if name not in rows:
                continue
            r = rows[name]
            acc_rows.append([ds, n, LABELS[name], _spread(r["linear_acc"]),
                             _spread(r["mlp_acc"]), None, _spread(r["final_effective_rank"]),
                             _spread(r["aurc_posterior_variance"]),
                             _spread(r["aurc_probe_confidence"]), _spread(r["aurc_random"])])  # fmt: skip
        for feats in ("raw", "pca"):
            lin, mlp = rows.get(f"{feats}_linear_acc"), rows.get(f"{feats}_mlp_acc")
            if lin is None:
                continue
            acc_rows.append([ds, n, LABELS[feats], _spread(lin["acc"]),
                             _spread(mlp["acc"]) if mlp else None, None, None, None, None, None])  # fmt: skip
        if "lightgbm_acc" in rows:
            acc_rows.append([ds, n, LABELS["lightgbm"], None, None,
                             _spread(rows["lightgbm_acc"]["acc"]), None, None, None, None])  # fmt: skip
    paired_cols = ["dataset", "probe", "comparison (a - b)", "mean a - b", "p (paired t)",
                   "seeds a > b / a = b / a < b"]  # fmt: skip
    paired_rows = []
    for ds, entry in summary.items():
        rows = entry["rows"]
        for probe, res in entry["paired"].items():
            key = f"{probe}_acc"
            pairs = []
            if "var_vs_t" in res:
                pairs.append(("Var-T-JEPA - T-JEPA", res["var_vs_t"],
                              rows["Var-T-JEPA"][key], rows["T-JEPA"][key]))  # fmt: skip
            best = res.get("best_baseline")
            for name in ROWS:
                if f"{name}_vs_best" in res:
                    label = f"{name} - {best.split('_')[0].replace('pca', 'PCA')} features (best label-free)"
                    pairs.append((label, res[f"{name}_vs_best"], rows[name][key],
                                  rows[best]["acc"]))  # fmt: skip
            for label, t, a, b in pairs:
                d = np.asarray(a, float) - np.asarray(b, float)
                wins = f"{int((d > 0).sum())} / {int((d == 0).sum())} / {int((d < 0).sum())}"
                p = t["p"] if np.isfinite(t["p"]) else None
                paired_rows.append([ds, probe, label, t["mean_diff"], p, wins])
    seed_cols = ["dataset", "seed", "T-JEPA lin.", "T-JEPA MLP", "Var-T-JEPA lin.",
                 "Var-T-JEPA MLP", "raw lin.", "raw MLP", "PCA lin.", "PCA MLP", "LightGBM",
                 "wall s"]  # fmt: skip
    seed_rows = []
    for r in sorted(runs, key=lambda r: (r["dataset"], r["seed"])):
        m, b = r["methods"], r.get("baselines", {})
        seed_rows.append([r["dataset"], r["seed"],
                          *(m.get(n, {}).get(k) for n in ROWS for k in ("linear_acc", "mlp_acc")),
                          *(b.get(k) for k in ("raw_linear_acc", "raw_mlp_acc", "pca_linear_acc",
                                               "pca_mlp_acc", "lightgbm_acc")),
                          r.get("wall_s")])  # fmt: skip
    seed_fmt = [None, None] + [".4f"] * 9 + [".0f"]
    return {
        "accuracy": {"columns": acc_cols, "rows": acc_rows, "formats": acc_fmt},
        "paired": {
            "columns": paired_cols,
            "rows": paired_rows,
            "formats": [None, None, None, "+.4f", ".2g", None],
        },
        "per_seed": {"columns": seed_cols, "rows": seed_rows, "formats": seed_fmt},
    }


def format_summary(summary: dict) -> str:
    """A plain-text view of :func:`results_tables`' accuracy table (for the log)."""
    tables = results_tables([], summary)
    t = tables["accuracy"]
    lines = [" | ".join(t["columns"])]
    for row in t["rows"]:
        cells = []
        for c in row:
            if isinstance(c, list):
                cells.append(f"{c[0]:.4f} +- {c[1]:.4f}")
            elif isinstance(c, float):
                cells.append(f"{c:.4f}")
            else:
                cells.append("-" if c is None else str(c))
        lines.append(" | ".join(cells))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="adult,breast_cancer,digits")
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--steps", type=int, default=None, help="pretraining steps (preset: 600)")
    ap.add_argument(
        "--adult-max-train",
        type=int,
        default=4000,
        help="Adult training rows kept (0 = all 32,561)",
    )
    ap.add_argument("--smoke", action="store_true", help="tiny preset, 1 seed, seconds")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        help='extra config override key=value (JSON value), e.g. tjepa_views="fixed"',
    )
    ap.add_argument(
        "--combine",
        default="",
        help="comma-separated JSON files of earlier runs (e.g. one per dataset, run "
        "in parallel): summarise their runs together, train nothing",
    )
    ap.add_argument("--out", default="benchmarks/results/varjepa.json")
    args = ap.parse_args()
    load_start = load_average()
    if args.combine:
        runs, wall, commands = [], 0.0, []
        for path in args.combine.split(","):
            payload = json.loads(pathlib.Path(path).read_text())
            runs += payload["runs"]
            wall = max(wall, payload["wall_s"])
            commands.append(payload.get("command"))
        extra = {"combined_from": args.combine.split(","), "commands_combined": commands}
        _report(runs, args, wall, extra, load_start)
        return
    datasets = args.datasets.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    preset = "default"
    if args.smoke:
        preset, datasets, seeds = "tiny", ["breast_cancer"], [0]
    runs, t0 = [], time.time()
    for ds in datasets:
        for seed in seeds:
            overrides = {"dataset": ds, "seed": seed}
            if args.steps is not None:
                overrides["steps"] = args.steps
            if ds == "adult" and args.adult_max_train and not args.smoke:
                overrides["max_train"] = args.adult_max_train
            for item in args.set:
                k, _, v = item.partition("=")
                try:
                    overrides[k] = json.loads(v)
                except json.JSONDecodeError:
                    overrides[k] = v
            config = varjepa.get_config(preset, **overrides)
            t = time.time()
            result = varjepa.run(config)
            result["wall_s"] = time.time() - t
            print(varjepa.format_table(result) + f"\n({result['wall_s']:.0f} s)\n", flush=True)
            runs.append(result)
            # keep what is done so far (beside the results file, which only a finished run
            # writes): an interrupted run still leaves its finished seeds
            atomic_write_text(
                pathlib.Path(args.out).with_suffix(".partial.json"),
                json_text({"partial": True, "runs": runs, "wall_s": time.time() - t0}),
            )
    _report(
        runs,
        args,
        time.time() - t0,
        {
            "preset": preset,
            "seeds": seeds,
            "steps": args.steps,
            "adult_max_train": args.adult_max_train,
            "overrides": args.set,
        },
        load_start,
    )


def _report(runs: list[dict], args, wall_s: float, extra: dict, load_start) -> None:
    summary = summarise(runs)
    print(format_summary(summary))
    for ds, entry in summary.items():
        print(
            f"{ds}: Var-T-JEPA >= T-JEPA (linear probe): {entry.get('var_ge_t_linear')}, "
            f"(MLP probe): {entry.get('var_ge_t_mlp')}"
        )
        for probe, res in entry["paired"].items():
            cells = [
                f"{k} {v['mean_diff']:+.4f} (p={v['p']:.3g})"
                for k, v in res.items()
                if isinstance(v, dict)
            ]
            print(f"  {probe} probe, paired t-test over seeds (best baseline "
                  f"{res.get('best_baseline')}): " + "; ".join(cells))  # fmt: skip
    out = pathlib.Path(args.out)
    raw = {"summary": summary, "wall_s": wall_s, **extra, "runs": runs}
    raw = {k: v for k, v in raw.items() if k not in RESERVED}
    write_results(out.stem, results_tables(runs, summary), load_start=load_start, extra=raw,
                  out=out)  # fmt: skip
    print(f"wrote {out} ({wall_s:.0f} s)")


if __name__ == "__main__":
    main()
