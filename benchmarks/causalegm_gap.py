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
* ``--report`` (or ``--retable``), no subcommand: no run; rewrites the tables of ``--out`` from
  its raw record, the caption kept. A file of the format before issue 41 (entries only, no
  caption keys) gets a caption assembled from the record (the commands of its runs, the days
  its entries were written) plus what the record lacks, filled as :data:`LEGACY_CAPTION` says,
  and a ``conversion`` entry that names the filled keys.

The file is written through ``benchmarks/_results.py``: the tables ``runs`` (per run:
iterations, seeds, sqrt(PEHE) mean ± sd and per seed, the package's values for a replay's seeds,
the tests against the package), ``replay_evals`` (the training outcome MSE at each evaluation,
a replay vs the package) and ``fixture`` (per option), which docs/causal.md renders; the
caption's command joins the commands of every run the file holds (the package's runs in its
venv first), its date/machine/commit/load are the last write's (earlier ones kept in
``earlier_captions``); each entry keeps its own commands and date.

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
sys.path.insert(0, str(HERE))
from _results import (  # noqa: E402
    RESERVED,
    command_line,
    commit,
    load_average,
    machine,
    write_results,
)

VARIANTS = {
    "default": {},
    "old": {"stream_seed": None, "adam": "optax", "critic_tf_moments": False},
    "stream_seed_none": {"stream_seed": None},
    "adam_optax": {"adam": "optax"},
    "exact_bn_variance": {"critic_tf_moments": False},
}
KIND_ORDER = ("package", "ours_default", "replay")
"""Row order of the ``runs`` table within one number of iterations (other variants after)."""
NOT_RUNS = ("fixture_variants", "package_runs", "conversion", "earlier_captions")
"""Record keys that are not a run entry (nor are the ``compare_*`` keys)."""
LEGACY_CAPTION = {
    "machine": "shared 2-core CPU sandbox (CPU model and jax version not recorded)",
    "commit": "unknown+not recorded, file converted 2026-12-05",
    "load_average": "5-12 (noted by hand in package_runs, not measured per run)",
}
"""What a file of the format before issue 41 lacks (its runs of 2026-12-04 recorded no
machine, commit or load average): filled by ``--report``, and named in its ``conversion``."""


# ----------------------------------------------------------------------------- tables


def _run_keys(record: dict) -> list[str]:
    """The run entries (``<kind>_ihdp<rep>_<n_iter>``), ordered by iterations then kind."""
    keys = [k for k, v in record.items()
            if k not in NOT_RUNS and not k.startswith("compare_") and isinstance(v, dict)
            and "runs" in v]  # fmt: skip

    def order(k):
        kind = k.rsplit("_ihdp", 1)[0]
        rank = KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)
        return (record[k]["n_iter"], record[k].get("ihdp_replication", 0), rank)

    return sorted(keys, key=order)


def _label(key: str) -> str:
    kind = key.rsplit("_ihdp", 1)[0]
    if kind == "package":
        text = "package"
    elif kind == "ours_default":
        text = "ours, default"
    elif kind == "ours_old":
        text = "ours with our former options, `--variant old`"
    elif kind.startswith("ours_"):
        text = f"ours, `--variant {kind[len('ours_') :]}`"
    elif kind == "replay":
        text = "ours replaying the package's run from its initial and mixing weights"
    else:
        text = kind
    return f"{text} (`{key}`)"


def seed_label(seeds: list[int]) -> str:
    """``[1, 2, 3, 5]`` -> ``"1-3, 5"``; ``[123, 1, 2, 3]`` -> ``"123, 1-3"`` (the runs' order)."""
    parts, start = [], 0
    for i in range(1, len(seeds) + 1):
        if i == len(seeds) or seeds[i] != seeds[i - 1] + 1:
            a, b = seeds[start], seeds[i - 1]
            parts.append(str(a) if a == b else f"{a}-{b}" if b > a + 1 else f"{a}, {b}")
            start = i
    return ", ".join(parts)


