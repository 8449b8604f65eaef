"""Multi-treatment effects benchmark: CFR schemes vs K, alpha_hat vs a grid, CausalEGM vs its package.

Parts (all in one run; see docs/causal.md for the table and its reading):

A. IHDP, CausalEGM: the authors' ``causalegm`` package (TensorFlow, a throwaway venv, one process
   per seed, started first and run concurrently) and our JAX port, same data (all 747 units of
   the replication, the package's workflow), same iterations, several seeds; in-sample sqrt(PEHE)
   of the ITE at the package's model-selection point.
B. IHDP, out-of-sample sqrt(PEHE) (30 % held out) of TARNet and CFR (pairwise = CFR's IPM term
   for K = 2, MMD-RBF, alpha = 1) over replications (published CFR: ~0.7-1.0).
C. K-arm semi-synthetic data on IHDP covariates, K in {2, 4, 8, 16}: sqrt(PEHE), ATE error and
   seconds per epoch of TARNet and CFR with the Pairwise / One-vs-All / Treatment-Aggregation
   schemes at the plug-in alpha_hat; multi-treatment CausalEGM at K = 8.
D. alpha_hat vs the best alpha of a grid (CFR-pairwise, K = 4).

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


def start_peers(x, t, y, n_iter, seeds, workdir):
    """One package process per seed, in the background (returns the seeds, peers, output files)."""
    src = pathlib.Path(workdir) / "peer_in.npz"
    np.savez(src, x=x, t=t, y=y)
    procs = []
    for seed in seeds:
        dst = pathlib.Path(workdir) / f"peer_out_{seed}.npz"
        peer = start_peer(
            PEER_PYTHON,
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
    ap.add_argument("--ihdp-reps", default="1,2,3,4")
    ap.add_argument("--iterations", type=int, default=800)
    ap.add_argument("--arms", default="2,4,8,16", help="K values of part C")
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

    # ---- A. CausalEGM: package (concurrent processes) vs ours, IHDP replication 1 -------------
    if args.smoke and args.data_dir is None:
        rng = np.random.default_rng(0)
        ihdp1 = data_lib.make_multiarm(rng.normal(size=(200, 8)), 2, seed=0, name="random")
    else:
        ihdp1 = data_lib.load_ihdp(1, args.data_dir)
    procs = None
    if "A" in parts and PEER_PYTHON.exists():
        procs = start_peers(ihdp1.x, ihdp1.t, ihdp1.y, egm_iter, seeds, workdir)
    else:
        results["peer_missing"] = f"{PEER_PYTHON} not found (run --make-peer-venv)"
    ours = {}
    for seed in seeds if "A" in parts else []:
        egm = causal.EgmSettings(n_iter=egm_iter, batches_per_eval=min(500, egm_iter))
        predict, info = causal.fit_causalegm(ihdp1, egm, seed)
        mu_hat = predict(ihdp1.x)
        ours[seed] = {
            "sqrt_pehe": metrics.sqrt_pehe(ihdp1.mu, mu_hat),
            "ate_error": metrics.ate_error(ihdp1.mu, mu_hat),
            "wall_s": info["wall_s"],
        }
        print(f"ours CausalEGM seed {seed}: {ours[seed]}", flush=True)
    if "A" in parts:
        results["causalegm_ihdp1"] = {"ours": ours}

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
    if procs is not None:
        results["causalegm_ihdp1"]["package"] = collect_peers(procs, ihdp1.mu)
    results[f"wall_s_{''.join(sorted(parts))}"] = time.time() - t_start
    out = pathlib.Path(args.out)
    merged = json.loads(out.read_text()) if out.exists() else {}
    merged.update(results)  # parts run in separate processes merge into one file
    atomic_write_text(out, json_text(merged, indent=2))
    print(format_report(merged))
    print(f"wrote {args.out}")


def _ms(values):
    v = np.asarray(values, float)
    return f"{v.mean():.3f} ± {v.std():.3f}"


def format_report(r) -> str:
    lines = []
    egm = r.get("causalegm_ihdp1")
    if egm:
        ours = [v["sqrt_pehe"] for v in egm["ours"].values()]
        lines += [
            "CausalEGM on IHDP replication 1 (in-sample sqrt(PEHE), seeds "
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
    return "\n".join(lines)


if __name__ == "__main__":
    main()
