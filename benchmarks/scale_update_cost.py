"""SCALE's optimiser update alone against AdamW's: CPU and wall time, XLA cost (issue 44).

What is timed: one jitted ``tx.update`` + ``optax.apply_updates`` (parameters and optimiser
state donated, the gradients fixed), waited for with ``jax.block_until_ready``, for

* ``scale``: :func:`fidia_jax.optim.scale` with the optimisers driver's hyperparameters
  (``fidia_jax.projects.optimizers.make_optimizer``: warm-up + cosine schedules, peak 3e-3,
  AdamW part 2e-2, momentum 0.9, weight decay 0);
* ``adamw``: ``optax.adamw`` with the driver's hyperparameters (the same schedule, weight
  decay 0);
* ``scale_xla_reduce``: the same ``optim.scale`` traced with the column RMS of the code before
  issue 44 (one XLA reduce over the fan-in axes; ``--no-before`` leaves it out), so the effect
  of the row-blocked sum of squares is measured in the same interleaved rounds;

on two parameter trees (random values, only the shapes matter):

* ``driver``: the driver's ``default`` preset model (byte-level LLaMA, dim 128, 4 layers,
  0.78 M parameters; ``fidia_jax.projects.optimizers``);
* ``llama_12x768``: a LLaMA-shaped tree of the size the issue names (embedding 32000 x 768,
  12 layers of attention 4 x 768 x 768 and SwiGLU MLP 768 x 3072 x 3, RMSNorm scales, an
  untied 768 x 32000 ``lm_head``): 162 M parameters.

Rounds are interleaved (SCALE, AdamW, ..., then the reverse order, ...), so load from other
jobs falls on all alike. Per call: CPU seconds of this process (``time.process_time``, every
thread, i.e. what the update costs the machine) and wall seconds; reported as min / median /
max, with the paired per-round ratios to AdamW. CPU time is the main measure on a shared machine.
XLA's cost analysis (flops, bytes accessed) of each compiled update is recorded too.

    python benchmarks/scale_update_cost.py            # full: 40 / 12 rounds
    python benchmarks/scale_update_cost.py --quick    # 10 / 3 rounds

Writes ``benchmarks/results/scale_update_cost.json`` (``benchmarks/_results.py``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from fidia_jax.models import Llama
from fidia_jax.optim import _scale
from fidia_jax.projects.optimizers import configs as lm_configs
from fidia_jax.projects.optimizers import train as lm_train

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _results  # noqa: E402


def _random_like(shapes, seed: int):
    """Random float32 arrays with the shapes of ``shapes`` (a pytree of shape-dtype structs)."""
    leaves, treedef = jax.tree.flatten(shapes)
    keys = jax.random.split(jax.random.key(seed), len(leaves))
    out = [
        0.02 * jax.random.normal(k, s.shape, jnp.float32) for k, s in zip(keys, leaves, strict=True)
    ]
    return jax.tree.unflatten(treedef, out)


def driver_tree(config) -> dict:
    """The driver's model parameters as a plain dict (shapes of ``config.model``)."""
    cfg = lm_train.llama_config(config)
    shapes = jax.eval_shape(lambda: nnx.state(Llama(cfg, rngs=nnx.Rngs(0)), nnx.Param))
    return _random_like(shapes.to_pure_dict(), 0)


def llama_tree(vocab=32000, dim=768, hidden=3072, n_layers=12) -> dict:
    """A LLaMA-shaped parameter dict (Flax ``(in, out)`` kernels), random values."""
    s = jax.ShapeDtypeStruct
    f = jnp.float32
    layers = {}
    for i in range(n_layers):
        layers[str(i)] = {
            "attention": {n: {"kernel": s((dim, dim), f)} for n in ("wq", "wk", "wv", "wo")},
            "feed_forward": {
                "w1": {"kernel": s((dim, hidden), f)},
                "w3": {"kernel": s((dim, hidden), f)},
                "w2": {"kernel": s((hidden, dim), f)},
            },
            "attention_norm": {"scale": s((dim,), f)},
            "ffn_norm": {"scale": s((dim,), f)},
        }
    shapes = {
        "tok_embeddings": {"embedding": s((vocab, dim), f)},
        "layers": layers,
        "norm": {"scale": s((dim,), f)},
        "lm_head": {"kernel": s((dim, vocab), f)},
    }
    return _random_like(shapes, 1)


