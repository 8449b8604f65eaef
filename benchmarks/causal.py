"""Multi-treatment effects benchmark: CFR schemes vs K, alpha_hat vs a grid, CausalEGM vs its package.

Parts (all in one run; see docs/causal.md for the table and its reading):

A. IHDP, CausalEGM: the authors' ``causalegm`` package (TensorFlow, a throwaway venv given by
   ``--peer-python``, one process per replication and seed, started first and run
   concurrently) and our JAX port, same data (all 747 units of each replication of
   ``--egm-reps``, the package's workflow), same iterations, several seeds; in-sample
   sqrt(PEHE) of the ITE at the package's model-selection point. The package's own protocol:
   ``--parts A --egm-iter 30000 --egm-reps 1,2,3 --egm-seeds 1,2,3``.
B. IHDP, out-of-sample sqrt(PEHE) (30 % held out) of TARNet and CFR (pairwise = CFR's IPM term
   for K = 2, MMD-RBF, alpha = 1) over replications (published CFR: ~0.7-1.0).
C. K-arm semi-synthetic data on IHDP covariates, K in {2, 4, 8, 16}: sqrt(PEHE), ATE error and
   seconds per epoch of TARNet (the alpha_hat pilot) and CFR with the Pairwise / One-vs-All /
   Treatment-Aggregation schemes at the plug-in alpha_hat, and the T-, S-, X-learner baselines
   (ridge, gradient boosting, LightGBM) on the same split; one generator draw per K.
E. multi-treatment CausalEGM at K = 8 (``--egm-iter`` iterations), same draw and split as C.
T. ms per call of one balancing term (value + gradient, jitted) per scheme and K of ``--arms``.
   docs/causal.md renders C, D, E and T from ``benchmarks/results/causal_arms.json``.
D. alpha_hat vs the best alpha of a grid (CFR-pairwise, K = 4).
R. IHDP (``--ihdp-reps``), the driver's splits: the predictors that ignore x (a constant
   effect, the difference of the training arms' mean outcomes; the training mean outcome for
   every arm, zero effect; :func:`fidia_jax.projects.causal.baselines.fit_reference`) next to
   the T- and S-learner with ridge, and the boosted T-learners with library defaults and with
   their learning rate chosen on the networks' validation split with the networks' budget
   (``t_gbm@val``, ``t_lgbm@val``; :func:`~fidia_jax.projects.causal.baselines.tune_meta_learner`).
   A minute; ``--parts R``. The driver adds the same two rows
   to every IHDP table (part H too).
H. The headline table: IHDP replications (``--ihdp-reps``), held-out sqrt(PEHE) of TARNet,
   CFR-pairwise with alpha from the plug-in bound estimator (alpha_hat) and from a validation
   split over ``--alpha-grid``, CFR at each grid alpha, and the meta-learner baselines
   (T-, S-, X-learner x ridge, scikit-learn gradient boosting, LightGBM), all on the same
   splits; paired tests over replications. ``--early-stopping`` adds TARNet and the
   validation-selected CFR early-stopped on that validation split (``--patience``,
   ``--eval-every``) and the oracle among the early-stopped grid fits. Runs of disjoint
   replication sets merge into the same ``--out`` (run it in chunks, then ``--report``).

Run: ``python benchmarks/causal.py --data-dir ../shared/data`` (``--smoke``: seconds, random
covariates, peer with 2 iterations if its venv exists; it writes a temporary file unless
``--out`` is given). The peer venv: ``python benchmarks/causal.py --make-peer-venv`` (pip
installs tensorflow-cpu + causalegm into /tmp/peer_causal/venv; never a dependency of
fidia_jax).

The results file (``--out``, default ``benchmarks/results/causal.json``) is written through
:func:`_results.write_results` (issue 41): the command, date, machine, commit and load
average, the tables of the parts it holds (:func:`tables`: ``headline``, ``per_replication``,
``paired`` and ``alpha`` from part H; ``reference`` and ``reference_per_replication`` from R;
``term_timing`` from T; ``alpha_grid`` from D; ``ihdp_cfr``, ``multiarm``, ``multiarm_egm``
from B, C, E; ``causalegm_ihdp<r>`` from A) and the raw results of every part (the keys
``protocol``, ``ihdp_headline``, ``ihdp_reference``, ...). ``docs/causal.md`` renders its
tables from such files (``python tools/render_tables.py --write``). A run into an existing file
merges its parts into the file's (and part H's replications into the file's, when the
iterations and early stopping agree); the caption's command is then the earlier runs' commands
and this one's, joined by `` ; ``. ``--report`` rewrites the tables of ``--out`` from its raw
results, keeping the run's caption.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import tempfile
import time

import numpy as np
from _peers import make_venv, start_peer, wait_peer
from _results import command_line, default_out, load_average
from _stats import paired_tests

HERE = pathlib.Path(__file__).resolve().parent
PEER_DIR = pathlib.Path("/tmp/peer_causal")
PEER_PYTHON = PEER_DIR / "venv" / "bin" / "python"


def make_peer_venv() -> None:
    """The throwaway TensorFlow venv of the peer (the package pins no TF version; we take the
    newest tensorflow-cpu wheel pip finds)."""
    make_venv(
        PEER_DIR / "venv",
        ["tensorflow-cpu", "scikit-learn", "pandas", "python-dateutil"],
        ["--no-deps", "causalegm==0.4.0"],
    )


def start_peers(x, t, y, n_iter, seeds, workdir, python=PEER_PYTHON):
    """One package process per seed, in the background (returns the seeds, peers, output files)."""
    src = pathlib.Path(workdir) / "peer_in.npz"
    np.savez(src, x=x, t=t, y=y)
    procs = []
    for seed in seeds:
        dst = pathlib.Path(workdir) / f"peer_out_{seed}.npz"
        peer = start_peer(
            python,
            "_causalegm_peer.py",
            src,
            dst,
            n_iter,
            seed,
            log_path=pathlib.Path(workdir) / f"peer_{seed}.log",
        )
        procs.append((seed, peer, dst))
    return procs


def collect_peers(procs, mu):
    from fidia_jax import metrics

    out = {}
    for seed, peer, dst in procs:
        wait_peer(peer, name=f"causalegm peer (seed {seed})")
        d = np.load(dst)
        ite = d[f"ite_{seed}"]  # binary arms: the effect is the predicted mu_1 - mu_0
        mu_hat = np.stack([np.zeros_like(ite), ite], axis=1)
        out[seed] = {
            "sqrt_pehe": metrics.sqrt_pehe(mu, mu_hat),
            "ate_error": metrics.ate_error(mu, mu_hat),
            "wall_s": float(d[f"wall_{seed}"]),
        }
    return out


def main(argv=None):
    load_start = load_average()
    command = command_line(None if argv is None else [str(pathlib.Path(__file__).resolve()), *argv])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=os.environ.get("FIDIA_DATA_DIR"))
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--make-peer-venv", action="store_true")
    ap.add_argument("--egm-iter", type=int, default=500)
    ap.add_argument("--egm-seeds", default="1,2,3")
    ap.add_argument("--egm-reps", default="1", help="part A: IHDP replications")
    ap.add_argument("--peer-python", default=str(PEER_PYTHON), help="the peer venv's python")
    ap.add_argument("--ihdp-reps", default="1,2,3,4")
    ap.add_argument("--iterations", type=int, default=800)
    ap.add_argument("--arms", default="2,4,8,16", help="K values of part C")
    ap.add_argument("--alpha-grid", default="0.1,1,10", help="part H: alpha grid")
    ap.add_argument("--val-fraction", type=float, default=0.2, help="part H: validation split")
    ap.add_argument(
        "--early-stopping",
        action="store_true",
        help="part H: add the early-stopped rows tarnet@es and cfr_pairwise@val_es",
    )
    ap.add_argument("--patience", type=int, default=10, help="part H: evaluations without gain")
    ap.add_argument("--eval-every", type=int, default=10, help="part H: steps per evaluation")
    ap.add_argument(
        "--parts",
        default="A,B,C,D,E",
        help="which parts to run; each writes --out with its part merged in",
    )
    ap.add_argument(
        "--report",
        action="store_true",
        help="no fitting: rewrite the tables of --out from its raw results (caption kept)",
    )
    ap.add_argument("--merge", default="", help="comma-separated part files to merge into --out")
    ap.add_argument("--out", default=None, help="default: benchmarks/results/causal.json")
    args = ap.parse_args(argv)
    if args.make_peer_venv:
        make_peer_venv()
        return
    if args.out is None:
        args.out = str(default_out("causal", args.smoke and not (args.report or args.merge)))
    out = pathlib.Path(args.out)
    if args.merge:
        merged, commands, sources = {}, [], []
        for name in args.merge.split(","):
            raw, caption = read(pathlib.Path(name))
            merged.update(raw)
            commands.append(caption.get("command", f"(part file {name})"))
            sources.append({"file": name, **caption})
        write(out, {**merged, "merged_from": sources}, command=" ; ".join(commands))
    elif args.report:
        raw, caption = read(out)
        if "command" not in caption:
            raise SystemExit(f"{out} has no caption (an old-format file): re-run its parts")
        write(out, raw, command=caption["command"], caption=caption)
    if args.report or args.merge:
        print(format_report(read(out)[0]))
        return
    parts = set(args.parts.split(","))
    # parts run in separate processes merge into one file; the caption names every run whose
    # results the file still holds
    old, old_caption = read(out) if out.exists() else ({}, {})
    earlier = old.pop("earlier_runs", [])

    def save(results: dict, final: bool = True) -> None:
        kept = [k for k in old if k not in results and k not in ("protocol", "run_command")]
        kept = [k for k in kept if not k.startswith("wall_s_")]
        if results.get("ihdp_headline", {}).get("merged_replications"):
            kept.append("ihdp_headline")
        merged = {**old, **results, "run_command": command}
        caption_command = command
        if kept and old_caption.get("command"):
            # the file's caption command already joins its earlier runs' commands: keep the
            # last run's own command (``run_command``) so that no command is listed twice
            own = old.get("run_command", old_caption["command"])
            merged["earlier_runs"] = [*earlier, {**old_caption, "command": own}]
            caption_command = " ; ".join([*(e["command"] for e in merged["earlier_runs"]), command])
        path = write(out, merged, command=caption_command, load_start=load_start)
        if final:
            print(format_report(merged))
        print(f"wrote {path}", flush=True)

    from fidia_jax import metrics
    from fidia_jax.projects import causal
    from fidia_jax.projects.causal import data as data_lib

    seeds = [int(s) for s in args.egm_seeds.split(",")]
    reps = tuple(int(r) for r in args.ihdp_reps.split(","))
    ks = tuple(int(k) for k in args.arms.split(","))
    egm_iter, iters = args.egm_iter, args.iterations
    if args.smoke:
        seeds, reps, ks, egm_iter, iters = seeds[:1], reps[:1], (2, 4), 2, 20
    results: dict = {
        "protocol": {
            "egm_iter": egm_iter,
            "egm_seeds": seeds,
            "ihdp_reps": reps,
            "iterations": iters,
            "K": ks,
            "smoke": args.smoke,
        }
    }
    t_start = time.time()
    workdir = tempfile.mkdtemp(prefix="causal_bench_")

    # ---- A. CausalEGM: package (concurrent processes) vs ours, IHDP replications -------------
    egm_reps = [int(r) for r in args.egm_reps.split(",")]
    if args.smoke and args.data_dir is None:
        rng = np.random.default_rng(0)
        egm_data = {1: data_lib.make_multiarm(rng.normal(size=(200, 8)), 2, seed=0, name="random")}
    else:
        egm_data = {r: data_lib.load_ihdp(r, args.data_dir) for r in egm_reps}
    procs = {}
    peer_python = pathlib.Path(args.peer_python)
    if "A" in parts and peer_python.exists():
        for rep, d in egm_data.items():
            sub = pathlib.Path(workdir) / f"rep{rep}"
            sub.mkdir()
            procs[rep] = start_peers(d.x, d.t, d.y, egm_iter, seeds, sub, peer_python)
    elif "A" in parts:
        results["peer_missing"] = f"{peer_python} not found (run --make-peer-venv)"
    for rep, d in egm_data.items() if "A" in parts else []:
        ours = {}
        for seed in seeds:
            egm = causal.EgmSettings(n_iter=egm_iter, batches_per_eval=min(500, egm_iter))
            predict, info = causal.fit_causalegm(d, egm, seed)
            mu_hat = predict(d.x)
            ours[seed] = {
                "sqrt_pehe": metrics.sqrt_pehe(d.mu, mu_hat),
                "ate_error": metrics.ate_error(d.mu, mu_hat),
                "wall_s": info["wall_s"],
            }
            print(f"ours CausalEGM rep {rep} seed {seed}: {ours[seed]}", flush=True)
        results[f"causalegm_ihdp{rep}"] = {"ours": ours}

    smoke_data = (
        {"dataset": "multiarm_random", "n_units": 200}
        if (args.smoke and args.data_dir is None)
        else {"data_dir": args.data_dir}
    )
    # ---- B. IHDP TARNet / CFR out-of-sample -----------------------------------------------------
    cfg_b = causal.get_config(
        "default",
        replications=reps,
        methods=("tarnet", "cfr_pairwise"),
        iterations=iters,
        alpha=1.0,
        **smoke_data,
    )
    if "dataset" in smoke_data:
        cfg_b = dataclasses.replace(cfg_b, num_arms=(2,))
    if "B" in parts:
        results["ihdp_cfr"] = causal.run_experiment(cfg_b)

    from fidia_jax.projects.causal.configs import BASELINES

    # ---- C. K arms: schemes, time per epoch, multi-treatment CausalEGM at K=8 -------------------
    base = {"dataset": "multiarm_ihdp", **smoke_data}
    cfg_c = causal.get_config(
        "default",
        replications=(0,),
        num_arms=ks,
        iterations=iters,
        alpha=None,
        time_epochs=1,
        # TARNet is the alpha_hat pilot (no extra fit); the meta-learners are the simple
        # baselines on the same splits (seconds)
        methods=("tarnet", "cfr_pairwise", "cfr_one_vs_all", "cfr_aggregation", *BASELINES),
        **base,
    )
    if "C" in parts:
        results["multiarm"] = causal.run_experiment(cfg_c)
    k_egm = 8 if not args.smoke else 4
    cfg_e = dataclasses.replace(
        cfg_c,
        num_arms=(k_egm,),
        methods=("causalegm",),
        egm_iterations=max(egm_iter, 2),
        time_epochs=0,
        alpha=1.0,
    )
    if "E" in parts:
        results["multiarm_egm"] = causal.run_experiment(cfg_e)

    # ---- D. alpha_hat vs grid (CFR pairwise, K = 4) ---------------------------------------------
    cfg_d = dataclasses.replace(
        cfg_c, num_arms=(4,), methods=("cfr_pairwise",), time_epochs=0, alpha_grid=(0.1, 1.0, 10.0)
    )
    if "D" in parts:
        results["alpha_grid"] = causal.run_experiment(cfg_d)

    # ---- H. headline: IHDP, networks vs meta-learner baselines, alpha by bound and validation --
    if "H" in parts:
        cfg_h = causal.get_config(
            "default",
            replications=reps,
            methods=("tarnet", "cfr_pairwise", *BASELINES),
            iterations=iters,
            alpha=None,
            alpha_grid=tuple(float(a) for a in args.alpha_grid.split(",")),
            validation_fraction=args.val_fraction,
            early_stopping=args.early_stopping,
            patience=args.patience,
            eval_every=args.eval_every,
            **smoke_data,
        )
        if "dataset" in smoke_data:
            cfg_h = dataclasses.replace(cfg_h, num_arms=(2,))
        prev = old.get("ihdp_headline")
        same = prev and all(
            prev.get(k) == v
            for k, v in (("iterations", iters), ("early_stopping", args.early_stopping))
        )
        keep = [x for x in prev["runs"] if x["replication"] not in reps] if same else []
        res_h = {"runs": keep, "wall_s": prev["wall_s"] if keep else 0.0}
        if keep:  # chunks of replications merge
            res_h["merged_replications"] = sorted({x["replication"] for x in keep})
        res_h["iterations"] = iters
        res_h["alpha_grid"] = list(cfg_h.alpha_grid)
        res_h["validation_fraction"] = cfg_h.validation_fraction
        res_h["early_stopping"] = cfg_h.early_stopping
        res_h["patience"], res_h["eval_every"] = cfg_h.patience, cfg_h.eval_every
        res_h["replications_done"] = []
        for r in reps:  # one replication at a time, the file rewritten after each
            one = causal.run_experiment(dataclasses.replace(cfg_h, replications=(r,)))
            res_h["runs"] += one["runs"]
            res_h["wall_s"] += one["wall_s"]
            res_h["summary"] = _summarise(res_h["runs"])
            res_h["replications_done"].append(r)
            results["ihdp_headline"] = res_h
            if r != reps[-1]:
                save(results, final=False)

    # ---- R. predictors that ignore x (issue 41) with the ridge meta-learners, IHDP, seconds ----
    if "R" in parts:
        from fidia_jax.projects.causal import baselines

        cfg_r = causal.get_config(
            "default", replications=reps, alpha=1.0, **smoke_data,
            methods=("t_ridge", "s_ridge", "t_gbm", "t_lgbm"),
        )  # fmt: skip
        res_r = causal.run_experiment(cfg_r)
        # the boosted T-learners with the learning rate chosen on the networks' validation
        # split (fraction --val-fraction), the networks' budget (3 values), same splits
        for k, r, d in causal.instances(cfg_r):
            seed = cfg_r.seed + r
            train, test = data_lib.split_causal(d, cfg_r.test_fraction, seed)
            for base in ("gbm", "lgbm"):
                predict, info = baselines.tune_meta_learner(
                    train, "t", base, seed, validation_fraction=args.val_fraction
                )
                mu_hat = predict(test.x)
                res_r["runs"].append({
                    "K": k, "replication": r, "method": f"t_{base}@val", "alpha": None,
                    "sqrt_pehe": metrics.sqrt_pehe(test.mu, mu_hat),
                    "ate_error": metrics.ate_error(test.mu, mu_hat),
                    "wall_s": info["wall_s"], "chosen": info["chosen"], "grid": info["grid"],
                })  # fmt: skip
        res_r["summary"] = _summarise(res_r["runs"])
        res_r["test_fraction"] = cfg_r.test_fraction
        res_r["validation_fraction"] = args.val_fraction
        results["ihdp_reference"] = res_r

    # ---- T. cost of one balancing term (value + gradient) vs K, batch 128 x 32 ---------------
    if "T" in parts:
        import jax
        import jax.numpy as jnp

        from fidia_jax.projects.causal import losses

        phi = jax.random.normal(jax.random.key(0), (128, 32))
        timing = {}
        for k in ks:
            t_arms = jnp.arange(128) % k
            for scheme in losses.SCHEMES:
                f = jax.jit(
                    jax.value_and_grad(
                        lambda p, t_arms=t_arms, k=k, scheme=scheme: losses.balancing_loss(
                            scheme,
                            p,
                            t_arms,
                            k,
                            jax.random.key(1),
                            ipm_name="mmd_rbf",
                            bandwidth=8.0,
                        )
                    )
                )
                jax.block_until_ready(f(phi))
                reps_t = 3
                t0 = time.perf_counter()
                for _ in range(reps_t):
                    jax.block_until_ready(f(phi))
                timing.setdefault(scheme, {})[str(k)] = (time.perf_counter() - t0) / reps_t
                print(f"timing K={k} {scheme}: {timing[scheme][str(k)] * 1e3:.2f} ms", flush=True)
        results["term_timing"] = timing

    # ---- collect the peer ------------------------------------------------------------------------
    for rep, rep_procs in procs.items():
        results[f"causalegm_ihdp{rep}"]["package"] = collect_peers(rep_procs, egm_data[rep].mu)
    results[f"wall_s_{''.join(sorted(parts))}"] = time.time() - t_start
    save(results)


def _summarise(runs) -> dict:
    """``str(K)`` -> method -> mean / std of sqrt(PEHE) and ATE error over replications (the
    driver's summary, for runs this script adds)."""
    out: dict = {}
    for row in runs:
        out.setdefault(str(row["K"]), {}).setdefault(row["method"], []).append(row)
    for by_method in out.values():
        for name, rows in by_method.items():
            p = np.array([x["sqrt_pehe"] for x in rows])
            a = np.array([x["ate_error"] for x in rows])
            by_method[name] = {"sqrt_pehe_mean": float(p.mean()), "sqrt_pehe_std": float(p.std()),
                               "ate_error_mean": float(a.mean()), "ate_error_std": float(a.std()),
                               "n": len(rows)}  # fmt: skip
    return out


# ---- the results file's tables ------------------------------------------------------------------

NETWORKS = ("tarnet", "cfr_pairwise", "cfr_pairwise@val", "tarnet@es", "cfr_pairwise@val_es")
"""The usable network rows of the headline (the oracle rows choose alpha on the test units)."""
REFERENCE = ("constant_effect", "mean_outcome")
LABELS = {
    "tarnet": "TARNet",
    "cfr_pairwise": "CFR, alpha_hat of the bound",
    "cfr_pairwise@val": "CFR, alpha by validation",
    "cfr_pairwise@oracle": "CFR, oracle alpha (chosen on the held-out units: not usable)",
    "tarnet@es": "TARNet early-stopped",
    "cfr_pairwise@val_es": "CFR early-stopped, alpha by validation",
    "cfr_pairwise@val_es_oracle": "CFR early-stopped, oracle alpha (not usable)",
    "constant_effect": "constant effect (training arms' mean difference; ignores x)",
    "mean_outcome": "mean outcome (zero effect; ignores x)",
}
_META = {"t": "T-learner", "s": "S-learner", "x": "X-learner"}
_BASE = {"ridge": "ridge", "gbm": "gradient boosting", "lgbm": "LightGBM"}


def label(method: str, iterations: int | None = None) -> str:
    """A headline row's name: the readable name and the driver's id in backticks."""
    if method in LABELS:
        text = LABELS[method]
        if iterations and method in ("tarnet", "cfr_pairwise", "cfr_pairwise@val"):
            text += f", {iterations} iterations"
    else:
        name, _, tag = method.partition("@")
        meta, _, base = name.partition("_")
        text = f"{_META.get(meta, meta)}, {_BASE.get(base, base)}"
        if tag == "val":
            text += ", learning rate by validation"
    return f"{text} (`{method}`)"


def kind(method: str) -> str:
    """``network`` / ``network, not usable`` / ``meta-learner`` / ``ignores x``."""
    if method in REFERENCE:
        return "ignores x"
    if "oracle" in method:
        return "network, not usable"
    if method in NETWORKS or method.split("@")[0] in ("tarnet", "cfr_pairwise"):
        return "network"
    return "meta-learner"


#: The columns of a per-method summary over replications (``headline`` adds alpha after "kind").
_SUMMARY_COLUMNS = (
    "method",
    "kind",
    "sqrt(PEHE) mean ± std",
    "median",
    "ATE error mean ± std",
    "replications",
)


def _ms(values) -> list[float]:
    """[mean, std] (population std over replications, as the driver's summary)."""
    v = np.asarray(values, float)
    return [float(v.mean()), float(v.std())]


def _paired(a, b):
    """Paired tests of ``a - b`` over replications (:func:`_stats.paired_tests`): (mean diff,
    median diff, Wilcoxon p, t-test p, wins = pairs with ``a`` lower)."""
    r = paired_tests(a, b)
    return r["mean_diff"], r["median_diff"], r["p_wilcoxon"], r["p_ttest"], r["a_lower"]


def _by_method(h) -> tuple[dict, list[int]]:
    """method -> replication -> run row, with the two oracle rows added; the replications."""
    by: dict = {}
    for row in h["runs"]:
        by.setdefault(row["method"], {})[row["replication"]] = row
    reps = sorted({row["replication"] for row in h["runs"]})
    # oracle: the grid fit with the best held-out sqrt(PEHE) per replication, a choice no user
    # can make; it bounds what choosing alpha can gain
    for src, dst in (("cfr_pairwise@val", "cfr_pairwise@oracle"),
                     ("cfr_pairwise@val_es", "cfr_pairwise@val_es_oracle")):  # fmt: skip
        if src in by and all(r in by[src] and by[src][r].get("grid") for r in reps):
            oracle = {}
            for r in reps:
                g = by[src][r]["grid"]
                a = min(g, key=lambda a, g=g: g[a]["sqrt_pehe"])
                oracle[r] = {**g[a], "alpha": float(a), "method": dst}
            by[dst] = oracle
    by = {m: rows for m, rows in by.items() if all(r in rows for r in reps)}  # complete only
    return by, reps


def _pehe(by, m, reps):
    return [by[m][r]["sqrt_pehe"] for r in reps]


def _baselines(by) -> list[str]:
    return [m for m in by if kind(m) in ("meta-learner", "ignores x")]


def headline_tables(h) -> dict:
    """The headline tables of part H (``h``: the driver's result with this script's protocol
    keys): ``headline`` (one row per method, mean ± std and median over replications, sorted by
    the mean), ``per_replication``, ``paired`` (the best usable network against the strongest
    baselines and the predictors that ignore x, and the network ablations) and ``alpha``
    (which alpha each selector picks)."""
    by, reps = _by_method(h)
    n = len(reps)
    iters = h.get("iterations")

    def mean(m):
        return float(np.mean(_pehe(by, m, reps)))

    rows = []
    for m in sorted(by, key=mean):
        al = [by[m][r].get("alpha") for r in reps]
        alpha = None if any(a is None for a in al) else float(np.median([float(a) for a in al]))
        rows.append([label(m, iters), kind(m), alpha, _ms(_pehe(by, m, reps)),
                     float(np.median(_pehe(by, m, reps))),
                     _ms([by[m][r]["ate_error"] for r in reps]), n])  # fmt: skip
    headline = {
        "columns": [*_SUMMARY_COLUMNS[:2], "alpha (median)", *_SUMMARY_COLUMNS[2:]],
        "rows": rows,
        "formats": [None, None, ".3g", ".3f", ".3f", ".3f", None],
    }
    nets = [m for m in NETWORKS if m in by]
    base = _baselines(by)
    best_net = min(nets, key=mean)
    best_base = min(base, key=mean)
    best_base_median = min(base, key=lambda m: float(np.median(_pehe(by, m, reps))))
    pairs = [(best_net, b) for b in (best_base, best_base_median, *REFERENCE,
                                     "t_ridge", "s_gbm", "x_ridge", "t_gbm@val")]  # fmt: skip
    pairs += [(m, "constant_effect") for m in nets]
    pairs += [("tarnet@es", "tarnet"), ("cfr_pairwise@val_es", "cfr_pairwise@val"),
              ("cfr_pairwise@val_es", "tarnet@es"), ("cfr_pairwise", "tarnet"),
              ("cfr_pairwise@val", "cfr_pairwise"),
              ("cfr_pairwise@val_es_oracle", "cfr_pairwise@val_es")]  # fmt: skip
    seen, prow = set(), []
    for m1, m2 in pairs:
        if m1 not in by or m2 not in by or m1 == m2 or (m1, m2) in seen:
            continue
        seen.add((m1, m2))
        d, dm, pw, pt, wins = _paired(_pehe(by, m1, reps), _pehe(by, m2, reps))
        note = []
        if m1 == best_net:
            note.append("best network by mean")
        if m2 == best_base:
            note.append("best baseline by mean")
        if m2 == best_base_median:
            note.append("best baseline by median")
        prow.append([f"`{m1}`", f"`{m2}`", ", ".join(note) or None, d, dm, pw, pt,
                     f"{wins}/{n}"])  # fmt: skip
    paired = {
        "columns": [
            "first",
            "second",
            "which",
            "mean diff",
            "median diff",
            "Wilcoxon p",
            "paired t p",
            "first lower",
        ],  # fmt: skip
        "rows": prow,
        "formats": [None, None, None, "+.3f", "+.3f", ".3g", ".3g", None],
    }
    show = [m for m in ("tarnet", "cfr_pairwise", "cfr_pairwise@val", "tarnet@es",
                        "cfr_pairwise@val_es", *REFERENCE) if m in by]  # fmt: skip
    per_rep = []
    for r in reps:
        best_b = min(base, key=lambda m, r=r: by[m][r]["sqrt_pehe"])
        per_rep.append([r, *(by[m][r]["sqrt_pehe"] for m in show),
                        f"`{best_b}`", by[best_b][r]["sqrt_pehe"],
                        by[best_net][r]["sqrt_pehe"] < by[best_b][r]["sqrt_pehe"]])  # fmt: skip
    per_replication = {
        "columns": [
            "replication",
            *(f"`{m}`" for m in show),
            "best baseline here",
            "its sqrt(PEHE)",
            f"`{best_net}` lower",
        ],  # fmt: skip
        "rows": per_rep,
        "formats": [None, *[".3f"] * len(show), None, ".3f", None],
    }
    tables = {"headline": headline, "per_replication": per_replication, "paired": paired}
    if "cfr_pairwise@val" in by:
        arow = []
        for r in reps:
            hat, val = by["cfr_pairwise"][r], by["cfr_pairwise@val"][r]
            cells = [r, hat["alpha"], hat["sqrt_pehe"], val["alpha"], val["sqrt_pehe"],
                     " / ".join(f"{g['val_mse']:.3f}" for g in val["grid"].values()),
                     by["cfr_pairwise@oracle"][r]["alpha"],
                     by["cfr_pairwise@oracle"][r]["sqrt_pehe"]]  # fmt: skip
            if "cfr_pairwise@val_es" in by:
                es, te = by["cfr_pairwise@val_es"][r], by["tarnet@es"][r]
                cells += [es["alpha"], f"{es['best_step']} / {es['stopped_step']}",
                          " / ".join(f"{g['val_mse']:.3f}" for g in es["grid"].values()),
                          f"{te['best_step']} / {te['stopped_step']}"]  # fmt: skip
            arow.append(cells)
        grid = "/".join(f"{float(a):g}" for a in h.get("alpha_grid") or ())
        columns = ["replication", "alpha_hat", "its sqrt(PEHE)", "alpha by validation",
                   "its sqrt(PEHE)", f"validation MSE at {grid}", "oracle alpha",
                   "its sqrt(PEHE)"]  # fmt: skip
        formats = [None, ".3g", ".3f", "g", ".3f", None, "g", ".3f"]
        if "cfr_pairwise@val_es" in by:
            columns += ["early-stopped: alpha", "best / last step",
                        f"best validation MSE at {grid}", "TARNet early-stopped: best / last step"]  # fmt: skip
            formats += ["g", None, None, None]
        tables["alpha"] = {"columns": columns, "rows": arow, "formats": formats}
    return tables


def reference_tables(ref) -> dict:
    """Part R: ``reference`` (mean ± std, median and ATE error over replications per method,
    sorted by the mean) and ``reference_per_replication``."""
    by, reps = _by_method(ref)
    order = sorted(by, key=lambda m: float(np.mean(_pehe(by, m, reps))))
    rows = [[label(m), kind(m), _ms(_pehe(by, m, reps)), float(np.median(_pehe(by, m, reps))),
             _ms([by[m][r]["ate_error"] for r in reps]), len(reps)] for m in order]  # fmt: skip
    summary = {
        "columns": list(_SUMMARY_COLUMNS),
        "rows": rows,
        "formats": [None, None, ".3f", ".3f", ".3f", None],
    }
    per_rep = {
        "columns": ["replication", *(f"`{m}`" for m in order)],
        "rows": [[r, *(by[m][r]["sqrt_pehe"] for m in order)] for r in reps],
        "formats": [None, *[".3f"] * len(order)],
    }
    return {"reference": summary, "reference_per_replication": per_rep}


def summary_table(res, *, per_epoch: bool = False) -> dict:
    """Parts B, C, D, E: one row per (K, method) of the driver's summary; alpha is the median
    over the runs (``None``: not a CFR row)."""
    # one draw per (K, method) everywhere (parts C, D, E): the values, no "± 0"
    single = all(c["n"] == 1 for by_method in res["summary"].values() for c in by_method.values())
    rows = []
    for k, by_method in res["summary"].items():
        for name, c in by_method.items():
            al = [x.get("alpha") for x in res["runs"] if str(x["K"]) == k and x["method"] == name]
            alpha = None if any(a is None for a in al) else float(np.median(al))
            if single:
                row = [int(k), f"`{name}`", alpha, c["sqrt_pehe_mean"], c["ate_error_mean"], 1]
            else:
                row = [int(k), f"`{name}`", alpha, [c["sqrt_pehe_mean"], c["sqrt_pehe_std"]],
                       [c["ate_error_mean"], c["ate_error_std"]], c["n"]]  # fmt: skip
            if per_epoch:
                row.append(c.get("s_per_epoch"))
            rows.append(row)
    columns = ["K", "method", "alpha", "sqrt(PEHE) mean ± std", "ATE error mean ± std", "runs"]
    if single:
        columns = ["K", "method", "alpha", "sqrt(PEHE)", "ATE error", "draws"]
    formats = [None, None, ".3g", ".3f", ".3f", None]
    if per_epoch:
        columns.append("s per epoch")
        formats.append(".3f")
    return {"columns": columns, "rows": rows, "formats": formats}


def timing_table(tt) -> dict:
    """Part T: ms per call of one balancing term (value + gradient) per scheme and K, and the
    ratio of each larger K's to the smallest K's."""
    ks = list(next(iter(tt.values())))
    rows = [[scheme, *(row[k] * 1e3 for k in ks), *(row[k] / row[ks[0]] for k in ks[1:])]
            for scheme, row in tt.items()]  # fmt: skip
    return {
        "columns": [
            "scheme",
            *(f"K={k} (ms)" for k in ks),
            *(f"K={k} / K={ks[0]}" for k in ks[1:]),
        ],  # fmt: skip
        "rows": rows,
        "formats": [None, *[".2f"] * len(ks), *[".1f"] * (len(ks) - 1)],
    }


def egm_table(egm) -> dict:
    """Part A: the package and our port on one replication, mean ± std over seeds."""
    pkg = egm.get("package")
    ref = float(np.mean([v["sqrt_pehe"] for v in pkg.values()])) if pkg else None
    rows = []
    for name, block in (("causalegm package (TensorFlow, peer)", pkg), ("ours (JAX)", egm["ours"])):
        if not block:
            rows.append([name, None, None, None, None, None])
            continue
        p = [v["sqrt_pehe"] for v in block.values()]
        rows.append([name, ", ".join(str(s) for s in block), _ms(p),
                     _ms([v["ate_error"] for v in block.values()]),
                     float(np.mean([v["wall_s"] for v in block.values()])),
                     None if ref is None else float(np.mean(p)) / ref])  # fmt: skip
    return {
        "columns": [
            "implementation",
            "seeds",
            "sqrt(PEHE) mean ± std",
            "ATE error mean ± std",
            "s per run",
            "ratio to the package",
        ],  # fmt: skip
        "rows": rows,
        "formats": [None, None, ".3f", ".3f", ".0f", ".2f"],
    }


def tables(raw) -> dict:
    """Every table of a raw record (the keys of the parts it holds)."""
    out = {}
    for key in sorted(k for k in raw if k.startswith("causalegm_ihdp")):
        out[key] = egm_table(raw[key])
    for key, per_epoch in (("ihdp_cfr", False), ("multiarm", True), ("multiarm_egm", False),
                           ("alpha_grid", False)):  # fmt: skip
        if key in raw:
            out[key] = summary_table(raw[key], per_epoch=per_epoch)
    if "term_timing" in raw:
        out["term_timing"] = timing_table(raw["term_timing"])
    if "ihdp_reference" in raw:
        out.update(reference_tables(raw["ihdp_reference"]))
    if "ihdp_headline" in raw:
        out.update(headline_tables(raw["ihdp_headline"]))
    return out


def markdown(tables_: dict) -> str:
    """The tables as plain Markdown (the console's copy; the pages render the file's)."""

    def cell(v, f):
        if v is None:
            return "—"
        if isinstance(v, list):
            return f"{cell(v[0], f)} ± {cell(v[1], f)}"
        if isinstance(v, float):
            return format(v, f or ".4g")
        return str(v)

    lines = []
    for key, t in tables_.items():
        formats = t.get("formats") or [None] * len(t["columns"])
        lines += ["", f"table {key}", "| " + " | ".join(t["columns"]) + " |",
                  "|" + "---|" * len(t["columns"])]  # fmt: skip
        lines += ["| " + " | ".join(cell(v, f) for v, f in zip(r, formats, strict=True)) + " |"
                  for r in t["rows"]]  # fmt: skip
    return "\n".join(lines)


def format_report(raw) -> str:
    return markdown(tables(raw))


def write(out: pathlib.Path, raw: dict, *, command: str, load_start=None, caption=None):
    """Writes ``out`` through :func:`_results.write_results`: the tables of ``raw`` (which the
    file keeps as its raw record)."""
    from _results import write_results

    return write_results(out.stem, tables(raw), command=command, load_start=load_start,
                         extra=raw, out=out, caption=caption)  # fmt: skip


def read(path: pathlib.Path) -> tuple[dict, dict]:
    """A results file's raw record and its caption keys (empty for a file of the old format)."""
    from _results import RESERVED

    doc = json.loads(path.read_text(encoding="utf-8"))
    raw = {k: v for k, v in doc.items() if k not in RESERVED}
    caption = {k: doc[k] for k in RESERVED if k != "tables" and doc.get(k) is not None}
    return raw, caption


if __name__ == "__main__":
    main()
