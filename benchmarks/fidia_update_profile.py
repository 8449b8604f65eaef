"""What bounds the FIDIA update: teacher-forced log-probs of n samples in their own decoding orders.

The update of a FIDIA step is the policy's forward and backward pass over ``B x N`` sampled
sequences (``policy_token_log_probs``), then adamw, with the frozen reference's forward pass over
the same sequences computed before it, once per step, in a forward-only program with
ProteinMPNN's inference options (``make_reference_log_probs``). This script times each part
jitted (the ``forward`` part is the same forward under XLA's defaults, as inside a training
program), on the ``small`` preset's shapes (``B`` = 2 backbones of ``L`` = 64
slots from the built-in 5PTI backbone, ``N`` = 16 samples, random sequences and decoding orders,
ProteinMPNN v_48_020), and reads XLA's own count of floating-point operations and bytes accessed
for each compiled program (``compiled.cost_analysis()``). Two peers measured in the same run give
the machine's practical ceilings: a large float32 matrix product (compute) and a large array
update ``y = a * x + y`` (memory bandwidth). A part whose FLOP rate is far below the matmul
ceiling while its byte rate is near the bandwidth ceiling is memory-bound.

Each part is compiled once, called once to warm up, then timed ``--repeats`` times; the parts
are timed one after the other (not interleaved). Writes
``benchmarks/results/fidia_update_profile.json`` through :func:`_results.write_results` with
every timed call kept; docs/fidia.md renders its ``profile`` table (min / median / max ms, XLA's
GFLOP and GB, and the rates and FLOP/byte at the median) and its ``derived`` table (the ratios
the page reads off the profile, :func:`derived_table`) from the file.

Usage::

  python benchmarks/fidia_update_profile.py [--length 64 --samples 16 --backbones 2 --repeats 5]
  python benchmarks/fidia_update_profile.py --report [--out PATH]   # re-table, no run
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _results import command_line, default_out, load_average, retable, write_results  # noqa: E402

NAME = "fidia_update_profile"

LABELS = {
    "matmul": "peer: 1024^3 float32 matmul (compute)",
    "axpy": "peer: axpy on 32 M floats (streaming)",
    "forward": "policy forward, {rows} rows",
    "backward": "policy forward + backward",
    "encoder": "encoder + 1 decoder row per backbone",
    "reference": "reference forward, {rows} rows, own program (inference options)",
    "update": "whole update (policy fwd + bwd, adamw; reference given)",
}
"""The table's row labels by part (``{rows}``: ``B x N``)."""


def profile_table(record: Mapping[str, Any]) -> dict[str, Any]:
    """One row per part (``record["parts"]``: ``part``, ``seconds`` (each timed call),
    ``flops``, ``bytes``): min / median / max ms, XLA's GFLOP and GB, GFLOP/s and GB/s at the
    median time, and FLOP/byte (``None`` when XLA counts no bytes)."""
    shape = record["shape"]
    rows = []
    for p in record["parts"]:
        secs = [float(s) for s in p["seconds"]]
        med = statistics.median(secs)
        flops, nbytes = float(p["flops"]), float(p["bytes"])
        rows.append(
            [
                LABELS.get(p["part"], p["part"]).format(rows=shape["B"] * shape["N"]),
                min(secs) * 1e3,
                med * 1e3,
                max(secs) * 1e3,
                flops / 1e9,
                nbytes / 1e9,
                flops / med / 1e9,
                nbytes / med / 1e9,
                flops / nbytes if nbytes else None,
            ]
        )
    n = len(record["parts"][0]["seconds"]) if record["parts"] else 0
    return {
        "columns": [
            "part",
            f"min ms ({n})",
            "median ms",
            "max ms",
            "GFLOP (XLA)",
            "GB accessed (XLA)",
            "GFLOP/s (median)",
            "GB/s (median)",
            "FLOP/byte",
        ],
        "rows": rows,
        "formats": [None, ".1f", ".1f", ".1f", ".2f", ".2f", ".1f", ".2f", ".3g"],
    }