def _mean_sd(values: list[float]):
    """``[mean, sd]`` (sd with ddof 1), or the value itself for one run."""
    if len(values) == 1:
        return float(values[0])
    return [float(np.mean(values)), float(np.std(values, ddof=1))]


def runs_table(record: dict) -> dict:
    """One row per run entry: iterations, seeds, sqrt(PEHE) mean ± sd and per seed; for a
    replay the package's values for the same seeds and the largest |ITE difference| to it; for
    ours the tests against the package at the same iterations (``compare_*``), where made."""
    rows = []
    for key in _run_keys(record):
        e = record[key]
        runs = e["runs"]
        seeds = [int(s) for s in runs]
        pehe = [runs[s]["sqrt_pehe"] for s in runs]
        pkg_key = f"package_ihdp{e.get('ihdp_replication', 1)}_{e['n_iter']}"
        pkg, diff = None, None
        if key.startswith("replay_"):
            diff = max(r["max_abs_ite_diff_vs_package"] for r in runs.values())
            if pkg_key in record:
                pkg_runs = record[pkg_key]["runs"]
                pkg = ", ".join(f"{pkg_runs[s]['sqrt_pehe']:.3f}" for s in runs if s in pkg_runs)
        test = record.get(f"compare_{key}_vs_{pkg_key}", {})
        rows.append([_label(key), e["n_iter"], seed_label(seeds), _mean_sd(pehe),
                     ", ".join(f"{v:.3f}" for v in pehe), pkg, diff,
                     test.get("mannwhitney_u_p"), test.get("welch_t_p")])  # fmt: skip
    return {"columns": ["run", "iterations", "seeds", "sqrt(PEHE) mean ± sd", "per seed",
                        "package, same seeds", "largest ITE difference to the package",
                        "Mann-Whitney p vs the package", "Welch p vs the package"],
            "rows": rows,
            "formats": [None, None, None, ".3f", None, None, ".3f", ".2f", ".2f"]}  # fmt: skip


def replay_evals_table(record: dict) -> dict:
    """The training outcome MSE at each evaluation of every replayed seed, ours vs the package
    (the same run computed twice: where float32 rounding makes them drift)."""
    rows = []
    for key in _run_keys(record):
        if not key.startswith("replay_"):
            continue
        e = record[key]
        pkg = record.get(f"package_ihdp{e.get('ihdp_replication', 1)}_{e['n_iter']}", {})
        for seed, r in e["runs"].items():
            theirs = dict(
                (int(i), v) for i, v in pkg.get("runs", {}).get(seed, {}).get("evals", [])
            )
            for it, ours in r["evals"]:
                ref = theirs.get(int(it))
                rows.append([f"`{key}`", int(seed), int(it), ref, ours,
                             None if ref is None else ours / ref - 1])  # fmt: skip
    return {"columns": ["run", "seed", "iteration", "package MSE", "ours MSE",
                        "ours / package - 1"],
            "rows": rows, "formats": [None, None, None, ".4f", ".4f", ".2%"]}  # fmt: skip


def fixture_table(record: dict) -> dict:
    """The fixture run replayed from the package's weights, per option setting: the largest
    difference to the package's final parameters, evaluation MSEs and best ITE."""
    rows = []
    for name, r in record["fixture_variants"]["runs"].items():
        opts = dict(part.split("=", 1) for part in name.split(","))
        variance = ("TensorFlow's (`critic_tf_moments=True`)"
                    if opts["critic_tf_moments"] == "True"
                    else "exact (`critic_tf_moments=False`)")  # fmt: skip
        rows.append([f"`{opts['adam']}`", variance, r["max_abs_param_diff"],
                     r["max_rel_eval_mse_diff"], r["max_abs_best_ite_diff"]])  # fmt: skip
    return {"columns": ["Adam", "critics' batch variance", "largest parameter difference",
                        "largest relative evaluation MSE difference",
                        "largest best-ITE difference"],
            "rows": rows, "formats": [None, None, ".1e", ".1e", ".1e"]}  # fmt: skip


