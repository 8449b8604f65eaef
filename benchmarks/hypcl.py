"""HypCL vs the Euclidean adapter and the baselines, class-incremental digits (5 tasks x 2).

Runs :func:`fidia_jax.projects.hypcl.train_and_evaluate` (frozen AlexNet conv5 features of the
scikit-learn digits at 64x64; every method on the same split and the same class orders, in the
same run) and prints one table: average accuracy, last accuracy and average forgetting per
method (mean ± std over the class orders) and the ratio of each method's average accuracy to the
Euclidean adapter's; then the depth sweep on the synthetic class trees (HypCL minus Euclidean).
Writes ``benchmarks/results/hypcl.json``.

With ``--seeds 0 1 2`` the whole protocol (split, class orders, validation choice, training)
runs once per seed, and HypCL and the Euclidean adapter are compared by a paired t-test and a
Wilcoxon signed-rank test over every (seed, class order) pair; the JSON is rewritten after each
seed, so a run stopped early keeps the seeds it finished.

Usage: python benchmarks/hypcl.py [--smoke] [--config default] [--seeds S ...]
       [--set key=value ...]
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

from fidia_jax._io import atomic_write_text, json_text
from fidia_jax.config import config_to_dict, override_config
from fidia_jax.projects import hypcl


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="the tiny preset (seconds)")
    ap.add_argument("--config", default="default")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--workdir", default=None, help="feature cache (default: a temp dir)")
    ap.add_argument("--out", default="benchmarks/results/hypcl.json")
    ap.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        default=None,
        help="run the protocol once per seed and pair HypCL with the Euclidean adapter over "
        "every (seed, class order)",
    )
    ap.add_argument("--machine", default="2-core CPU sandbox, shared with other jobs, no GPU")
    args = ap.parse_args(argv)
    config = override_config(hypcl.get_config("tiny" if args.smoke else args.config), args.set)
    workdir = args.workdir or tempfile.mkdtemp(prefix="hypcl_")
    if args.seeds:
        return _over_seeds(args, argv, config, workdir)
    res = hypcl.train_and_evaluate(config, workdir)
    ref = res["methods"]["euclidean"]["average_accuracy"]
    print("\nratio = average accuracy / Euclidean adapter's (same run, same orders)")
    print("| method | average acc. | ratio to Euclidean adapter |")
    print("|---|---|---|")
    for name, row in res["methods"].items():
        print(
            f"| {hypcl.METHODS[name]} | {row['average_accuracy']:.3f} | "
            f"{row['average_accuracy'] / ref:.3f} |"
        )
    out = {
        "command": " ".join(["python", "benchmarks/hypcl.py", *(argv or sys.argv[1:])]),
        "machine": args.machine,
        "date": time.strftime("%Y-%m-%d"),
        **res,
        "config": config_to_dict(config),
    }
    if not args.smoke:
        path = pathlib.Path(args.out)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json_text(out, indent=2))
        print(f"wrote {path}")
    else:
        print(json.dumps({"smoke": True, "gap": res["gap_average_accuracy"]}))
    return 0


def pooled_pairs(per_seed: list[dict], a: str = "hypcl", b: str = "euclidean") -> dict:
    """Pools the per-order runs of several seeds and pairs ``a`` with ``b`` over all of them.

    Args:
      per_seed: :func:`~fidia_jax.projects.hypcl.train_and_evaluate` results, one per seed.

    Returns:
      :func:`~fidia_jax.projects.hypcl.paired_order_test` over every (seed, order) pair, plus
      ``"pairs"`` (their number) and ``"per_seed_mean_diff"``.
    """
    rows = {
        m: {"orders": [r for res in per_seed for r in res["methods"][m]["orders"]]} for m in (a, b)
    }
    out = hypcl.paired_order_test(rows, a, b)
    out["pairs"] = len(out["diffs"])
    out["per_seed_mean_diff"] = [
        float(res["paired_hypcl_vs_euclidean"]["mean_diff"]) for res in per_seed
    ]
    return out


def _over_seeds(args, argv, config, workdir) -> int:
    per_seed: list[dict] = []
    path = pathlib.Path(args.out)
    for seed in args.seeds:
        res = hypcl.train_and_evaluate(dataclasses.replace(config, seed=seed), workdir)
        per_seed.append({"seed": seed, **res})
        pooled = pooled_pairs(per_seed)
        methods = {
            m: {
                "average_accuracy": float(
                    np.mean(
                        [r["average_accuracy"] for s in per_seed for r in s["methods"][m]["orders"]]
                    )
                ),
                "average_accuracy_std": float(
                    np.std(
                        [r["average_accuracy"] for s in per_seed for r in s["methods"][m]["orders"]]
                    )
                ),
                "last_accuracy": float(
                    np.mean(
                        [r["last_accuracy"] for s in per_seed for r in s["methods"][m]["orders"]]
                    )
                ),
                "average_forgetting": float(
                    np.mean(
                        [
                            r["average_forgetting"]
                            for s in per_seed
                            for r in s["methods"][m]["orders"]
                        ]
                    )
                ),
            }
            for m in config.methods
        }
        out = {
            "command": " ".join(["python", "benchmarks/hypcl.py", *(argv or sys.argv[1:])]),
            "machine": args.machine,
            "date": time.strftime("%Y-%m-%d"),
            "seeds_done": [s["seed"] for s in per_seed],
            "methods_pooled": methods,
            "paired_hypcl_vs_euclidean_pooled": pooled,
            "hypcl_above_euclidean": bool(pooled["mean_diff"] > 0 and pooled["p_ttest"] < 0.05),
            "per_seed": per_seed,
            "config": config_to_dict(config),
        }
        if not args.smoke:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, json_text(out, indent=2))
        print(f"\nafter seeds {out['seeds_done']} ({pooled['pairs']} (seed, order) pairs):")
        print("| method | average acc. (mean ± std over pairs) | last acc. | avg. forgetting |")
        print("|---|---|---|---|")
        for m, row in methods.items():
            print(
                f"| {hypcl.METHODS[m]} | {row['average_accuracy']:.3f} ± "
                f"{row['average_accuracy_std']:.3f} | {row['last_accuracy']:.3f} | "
                f"{row['average_forgetting']:.3f} |"
            )
        print(
            f"HypCL - Euclidean: mean {pooled['mean_diff']:+.4f}, HypCL wins "
            f"{pooled['a_wins']}/{pooled['pairs']}, paired t-test p = {pooled['p_ttest']:.3g}, "
            f"Wilcoxon p = {pooled['p_wilcoxon']:.3g}",
            flush=True,
        )
    if args.smoke:
        print(json.dumps({"smoke": True, "pairs": pooled["pairs"]}))
    else:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