def derived_table(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """What docs/fidia.md reads off the profile, computed here so that no ratio is worked by
    hand: each part's rate against the matmul peer's, the backward part alone (forward +
    backward minus forward, in operations and median time), the share of the structure terms
    (encoder + one decoder row per backbone) in the forward, the rate of the other rows, the
    reference forward in its own program against the same forward under XLA's defaults, the
    update against its floor (the policy forward + backward). ``None`` when a part is
    missing."""
    parts = {p["part"]: p for p in record["parts"]}
    if not {"matmul", "forward", "backward", "encoder", "reference", "update"} <= set(parts):
        return None
    med = {k: statistics.median(float(s) for s in p["seconds"]) for k, p in parts.items()}
    flops = {k: float(p["flops"]) for k, p in parts.items()}

    def rate(k):
        return flops[k] / med[k]

    shape = record["shape"]
    rows_total, backbones = shape["B"] * shape["N"], shape["B"]
    fwd_s, bwd_s = parts["forward"]["seconds"], parts["backward"]["seconds"]
    pair_ratios = [float(b) / float(f) for b in bwd_s for f in fwd_s]
    back_flops = flops["backward"] - flops["forward"]
    back_s = med["backward"] - med["forward"]
    other_flops = flops["forward"] - flops["encoder"]
    floor = flops["backward"]
    rows = [
        ["policy forward, % of the matmul peer's rate", 100 * rate("forward") / rate("matmul")],
        ["forward + backward, % of the matmul peer's rate",
         100 * rate("backward") / rate("matmul")],
        ["whole update, % of the matmul peer's rate", 100 * rate("update") / rate("matmul")],
        ["forward + backward / forward, operations (x)", flops["backward"] / flops["forward"]],
        ["forward + backward / forward, median time (x)", med["backward"] / med["forward"]],
        ["forward + backward / forward, time of any two calls, min (x)", min(pair_ratios)],
        ["forward + backward / forward, time of any two calls, max (x)", max(pair_ratios)],
        ["backward part alone, GFLOP", back_flops / 1e9],
        ["backward part alone, median s", back_s],
        ["backward part alone, GFLOP/s", back_flops / back_s / 1e9],
        ["encoder + 1 decoder row per backbone, % of the forward's time",
         100 * med["encoder"] / med["forward"]],
        ["encoder + 1 decoder row per backbone, % of the forward's operations",
         100 * flops["encoder"] / flops["forward"]],
        [f"the other {rows_total - backbones} rows, GFLOP/s",
         other_flops / (med["forward"] - med["encoder"]) / 1e9],
        ["the other rows, GFLOP per row", other_flops / (rows_total - backbones) / 1e9],
        ["reference forward: XLA's defaults / inference options, median time (x)",
         med["forward"] / med["reference"]],
        ["reference forward (inference options), % of the matmul peer's rate",
         100 * rate("reference") / rate("matmul")],
        ["update floor (policy forward + backward), GFLOP", floor / 1e9],
        ["whole update, XLA's GFLOP minus the floor", (flops["update"] - floor) / 1e9],
        ["whole update, median vs the policy forward + backward's, %",
         100 * (med["update"] / med["backward"] - 1)],
    ]  # fmt: skip
    return {"columns": ["quantity", "value"], "rows": rows, "formats": [None, ".3g"]}


def tables(record: Mapping[str, Any]) -> dict[str, Any]:
    out = {"profile": profile_table(record)}
    derived = derived_table(record)
    if derived is not None:
        out["derived"] = derived
    return out


def _times(fn, *args, repeats: int) -> list[float]:
    import jax

    jax.block_until_ready(fn(*args))  # warm
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn(*args))
        out.append(time.perf_counter() - t)
    return out


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


def profile(B: int, N: int, L: int, repeats: int, skip_update: bool) -> dict[str, Any]:
    """The raw record: each part's timed calls and XLA's counts."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx

    from fidia_jax import models, protein
    from fidia_jax.projects import fidia
    from fidia_jax.projects.fidia._step import make_reference_log_probs, make_update

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
    # the trainer's reference forward: its own forward-only program (inference options), once
    # per step; the update then reads its output as batch["ref"]
    reference = make_reference_log_probs(graphdef, cfg).program(True)
    ref_args = (params, inputs, seqs, orders)
    update_batch = dict(batch, ref=reference(*ref_args))

    # peers: the machine's compute and bandwidth ceilings, same process, same load
    a = jnp.asarray(rng.normal(size=(1024, 1024)), jnp.float32)
    matmul = jax.jit(lambda x: x @ x)
    x = jnp.asarray(rng.normal(size=(32 * 1024 * 1024,)), jnp.float32)
    axpy = jax.jit(lambda y: 1.0001 * y + x)

    parts = {
        "matmul": (matmul, (a,)),
        "axpy": (axpy, (x,)),
        "forward": (forward, (params,)),
        "backward": (backward, (params,)),
        "encoder": (encoder, (params,)),
        "reference": (reference, ref_args),
        "update": (update_jit, (params, opt, params, update_batch)),
    }
    if skip_update:
        parts.pop("update")
    out = []
    for name, (fn, fn_args) in parts.items():
        compiled, c = _compile(fn, *fn_args)
        secs = _times(compiled, *fn_args, repeats=repeats)
        out.append({"part": name, "seconds": secs, **c})
        t = statistics.median(secs)
        print(
            f"{name}: {t * 1e3:.1f} ms, {c['flops'] / 1e9:.2f} GFLOP, {c['bytes'] / 1e9:.2f} GB",
            file=sys.stderr,
            flush=True,
        )
    return {"shape": {"B": B, "N": N, "L": L}, "repeats": repeats, "parts": out}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--length", type=int, default=64)
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--backbones", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--skip-update", action="store_true", help="leave out the whole update")
    ap.add_argument("--out", default=str(default_out(NAME)))
    ap.add_argument(
        "--report", action="store_true", help="no run: rebuild the tables of --out from its parts"
    )
    args = ap.parse_args(argv)
    if args.report:
        retable(args.out, tables)
        return 0
    if min(args.length, args.samples, args.backbones, args.repeats) < 1:
        ap.error("--length, --samples, --backbones and --repeats must be >= 1")
    load_start = load_average()
    command = command_line([__file__, *(sys.argv[1:] if argv is None else argv)])
    record = profile(args.backbones, args.samples, args.length, args.repeats, args.skip_update)
    t = tables(record)["profile"]
    B, N, L = args.backbones, args.samples, args.length
    print(f"\nFIDIA update parts, B={B} backbones x N={N} samples x L={L} slots, "
          f"{args.repeats} timed calls; XLA cost analysis")  # fmt: skip
    print("| " + " | ".join(t["columns"]) + " |")
    for r in t["rows"]:
        cells = [r[0]] + ["—" if v is None else f"{v:.3g}" for v in r[1:]]
        print("| " + " | ".join(cells) + " |")
    path = write_results(NAME, tables(record), command=command, load_start=load_start,
                         extra=record, out=args.out)  # fmt: skip
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