def tables(record: dict) -> dict:
    out = {"runs": runs_table(record)}
    if any(k.startswith("replay_") for k in _run_keys(record)):
        out["replay_evals"] = replay_evals_table(record)
    if "fixture_variants" in record:
        out["fixture"] = fixture_table(record)
    return out


# ----------------------------------------------------------------------------- the file


def run_commands(record: dict) -> list[str]:
    """Every command the record's entries name, once each: the package's runs in its venv
    first (they made the inputs of ``peer`` and ``replay``), then the entries in file order."""
    commands = list(record.get("package_runs", {}).get("commands", []))
    for key, e in record.items():
        if key in ("package_runs", "conversion", "earlier_captions") or not isinstance(e, dict):
            continue
        for c in e.get("commands", [e["command"]] if "command" in e else []):
            if c not in commands:
                commands.append(c)
    return commands


def read(path: pathlib.Path) -> tuple[dict, dict]:
    """A file's raw record and caption keys (none for a file of the format before issue 41)."""
    doc = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    record = {k: v for k, v in doc.items() if k not in RESERVED}
    caption = {k: doc[k] for k in RESERVED if k != "tables" and k in doc}
    return record, caption


def save(out: pathlib.Path, record: dict, caption: dict, load_start=None) -> pathlib.Path:
    """Writes the record after a run: its tables, the caption of this run (the command: every
    run the file holds), the file's previous caption moved to ``earlier_captions``."""
    if caption:
        earlier = record.setdefault("earlier_captions", [])
        earlier.append({k: v for k, v in caption.items() if k != "command"})
    return write_results(out.stem, tables(record), command=" ; ".join(run_commands(record)),
                         load_start=load_start, extra=record, out=out)  # fmt: skip


def legacy_caption(record: dict) -> dict:
    """The caption of a file of the format before issue 41: the command from its entries, the
    date from their ``date_utc`` (each the start of the last subcommand merged into it), the
    rest :data:`LEGACY_CAPTION`."""
    stamps = sorted(datetime.datetime.fromisoformat(e["date_utc"]) for e in record.values()
                    if isinstance(e, dict) and "date_utc" in e)  # fmt: skip
    days = sorted({s.strftime("%Y-%m-%d") for s in stamps})
    date = (f"{', '.join(days)} (the entries' date_utc: {stamps[0]:%H:%M}-{stamps[-1]:%H:%M} UTC)"
            if stamps else "not recorded")  # fmt: skip
    return {"command": " ; ".join(run_commands(record)), "date": date, **LEGACY_CAPTION}


def report(out: pathlib.Path) -> pathlib.Path:
    """``--report``: rewrites the tables of ``out`` from its record, no run; the caption is
    kept, or for an old-format file assembled (:func:`legacy_caption`) and the filled keys
    recorded under ``conversion``."""
    if not out.is_file():
        raise SystemExit(f"{out}: no such results file to re-table")
    record, caption = read(out)
    if "date" not in caption:
        filled = legacy_caption(record)
        record["conversion"] = {
            "what": "converted from the format before issue 41 (entries only) by --report; "
            "the caption keys were not recorded by the runs: command joined from the entries' "
            "commands, date from their date_utc, the others filled by hand",
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "filled": sorted(filled),
        }
        caption = {**filled, **{k: v for k, v in caption.items() if v is not None}}
    path = write_results(out.stem, tables(record), extra=record, out=out, caption=caption)
    print(f"rewrote the tables of {path}")
    return path


def _score(mu, ite):
    from fidia_jax import metrics

    mu_hat = np.stack([np.zeros_like(ite), ite], axis=1)
    return {
        "sqrt_pehe": float(metrics.sqrt_pehe(mu, mu_hat)),
        "ate_error": float(metrics.ate_error(mu, mu_hat)),
    }


