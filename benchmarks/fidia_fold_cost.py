"""AlphaFold2's cost per fold by counting: XLA's operation and byte counts of one recycle pass.

For the GPU recipe in docs/fidia.md. Lowers (does not compile or run) the jitted, vmapped
recycle pass of :class:`fidia_jax.protein.AlphaFoldPredictor` for the full-size ``model_1_ptm``
configuration (48 Evoformer blocks, 4 extra-MSA blocks, 8 structure-module layers; single
sequence, so one MSA row and one extra-MSA row) at a few padded lengths (``--model
model_1_multimer_v3``: the multimer, the length split into ``--chains`` equal chains, a binder
and its target with the default 2), and reads the HLO cost
analysis (``jax.stages.Lowered.cost_analysis()``: floating-point operations and bytes accessed,
before XLA's fusion, so the bytes are an upper bound). The block stacks are unrolled for the count
(XLA counts a scan's body once). Parameters are shapes only
(``jax.eval_shape``); no weights are read. Needs the ``fold`` extra.

Usage::

  python benchmarks/fidia_fold_cost.py [--model model_1_ptm --lengths 64 128 256 --recycles 3]
  python benchmarks/fidia_fold_cost.py --model model_1_multimer_v3 --chains 2

Prints one table and writes ``benchmarks/results/fidia_fold_cost.json``
(``fidia_fold_cost_<model>.json`` for another model).
"""

from __future__ import annotations

import argparse
import datetime
import pathlib
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from _timing import write_record

HERE = pathlib.Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="model_1_ptm")
    ap.add_argument("--lengths", type=int, nargs="+", default=[64, 128, 256])
    ap.add_argument("--recycles", type=int, default=3)
    ap.add_argument("--bfloat16", action="store_true", help="the release's GPU setting")
    ap.add_argument("--chains", type=int, default=2, help="chains of a multimer input")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.out is None:
        name = "" if args.model == "model_1_ptm" else f"_{args.model}"
        args.out = str(HERE / "results" / f"fidia_fold_cost{name}.json")

    import haiku as hk
    from alphafold.model import layer_stack, modules, modules_multimer

    # XLA counts a scan's body once, whatever its trip count: unroll the block stacks (48
    # Evoformer, 4 extra-MSA, 8 structure-module layers) so that every block is counted.
    stack = layer_stack.layer_stack

    def unrolled(num_layers, with_state=False, unroll=1, name=None):
        return stack(num_layers, with_state=with_state, unroll=num_layers, name=name)

    layer_stack.layer_stack = unrolled

    from fidia_jax import protein

    cfg = protein.alphafold_config(
        args.model,
        num_recycles=args.recycles,
        overrides={"model.global_config.bfloat16": bool(args.bfloat16)},
    )
    evo = cfg.model.embeddings_and_evoformer
    multimer = bool(cfg.model.global_config.multimer_mode)
    model_cls = modules_multimer.AlphaFold if multimer else modules.AlphaFold_noE

    def forward(batch):
        return model_cls(cfg.model)(batch, is_training=False)

    f = hk.transform(forward)
    rows = []
    n_params = None
    for L in args.lengths:
        t0 = time.perf_counter()
        if multimer:
            cuts = np.linspace(0, L, args.chains + 1).astype(int)
            seq = ":".join("A" * (b - a) for a, b in zip(cuts[:-1], cuts[1:], strict=True))
            batch = protein._alphafold._multimer_features(cfg, seq, L)[0]
        else:
            feats = protein._alphafold._single_sequence_features(cfg, "A" * L, L, 0)
            batch = {k: v[0:1] for k, v in feats.items()}
        batch["prev"] = {
            "prev_msa_first_row": jnp.zeros((L, evo.msa_channel), jnp.float32),
            "prev_pair": jnp.zeros((L, L, evo.pair_channel), jnp.float32),
            "prev_pos": jnp.zeros((L, 37, 3), jnp.float32),
        }
        with jax.numpy_rank_promotion("allow"):
            shapes = jax.eval_shape(f.init, jax.random.PRNGKey(0), batch)
            n_params = sum(int(np.prod(s.shape)) for s in jax.tree.leaves(shapes))
            lowered = jax.jit(f.apply).lower(shapes, jax.random.PRNGKey(0), batch)
        cost = lowered.cost_analysis() or {}
        if isinstance(cost, list | tuple):
            cost = cost[0] if cost else {}
        flops, nbytes = float(cost.get("flops", 0.0)), float(cost.get("bytes accessed", 0.0))
        passes = args.recycles + 1
        rows.append(
            {
                "length": L,
                "flops_per_pass": flops,
                "bytes_per_pass": nbytes,
                "flops_per_fold": flops * passes,
                "lowering_s": time.perf_counter() - t0,
            }
        )
        print(f"L={L}: {flops / 1e12:.3f} TFLOP per pass", file=sys.stderr, flush=True)
    print(f"\nAlphaFold2 {args.model}, single sequence, {args.recycles} recycles "
          f"({args.recycles + 1} passes), {n_params / 1e6:.1f} M parameters; HLO cost analysis")  # fmt: skip
    print("| L | TFLOP per pass | GB accessed per pass (unfused) | TFLOP per fold |")
    print("|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['length']} | {r['flops_per_pass'] / 1e12:.3f} | {r['bytes_per_pass'] / 1e9:.1f} "
            f"| {r['flops_per_fold'] / 1e12:.2f} |"
        )
    record = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
        "model": args.model,
        "chains": args.chains if multimer else 1,
        "recycles": args.recycles,
        "bfloat16": bool(args.bfloat16),
        "parameters": n_params,
        "rows": rows,
    }
    write_record(args.out, record)


if __name__ == "__main__":
    main()