def _xla_sum_squares(g, n_lead, dtype):
    """The column sum of squares before issue 44: one XLA reduce over the leading axes."""
    return jnp.sum(jnp.square(g.astype(dtype)), axis=tuple(range(n_lead))).reshape(-1)


def with_xla_reduce(tx):
    """``tx`` (an ``optim.scale``) traced with the column RMS of the code before issue 44
    (``jnp.mean`` over the leading axes), for the ``scale_xla_reduce`` row."""

    def update(updates, state, params=None):
        fast = _scale._sum_squares_leading
        _scale._sum_squares_leading = _xla_sum_squares
        try:
            return tx.update(updates, state, params)
        finally:
            _scale._sum_squares_leading = fast

    return optax.GradientTransformation(tx.init, update)


def make_step(tx):
    def step(params, state, grads):
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state

    return jax.jit(step, donate_argnums=(0, 1))


def _cost(compiled) -> dict:
    ca = compiled.cost_analysis()
    if isinstance(ca, list | tuple):
        ca = ca[0] if ca else {}
    ca = ca or {}
    return {
        "flops": float(ca.get("flops", 0.0)),
        "bytes_accessed": float(ca.get("bytes accessed", 0.0)),
    }


def _stats(xs) -> dict:
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs), "n": len(xs)}


def bench_tree(name: str, params, optimizers: dict, rounds: int, warmup: int) -> dict:
    grads = jax.tree.map(lambda x: 1e-3 * jnp.sin(1e3 * x + 1.0), params)
    jax.block_until_ready(grads)
    runs = {}
    for opt_name, tx in optimizers.items():
        p = jax.tree.map(jnp.copy, params)
        st = tx.init(p)
        step = make_step(tx)
        compiled = step.lower(p, st, grads).compile()
        runs[opt_name] = {"step": step, "p": p, "st": st, "cost": _cost(compiled)}
    names = list(optimizers)

    def call(r):
        c0, w0 = time.process_time(), time.perf_counter()
        r["p"], r["st"] = r["step"](r["p"], r["st"], grads)
        jax.block_until_ready((r["p"], r["st"]))
        return time.process_time() - c0, time.perf_counter() - w0

    for _ in range(warmup):
        for n in names:
            call(runs[n])
    times = {n: {"cpu": [], "wall": []} for n in names}
    for i in range(rounds):
        order = names if i % 2 == 0 else names[::-1]
        for n in order:
            cpu, wall = call(runs[n])
            times[n]["cpu"].append(cpu)
            times[n]["wall"].append(wall)
    n_params = sum(x.size for x in jax.tree.leaves(params))
    out = {"n_params": int(n_params), "rounds": rounds, "optimizers": {}}
    for n in names:
        out["optimizers"][n] = {
            "cpu_s": _stats(times[n]["cpu"]),
            "wall_s": _stats(times[n]["wall"]),
            "state_bytes": lm_train.tree_bytes(runs[n]["st"]),
            **runs[n]["cost"],
        }
    out["ratios_to_adamw"] = {
        n: {
            kind: _stats([a / b for a, b in zip(times[n][kind], times["adamw"][kind], strict=True)])
            for kind in ("cpu", "wall")
        }
        for n in names
        if n != "adamw" and "adamw" in names
    }
    print(f"[{name}] {n_params / 1e6:.2f} M parameters, {rounds} interleaved rounds")
    for n in names:
        o = out["optimizers"][n]
        print(
            f"  {n:>16}: cpu ms min/med/max {1e3 * o['cpu_s']['min']:.2f}/"
            f"{1e3 * o['cpu_s']['median']:.2f}/{1e3 * o['cpu_s']['max']:.2f}  wall ms "
            f"{1e3 * o['wall_s']['min']:.2f}/{1e3 * o['wall_s']['median']:.2f}/"
            f"{1e3 * o['wall_s']['max']:.2f}  flops {o['flops']:.3e}  "
            f"bytes {o['bytes_accessed']:.3e}"
        )
    for n, r in out["ratios_to_adamw"].items():
        print(
            f"  {n}/adamw median ratio: cpu {r['cpu']['median']:.3f} wall {r['wall']['median']:.3f}"
        )
    for r in runs.values():
        r.clear()
    return out