def _merge(record: dict, key: str, rows: dict, meta: dict) -> None:
    """Merges ``rows`` (seed -> result) and ``meta`` into the record's entry ``key``."""
    entry = record.setdefault(key, {"runs": {}})
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
    print(f"{key}: {[round(v, 3) for v in vals]} mean {entry['sqrt_pehe_mean']:.3f}", flush=True)


def _fixture_variants() -> dict:
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
    return {
        "what": "the fixture run replayed by our loop from the package's weights and mixing "
        "weights, per option; differences to the package's recorded values",
        "command": "python benchmarks/causalegm_gap.py fixture",
        "runs": rows,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "what",
        nargs="?",
        choices=("input", "ours", "peer", "replay", "merge", "fixture", "compare"),
    )
    ap.add_argument(
        "--report",
        "--retable",
        dest="report",
        action="store_true",
        help="no run: rewrite the tables of --out from its raw record (caption kept)",
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
    out = pathlib.Path(args.out)
    if args.report:
        if args.what:
            ap.error("--report runs nothing: give no subcommand")
        report(out)
        return
    if not args.what:
        ap.error("a subcommand or --report is needed")
    load_start = load_average()

    if args.what == "merge":
        record, caption = read(out)
        for key, entry in read(pathlib.Path(args.src))[0].items():
            if key in ("conversion", "earlier_captions"):
                continue
            if key in ("fixture_variants", "package_runs") or key.startswith("compare_"):
                record[key] = entry  # copied as they are
                continue
            meta = {k: v for k, v in entry.items() if k != "runs" and not k.startswith("sqrt")}
            _merge(record, key, entry["runs"], meta)
        save(out, record, caption, load_start)
        return
    if args.what == "compare":
        from scipy import stats

        record, caption = read(out)
        va = [r["sqrt_pehe"] for r in record[args.a]["runs"].values()]
        vb = [r["sqrt_pehe"] for r in record[args.b]["runs"].values()]
        res = {
            "a": args.a,
            "b": args.b,
            "n": [len(va), len(vb)],
            "median": [float(np.median(va)), float(np.median(vb))],
            "mannwhitney_u_p": float(stats.mannwhitneyu(va, vb).pvalue),
            "welch_t_p": float(stats.ttest_ind(va, vb, equal_var=False).pvalue),
            "command": command_line(),
        }
        record[f"compare_{args.a}_vs_{args.b}"] = res
        save(out, record, caption, load_start)
        print(res)
        return
    if args.what == "fixture":
        fixture = _fixture_variants()
        record, caption = read(out)
        record["fixture_variants"] = fixture
        save(out, record, caption, load_start)
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
    meta = {
        "ihdp_replication": args.rep,
        "n_iter": args.n_iter,
        "units": len(d),
        "metric": "in-sample sqrt(PEHE) of the ITE at the package's model-selection point",
        "command": command_line(),
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
        record, caption = read(out)
        _merge(record, f"package_ihdp{args.rep}_{args.n_iter}", rows, meta)
        save(out, record, caption, load_start)
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
    meta["machine"] = machine()
    meta["commit"] = commit()
    record, caption = read(out)
    if args.what == "replay":
        meta["implementation"] = (
            "ours (fit_causalegm's loop) from the package's initial weights and mixing weights"
        )
        _merge(record, f"replay_ihdp{args.rep}_{args.n_iter}", rows, meta)
    else:
        meta["implementation"] = f"ours, variant {args.variant}: {VARIANTS[args.variant]}"
        meta["settings"] = dataclasses.asdict(s)
        _merge(record, f"ours_{args.variant}_ihdp{args.rep}_{args.n_iter}", rows, meta)
    save(out, record, caption, load_start)


if __name__ == "__main__":
    main()
