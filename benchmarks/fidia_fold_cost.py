"""AlphaFold2's cost per fold by counting: XLA's operation and byte counts of one recycle pass.

For the GPU recipe in docs/fidia.md. Lowers (does not compile or run) the jitted recycle pass of
:class:`fidia_jax.protein.AlphaFoldPredictor`'s model for the full-size ``model_1_ptm``
configuration (48 Evoformer blocks, 4 extra-MSA blocks, 8 structure-module layers; single
sequence, so one MSA row and one extra-MSA row) at a few padded lengths (``--model
model_1_multimer_v3``: the multimer, the length split into ``--chains`` equal chains, a binder
and its target with the default 2), and reads the HLO cost analysis
(``jax.stages.Lowered.cost_analysis()``: floating-point operations and bytes accessed, before
XLA's fusion, so the bytes are an upper bound). The block stacks are unrolled for the count
(XLA counts a scan's body once). Parameters are shapes only (``jax.eval_shape``); no weights are
read. Needs the ``fold`` extra.

Writes ``benchmarks/results/fidia_fold_cost.json`` (``model_1_ptm``),
``fidia_fold_cost_multimer.json`` (``model_1_multimer_v3``) or ``fidia_fold_cost_<model>.json``
through :func:`_results.write_results`, with the raw counts per length; docs/fidia.md renders
its ``fold_cost`` table (padded length, TFLOP per pass, TFLOP per fold) from the file.

Usage::

  python benchmarks/fidia_fold_cost.py [--model model_1_ptm --lengths 64 128 256 --recycles 3]
  python benchmarks/fidia_fold_cost.py --model model_1_multimer_v3 --chains 2
  python benchmarks/fidia_fold_cost.py --report [--model NAME | --out PATH]   # re-table, no run
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _results import command_line, default_out, load_average, retable, write_results  # noqa: E402

NAME = "fidia_fold_cost"


def results_name(model: str) -> str:
    """The results file's stem for ``model``: ``fidia_fold_cost`` for the default
    ``model_1_ptm``, ``fidia_fold_cost_multimer`` for ``model_1_multimer_v3`` (the multimer the
    page quotes), ``fidia_fold_cost_<model>`` for any other."""
    if model == "model_1_ptm":
        return NAME
    if model == "model_1_multimer_v3":
        return f"{NAME}_multimer"
    return f"{NAME}_{model}"


def fold_cost_table(record: Mapping[str, Any]) -> dict[str, Any]:
    """One row per padded length: ``L``, TFLOP per pass, TFLOP per fold (``recycles + 1``
    passes), from the raw counts (``record["rows"]``: ``length``, ``flops_per_pass``)."""
    passes = int(record["recycles"]) + 1
    rows = [
        [int(r["length"]), r["flops_per_pass"] / 1e12, r["flops_per_pass"] * passes / 1e12]
        for r in record["rows"]
    ]
    return {
        "columns": ["padded length L", "TFLOP per pass", f"TFLOP per fold ({passes} passes)"],
        "rows": rows,
        "formats": [None, ".3f", ".2f"],
    }


def tables(record: Mapping[str, Any]) -> dict[str, Any]:
    return {"fold_cost": fold_cost_table(record)}


def count(model: str, lengths: Sequence[int], recycles: int, bfloat16: bool, chains: int) -> dict:
    """The raw record: HLO counts of one recycle pass per padded length."""
    import haiku as hk
    import jax
    import jax.numpy as jnp
    import numpy as np
    from alphafold.model import layer_stack, modules, modules_multimer

    # XLA counts a scan's body once, whatever its trip count: unroll the block stacks (48
    # Evoformer, 4 extra-MSA, 8 structure-module layers) so that every block is counted.
    stack = layer_stack.layer_stack

    def unrolled(num_layers, with_state=False, unroll=1, name=None):
        return stack(num_layers, with_state=with_state, unroll=num_layers, name=name)

    layer_stack.layer_stack = unrolled

    from fidia_jax import protein

    cfg = protein.alphafold_config(
        model, num_recycles=recycles, overrides={"model.global_config.bfloat16": bool(bfloat16)}
    )
    evo = cfg.model.embeddings_and_evoformer
    multimer = bool(cfg.model.global_config.multimer_mode)
    model_cls = modules_multimer.AlphaFold if multimer else modules.AlphaFold_noE

    def forward(batch):
        return model_cls(cfg.model)(batch, is_training=False)

    f = hk.transform(forward)
    rows = []
    n_params = None
    for L in lengths:
        t0 = time.perf_counter()
        if multimer:
            cuts = np.linspace(0, L, chains + 1).astype(int)
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
        rows.append(
            {
                "length": int(L),
                "flops_per_pass": flops,
                "bytes_per_pass": nbytes,
                "lowering_s": time.perf_counter() - t0,
            }
        )
        print(f"L={L}: {flops / 1e12:.3f} TFLOP per pass", file=sys.stderr, flush=True)
    from importlib.metadata import PackageNotFoundError, version

    try:
        af_version = version("alphafold-colabfold")
    except PackageNotFoundError:
        af_version = None
    return {
        "model": model,
        "multimer": multimer,
        "chains": chains if multimer else 1,
        "recycles": recycles,
        "bfloat16": bool(bfloat16),
        "parameters": n_params,
        "alphafold_colabfold": af_version,
        "rows": rows,
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="model_1_ptm")
    ap.add_argument("--lengths", type=int, nargs="+", default=[64, 128, 256])
    ap.add_argument("--recycles", type=int, default=3)
    ap.add_argument("--bfloat16", action="store_true", help="the release's GPU setting")
    ap.add_argument("--chains", type=int, default=2, help="chains of a multimer input")
    ap.add_argument("--out", default=None, help="default: benchmarks/results/<results_name>.json")
    ap.add_argument(
        "--report", action="store_true", help="no run: rebuild the tables of --out from its rows"
    )
    args = ap.parse_args(argv)
    out = pathlib.Path(args.out) if args.out else default_out(results_name(args.model))
    if args.report:
        retable(out, tables)
        return 0
    if min(args.lengths) < 1 or args.recycles < 0 or args.chains < 1:
        ap.error(f"--lengths must be >= 1, --recycles >= 0 and --chains >= 1, got "
                 f"{args.lengths}, {args.recycles}, {args.chains}")  # fmt: skip
    load_start = load_average()
    command = command_line([__file__, *(sys.argv[1:] if argv is None else argv)])
    record = count(args.model, args.lengths, args.recycles, args.bfloat16, args.chains)
    t = tables(record)["fold_cost"]
    print(f"\nAlphaFold2 {args.model}, single sequence, {args.recycles} recycles "
          f"({args.recycles + 1} passes), {record['parameters'] / 1e6:.1f} M parameters; "
          "HLO cost analysis")  # fmt: skip
    print("| " + " | ".join(t["columns"]) + " |")
    for r in t["rows"]:
        print(f"| {r[0]} | {r[1]:.3f} | {r[2]:.2f} |")
    path = write_results(out.stem, tables(record), command=command, load_start=load_start,
                         extra=record, out=out)  # fmt: skip
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
