"""Multi-fidelity benchmark: trusted subsets vs every baseline at n_HF = 16, with paired tests.

For each task (Forrester, Currin, Park, Borehole, FreeSolv) the driver
(:func:`fidia_jax.projects.multifidelity.run_methods`) trains every method on the same runs,
the scikit-learn GP baselines (HF-only GP, two-stage Δ GP) included; Kennedy–O'Hagan AR1
co-kriging from emukit + GPy is measured on the same runs in another interpreter
(``--gp-python``; ``tools/multifidelity_make_gp_venv.sh`` makes it). Prints one table of HF test
RMSE ratios against the HF-only MLP (``< 1`` is better), then per task the paired tests over
runs of trusted subsets against the HF-only MLP and against the best simple baseline (paired
t-test on log RMSE, the declared test; Wilcoxon signed-rank, exact, alongside), and writes
``benchmarks/results/multifidelity.json`` through :func:`_results.write_results` (issue 41): the
tables ``ratios`` (every method x task), ``paired`` (the goals), ``baselines`` (ours against each
baseline, paired), ``ablations`` (each ablation of the loss against the full loss, paired) and
``affine`` (how affine each task's lowest fidelity
is in the HF function), built by :func:`tables` from the raw per-run RMSEs kept in the file;
``docs/multifidelity.md`` renders them. Every native thread pool (scikit-learn's GPs, the
co-kriging peer's BLAS) is limited to the cores this process may use.

    python benchmarks/multifidelity.py --gp-python /tmp/peer_multifidelity/bin/python
    python benchmarks/multifidelity.py --smoke        # seconds-long check (writes to a temp file)
    python benchmarks/multifidelity.py --report       # re-table the results file, no run
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
from _results import command_line, default_out, load_average, retable, write_results  # noqa: E402

from fidia_jax import metrics  # noqa: E402
from fidia_jax.config import config_to_dict  # noqa: E402
from fidia_jax.projects import multifidelity as mf  # noqa: E402
from fidia_jax.projects.multifidelity import data as mf_data  # noqa: E402
from fidia_jax.train import available_cores  # noqa: E402

GOAL = 0.8
ALPHA = 0.05
#: Simple baselines that see what the method sees (no oracle, no ablation of the method).
SIMPLE_BASELINES = ("hf_only", "multi_head", "pretrain_finetune", "gp_hf_only", "gp_two_stage",
                    "cokriging")  # fmt: skip
COKRIGING = "cokriging"
COKRIGING_NAME = "AR1 co-kriging (emukit + GPy, Kennedy–O'Hagan)"
DEFAULT_GP_PYTHON = "/tmp/peer_multifidelity/bin/python"
#: Ablations of the trusted-subset loss (rows of the ``ablations`` table), in the page's order.
ABLATIONS = ("ts_no_absolute", "ts_no_interval", "ts_no_ranking", "ts_other_radius",
             "ts_other_ranking")  # fmt: skip
RESULTS_NAME = "multifidelity"


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", default=",".join(mf.TASKS))
    p.add_argument("--gp-sklearn-restarts", type=int, default=3,
                   help="restarts of the scikit-learn GP baselines")  # fmt: skip
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
    p.add_argument("--smoke", action="store_true",
                   help="Forrester, 2 runs, 50 steps (writes to a temp file unless --out)")  # fmt: skip
    p.add_argument("--out", default=None,
                   help="results file (default benchmarks/results/multifidelity.json)")  # fmt: skip
    p.add_argument("--report", action="store_true",
                   help="no run: rebuild the tables of --out from the raw results it holds")  # fmt: skip
    return p.parse_args()


def _config(args, task: str) -> mf.MultiFidelityConfig:
    over = dict(task=task, n_hf=args.n_hf, n_mf=args.n_mf, n_lf=args.n_lf, steps=args.steps,
                num_seeds=args.seeds, data_dir=args.data_dir,
                gp_restarts=args.gp_sklearn_restarts)  # fmt: skip
    if task == "freesolv":
        over.update(n_mf=0, n_lf=None)
    return mf.get_config("default", **over)


def _method_order(record: dict) -> list[str]:
    tasks = list(record["tasks"])
    order = list(record["tasks"][tasks[0]]["methods"])
    for t in tasks[1:]:
        order += [m for m in record["tasks"][t]["methods"] if m not in order]
    return order


def ratio_table(record: dict) -> dict:
    """Every method x task: ``ratio (RMSE mean ± std)``, the ratio of mean HF test RMSEs to the
    HF-only MLP's (co-kriging: against the HF-only MLP on the same runs)."""
    tasks = list(record["tasks"])
    rows = []
    for m in _method_order(record):
        name, cells = None, []
        for t in tasks:
            row = record["tasks"][t]["methods"].get(m)
            if row is None:
                cells.append(None)
                continue
            name = name or row["name"]
            cells.append(f"{row['ratio_vs_hf_only']:.3f} ({row['mean']:.3g} ± {row['std']:.2g})")
        rows.append([name, *cells])
    return {"columns": ["method", *tasks], "rows": rows}


