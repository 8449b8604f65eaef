"""HypCL vs the Euclidean adapter and the baselines, class-incremental digits (5 tasks x 2).

Runs :func:`fidia_jax.projects.hypcl.train_and_evaluate` once per seed (frozen AlexNet conv5
features of the scikit-learn digits at 64x64; every method on the same split, the same class
orders and, for the trained methods, a learning rate chosen on the same validation rows with the
same grid), pools the (seed, class order) runs and writes ``benchmarks/results/hypcl.json``
through :func:`_results.write_results`; ``docs/hypcl.md`` renders its tables from that file
(``python tools/render_tables.py --write``). Tables:

* ``methods``: average accuracy, last accuracy and average forgetting per method, mean ± std
  over every (seed, class order) run, and the ratio of each method's mean average accuracy to
  the Euclidean adapter's;
* ``paired``: HypCL minus each other method, average accuracy paired over the (seed, order)
  runs (mean difference, wins, two-sided paired t-test, Wilcoxon signed-rank), and HypCL minus
  the Euclidean adapter within each seed;
* ``validation``: each tuned method's validation average accuracy per grid point and its choice,
  per seed;
* ``depth_sweep`` (when ``sweep_depths`` is not empty): average accuracy on the synthetic class
  trees, mean ± std over seeds of the per-seed mean over class orders.

Each seed is a whole protocol (its own stratified split, class orders, validation choice and
initialisations); the file is rewritten after each seed (``seeds_done``), so a run stopped early
keeps the seeds it finished.

Usage: python benchmarks/hypcl.py [--smoke] [--config default] [--seeds S ...]
       [--set key=value ...] [--workdir DIR] [--out PATH]
       python benchmarks/hypcl.py --report [--out PATH]   # retabulate a finished run's file
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys
import tempfile
import time

import numpy as np

from fidia_jax.config import config_to_dict, override_config
from fidia_jax.projects import hypcl

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _results import RESERVED, command_line, default_out, load_average, write_results  # noqa: E402


def _runs(per_seed: list[dict], method: str) -> list[dict]:
    return [r for res in per_seed for r in res["methods"][method]["orders"]]


def pooled_pairs(per_seed: list[dict], a: str = "hypcl", b: str = "euclidean") -> dict:
    """Pools the per-order runs of several seeds and pairs ``a`` with ``b`` over all of them.

    Args:
      per_seed: :func:`~fidia_jax.projects.hypcl.train_and_evaluate` results, one per seed.

    Returns:
      :func:`~fidia_jax.projects.hypcl.paired_order_test` over every (seed, order) pair, plus
      ``"pairs"`` (their number) and ``"per_seed_mean_diff"``.
    """
    rows = {m: {"orders": _runs(per_seed, m)} for m in (a, b)}
    out = hypcl.paired_order_test(rows, a, b)
    out["pairs"] = len(out["diffs"])
    out["per_seed_mean_diff"] = [
        float(hypcl.paired_order_test(res["methods"], a, b)["mean_diff"]) for res in per_seed
    ]
    return out


def _num(v: float) -> float | None:
    """A finite float, else ``None`` (rendered as a dash)."""
    return float(v) if np.isfinite(v) else None


def methods_table(per_seed: list[dict], methods) -> dict:
    """Per method: [mean, std] over every (seed, order) run of the three metrics, the ratio of
    its mean average accuracy to the Euclidean adapter's, and the number of runs."""
    ref = float(np.mean([r["average_accuracy"] for r in _runs(per_seed, "euclidean")]))
    rows = []
    for m in methods:
        runs = _runs(per_seed, m)
        cells = []
        for key in ("average_accuracy", "last_accuracy", "average_forgetting"):
            v = np.asarray([r[key] for r in runs], dtype=float)
            cells.append([float(v.mean()), float(v.std())])
        rows.append([hypcl.METHODS[m], *cells, cells[0][0] / ref, len(runs)])
    return {
        "columns": [
            "method",
            "average acc. (mean ± std)",
            "last acc. (mean ± std)",
            "avg. forgetting (mean ± std)",
            "ratio to Euclidean adapter (avg. acc.)",
            "runs",
        ],
        "rows": rows,
        "formats": [None, ".3f", ".3f", ".3f", ".3f", None],
    }


def paired_table(per_seed: list[dict], methods) -> dict:
    """HypCL minus every other method over all (seed, order) runs, then HypCL minus the
    Euclidean adapter within each seed."""
    rows = []
    for m in methods:
        if m == "hypcl":
            continue
        p = pooled_pairs(per_seed, "hypcl", m)
        rows.append(
            [
                f"HypCL − {hypcl.METHODS[m]}, all seeds",
                p["pairs"],
                p["mean_diff"],
                p["a_wins"],
                _num(p["p_ttest"]),
                _num(p["p_wilcoxon"]),
            ]
        )
    for res in per_seed:
        p = hypcl.paired_order_test(res["methods"], "hypcl", "euclidean")
        rows.append(
            [
                f"HypCL − Euclidean adapter, seed {res['seed']}",
                len(p["diffs"]),
                p["mean_diff"],
                p["a_wins"],
                _num(p["p_ttest"]),
                _num(p["p_wilcoxon"]),
            ]
        )
    return {
        "columns": [
            "comparison (average acc.)",
            "pairs",
            "mean difference",
            "HypCL ahead",
            "paired t-test p",
            "Wilcoxon p",
        ],
        "rows": rows,
        "formats": [None, None, "+.4f", None, ".3g", ".3g"],
    }


