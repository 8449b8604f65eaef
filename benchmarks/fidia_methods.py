"""Five methods at equal sample budget on held-out backbones (FIDIA, RLOO, GRPO, DPO, BoN).

For each seed: one :class:`fidia_jax.projects.fidia.Trainer` (rewards calibrated once on samples of the
frozen reference, identical for every method), then each method is trained with
``train_and_evaluate`` and evaluated on the same held-out backbones with the same evaluation
key. ``bon`` is the frozen ProteinMPNN + Best-of-N (no update). Prints one table against the
``bon`` peer measured in the same run (differences: rewards are z-scores, so ratios would be
meaningless), and writes ``benchmarks/results/fidia_methods.json`` through
``benchmarks/_results.py`` (the command, date, machine, commit and load average, the tables
``methods`` and ``paired`` that docs/benchmarks.md renders, and every run's raw scores).
``--report`` re-tables an existing file without training.

Usage (2-core CPU, ~minutes per run)::

  python benchmarks/fidia_methods.py --config small --seeds 0 1 2 --workdir out/fidia_methods
  python benchmarks/fidia_methods.py --config small --seeds 0 --set train.num_steps=4   # quicker
  python benchmarks/fidia_methods.py --methods bon fidia fidia_gn=fidia,fidia_group_norm=true
  python benchmarks/fidia_methods.py --report       # re-table benchmarks/results/fidia_methods.json

A method entry is a method name or ``LABEL=METHOD,KEY=VALUE,...`` (``train.KEY`` overrides for
that entry only, JSON values), so variants share the seed's trainer and rewards.

Success and precision use *proxy* thresholds (no structure predictor is available offline).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import sys
import time

import numpy as np

from fidia_jax.errors import ConfigError
from fidia_jax.projects import fidia

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _results import RESERVED, load_average, retable, write_results  # noqa: E402
from _stats import paired_tests  # noqa: E402

METHODS = ("bon", "rloo", "grpo", "dpo", "fidia")
KEYS = (
    "max@1",
    "max@8",
    "max@32",
    "success",
    "precision",
    "identity",
    "unique",
    "recovery",
    "motif",
)


def _mean_std(values):
    a = np.asarray(values, np.float64)
    return float(a.mean()), float(a.std(ddof=1)) if a.size > 1 else 0.0


def _parse_method(entry: str) -> tuple[str, str, dict]:
    """``"grpo"`` -> ``("grpo", "grpo", {})``; ``"a=fidia,k_bon=4"`` -> ``("a", "fidia", {"k_bon": 4})``.

    Keys are ``train.`` fields (the prefix is optional); values are JSON (``[1,2]`` keeps its
    commas) or plain strings.
    """
    label, sep, spec = entry.partition("=")
    if not sep:
        return entry, entry, {}
    method, *pairs = re.split(r",(?=[A-Za-z_.]+=)", spec)
    overrides = {}
    for pair in pairs:
        key, eq, raw = pair.partition("=")
        if not eq:
            raise SystemExit(f"--methods {entry!r}: {pair!r} is not KEY=VALUE")
        key = key.removeprefix("train.")
        try:
            overrides[key] = json.loads(raw)
        except json.JSONDecodeError:
            overrides[key] = raw
    return label, method, overrides


def _parse_methods(entries, base) -> list[tuple[str, str, dict]]:
    """Parses and validates every ``--methods`` entry before any training starts."""
    parsed = [_parse_method(e) for e in entries]
    labels = [label for label, _, _ in parsed]
    if any(not label for label in labels) or len(set(labels)) != len(labels):
        raise SystemExit(f"--methods: labels must be non-empty and unique, got {labels}")
    for label, kind, overrides in parsed:
        if label == "bon" and (kind != "bon" or overrides):
            raise SystemExit("--methods: the label 'bon' is reserved for the frozen reference peer")
        try:
            fidia.override_config(
                base,
                [f"method={kind}"] + [f"train.{k}={json.dumps(v)}" for k, v in overrides.items()],
            )
        except ConfigError as exc:
            raise SystemExit(f"--methods {label!r}: {exc}") from exc
    return parsed


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="small")
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--methods", nargs="+", default=list(METHODS))
    ap.add_argument("--workdir", default="out/fidia_methods")
    ap.add_argument("--out", default="benchmarks/results/fidia_methods.json")
    ap.add_argument(
        "--merge",
        nargs="+",
        metavar="JSON",
        help="no training: combine the runs of earlier result files into --out",
    )
    ap.add_argument("--report", action="store_true", help="no training: re-table --out")
    args = ap.parse_args(argv)
    out_path = pathlib.Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    t_start = time.time()
    if args.report:
        retable(out_path, tables)
        return json.loads(out_path.read_text(encoding="utf-8"))
    if args.merge:
        files = [json.loads(pathlib.Path(f).read_text()) for f in args.merge]
        runs = [run for f in files for run in f["runs"]]
        pairs = [(r["method"], r["seed"]) for r in runs]
        if len(set(pairs)) != len(pairs):
            raise SystemExit("--merge: the files repeat a (method, seed) run")
        caption = {k: " ; ".join(dict.fromkeys(str(f[k]) for f in files if k in f))
                   for k in RESERVED if k != "tables"}  # fmt: skip
        meta = {
            "command": caption.pop("command"),
            "caption": caption,
            "config": files[0]["config"],
            "wall_seconds": sum(f["wall_seconds"] for f in files),
        }
        return _write(out_path, meta, runs, t_start, final=True)

    base = fidia.override_config(fidia.load_config(args.config), args.set)
    entries = _parse_methods(args.methods, base)
    meta = {
        "command": "python benchmarks/fidia_methods.py "
        + " ".join(
            ["--config", args.config, "--seeds", *map(str, args.seeds)]
            + [f"--set {s}" for s in args.set]
            + ["--methods", *args.methods]
        ),
        "config": fidia.config_to_dict(base),
        "load_start": load_average(),
    }
    runs: list[dict] = []
    for seed in args.seeds:
        cfg = fidia.override_config(base, [f"seed={seed}", "method=bon"])
        t0 = time.time()
        trainer = fidia.Trainer(cfg)
        print(
            f"[seed {seed}] trainer ready in {time.time() - t0:.0f}s: "
            f"{len(trainer.train_backbones)} train / {len(trainer.eval_backbones)} held-out backbones",
            flush=True,
        )
        for method, kind, overrides in entries:
            tr = (
                trainer
                if kind == "bon" and not overrides
                else trainer.with_method(kind, **overrides)
            )
            t0 = time.time()
            res = fidia.train_and_evaluate(
                tr.config,
                pathlib.Path(args.workdir) / f"{method}_s{seed}",
                trainer=tr,
                resume=False,
                progress=False,
            )
            ev = res["after"]
            runs.append(
                {
                    "method": method,
                    "base_method": kind,
                    "train_overrides": overrides,
                    "seed": seed,
                    "seconds": time.time() - t0,
                    "summary": ev["summary"],
                    "by_kind": ev["by_kind"],
                    "per_backbone": ev["per_backbone"],
                }
            )
            print(
                f"[seed {seed}] {method:5s} max@8 {ev['summary']['max@8']:+.3f} "
                f"success {ev['summary']['success']:.2f} precision {ev['summary']['precision']:.2f} "
                f"({time.time() - t0:.0f}s)",
                flush=True,
            )
            _write(out_path, meta, runs, t_start)
    return _write(out_path, meta, runs, t_start, final=True)


def _aggregate(runs, methods, key_fn):
    table = {}
    for m in methods:
        rows = [r for r in runs if r["method"] == m]
        vals = {}
        for k in KEYS:
            xs = [key_fn(r).get(k) for r in rows]
            xs = [x for x in xs if x is not None and np.isfinite(x)]
            if xs:
                vals[k] = _mean_std(xs)
        table[m] = vals
    return table


def _write(out_path, meta, runs, t_start, final=False):
    methods = list(dict.fromkeys(r["method"] for r in runs))
    overall = _aggregate(runs, methods, lambda r: r["summary"])
    kinds = sorted({k for r in runs for k in r["by_kind"]})
    by_kind = {
        kind: _aggregate(runs, methods, lambda r, kind=kind: r["by_kind"].get(kind, {}))
        for kind in kinds
    }
    per_backbone = {}
    for r in runs:
        for b in r["per_backbone"]:
            per_backbone.setdefault(b["name"], {}).setdefault(r["method"], []).append(
                {k: b[k] for k in ("max@8", "success", "precision", "identity") if k in b}
            )
    result = {
        "benchmark": "fidia_methods",
        "config": meta["config"],
        "seeds": sorted({r["seed"] for r in runs}),
        "criteria": "proxy (no structure predictor offline)",
        "wall_seconds": meta.get("wall_seconds", time.time() - t_start),
        "overall": overall,
        "by_kind": by_kind,
        "per_backbone": per_backbone,
        "runs": runs,
    }
    write_results(out_path.stem, tables(result), command=meta["command"],
                  load_start=meta.get("load_start"), extra=result, out=out_path,
                  caption=meta.get("caption"))  # fmt: skip
    if final:
        ref = overall.get("bon", {})
        # Rewards are z-scores (standardised on the reference), so a ratio of max@8 values is
        # meaningless; the peer comparison is the difference to the ``bon`` peer of the same run.
        print("\nheld-out, mean ± std over seeds (delta = method - bon peer of the same run)")
        print(
            f"{'method':9s} {'max@8':>16s} {'delta':>7s} {'success':>14s} {'precision':>14s} "
            f"{'identity':>14s}"
        )
        for m in methods:
            v = overall[m]
            delta = v["max@8"][0] - ref["max@8"][0] if ref.get("max@8") else float("nan")
            print(
                f"{m:9s} {v['max@8'][0]:+8.3f}±{v['max@8'][1]:.3f} {delta:+7.3f} "
                f"{v['success'][0]:6.3f}±{v['success'][1]:.3f} {v['precision'][0]:6.3f}±"
                f"{v['precision'][1]:.3f} {v['identity'][0]:6.3f}±{v['identity'][1]:.3f}"
            )
    return result


def _by_seed(runs, method, key):
    return {r["seed"]: r["summary"][key] for r in runs if r["method"] == method}


def _paired(first: dict, second: dict) -> list:
    """Paired over the seeds both have (:func:`_stats.paired_tests`): mean difference, seeds
    where ``first`` is higher (``"k/n"``), paired t-test p and exact two-sided Wilcoxon
    signed-rank p (``None`` below 2 seeds or without spread in the differences)."""
    seeds = sorted(set(first) & set(second))
    r = paired_tests([first[s] for s in seeds], [second[s] for s in seeds])
    return [r["mean_diff"], f"{r['a_higher']}/{r['n']}", r["p_ttest"], r["p_wilcoxon"]]


def tables(result: dict) -> dict:
    """The results file's tables: ``methods`` (held-out scores, mean ± std over seeds, and the
    difference to the ``bon`` peer of the same seeds) and ``paired`` (every method minus
    ``bon``, and ``fidia`` minus every other trained method, paired over seeds)."""
    runs = result["runs"]
    methods = list(dict.fromkeys(r["method"] for r in runs))
    overall = result["overall"]
    rows = []
    for m in methods:
        v = overall[m]
        delta = None
        if "bon" in methods:
            delta = _paired(_by_seed(runs, m, "max@8"), _by_seed(runs, "bon", "max@8"))[0]
        cells = [
            list(v[k]) if k in v else None for k in ("max@8", "success", "precision", "identity")
        ]
        rows.append([f"`{m}`", len(_by_seed(runs, m, "max@8")), cells[0], delta, *cells[1:]])
    out = {
        "methods": {
            "columns": ["method", "seeds", "held-out max@8", "Δ max@8 vs bon (paired)",
                        "success@8 (proxy)", "precision (proxy)", "identity"],
            "rows": rows,
            "formats": [None, None, "+.2f", "+.2f", ".2f", ".2f", ".2f"],
        }
    }  # fmt: skip
    pairs = [(m, "bon") for m in methods if m != "bon" and "bon" in methods]
    pairs += [("fidia", m) for m in methods if m not in ("fidia", "bon") and "fidia" in methods]
    prow = []
    for a, b in pairs:
        for key in ("max@8", "success", "precision"):
            prow.append([f"`{a}`", f"`{b}`", key,
                         *_paired(_by_seed(runs, a, key), _by_seed(runs, b, key))])  # fmt: skip
    out["paired"] = {
        "columns": ["first", "second", "metric", "mean diff", "first higher (seeds)",
                    "paired t p", "Wilcoxon p"],
        "rows": prow,
        "formats": [None, None, None, "+.3f", None, ".2g", ".2g"],
    }  # fmt: skip
    return out


if __name__ == "__main__":
    main()