def paired_tests(res: dict) -> dict | None:
    """One task's paired tests over runs of trusted subsets (ours) against the HF-only MLP,
    the best simple baseline measured on every run, and each baseline / ablation; ``None``
    without the method."""
    rows = res["methods"]
    if "trusted_subsets" not in rows:
        return None
    ours = rows["trusted_subsets"]["rmse"]
    n = len(ours)
    full = {k: r for k, r in rows.items() if k in SIMPLE_BASELINES and len(r["rmse"]) == n}
    best = min(full, key=lambda k: full[k]["mean"])
    vs_hf = _paired(ours, rows["hf_only"]["rmse"])
    vs_best = {**_paired(ours, full[best]["rmse"]), "method": best, "name": full[best]["name"]}
    return {
        "vs_hf_only": vs_hf, "vs_best": vs_best,
        "goal_hf": _verdict(vs_hf, beat=GOAL), "goal_best": _verdict(vs_best),
        "all": {k: _paired(ours, r["rmse"]) for k, r in rows.items()
                if k != "trusted_subsets" and len(r["rmse"]) == n},
    }  # fmt: skip


def paired_table(record: dict) -> dict:
    """Per task: ours vs the HF-only MLP and vs the best simple baseline (ratio of mean RMSEs,
    paired t-test on log RMSE, exact Wilcoxon) and the two goals' verdicts."""
    rows = []
    for t, res in record["tasks"].items():
        tests = paired_tests(res)
        if tests is None:
            continue
        h, b = tests["vs_hf_only"], tests["vs_best"]
        rows.append([t, h["ratio"], h["p_t"], h["p_w"], tests["goal_hf"], b["name"], b["ratio"],
                     b["p_t"], b["p_w"], tests["goal_best"]])  # fmt: skip
    return {
        "columns": ["task", "ours / HF-only MLP", "p_t", "p_W", f"goal ≤ {GOAL} × HF-only",
                    "best simple baseline", "ours / best", "p_t", "p_W",
                    "goal: at or above the best"],
        "rows": rows,
        "formats": [None, ".3f", ".2g", ".2g", None, None, ".3f", ".2g", ".2g", None],
    }  # fmt: skip


def _against_ours(record: dict, methods, label: str, ours_first: bool, ratio: str) -> dict:
    """Per method and task, the paired comparison of ``trusted_subsets`` with ``method`` over the
    same runs: the ratio of mean RMSEs (ours over the method's when ``ours_first``, else the
    method's over ours) and the paired t-test on log RMSE; a task without the method, or with
    a different number of runs, gives empty cells."""
    tasks = list(record["tasks"])
    rows = []
    for m in methods:
        name, cells = None, []
        for t in tasks:
            meth = record["tasks"][t]["methods"]
            ours = meth.get("trusted_subsets")
            if m not in meth or ours is None or len(meth[m]["rmse"]) != len(ours["rmse"]):
                cells += [None, None]
                continue
            name = name or meth[m]["name"]
            a, b = (ours, meth[m]) if ours_first else (meth[m], ours)
            test = _paired(a["rmse"], b["rmse"])
            cells += [test["ratio"], test["p_t"]]
        if name is not None:
            rows.append([name, *cells])
    columns = [label] + [c for t in tasks for c in (f"{t}: {ratio}", "p_t")]
    return {"columns": columns, "rows": rows, "formats": [None] + [".3f", ".2g"] * len(tasks)}


