"""Var-T-JEPA vs T-JEPA: frozen-embedding probes on Adult, breast_cancer and digits.

For every dataset and seed the driver (:func:`fidia_jax.projects.varjepa.run`, ``default``
preset) pretrains T-JEPA (the authors' EMA ramp, multi-mask views, raw targets, one extra token)
and Var-T-JEPA, probes their frozen embeddings with logistic regression and an MLP, runs the
same two probes on the raw features and on their first ``dim`` principal components (label-free
baselines) and fits LightGBM (supervised) in the same run, records the embeddings'
effective rank over training, and scores Var-T-JEPA's posterior variance by the area under the
risk-coverage curve (AURC) of the linear probe's errors. The table gives mean +- std over seeds
and the ratio of each accuracy to T-JEPA's (same probe), then paired t-tests over seeds:
Var-T-JEPA vs T-JEPA, and each method vs the best label-free baseline under the same probe.

Usage:
  python benchmarks/varjepa.py [--datasets adult,breast_cancer,digits] [--seeds 0,1,2,3,4]
                               [--steps 300] [--adult-max-train 4000] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time

import numpy as np

from fidia_jax._io import atomic_write_text
from fidia_jax.projects import varjepa

ROWS = ("T-JEPA", "Var-T-JEPA")


def _cell(values) -> str:
    values = [v for v in values if v is not None and np.isfinite(v)]
    if not values:
        return "-"
    return (
        f"{np.mean(values):.4f} +- {np.std(values):.4f}" if len(values) > 1 else f"{values[0]:.4f}"
    )


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


def format_summary(summary: dict) -> str:
    lines = [
        "| dataset | model | linear probe acc | ratio | MLP acc | ratio | eff. rank (end) | "
        "AURC post. var / probe conf / random |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for ds, entry in summary.items():
        rows = entry["rows"]
        ref_lin = np.mean(rows["T-JEPA"]["linear_acc"]) if "T-JEPA" in rows else np.nan
        mlps = rows.get("T-JEPA", {}).get("mlp_acc", [None])
        ref_mlp = np.mean(mlps) if all(m is not None for m in mlps) else np.nan
        for name in ROWS:
            if name not in rows:
                continue
            r = rows[name]
            lin = np.mean(r["linear_acc"])
            mlp = np.mean(r["mlp_acc"]) if all(m is not None for m in r["mlp_acc"]) else np.nan
            aurc = " / ".join(
                _cell(r[k])
                for k in ("aurc_posterior_variance", "aurc_probe_confidence", "aurc_random")
            )
            lines.append(
                f"| {ds} | {name} | {_cell(r['linear_acc'])} | {lin / ref_lin:.3f} | "
                f"{_cell(r['mlp_acc'])} | {mlp / ref_mlp:.3f} | "
                f"{_cell(r['final_effective_rank'])} | {aurc} |"
            )
        for feats, label in (("raw", "raw features"), ("pca", "PCA features")):
            lin, mlp = rows.get(f"{feats}_linear_acc"), rows.get(f"{feats}_mlp_acc")
            if lin is None:
                continue
            lin_m = np.mean(lin["acc"])
            mlp_m = np.mean(mlp["acc"]) if mlp else np.nan
            lines.append(
                f"| {ds} | {label} | {_cell(lin['acc'])} | {lin_m / ref_lin:.3f} | "
                f"{_cell(mlp['acc']) if mlp else '-'} | {mlp_m / ref_mlp:.3f} | | |"
            )
        if "lightgbm_acc" in rows:
            acc = np.mean(rows["lightgbm_acc"]["acc"])
            lines.append(
                f"| {ds} | LightGBM (supervised) | | | {_cell(rows['lightgbm_acc']['acc'])} | "
                f"{acc / ref_mlp:.3f} | | |"
            )
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
    if args.combine:
        runs, wall = [], 0.0
        for path in args.combine.split(","):
            payload = json.loads(pathlib.Path(path).read_text())
            runs += payload["runs"]
            wall = max(wall, payload["wall_s"])
        _report(runs, args, wall, {"combined_from": args.combine.split(",")})
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
            print(varjepa.format_table(result) + f"\n({time.time() - t:.0f} s)\n", flush=True)
            runs.append(result)
            # keep what is done so far: an interrupted run still leaves its finished seeds
            atomic_write_text(
                pathlib.Path(args.out),
                json.dumps(
                    {"partial": True, "runs": runs, "wall_s": time.time() - t0}, default=float
                ),
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
    )


def _report(runs: list[dict], args, wall_s: float, extra: dict) -> None:
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
    payload = {"summary": summary, "wall_s": wall_s, **extra, "runs": runs}
    atomic_write_text(out, json.dumps(payload, indent=1, default=float))
    print(f"wrote {out} ({payload['wall_s']:.0f} s)")


if __name__ == "__main__":
    main()