def _parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="few rounds (10 driver / 3 large)")
    p.add_argument("--rounds", type=int, default=None, help="rounds on the driver tree")
    p.add_argument("--large-rounds", type=int, default=None, help="rounds on the 162 M tree")
    p.add_argument("--trees", default="driver,llama_12x768")
    p.add_argument(
        "--no-before", action="store_true", help="leave out scale_xla_reduce (the old code)"
    )
    p.add_argument("--out", default=None, help="results file (default benchmarks/results/...)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = _parse_args(argv)
    load_start = _results.load_average()
    rounds = args.rounds or (10 if args.quick else 40)
    large_rounds = args.large_rounds or (3 if args.quick else 12)
    config = lm_configs.get_config("default")
    optimizers = {
        "scale": lm_train.make_optimizer(
            lm_configs.override_config(config, ["optimizer.name=scale"])
        ),
        "adamw": lm_train.make_optimizer(
            lm_configs.override_config(config, ["optimizer.name=adamw"])
        ),
    }
    if not args.no_before:
        optimizers["scale_xla_reduce"] = with_xla_reduce(optimizers["scale"])
    results = {}
    for tree in args.trees.split(","):
        if tree == "driver":
            results[tree] = bench_tree(tree, driver_tree(config), optimizers, rounds, warmup=3)
        elif tree == "llama_12x768":
            results[tree] = bench_tree(tree, llama_tree(), optimizers, large_rounds, warmup=1)
        else:
            raise SystemExit(f"unknown tree {tree!r}")
    rows = []
    for tree, r in results.items():
        for n, o in r["optimizers"].items():
            rows.append(
                [
                    tree,
                    r["n_params"] / 1e6,
                    n,
                    1e3 * o["cpu_s"]["min"],
                    1e3 * o["cpu_s"]["median"],
                    1e3 * o["cpu_s"]["max"],
                    1e3 * o["wall_s"]["min"],
                    1e3 * o["wall_s"]["median"],
                    1e3 * o["wall_s"]["max"],
                    o["flops"] / 1e6,
                    o["bytes_accessed"] / 1e6,
                ]
            )
    ratio_rows = [
        [
            tree,
            f"{n} / adamw",
            r["rounds"],
            q["cpu"]["min"],
            q["cpu"]["median"],
            q["cpu"]["max"],
            q["wall"]["min"],
            q["wall"]["median"],
            q["wall"]["max"],
        ]
        for tree, r in results.items()
        for n, q in r["ratios_to_adamw"].items()
    ]
    tables = {
        "update_cost": {
            "columns": [
                "tree",
                "M params",
                "optimizer",
                "CPU ms min",
                "CPU ms median",
                "CPU ms max",
                "wall ms min",
                "wall ms median",
                "wall ms max",
                "MFLOP (XLA)",
                "MB accessed (XLA)",
            ],
            "rows": rows,
            "formats": [None, ".2f", None, ".2f", ".2f", ".2f", ".2f", ".2f", ".2f", ".2f", ".1f"],
        },
        "ratios": {
            "columns": [
                "tree",
                "ratio",
                "rounds",
                "CPU ratio min",
                "CPU ratio median",
                "CPU ratio max",
                "wall ratio min",
                "wall ratio median",
                "wall ratio max",
            ],
            "rows": ratio_rows,
            "formats": [None, None, "d", ".3f", ".3f", ".3f", ".3f", ".3f", ".3f"],
        },
    }
    path = _results.write_results(
        "scale_update_cost",
        tables,
        load_start=load_start,
        out=args.out,
        extra={
            "quick": args.quick,
            "results": results,
            "cpu_count": os.cpu_count(),
            "numpy": np.__version__,
        },
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
