"""What bounds the FIDIA update: teacher-forced log-probs of n samples in their own decoding orders.

The update of a FIDIA step is the policy's forward and backward pass and the frozen reference's
forward pass over ``B x N`` sampled sequences (``policy_token_log_probs``), then adamw. This script
times each part of it jitted, on the ``small`` preset's shapes (``B`` = 2 backbones of ``L`` = 64
slots from the built-in 5PTI backbone, ``N`` = 16 samples, random sequences and decoding orders,
ProteinMPNN v_48_020), and reads XLA's own count of floating-point operations and bytes accessed
for each compiled program (``compiled.cost_analysis()``). Two peers measured in the same run give
the machine's practical ceilings: a large float32 matrix product (compute) and a large array
update ``y = a * x + y`` (memory bandwidth). A part whose FLOP rate is far below the matmul
ceiling while its byte rate is near the bandwidth ceiling is memory-bound.

Usage::

  python benchmarks/fidia_update_profile.py [--length 64 --samples 16 --backbones 2 --repeats 5]

Prints one table and writes ``benchmarks/results/fidia_update_profile.json``.
"""

from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import platform
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from _timing import write_record

HERE = pathlib.Path(__file__).resolve().parent


def _time(fn, *args, repeats: int) -> float:
    jax.block_until_ready(fn(*args))  # warm
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn(*args))
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def _compile(fn, *args):
    """The compiled program (timed below, so it is compiled once) and XLA's counts for it."""
    compiled = fn.lower(*args).compile()
    cost = compiled.cost_analysis()
    if isinstance(cost, list | tuple):
        cost = cost[0] if cost else {}
    cost = cost or {}
    counts = {
        "flops": float(cost.get("flops", 0.0)),
        "bytes": float(cost.get("bytes accessed", 0.0)),
    }
    return compiled, counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--length", type=int, default=64)
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--backbones", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--skip-update", action="store_true", help="leave out the whole update")
    ap.add_argument("--out", default=str(HERE / "results" / "fidia_update_profile.json"))
    args = ap.parse_args()

    from flax import nnx

    from fidia_jax import models, protein
    from fidia_jax.projects import fidia
    from fidia_jax.projects.fidia._step import make_update

    B, N, L = args.backbones, args.samples, args.length
    prot = protein.load_structure(protein.default_backbone_path())
    full = models.MPNNInputs.from_protein(prot)
    take = min(L, prot.length)
    one = models.MPNNInputs(*(np.asarray(a)[:take] for a in full))
    bb = fidia.Backbone("5PTI", "motif", one, np.zeros(take, bool), lambda s: (None, None))
    stacked = fidia.stack_backbones([bb] * B, L)
    inputs = jax.tree.map(jnp.asarray, stacked.inputs)
    rng = np.random.default_rng(0)
    seqs = jnp.asarray(rng.integers(0, 20, (B, N, L)), jnp.int32)
    orders = jnp.asarray(np.stack([[rng.permutation(L) for _ in range(N)] for _ in range(B)]))
    model = models.ProteinMPNN.from_checkpoint("v_48_020")
    graphdef, state = nnx.split(model)
    params = jax.tree.map(jnp.asarray, nnx.to_pure_dict(state))
    cfg = fidia.override_config(
        fidia.get_config("small"), [f"train.n_samples={N}", f"data.max_length={L}"]
    )
    omit = fidia.omit_mask(cfg.model.omit_aas)
    T = cfg.model.temperature

    def logp(p):
        return fidia.policy_token_log_probs(
            nnx.merge(graphdef, p), inputs, seqs, orders, temperature=T, omit_21=omit
        )

    forward = jax.jit(lambda p: logp(p).sum())
    backward = jax.jit(jax.grad(lambda p: logp(p).sum()))
    encoder = jax.jit(
        lambda p: (
            nnx.merge(graphdef, p).log_probs_many(inputs, seqs[:, :1, :], orders[:, :1, :]).sum()
        )
    )
    update = make_update(graphdef, cfg)
    tx = fidia.make_optimizer(cfg)
    opt = tx.init(params)
    designed = jnp.asarray(np.broadcast_to(stacked.designed[:, None, :], (B, N, L)))
    batch = {
        "inputs": inputs,
        "seqs": seqs,
        "orders": orders,
        "designed": designed,
        "old": jnp.full((B, N, L), -1.0, jnp.float32),
        "adv": jnp.asarray(rng.normal(size=(B, N)), jnp.float32),
    }
    update_jit = jax.jit(update)

    # peers: the machine's compute and bandwidth ceilings, same process, same load
    a = jnp.asarray(rng.normal(size=(1024, 1024)), jnp.float32)
    matmul = jax.jit(lambda x: x @ x)
    x = jnp.asarray(rng.normal(size=(32 * 1024 * 1024,)), jnp.float32)
    axpy = jax.jit(lambda y: 1.0001 * y + x)

    parts = {
        "matmul 1024^3 (peer: compute)": (matmul, (a,)),
        "axpy 32M floats (peer: bandwidth)": (axpy, (x,)),
        "policy forward (B*N rows)": (forward, (params,)),
        "policy forward+backward": (backward, (params,)),
        "one row per backbone (encoder + 1 decoder row)": (encoder, (params,)),
        "whole update (policy fwd+bwd, reference fwd, adamw)": (
            update_jit,
            (params, opt, params, batch),
        ),
    }
    if args.skip_update:
        parts.pop("whole update (policy fwd+bwd, reference fwd, adamw)")
    rows = {}
    for name, (fn, fn_args) in parts.items():
        compiled, c = _compile(fn, *fn_args)
        t = _time(compiled, *fn_args, repeats=args.repeats)
        rows[name] = {
            "seconds": t,
            **c,
            "gflop_per_s": c["flops"] / t / 1e9,
            "gbyte_per_s": c["bytes"] / t / 1e9,
            "flop_per_byte": c["flops"] / c["bytes"] if c["bytes"] else float("nan"),
        }
        r = rows[name]
        print(
            f"{name}: {t * 1e3:.1f} ms, {r['flops'] / 1e9:.2f} GFLOP, {r['bytes'] / 1e9:.2f} GB, "
            f"{r['gflop_per_s']:.1f} GFLOP/s, {r['gbyte_per_s']:.1f} GB/s",
            file=sys.stderr,
            flush=True,
        )
    print(f"\nFIDIA update parts, B={B} backbones x N={N} samples x L={L} slots, median of "
          f"{args.repeats}; XLA cost analysis")  # fmt: skip
    print("| part | ms | GFLOP | GB accessed | GFLOP/s | GB/s | FLOP/byte |")
    print("|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        print(
            f"| {name} | {r['seconds'] * 1e3:.1f} | {r['flops'] / 1e9:.2f} | "
            f"{r['bytes'] / 1e9:.2f} | {r['gflop_per_s']:.1f} | {r['gbyte_per_s']:.1f} | "
            f"{r['flop_per_byte']:.2f} |"
        )
    record = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} CPUs",
        "load_average": os.getloadavg(),
        "command": " ".join(sys.argv),
        "shape": {"B": B, "N": N, "L": L},
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "parts": rows,
    }
    write_record(args.out, record)


if __name__ == "__main__":
    main()