def baseline_table(record: dict) -> dict:
    """Ours against each baseline measured on the same runs (the simple baselines, then the
    Δ-learning oracle), per task: mean RMSE of ours over the baseline's (``< 1``: ours better)
    and the paired t-test on log RMSE."""
    methods = (*SIMPLE_BASELINES, "delta_oracle")
    return _against_ours(record, methods, "baseline", True, "ours / baseline")


def ablation_table(record: dict) -> dict:
    """Each ablation of the loss against the full loss, per task: mean RMSE of the ablation over
    that of the full loss (``> 1``: the ablated part helps) and the paired t-test on log RMSE."""
    return _against_ours(record, ABLATIONS, "ablation", False, "ablation / full")


def affine_table(record: dict) -> dict:
    """Per analytic task: least squares ``y_L ~ a y_H + b`` on 4096 test inputs (R^2, residual
    sd over the HF sd), from ``affine_fit_of_lower_fidelities``."""
    rows = []
    for t, res in record["tasks"].items():
        fit = (res.get("affine_fit_of_lower_fidelities") or {}).get("lf")
        if fit is not None:
            rows.append([t, fit["a"], fit["b"], fit["r2"], fit["resid_sd_over_hf_sd"]])
    return {
        "columns": ["task", "a", "b", "R²", "residual sd / HF sd"],
        "rows": rows,
        "formats": [None, ".3g", ".3g", ".3f", ".2g"],
    }


def tables(record: dict) -> dict:
    """Every table of the results file, from its raw record (pure: ``--report`` re-tables)."""
    out = {"ratios": ratio_table(record), "paired": paired_table(record),
           "baselines": baseline_table(record)}  # fmt: skip
    abl = ablation_table(record)
    if abl["rows"]:
        out["ablations"] = abl
    aff = affine_table(record)
    if aff["rows"]:
        out["affine"] = aff
    return out


def _paired(ours: list[float], theirs: list[float]) -> dict:
    """Paired tests of two methods' per-run RMSEs (same runs)."""
    from scipy import stats

    a, b = np.log(np.asarray(ours)), np.log(np.asarray(theirs))
    if len(a) < 2 or np.allclose(a, b):
        return {"ratio": float(np.mean(ours) / np.mean(theirs)), "p_t": 1.0, "p_w": 1.0}
    p_t = float(stats.ttest_rel(a, b).pvalue)
    p_w = float(stats.wilcoxon(a, b, method="exact").pvalue) if len(a) <= 25 else float(
        stats.wilcoxon(a, b).pvalue)  # fmt: skip
    return {"ratio": float(np.mean(ours) / np.mean(theirs)), "p_t": p_t, "p_w": p_w,
            "mean_log_ratio": float(np.mean(a - b))}  # fmt: skip


def _verdict(test: dict, *, beat: float = 1.0) -> str:
    """'met' only beyond the noise (p_t < ALPHA in the right direction)."""
    significant = test["p_t"] < ALPHA
    if test["ratio"] <= beat and test.get("mean_log_ratio", 0.0) < 0 and significant:
        return "met"
    if test.get("mean_log_ratio", 0.0) > 0 and significant:
        return "NOT met (significantly worse)"
    return "NOT met (within noise)"


