"""SCALE vs AdamW vs Muon vs SGD on the small LLaMA (byte-level Shakespeare).

Every optimiser trains the same model from the same initialisation on the same batches for the
same number of steps with the same schedule shape (linear warm-up over 10 %, cosine decay to
10 % of the peak); only the peak learning rate differs (per-optimiser defaults,
``fidia_jax.projects.optimizers.PEAK_LEARNING_RATES``, not tuned here). The training loop is the
``optimizers`` driver's :func:`train_interleaved`: the optimisers' steps run interleaved in one
process (round-robin, order rotated every step), so machine noise hits all of them alike.
Reported per optimiser (mean over seeds): final validation loss, optimiser-state bytes,
weights + state bytes, median step time, the step-time ratio against AdamW as the median over
steps of the paired per-step ratio (step 0, which compiles, left out), and the median time of
the optimiser's update alone (jitted ``update`` + ``apply_updates`` on fixed gradients).

Usage:
  python benchmarks/scale_llama.py --data-dir ../shared/data [--steps 150] [--seeds 0,1]

Writes ``benchmarks/results/scale_llama.json`` (``benchmarks/_results.py``): the tables
``optimizers`` (one row per optimiser), ``goals`` (issue 4's three goals for SCALE against
AdamW) and ``setup`` that docs/benchmarks.md renders, and the raw runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from fidia_jax.data import load_shakespeare
from fidia_jax.projects import optimizers as lm

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _results import load_average, write_results  # noqa: E402


def opt_columns(ref: str) -> list[str]:
    """The columns of the ``optimizers`` table, ratios against ``ref``."""
    return [
        "optimizer",
        "peak lr",
        "Adam part peak lr",
        "val loss (nats/byte), mean",
        "val loss per seed",
        f"val loss / {ref}'s",
        "optimiser state bytes",
        "weights+state bytes",
        f"weights+state / {ref}'s",
        "step ms (median)",
        f"step time / {ref}'s, paired",
        "update alone ms",
    ]


OPT_FORMATS = [None, "g", "g", ".4f", None, ".3f", ".0f", ".0f", ".3f", ".1f", ".3f", ".2f"]


def update_times(task, txs, rounds: int = 30) -> dict[str, float]:
    """Median seconds of each optimiser's jitted ``update`` + ``apply_updates`` alone, on the
    same fixed gradients, calls interleaved round-robin (first call, which compiles, dropped)."""
    grads = jax.tree.map(lambda x: jnp.full_like(x, 0.01), task.params)
    fns = {
        n: jax.jit(lambda g, s, p, tx=tx: optax.apply_updates(p, tx.update(g, s, p)[0]))
        for n, tx in txs.items()
    }
    states = {n: tx.init(task.params) for n, tx in txs.items()}
    times = {n: [] for n in txs}
    for r in range(rounds + 1):
        for n in txs:
            t0 = time.perf_counter()
            jax.block_until_ready(fns[n](grads, states[n], task.params))
            if r:
                times[n].append(time.perf_counter() - t0)
    return {n: float(np.median(ts)) for n, ts in times.items()}


def _progress_printer(seed: int, steps: int):
    """``on_step`` of ``train_interleaved``: one flushed line at the first step and every tenth."""
    every, t0 = max(1, steps // 10), time.perf_counter()

    def progress(t: int, losses: dict[str, float]) -> None:
        if (t + 1) % every == 0 or t == 0:
            shown = "  ".join(f"{n} {v:.3f}" for n, v in losses.items())
            print(f"seed {seed} step {t + 1}/{steps} ({time.perf_counter() - t0:.0f} s): loss "
                  f"{shown}", flush=True)  # fmt: skip

    return progress


def main(argv=None):
    ap = argparse.ArgumentParser(description="SCALE vs AdamW vs Muon vs SGD on the small LLaMA")
    ap.add_argument("--data-dir", default=os.environ.get("FIDIA_DATA_DIR", "../shared/data"))
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument(
        "--optimizers",
        default="adamw,scale,muon,sgd",
        help="comma-separated; repeated names are run once (steps are interleaved)",
    )
    ap.add_argument("--out", default="benchmarks/results/scale_llama.json")
    args = ap.parse_args(argv)
    load_start = load_average()

    base = lm.get_config("default")
    base = dataclasses.replace(
        base,
        steps=args.steps,
        model=dataclasses.replace(base.model, dim=args.dim, n_layers=args.layers),
        data=dataclasses.replace(
            base.data, data_dir=args.data_dir, batch_size=args.batch, seq_len=args.seq_len
        ),
    )
    names = list(dict.fromkeys(args.optimizers.split(",")))
    ref = "adamw" if "adamw" in names else names[0]
    seeds = [int(s) for s in args.seeds.split(",")]
    runs = {n: [] for n in names}
    ratios = {n: [] for n in names}
    n_params = None
    splits = load_shakespeare(args.data_dir)  # once for all seeds
    for seed in seeds:
        config = dataclasses.replace(base, seed=seed)
        task = lm.make_task(config, tokens=(splits.train, splits.val))
        n_params = sum(x.size for x in jax.tree.leaves(task.params))
        txs = {n: lm.make_optimizer(lm.with_optimizer(config, n)) for n in names}
        print(f"seed {seed}: training {', '.join(names)} interleaved (the first step of each "
              "compiles)", flush=True)  # fmt: skip
        progress = _progress_printer(seed, args.steps)
        results = lm.train_interleaved(task, txs, args.steps, on_step=progress)
        paired = lm.step_time_ratios(results, ref) if args.steps > 1 else {n: 1.0 for n in names}
        update_s = update_times(task, txs)
        for name, res in results.items():
            row = {
                "seed": seed,
                "val_loss": lm.evaluate(task, res.params),
                "train_loss_last": float(res.losses[-1]),
                "state_bytes": res.state_bytes,
                "weights_bytes": lm.tree_bytes(task.params),
                "step_time_s": float(np.median(res.step_times_s[1:])),
                "step_time_ratio_paired": paired[name],
                "update_time_s": update_s[name],
                "step_times_s": [round(x, 6) for x in res.step_times_s.tolist()],
            }
            runs[name].append(row)
            ratios[name].append(paired[name])
            shown = {k: v for k, v in row.items() if k != "step_times_s"}
            print(json.dumps({"optimizer": name, **shown}), flush=True)

    def mean(name, key):
        return float(np.mean([r[key] for r in runs[name]]))

    print(
        f"\nsmall LLaMA ({n_params / 1e6:.2f} M params, {args.steps} steps, batch "
        f"{args.batch}x{args.seq_len} bytes, seeds {seeds}); ratios vs {ref}; steps interleaved"
    )
    print(
        "| optimizer | peak lr | val loss | ratio | state bytes | weights+state bytes | ratio | "
        "step time ms | paired step-time ratio | update alone ms |"
    )
    print("|" + "---|" * 10)
    summary = {}
    opt_rows = []
    for name in names:
        wst = mean(name, "weights_bytes") + mean(name, "state_bytes")
        wst_ref = mean(ref, "weights_bytes") + mean(ref, "state_bytes")
        summary[name] = {
            "val_loss": mean(name, "val_loss"),
            "val_loss_ratio": mean(name, "val_loss") / mean(ref, "val_loss"),
            "state_bytes": mean(name, "state_bytes"),
            "weights_plus_state_ratio": wst / wst_ref,
            "step_time_ratio": float(np.mean(ratios[name])),
        }
        sm = summary[name]
        opt_config = lm.with_optimizer(base, name).optimizer
        peak = opt_config.peak_learning_rate
        adam_peak = opt_config.peak_adam_learning_rate if name in ("scale", "muon") else None
        opt_rows.append(
            [
                name,
                peak,
                adam_peak,
                sm["val_loss"],
                ", ".join(f"{r['val_loss']:.4f}" for r in runs[name]),
                sm["val_loss_ratio"],
                sm["state_bytes"],
                wst,
                sm["weights_plus_state_ratio"],
                1e3 * mean(name, "step_time_s"),
                sm["step_time_ratio"],
                1e3 * mean(name, "update_time_s"),
            ]
        )
        print(
            f"| {name} | {peak:g} | {sm['val_loss']:.4f} | {sm['val_loss_ratio']:.3f} "
            f"| {int(sm['state_bytes'])} | {int(wst)} | {sm['weights_plus_state_ratio']:.3f} | "
            f"{1e3 * mean(name, 'step_time_s'):.1f} | {sm['step_time_ratio']:.3f} | "
            f"{1e3 * mean(name, 'update_time_s'):.2f} |"
        )
    if "scale" in summary and ref == "adamw":
        sc = summary["scale"]
        goals = {
            "val_loss_within_2pct": sc["val_loss_ratio"] <= 1.02,
            "memory_at_most_45pct": sc["weights_plus_state_ratio"] <= 0.45,
            "step_not_slower": sc["step_time_ratio"] <= 1.0,
        }
        print(f"\nSCALE goals: {goals}")
        summary["goals"] = goals
    tables = {
        "optimizers": {"columns": opt_columns(ref), "rows": opt_rows, "formats": OPT_FORMATS},
        "setup": {
            "columns": [
                "parameters",
                "steps",
                "batch (sequences x bytes)",
                "seeds",
                "validation windows",
                "reference",
            ],
            "rows": [
                [
                    n_params,
                    args.steps,
                    f"{args.batch} x {args.seq_len}",
                    ", ".join(map(str, seeds)),
                    base.data.val_windows,
                    ref,
                ]
            ],
        },
    }
    if "goals" in summary:
        sc = summary["scale"]
        tables["goals"] = {
            "columns": ["goal (issue 4)", "SCALE / AdamW", "met"],
            "rows": [
                [
                    "validation loss within 2 % of AdamW's (ratio <= 1.02)",
                    sc["val_loss_ratio"],
                    goals["val_loss_within_2pct"],
                ],
                [
                    "weights + optimiser state at most 45 % of AdamW's (ratio <= 0.45)",
                    sc["weights_plus_state_ratio"],
                    goals["memory_at_most_45pct"],
                ],
                [
                    "no slower steps (paired step-time ratio <= 1)",
                    sc["step_time_ratio"],
                    goals["step_not_slower"],
                ],
            ],
            "formats": [None, ".3f", None],
        }
    out = write_results(
        "scale_llama",
        tables,
        load_start=load_start,
        extra={"args": vars(args), "n_params": n_params, "runs": runs, "summary": summary},
        out=args.out,
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
