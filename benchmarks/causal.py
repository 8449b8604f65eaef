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
   seconds per epoch of TARNet and CFR with the Pairwise / One-vs-All / Treatment-Aggregation
   schemes at the plug-in alpha_hat; multi-treatment CausalEGM at K = 8.
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
covariates, peer with 2 iterations if its venv exists). The peer venv:
``python benchmarks/causal.py --make-peer-venv`` (pip installs tensorflow-cpu + causalegm into
/tmp/peer_causal/venv; never a dependency of fidia_jax). Writes benchmarks/results/causal.json.
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
    ap.add_argument("--report", action="store_true", help="only print the table of --out")
    ap.add_argument("--merge", default="", help="comma-separated part files to merge into --out")
    ap.add_argument("--out", default=str(HERE / "results" / "causal.json"))
    args = ap.parse_args(argv)
    if args.make_peer_venv:
        make_peer_venv()
        return
    if args.merge:
        merged = {}
        for name in args.merge.split(","):
            merged.update(json.loads(pathlib.Path(name).read_text()))
        from fidia_jax._io import atomic_write_text, json_text

        atomic_write_text(pathlib.Path(args.out), json_text(merged, indent=2))
    if args.report or args.merge:
        print(format_report(json.loads(pathlib.Path(args.out).read_text())))
        return
    parts = set(args.parts.split(","))
    from fidia_jax import metrics
    from fidia_jax._io import atomic_write_text, json_text
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

    # ---- C. K arms: schemes, time per epoch, multi-treatment CausalEGM at K=8 -------------------
    base = {"dataset": "multiarm_ihdp", **smoke_data}
    cfg_c = causal.get_config(
        "default",
        replications=(0,),
        num_arms=ks,
        iterations=iters,
        alpha=None,
        time_epochs=1,
        methods=("cfr_pairwise", "cfr_one_vs_all", "cfr_aggregation"),
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
        from fidia_jax.projects.causal.configs import BASELINES

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
        res_h = causal.run_experiment(cfg_h)
        out_path = pathlib.Path(args.out)
        old = json.loads(out_path.read_text()).get("ihdp_headline") if out_path.exists() else None
        same = old and all(
            old.get(k) == v
            for k, v in (("iterations", iters), ("early_stopping", args.early_stopping))
        )
        if same:  # chunks of replications merge
            keep = [x for x in old["runs"] if x["replication"] not in reps]
            res_h["runs"] = keep + res_h["runs"]
            res_h["wall_s"] += old["wall_s"]
        res_h["iterations"] = iters
        res_h["alpha_grid"] = list(cfg_h.alpha_grid)
        res_h["validation_fraction"] = cfg_h.validation_fraction
        res_h["early_stopping"] = cfg_h.early_stopping
        res_h["patience"], res_h["eval_every"] = cfg_h.patience, cfg_h.eval_every
        results["ihdp_headline"] = res_h

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
    out = pathlib.Path(args.out)
    merged = json.loads(out.read_text()) if out.exists() else {}
    merged.update(results)  # parts run in separate processes merge into one file
    atomic_write_text(out, json_text(merged, indent=2))
    print(format_report(merged))
    print(f"wrote {args.out}")


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


def _ms(values):
    v = np.asarray(values, float)
    return f"{v.mean():.3f} ± {v.std():.3f}"


def format_report(r) -> str:
    lines = []
    for key in sorted(k for k in r if k.startswith("causalegm_ihdp")):
        egm = r[key]
        ours = [v["sqrt_pehe"] for v in egm["ours"].values()]
        lines += [
            f"CausalEGM on IHDP replication {key[14:]} (in-sample sqrt(PEHE), seeds "
            f"{list(egm['ours'])}, {r['protocol']['egm_iter']} iterations)",
            "| implementation | sqrt(PEHE) | ATE error | s/run | ratio to package |",
            "|---|---|---|---|---|",
        ]
        pkg = egm.get("package")
        ref = np.mean([v["sqrt_pehe"] for v in pkg.values()]) if pkg else float("nan")
        for name, block in (("causalegm package (TF)", pkg), ("ours (JAX)", egm["ours"])):
            if not block:
                lines.append(f"| {name} | not run | | | |")
                continue
            p = [v["sqrt_pehe"] for v in block.values()]
            a = [v["ate_error"] for v in block.values()]
            w = np.mean([v["wall_s"] for v in block.values()])
            lines.append(f"| {name} | {_ms(p)} | {_ms(a)} | {w:.0f} | {np.mean(p) / ref:.2f} |")
        if pkg:
            p = [v["sqrt_pehe"] for v in pkg.values()]
            ok = abs(np.mean(ours) - np.mean(p)) <= max(np.std(p), 1e-12)
            lines.append(
                f"goal (ours within package mean ± its seed std): {'MET' if ok else 'NOT met'}"
            )
    from fidia_jax.projects.causal import format_table

    if "ihdp_cfr" in r:
        lines += ["", "IHDP out-of-sample (30 % held out)", format_table(r["ihdp_cfr"])]
    summ = r.get("multiarm", {}).get("summary")
    if summ:
        lines += [
            "",
            "K-arm semi-synthetic (IHDP covariates), alpha = alpha_hat",
            format_table(r["multiarm"]),
            "",
            "seconds per epoch (ratio to K = 2)",
            "| scheme | " + " | ".join(f"K={k}" for k in summ) + " |",
            "|---|" + "---|" * len(summ),
        ]
        first = next(iter(summ))
        for scheme in ("cfr_pairwise", "cfr_one_vs_all", "cfr_aggregation"):
            cells = [
                f"{summ[k][scheme]['s_per_epoch']:.3f} "
                f"({summ[k][scheme]['s_per_epoch'] / summ[first][scheme]['s_per_epoch']:.1f}x)"
                for k in summ
            ]
            lines.append(f"| {scheme} | " + " | ".join(cells) + " |")
    if "term_timing" in r:
        tt = r["term_timing"]
        kk = list(next(iter(tt.values())))
        lines += [
            "",
            "one balancing term, value + gradient, batch 128 x 32, MMD-RBF (ms; ratio to K = 2)",
            "| scheme | " + " | ".join(f"K={k}" for k in kk) + " |",
            "|---|" + "---|" * len(kk),
        ]
        for scheme, row in tt.items():
            lines.append(
                f"| {scheme} | "
                + " | ".join(f"{row[k] * 1e3:.2f} ({row[k] / row[kk[0]]:.1f}x)" for k in kk)
                + " |"
            )
    if "multiarm_egm" in r:
        lines += ["", "multi-treatment CausalEGM", format_table(r["multiarm_egm"])]
        k8 = next(iter(r["multiarm_egm"]["summary"]))
        mt = r["multiarm_egm"]["summary"][k8]["causalegm"]["sqrt_pehe_mean"]
        if summ and k8 in summ:
            best = min(summ[k8][s]["sqrt_pehe_mean"] for s in summ[k8] if s.startswith("cfr_"))
            lines.append(
                f"goal (multi-treatment CausalEGM <= best scheme at K={k8}: "
                f"{best:.3f}): {'MET' if mt <= best else 'NOT met'} ({mt:.3f})"
            )
    if "alpha_grid" in r:
        lines += ["", "alpha_hat vs grid (CFR pairwise, K=4)", format_table(r["alpha_grid"])]
    if "ihdp_reference" in r:
        ref = r["ihdp_reference"]
        lines += [
            "",
            f"IHDP held-out ({ref.get('test_fraction', 0.3):g} held out), predictors that ignore "
            "x (fitted on the training units) and the ridge meta-learners, the driver's splits",
            format_table(ref),
            "",
            "per replication, sqrt(PEHE): " + " | ".join(
                sorted({x["method"] for x in ref["runs"]})),
        ]  # fmt: skip
        by_rep = {}
        for x in ref["runs"]:
            by_rep.setdefault(x["replication"], {})[x["method"]] = x["sqrt_pehe"]
        for rep, cells in sorted(by_rep.items()):
            lines.append(f"rep {rep}: " + " | ".join(f"{cells[m]:.3f}" for m in sorted(cells)))
    if "ihdp_headline" in r:
        lines += ["", *headline_report(r["ihdp_headline"])]
    return "\n".join(lines)


def _paired(a, b):
    """Paired tests of ``a - b`` over replications: (mean diff, Wilcoxon p, t-test p, wins)."""
    from scipy import stats

    a, b = np.asarray(a, float), np.asarray(b, float)
    d = a - b
    p_w = float(stats.wilcoxon(a, b).pvalue) if len(d) > 1 and np.any(d != 0) else float("nan")
    # (exact two-sided Wilcoxon: its smallest p with n = 5 is 0.0625, n = 10: 0.002)
    p_t = float(stats.ttest_rel(a, b).pvalue) if len(d) > 1 else float("nan")
    return float(d.mean()), p_w, p_t, int(np.sum(d < 0))


def headline_report(h) -> list[str]:
    """The headline table (mean ± std, median, wins) and the paired tests."""
    by = {}
    for row in h["runs"]:
        by.setdefault(row["method"], {})[row["replication"]] = row
    reps = sorted(by["tarnet"])
    # oracle: the grid fit (validation-split training part) with the best held-out sqrt(PEHE)
    # per replication, a choice no user can make; it bounds what choosing alpha can gain
    oracle = {}
    for r in reps:
        g = by["cfr_pairwise@val"][r]["grid"]
        a = min(g, key=lambda a: g[a]["sqrt_pehe"])
        oracle[r] = {**g[a], "alpha": float(a)}
    by["cfr_pairwise@oracle"] = oracle
    if "cfr_pairwise@val_es" in by:  # the same oracle among the early-stopped grid fits
        oracle_es = {}
        for r in reps:
            g = by["cfr_pairwise@val_es"][r]["grid"]
            a = min(g, key=lambda a: g[a]["sqrt_pehe"])
            oracle_es[r] = {**g[a], "alpha": float(a)}
        by["cfr_pairwise@val_es_oracle"] = oracle_es
    lines = [
        f"IHDP held-out sqrt(PEHE) and ATE error, replications {reps} "
        f"({h['iterations']} CFR iterations; validation fraction {h['validation_fraction']})",
        "| method | alpha | sqrt(PEHE) mean ± std | median | ATE error | reps |",
        "|---|---|---|---|---|---|",
    ]
    order = sorted(by, key=lambda m: np.mean([by[m][r]["sqrt_pehe"] for r in reps]))
    for m in order:
        p = [by[m][r]["sqrt_pehe"] for r in reps]
        a = [by[m][r]["ate_error"] for r in reps]
        al = [by[m][r].get("alpha") for r in reps]
        al_s = "-" if al[0] is None else f"{np.median([float(x) for x in al]):.3g} (median)"
        lines.append(f"| {m} | {al_s} | {_ms(p)} | {np.median(p):.3f} | {_ms(a)} | {len(p)} |")
    es = [m for m in ("tarnet@es", "cfr_pairwise@val_es") if m in by]
    nets = ["tarnet", "cfr_pairwise", "cfr_pairwise@val", *es]
    base = [m for m in by if m[:2] in ("t_", "s_", "x_")]
    best_base = min(base, key=lambda m: np.mean([by[m][r]["sqrt_pehe"] for r in reps]))
    best_net = min(nets, key=lambda m: np.mean([by[m][r]["sqrt_pehe"] for r in reps]))
    lines += [
        "",
        "paired over replications (sqrt(PEHE); diff = first - second; wins = first lower)",
        "| first | second | mean diff | Wilcoxon p | paired t p | wins |",
        "|---|---|---|---|---|---|",
    ]
    pairs = [
        ("cfr_pairwise", "tarnet"),
        ("cfr_pairwise@val", "tarnet"),
        ("cfr_pairwise@val", "cfr_pairwise"),
        ("cfr_pairwise@oracle", "cfr_pairwise"),
        (best_net, best_base),
        ("cfr_pairwise@oracle", best_base),
    ]
    if es:
        pairs += [
            ("tarnet@es", "tarnet"),
            ("cfr_pairwise@val_es", "cfr_pairwise@val"),
            ("cfr_pairwise@val_es", "tarnet@es"),
            ("tarnet@es", best_base),
            ("cfr_pairwise@val_es", best_base),
            ("cfr_pairwise@val_es_oracle", "cfr_pairwise@val_es"),
            ("cfr_pairwise@val_es_oracle", best_base),
        ]
    # issue 41: the predictors that ignore x (train rows only); absent in runs made before them
    pairs += [(m, ref) for ref in ("constant_effect", "mean_outcome") if ref in by
              for m in ("tarnet", "cfr_pairwise", best_net)]  # fmt: skip
    for m1, m2 in pairs:
        d, pw, pt, wins = _paired(
            [by[m1][r]["sqrt_pehe"] for r in reps], [by[m2][r]["sqrt_pehe"] for r in reps]
        )
        lines.append(f"| {m1} | {m2} | {d:+.3f} | {pw:.3g} | {pt:.3g} | {wins}/{len(reps)} |")
    lines += [
        "",
        "alpha per replication (held-out sqrt(PEHE)): alpha_hat (bound) | alpha_val "
        "(validation) | oracle (best grid fit on the held-out units)",
    ]
    for r in reps:
        lines.append(
            f"rep {r}: {by['cfr_pairwise'][r]['alpha']:.3g} "
            f"({by['cfr_pairwise'][r]['sqrt_pehe']:.3f}) | "
            f"{by['cfr_pairwise@val'][r]['alpha']:g} "
            f"({by['cfr_pairwise@val'][r]['sqrt_pehe']:.3f}) | "
            f"{by['cfr_pairwise@oracle'][r]['alpha']:g} "
            f"({by['cfr_pairwise@oracle'][r]['sqrt_pehe']:.3f})"
        )
    if es:
        lines += [
            "",
            "early stopping per replication: tarnet@es best step / steps run | "
            "cfr_pairwise@val_es alpha, best step / steps run (validation MSE at 0.1 / 1 / 10)",
        ]
        for r in reps:
            te, ce = by["tarnet@es"][r], by["cfr_pairwise@val_es"][r]
            vals = " / ".join(f"{g['val_mse']:.3f}" for g in ce["grid"].values())
            lines.append(
                f"rep {r}: {te['best_step']} / {te['stopped_step']} | alpha {ce['alpha']:g}, "
                f"{ce['best_step']} / {ce['stopped_step']} ({vals})"
            )
    return lines


if __name__ == "__main__":
    main()
