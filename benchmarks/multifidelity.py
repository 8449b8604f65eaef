"""Multi-fidelity benchmark: trusted subsets vs HF-only (and every baseline) at n_HF = 16.

For each task (Forrester, Currin, Park, Borehole, FreeSolv) the driver
(:func:`fidia_jax.projects.multifidelity.run_methods`) trains every method on the same runs;
Kennedy–O'Hagan AR1 co-kriging from emukit + GPy is measured on the same runs in another
interpreter (``--gp-python``; ``tools/multifidelity_make_gp_venv.sh`` makes it). Prints one table
of HF test RMSE ratios against the HF-only MLP (``< 1`` is better; the goal is ``<= 0.8`` on every
task) and writes ``benchmarks/results/multifidelity.json``.

    python benchmarks/multifidelity.py --gp-python /tmp/peer_multifidelity/bin/python
    python benchmarks/multifidelity.py --smoke        # seconds-long check of the plumbing
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _peers import run_peer  # noqa: E402

from fidia_jax import metrics  # noqa: E402
from fidia_jax._io import atomic_write_text, json_text  # noqa: E402
from fidia_jax.config import config_to_dict  # noqa: E402
from fidia_jax.projects import multifidelity as mf  # noqa: E402

GOAL = 0.8
COKRIGING = "cokriging"
COKRIGING_NAME = "AR1 co-kriging (emukit + GPy, Kennedy–O'Hagan)"
DEFAULT_GP_PYTHON = "/tmp/peer_multifidelity/bin/python"


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", default=",".join(mf.TASKS))
    p.add_argument("--seeds", type=int, default=5, help="runs per task (FreeSolv: 5 splits)")
    p.add_argument("--steps", type=int, default=500)
    p.add_argument("--n-hf", type=int, default=16)
    p.add_argument("--n-mf", type=int, default=32)
    p.add_argument("--n-lf", type=int, default=128)
    p.add_argument(
        "--gp-python",
        default=None,
        help=f"interpreter with emukit + GPy (default {DEFAULT_GP_PYTHON} if present)",
    )
    p.add_argument("--gp-restarts", type=int, default=1)
    p.add_argument("--gp-max-iters", type=int, default=100)
    p.add_argument(
        "--gp-runs", type=int, default=2, help="runs per task given to co-kriging (slow)"
    )
    p.add_argument("--data-dir", default=None)
    p.add_argument("--smoke", action="store_true", help="Forrester, 2 runs, 50 steps")
    p.add_argument("--out", default=str(HERE / "results" / "multifidelity.json"))
    return p.parse_args()


def _config(args, task: str) -> mf.MultiFidelityConfig:
    over = dict(task=task, n_hf=args.n_hf, n_mf=args.n_mf, n_lf=args.n_lf, steps=args.steps,
                num_seeds=args.seeds, data_dir=args.data_dir)  # fmt: skip
    if task == "freesolv":
        over.update(n_mf=0, n_lf=None)
    return mf.get_config("default", **over)


def _table(results: dict) -> str:
    tasks = list(results["tasks"])
    methods = list(results["tasks"][tasks[0]]["methods"])
    lines = [
        f"HF test RMSE ratio vs HF-only MLP at n_HF = {results['n_hf']} (mean of runs; "
        f"< 1 is better; goal <= {GOAL}); cell: ratio (RMSE mean ± std)",
        "| method | " + " | ".join(tasks) + " |",
        "|---|" + "---|" * len(tasks),
    ]
    for m in methods:
        cells = []
        for t in tasks:
            row = results["tasks"][t]["methods"].get(m)
            cells.append(
                "—"
                if row is None
                else f"{row['ratio_vs_hf_only']:.3f} ({row['mean']:.3g} ± {row['std']:.2g})"
            )
        lines.append(
            f"| {results['tasks'][tasks[0]]['methods'][m]['name']} | " + " | ".join(cells) + " |"
        )
    goal = " ".join(
        f"{t}: {'met' if r['methods']['trusted_subsets']['ratio_vs_hf_only'] <= GOAL else 'NOT met'}"
        for t, r in results["tasks"].items() if "trusted_subsets" in r["methods"]
    )  # fmt: skip
    lines.append(f"goal (trusted subsets <= {GOAL} x HF-only): {goal}")
    return "\n".join(lines)


def main() -> None:
    args = _parse()
    if args.smoke:
        args.tasks, args.seeds, args.steps, args.n_mf, args.n_lf = "forrester", 2, 50, 8, 32
        args.gp_runs, args.gp_max_iters = 1, 20
    gp_python = args.gp_python or (DEFAULT_GP_PYTHON if os.path.exists(DEFAULT_GP_PYTHON) else None)
    t0 = time.perf_counter()
    results = {"n_hf": args.n_hf, "tasks": {}, "configs": {}}
    peer_in: dict[str, np.ndarray] = {}
    y_tests: dict[str, list[np.ndarray]] = {}
    for task in args.tasks.split(","):
        cfg = _config(args, task)
        runs = mf.make_tasks(cfg)
        res = mf.run_methods(cfg, runs)
        print(mf.format_table(res), flush=True)
        results["tasks"][task] = res
        results["configs"][task] = config_to_dict(cfg)
        y_tests[task] = [r.y_test for r in runs]
        for i, r in enumerate(runs[: args.gp_runs]):
            for name, arr in (("x_train", r.x_train), ("y_train", r.y_train),
                              ("fid_train", r.fidelity_train), ("x_test", r.x_test)):  # fmt: skip
                peer_in[f"{task}_{i}/{name}"] = arr
    if gp_python:
        with tempfile.TemporaryDirectory() as tmp:
            inp, out = pathlib.Path(tmp) / "in.npz", pathlib.Path(tmp) / "out.npz"
            np.savez(inp, **peer_in)
            run_peer(gp_python, "_multifidelity_emukit_peer.py", inp, out, "--restarts",
                     args.gp_restarts, "--max-iters", args.gp_max_iters, name="emukit co-kriging peer")  # fmt: skip
            preds = dict(np.load(out))
        for task, ys in y_tests.items():
            ys = ys[: args.gp_runs]
            rmse = np.array(
                [float(metrics.rmse(y, preds[f"{task}_{i}/pred"])) for i, y in enumerate(ys)]
            )
            rows = results["tasks"][task]["methods"]
            # ratio against HF-only on the same runs (co-kriging sees only the first gp_runs)
            ref = float(np.mean(rows["hf_only"]["rmse"][: len(ys)]))
            rows[COKRIGING] = {
                "name": f"{COKRIGING_NAME}, first {len(ys)} runs", "rmse": rmse.tolist(), "mean": float(rmse.mean()),
                "std": float(rmse.std(ddof=1)) if rmse.size > 1 else 0.0,
                "ratio_vs_hf_only": float(rmse.mean()) / ref,
                "wall_s": float(sum(preds[f"{task}_{i}/seconds"] for i in range(len(ys)))),
            }  # fmt: skip
    else:
        print("co-kriging not measured: no --gp-python and no emukit venv at "
              f"{DEFAULT_GP_PYTHON} (tools/multifidelity_make_gp_venv.sh)", file=sys.stderr)  # fmt: skip
    results["wall_s"] = time.perf_counter() - t0
    results["command"] = " ".join(["python", "benchmarks/multifidelity.py", *sys.argv[1:]])
    table = _table(results)
    print(table)
    results["table"] = table
    atomic_write_text(args.out, json_text(results, indent=2))


if __name__ == "__main__":
    main()
