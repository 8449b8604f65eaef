"""SCALE vs AdamW vs Muon vs SGD on the small LLaMA (byte-level Shakespeare).

Every optimiser trains the same model from the same initialisation on the same batches for the
same number of steps with the same schedule shape (linear warm-up over 10 %, cosine decay to
10 % of the peak); only the peak learning rate differs (per-optimiser defaults below, not
tuned here). Reported per optimiser (mean over seeds): final validation loss, optimiser-state
bytes, weights + state bytes, median step time; ratios against AdamW.

Usage:
  python benchmarks/scale_llama.py --data-dir ../shared/data [--steps 150] [--seeds 0,1]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from fidia_jax import optim
from fidia_jax._io import atomic_write_text
from fidia_jax.data import load_shakespeare, sample_windows
from fidia_jax.models import Llama, LlamaConfig, next_token_loss

PEAK_LR = {"adamw": 3e-3, "scale": 3e-3, "muon": 2e-2, "sgd": 0.1}


def make_optimizer(name, schedule, adam_schedule):
    if name == "adamw":
        return optax.adamw(schedule, weight_decay=0.0)
    if name == "scale":
        return optim.scale(schedule, adam_learning_rate=adam_schedule)
    if name == "muon":
        return optax.contrib.muon(schedule, adam_learning_rate=adam_schedule)
    if name == "sgd":
        return optax.sgd(schedule, momentum=0.9)
    raise ValueError(name)


def nbytes(tree):
    return sum(x.nbytes for x in jax.tree.leaves(tree) if hasattr(x, "nbytes"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", default=os.environ.get("FIDIA_DATA_DIR", "../shared/data"))
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--optimizers", default="adamw,scale,muon,sgd")
    ap.add_argument("--out", default="benchmarks/results/scale_llama.json")
    args = ap.parse_args()

    splits = load_shakespeare(args.data_dir)
    train, val = jnp.asarray(splits.train), jnp.asarray(splits.val)
    cfg = LlamaConfig(
        dim=args.dim,
        n_layers=args.layers,
        n_heads=4,
        n_kv_heads=2,
        hidden_dim=int(args.dim * 8 / 3) // 8 * 8,
        max_seq_len=args.seq_len,
    )
    val_tokens = sample_windows(jax.random.key(999), val, 64, args.seq_len)
    names = args.optimizers.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    runs = {n: [] for n in names}
    n_params = None
    for seed in seeds:
        model = Llama(cfg, rngs=nnx.Rngs(seed))
        graphdef, params0 = nnx.split(model, nnx.Param)
        n_params = sum(x.size for x in jax.tree.leaves(params0))

        def loss_fn(p, tokens, graphdef=graphdef):
            return next_token_loss(nnx.merge(graphdef, p)(tokens), tokens)

        eval_loss = jax.jit(loss_fn)
        data_key = jax.random.key(seed + 1000)
        for name in names:
            peak = PEAK_LR[name]
            sched = optax.warmup_cosine_decay_schedule(
                0.0, peak, max(1, args.steps // 10), args.steps, end_value=0.1 * peak
            )
            adam_sched = optax.warmup_cosine_decay_schedule(
                0.0,
                PEAK_LR["adamw"],
                max(1, args.steps // 10),
                args.steps,
                end_value=0.1 * PEAK_LR["adamw"],
            )
            opt = make_optimizer(name, sched, adam_sched)

            @jax.jit
            def step(p, s, t, opt=opt, loss_fn=loss_fn, data_key=data_key):
                tokens = sample_windows(
                    jax.random.fold_in(data_key, t), train, args.batch, args.seq_len
                )
                loss, g = jax.value_and_grad(loss_fn)(p, tokens)
                u, s = opt.update(g, s, p)
                return optax.apply_updates(p, u), s, loss

            p, s = params0, opt.init(params0)
            state_bytes = nbytes(s)
            times = []
            for t in range(args.steps):
                t0 = time.perf_counter()
                p, s, loss = step(p, s, jnp.int32(t))
                jax.block_until_ready(loss)
                if t > 0:  # skip the compiling call
                    times.append(time.perf_counter() - t0)
            row = {
                "seed": seed,
                "val_loss": float(eval_loss(p, val_tokens)),
                "train_loss_last": float(loss),
                "state_bytes": state_bytes,
                "weights_bytes": nbytes(params0),
                "step_time_s": statistics.median(times),
            }
            runs[name].append(row)
            print(json.dumps({"optimizer": name, **row}), flush=True)

    def mean(name, key):
        return float(np.mean([r[key] for r in runs[name]]))

    ref = "adamw"
    print(
        f"\nsmall LLaMA ({n_params / 1e6:.2f} M params, {args.steps} steps, batch "
        f"{args.batch}x{args.seq_len} bytes, seeds {seeds}); ratios vs AdamW"
    )
    print(
        "| optimizer | peak lr | val loss | ratio | state bytes | weights+state bytes | ratio | "
        "step time ms | ratio |"
    )
    print("|" + "---|" * 9)
    summary = {}
    for name in names:
        wst = mean(name, "weights_bytes") + mean(name, "state_bytes")
        wst_ref = mean(ref, "weights_bytes") + mean(ref, "state_bytes")
        summary[name] = {
            "val_loss": mean(name, "val_loss"),
            "val_loss_ratio": mean(name, "val_loss") / mean(ref, "val_loss"),
            "state_bytes": mean(name, "state_bytes"),
            "weights_plus_state_ratio": wst / wst_ref,
            "step_time_ratio": mean(name, "step_time_s") / mean(ref, "step_time_s"),
        }
        sm = summary[name]
        print(
            f"| {name} | {PEAK_LR[name]:g} | {sm['val_loss']:.4f} | {sm['val_loss_ratio']:.3f} "
            f"| {int(sm['state_bytes'])} | {int(wst)} | {sm['weights_plus_state_ratio']:.3f} | "
            f"{1e3 * mean(name, 'step_time_s'):.1f} | {sm['step_time_ratio']:.2f} |"
        )
    if "scale" in summary:
        sc = summary["scale"]
        goals = {
            "val_loss_within_2pct": sc["val_loss_ratio"] <= 1.02,
            "memory_at_most_45pct": sc["weights_plus_state_ratio"] <= 0.45,
            "step_not_slower": sc["step_time_ratio"] <= 1.0,
        }
        print(f"\nSCALE goals: {goals}")
        summary["goals"] = goals
    out = pathlib.Path(args.out)
    atomic_write_text(
        out,
        json.dumps(
            {"args": vars(args), "n_params": n_params, "runs": runs, "summary": summary}, indent=2
        ),
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
