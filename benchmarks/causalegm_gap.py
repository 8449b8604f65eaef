"""CausalEGM: our port vs the authors' package on IHDP, matched settings (issue 38).

Subcommands (each merges its rows into ``--out``, default
benchmarks/results/causalegm_gap.json):

* ``ours``: :func:`fidia_jax.projects.causal.fit_causalegm` on all units of an IHDP replication
  (the package's workflow), ``--n-iter`` iterations, one fit per ``--seeds`` seed, with the
  settings of ``--variant`` (``default``: the package's behaviour; ``old``: our defaults before
  issue 38, i.e. ``stream_seed=None, adam="optax", critic_tf_moments=False``; or any single
  option). In-sample sqrt(PEHE) and ATE error of the ITE at the package's model-selection
  point.
* ``peer``: reads the output of ``benchmarks/_causalegm_peer.py`` (the package, run in its
  throwaway venv, e.g. ``CAUSALEGM_PEER_RECORD=1 /tmp/peer_causalegm/venv/bin/python
  benchmarks/_causalegm_peer.py IN.npz OUT.npz 500 1 2 3``) and scores it the same way.
* ``replay``: our loop started from the package's recorded initial weights with its recorded
  gradient-penalty mixing weights (batches and ``z`` are the package's by construction,
  ``stream_seed = 123``): the same run, computed by our code.
* ``input``: writes the replication's ``x, t, y`` for the peer (``IN.npz``).
* ``merge``: merges the runs of another results file (``--from``) into ``--out``.
* ``compare --a KEY --b KEY``: two-sided Mann-Whitney U and Welch t tests between the
  sqrt(PEHE) values of two entries of ``--out`` (e.g. ours and the package, same seeds), stored
  as ``compare_<a>_vs_<b>``.
* ``fixture``: replays the fixture run (tests/data/causalegm/trace.npz) with each combination
  of ``adam`` and ``critic_tf_moments`` and records the largest difference to the package's
  final parameters, evaluation MSEs and best ITE (which deviation matters how much).

Example (IHDP replication 1, 500 iterations)::

  python benchmarks/causalegm_gap.py input --data-dir ../shared/data --rep 1 --to /tmp/in.npz
  CAUSALEGM_PEER_RECORD=1 /tmp/peer_causalegm/venv/bin/python benchmarks/_causalegm_peer.py \\
      /tmp/in.npz /tmp/peer.npz 500 1 2 3
  python benchmarks/causalegm_gap.py peer --peer-out /tmp/peer.npz --n-iter 500 --seeds 1,2,3
  python benchmarks/causalegm_gap.py replay --peer-out /tmp/peer.npz --n-iter 500 --seeds 1,2,3
  python benchmarks/causalegm_gap.py ours --n-iter 500 --seeds 1,2,3
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import pathlib
import sys
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
VARIANTS = {
    "default": {},
    "old": {"stream_seed": None, "adam": "optax", "critic_tf_moments": False},
    "stream_seed_none": {"stream_seed": None},
    "adam_optax": {"adam": "optax"},
    "exact_bn_variance": {"critic_tf_moments": False},
}


def _score(mu, ite):
    from fidia_jax import metrics

    mu_hat = np.stack([np.zeros_like(ite), ite], axis=1)
    return {
        "sqrt_pehe": float(metrics.sqrt_pehe(mu, mu_hat)),
        "ate_error": float(metrics.ate_error(mu, mu_hat)),
    }


def _merge(out: pathlib.Path, key: str, rows: dict, meta: dict) -> None:
    from fidia_jax._io import atomic_write_text, json_text

    merged = json.loads(out.read_text()) if out.exists() else {}
    entry = merged.setdefault(key, {"runs": {}})
    entry["runs"].update({str(k): v for k, v in rows.items()})
    commands = entry.get("commands", [entry["command"]] if "command" in entry else [])
    for c in meta.get("commands", [meta["command"]] if "command" in meta else []):
        if c not in commands:
            commands.append(c)
    entry.update({k: v for k, v in meta.items() if k not in ("command", "commands")})
    entry["commands"] = commands
    entry.pop("command", None)
    vals = [r["sqrt_pehe"] for r in entry["runs"].values()]
    entry["sqrt_pehe_mean"] = float(np.mean(vals))
    entry["sqrt_pehe_std"] = float(np.std(vals, ddof=1)) if len(vals) > 1 else None
    atomic_write_text(out, json_text(merged, indent=2))
    print(f"{key}: {[round(v, 3) for v in vals]} mean {entry['sqrt_pehe_mean']:.3f}", flush=True)


def _fixture_variants(out: pathlib.Path) -> None:
    sys.path.insert(0, str(HERE.parent / "tests" / "projects" / "causal"))
    import test_causalegm_fidelity as fx
    from flax import nnx

    from fidia_jax import train as train_lib
    from fidia_jax.projects.causal import _fit
    from fidia_jax.projects.causal import model as models

    meta = json.loads((fx.DATA / "trace.json").read_text())
    a = dict(np.load(fx.DATA / "trace.npz"))
    rows = {}
    for adam in ("keras", "optax"):
        for tf_moments in (True, False):
            s = dataclasses.replace(fx._settings(meta), adam=adam, critic_tf_moments=tf_moments)
            m = fx._model(meta, a, s)
            m.dz_net.tf_moments = m.dv_net.tf_moments = tf_moments
            graphdef, _, rest = train_lib.split_model(m)
            eps = a["disc_eps"].reshape(meta["n_iter"] + 1, s.g_d_freq, 2)
            predict, info = _fit._fit_egm(fx._data(a), s, 0, m, run="fixture", eps=eps)
            fitted = nnx.merge(graphdef, info["_final_params"], rest)
            final = fx._stage(a, "final")
            worst = 0.0
            for name in models.CausalEGM._NETS:
                net = getattr(fitted, name)
                for i, layer in enumerate(net.layers):
                    hidden_critic = name.startswith("d") and i < len(net.layers) - 1
                    for leaf in ("kernel",) if hidden_critic else ("kernel", "bias"):
                        got = np.asarray(getattr(layer, leaf)[...])
                        worst = max(worst, float(np.abs(got - final[f"{name}/{i}/{leaf}"]).max()))
            mu = predict(a["v"])
            evals = np.array([v for _, v in info["evals"]])
            rows[f"adam={adam},critic_tf_moments={tf_moments}"] = {
                "max_abs_param_diff": worst,
                "max_rel_eval_mse_diff": float(np.max(np.abs(evals / a["eval_mse_y"] - 1))),
                "max_abs_best_ite_diff": float(
                    np.max(np.abs(mu[:, 1] - mu[:, 0] - a["best_causal_pre"]))
                ),
            }
            print(rows, flush=True)
    from fidia_jax._io import atomic_write_text, json_text

    merged = json.loads(out.read_text()) if out.exists() else {}
    merged["fixture_variants"] = {
        "what": "the fixture run replayed by our loop from the package's weights and mixing "
        "weights, per option; differences to the package's recorded values",
        "command": "python benchmarks/causalegm_gap.py fixture",
        "runs": rows,
    }
    atomic_write_text(out, json_text(merged, indent=2))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "what", choices=("input", "ours", "peer", "replay", "merge", "fixture", "compare")
    )
    ap.add_argument("--data-dir", default=os.environ.get("FIDIA_DATA_DIR", "../shared/data"))
    ap.add_argument("--rep", type=int, default=1)
    ap.add_argument("--n-iter", type=int, default=500)
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--variant", default="default", choices=sorted(VARIANTS))
    ap.add_argument("--peer-out", help="the peer's OUT.npz (peer, replay)")
    ap.add_argument("--to", help="input: where to write IN.npz")
    ap.add_argument("--from", dest="src", help="merge: a results file to merge into --out")
    ap.add_argument("--a", help="compare: first entry of --out")
    ap.add_argument("--b", help="compare: second entry of --out")
    ap.add_argument("--out", default=str(HERE / "results" / "causalegm_gap.json"))
    args = ap.parse_args(argv)

    if args.what == "merge":
        from fidia_jax._io import atomic_write_text, json_text

        for key, entry in json.loads(pathlib.Path(args.src).read_text()).items():
            if key == "fixture_variants" or key.startswith("compare_"):  # copied as they are
                out = pathlib.Path(args.out)
                merged = json.loads(out.read_text()) if out.exists() else {}
                merged[key] = entry
                atomic_write_text(out, json_text(merged, indent=2))
                continue
            meta = {k: v for k, v in entry.items() if k != "runs" and not k.startswith("sqrt")}
            _merge(pathlib.Path(args.out), key, entry["runs"], meta)
        return
    if args.what == "compare":
        from scipy import stats

        from fidia_jax._io import atomic_write_text, json_text

        out = pathlib.Path(args.out)
        merged = json.loads(out.read_text())
        va = [r["sqrt_pehe"] for r in merged[args.a]["runs"].values()]
        vb = [r["sqrt_pehe"] for r in merged[args.b]["runs"].values()]
        res = {
            "a": args.a,
            "b": args.b,
            "n": [len(va), len(vb)],
            "median": [float(np.median(va)), float(np.median(vb))],
            "mannwhitney_u_p": float(stats.mannwhitneyu(va, vb).pvalue),
            "welch_t_p": float(stats.ttest_ind(va, vb, equal_var=False).pvalue),
            "command": "python benchmarks/causalegm_gap.py " + " ".join(sys.argv[1:]),
        }
        merged[f"compare_{args.a}_vs_{args.b}"] = res
        atomic_write_text(out, json_text(merged, indent=2))
        print(res)
        return
    if args.what == "fixture":
        _fixture_variants(pathlib.Path(args.out))
        return
    from flax import nnx

    from fidia_jax.projects import causal
    from fidia_jax.projects.causal import _fit
    from fidia_jax.projects.causal import data as data_lib

    d = data_lib.load_ihdp(args.rep, args.data_dir)
    if args.what == "input":
        np.savez(args.to, x=d.x, t=d.t, y=d.y)
        return
    seeds = [int(s) for s in args.seeds.split(",")]
    out = pathlib.Path(args.out)
    meta = {
        "ihdp_replication": args.rep,
        "n_iter": args.n_iter,
        "units": len(d),
        "metric": "in-sample sqrt(PEHE) of the ITE at the package's model-selection point",
        "command": "python benchmarks/causalegm_gap.py " + " ".join(sys.argv[1:]),
        "date_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    s = causal.EgmSettings(n_iter=args.n_iter, batches_per_eval=min(500, args.n_iter))
    rows = {}
    if args.what == "peer":
        peer = np.load(args.peer_out)
        for seed in seeds:
            rows[seed] = {
                **_score(d.mu, peer[f"ite_{seed}"]),
                "wall_s": float(peer[f"wall_{seed}"]),
                "best_iter": int(peer[f"best_iter_{seed}"]),
                "evals": peer[f"evals_{seed}"].tolist(),
            }
        meta["implementation"] = "causalegm 0.4.0 package (TensorFlow), random_seed = seed"
        _merge(out, f"package_ihdp{args.rep}_{args.n_iter}", rows, meta)
        return
    if args.what == "ours":
        s = dataclasses.replace(s, **VARIANTS[args.variant])
    peer = np.load(args.peer_out) if args.what == "replay" else None
    for seed in seeds:
        init = None
        eps = None
        if peer is not None:
            init = causal.CausalEGM(d.x.shape[1], rngs=nnx.Rngs(0))
            prefix = f"init_{seed}/"
            init.load_package_weights(
                {k[len(prefix) :]: peer[k] for k in peer.files if k.startswith(prefix)}
            )
            eps = peer[f"eps_{seed}"]
        t0 = time.perf_counter()
        if init is None:
            predict, info = causal.fit_causalegm(d, s, seed, run=f"ours_{args.variant}_{seed}")
        else:
            predict, info = _fit._fit_egm(d, s, seed, init, run=f"replay_{seed}", eps=eps)
        mu_hat = predict(d.x)
        rows[seed] = {
            **_score(d.mu, mu_hat[:, 1] - mu_hat[:, 0]),
            "wall_s": time.perf_counter() - t0,
            "best_iter": info["best_iter"],
            "evals": info["evals"],
        }
        if peer is not None:
            ite_pkg = peer[f"ite_{seed}"]
            diff = (mu_hat[:, 1] - mu_hat[:, 0]) - ite_pkg
            rows[seed]["max_abs_ite_diff_vs_package"] = float(np.max(np.abs(diff)))
        print(f"{args.what} seed {seed}: {rows[seed]}", flush=True)
    if args.what == "replay":
        meta["implementation"] = (
            "ours (fit_causalegm's loop) from the package's initial weights and mixing weights"
        )
        _merge(out, f"replay_ihdp{args.rep}_{args.n_iter}", rows, meta)
    else:
        meta["implementation"] = f"ours, variant {args.variant}: {VARIANTS[args.variant]}"
        meta["settings"] = dataclasses.asdict(s)
        _merge(out, f"ours_{args.variant}_ihdp{args.rep}_{args.n_iter}", rows, meta)


if __name__ == "__main__":
    main()