def _affine_fit(task: str, seed: int = 0) -> dict | None:
    """How far a task's lowest fidelity is from an affine map of the HF function (the model the
    interval term assumes): R^2 of least squares y_L ~ a y_H + b on 4096 uniform test inputs
    (the task's own HF labels and Δ-oracle LF labels there), and the residual standard deviation
    over the HF standard deviation. (The medium level (y_H + y_L) / 2 has half that residual.)"""
    if task not in mf_data.ANALYTIC_FUNCTIONS:
        return None
    t = mf.analytic_multifidelity_task(task, 1, 1, 1, 4096, seed=seed)
    y_h, y = np.asarray(t.y_test, np.float64), np.asarray(t.delta_oracle_test, np.float64)
    (a, b), *_ = np.linalg.lstsq(np.stack([y_h, np.ones_like(y_h)], 1), y, rcond=None)
    resid = y - (a * y_h + b)
    return {"lf": {"a": float(a), "b": float(b), "r2": float(1 - resid.var() / y.var()),
                   "resid_sd_over_hf_sd": float(resid.std() / y_h.std())}}  # fmt: skip


def main() -> None:
    load_start = load_average()
    args = _parse()
    if args.report:
        retable(args.out or HERE / "results" / f"{RESULTS_NAME}.json", tables)
        return
    if args.out is None:
        args.out = default_out(RESULTS_NAME, args.smoke)
    threads = available_cores()
    if args.smoke:
        args.tasks, args.seeds, args.steps, args.n_mf, args.n_lf = "forrester", 2, 50, 8, 32
        args.gp_runs, args.gp_max_iters = 1, 20
    gp_python = args.gp_python or (DEFAULT_GP_PYTHON if os.path.exists(DEFAULT_GP_PYTHON) else None)
    t0 = time.perf_counter()
    results = {"n_hf": args.n_hf, "tasks": {}, "configs": {}, "threads": threads,
               "protocol": {k: v for k, v in vars(args).items() if k not in ("out", "report")}}  # fmt: skip
    peer_in: dict[str, np.ndarray] = {}
    y_tests: dict[str, list[np.ndarray]] = {}
    for task in args.tasks.split(","):
        cfg = _config(args, task)
        runs = mf.make_tasks(cfg)
        res = mf.run_methods(cfg, runs)
        print(mf.format_table(res), flush=True)
        affine = _affine_fit(task)
        if affine is not None:
            res["affine_fit_of_lower_fidelities"] = affine
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
            # the peer's BLAS / OpenMP pools limited like the scikit-learn GPs (cpu_stage)
            env = {**os.environ, **{v: str(threads) for v in (
                "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}}  # fmt: skip
            run_peer(gp_python, "_multifidelity_emukit_peer.py", inp, out, "--restarts",
                     args.gp_restarts, "--max-iters", args.gp_max_iters, env=env,
                     name="emukit co-kriging peer")  # fmt: skip
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
        for task in y_tests:
            results["tasks"][task]["methods"][COKRIGING]["name"] = (
                f"{COKRIGING_NAME}, first {len(y_tests[task][: args.gp_runs])} runs"
                if args.gp_runs < args.seeds else COKRIGING_NAME)  # fmt: skip
    else:
        print("co-kriging not measured: no --gp-python and no emukit venv at "
              f"{DEFAULT_GP_PYTHON} (tools/multifidelity_make_gp_venv.sh)", file=sys.stderr)  # fmt: skip
    results["cokriging_measured"] = bool(gp_python)
    for res in results["tasks"].values():
        tests = paired_tests(res)
        if tests is not None:
            res["paired_tests"] = tests
    results["wall_s"] = time.perf_counter() - t0
    tabs = tables(results)
    for key, tab in tabs.items():
        print(f"\n{key}: " + " | ".join(tab["columns"]))
        for row in tab["rows"]:
            print("  " + " | ".join("—" if c is None else f"{c:.4g}" if isinstance(c, float)
                                    else str(c) for c in row))  # fmt: skip
    path = write_results(RESULTS_NAME, tabs, command=command_line(), load_start=load_start,
                         extra=results, out=args.out)  # fmt: skip
    print(f"wrote {path} ({results['wall_s']:.0f} s)")


if __name__ == "__main__":
    main()