def validation_table(per_seed: list[dict]) -> dict:
    """Per seed and tuned method: validation average accuracy at every grid point, the choice."""
    grid: list[tuple[float, float]] = []
    for res in per_seed:
        for t in res["validation_trials"]:
            key = (t["learning_rate"], t["distill_weight"])
            if key not in grid:
                grid.append(key)
    several_dw = len({dw for _, dw in grid}) > 1
    columns = ["seed", "method"]
    for lr, dw in grid:
        columns.append(f"lr {lr:g}" + (f", λ {dw:g}" if several_dw else ""))
    columns.append("chosen lr" + (", λ" if several_dw else ""))
    rows = []
    for res in per_seed:
        for m, choice in res["validation_choice"].items():
            got = {
                (t["learning_rate"], t["distill_weight"]): t["val_aa"]
                for t in res["validation_trials"]
                if t["method"] == m
            }
            chosen = f"{choice['learning_rate']:g}"
            if several_dw:
                chosen += f", {choice['distill_weight']:g}"
            rows.append([res["seed"], hypcl.METHODS[m], *(got.get(k) for k in grid), chosen])
    return {
        "columns": columns,
        "rows": rows,
        "formats": [None, None, *[".3f"] * len(grid), None],
    }


def depth_table(per_seed: list[dict]) -> dict:
    """Depth sweep: per depth, [mean, std] over seeds of each geometry's mean over orders."""
    rows = []
    for i, entry in enumerate(per_seed[0]["depth_sweep"]):
        cells = []
        for key in ("euclidean", "hypcl", "gap"):
            v = np.asarray([res["depth_sweep"][i][key] for res in per_seed], dtype=float)
            cells.append([float(v.mean()), float(v.std())])
        rows.append([f"{entry['depth']} ({entry['num_classes']})", *cells, len(per_seed)])
    return {
        "columns": [
            "tree depth (classes)",
            "Euclidean adapter",
            "HypCL",
            "HypCL − Euclidean",
            "seeds",
        ],
        "rows": rows,
        "formats": [None, ".3f", ".3f", ".3f", None],
    }


def tables(per_seed: list[dict], methods) -> dict:
    """Every results-file table of the seeds done so far."""
    out = {
        "methods": methods_table(per_seed, methods),
        "paired": paired_table(per_seed, methods),
    }
    if any(res["validation_trials"] for res in per_seed):
        out["validation"] = validation_table(per_seed)
    if per_seed[0].get("depth_sweep"):
        out["depth_sweep"] = depth_table(per_seed)
    return out


def main(argv=None) -> int:
    load_start = load_average()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="the tiny preset (seconds)")
    ap.add_argument("--config", default="default")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--workdir", default=None, help="feature cache (default: a temp dir)")
    ap.add_argument(
        "--out",
        default=None,
        help="results file (default: benchmarks/results/hypcl.json; --smoke: a temp file)",
    )
    ap.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        default=[0, 1, 2],
        help="run the whole protocol once per seed and pool the (seed, class order) runs",
    )
    ap.add_argument(
        "--report",
        action="store_true",
        help="no training: rebuild the tables of --out from the per-seed results it holds",
    )
    args = ap.parse_args(argv)
    config = override_config(hypcl.get_config("tiny" if args.smoke else args.config), args.set)
    workdir = args.workdir or tempfile.mkdtemp(prefix="hypcl_")
    out = args.out or default_out("hypcl", args.smoke)
    command = command_line(None if argv is None else [str(pathlib.Path(__file__).resolve()), *argv])
    if args.report:
        return _report(pathlib.Path(out), command)
    per_seed: list[dict] = []
    t0 = time.time()
    for seed in args.seeds:
        res = hypcl.train_and_evaluate(dataclasses.replace(config, seed=seed), workdir)
        per_seed.append({"seed": seed, **res})
        pooled = pooled_pairs(per_seed)
        extra = {
            "seeds_done": [s["seed"] for s in per_seed],
            "wall_s": time.time() - t0,
            "paired_hypcl_vs_euclidean_pooled": pooled,
            "hypcl_above_euclidean": bool(pooled["mean_diff"] > 0 and pooled["p_ttest"] < 0.05),
            "per_seed": per_seed,
            "config": config_to_dict(config),
        }
        path = write_results(
            "hypcl",
            tables(per_seed, config.methods),
            command=command,
            load_start=load_start,
            extra=extra,
            out=out,
        )
        rows = tables(per_seed, config.methods)["methods"]["rows"]
        print(f"\nafter seeds {extra['seeds_done']} ({pooled['pairs']} (seed, order) runs):")
        for name, aa, la, fg, ratio, n in rows:
            print(
                f"| {name} | {aa[0]:.3f} ± {aa[1]:.3f} | {la[0]:.3f} | {fg[0]:.3f} | "
                f"{ratio:.3f} | {n} |"
            )
        print(
            f"HypCL - Euclidean: mean {pooled['mean_diff']:+.4f}, HypCL ahead "
            f"{pooled['a_wins']}/{pooled['pairs']}, paired t-test p = {pooled['p_ttest']:.3g}, "
            f"Wilcoxon p = {pooled['p_wilcoxon']:.3g}; wrote {path}",
            flush=True,
        )
    return 0


def _report(path: pathlib.Path, command: str) -> int:
    """Rewrites ``path``'s tables from its ``per_seed`` results (after a change to how they are
    tabulated); the caption's command becomes ``<the run's command> ; <this command>``, and the
    run's own date, machine, commit and load average are kept under ``"run"``."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    extra = {k: v for k, v in doc.items() if k not in RESERVED}
    extra["run"] = doc.get("run") or {k: doc[k] for k in RESERVED if k != "tables"}
    first = extra["run"]["command"]
    write_results(
        "hypcl",
        tables(doc["per_seed"], doc["config"]["methods"]),
        command=f"{first} ; {command}",
        extra=extra,
        out=path,
    )
    print(f"rewrote the tables of {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
