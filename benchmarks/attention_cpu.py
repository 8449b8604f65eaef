"""CPU benchmark: one decode step, dense attention vs SANTA, both through the XLA (jnp) reference.

Shapes: batch 1, 8 query heads on 2 kv heads, head dim 64, bf16 cache, n_k in {4k, 32k, 128k}
(Llama-3-8B has 32/8 heads of 128; reduced so the 128k cache fits a shared 2-core machine).
SANTA: systematic sampling, total budget S = 2048 (``samples_per_tile_for``), 64-key tiles,
gather value stage. The peer is ``dense_decode_reference`` measured in the same run.

Usage:
  python benchmarks/attention_cpu.py [--repeats 5] [--nk 4096 32768 131072]

Prints a table (time per step, ratio dense/SANTA, distinct V rows read by SANTA) and writes
benchmarks/results/attention_cpu.json.
"""

from __future__ import annotations

import argparse
import pathlib
import platform

import jax
import jax.numpy as jnp
from _results import load_average, write_results
from _timing import median_seconds

from fidia_jax.kernels.santa import reference as R
from fidia_jax.kernels.santa.api import samples_per_tile_for


def main(argv=None):
    ap = argparse.ArgumentParser(description="dense vs SANTA decode step on CPU (XLA reference)")
    ap.add_argument("--nk", type=int, nargs="+", default=[4096, 32768, 131072])
    ap.add_argument("--samples", type=int, default=2048)
    ap.add_argument("--block-k", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default="benchmarks/results/attention_cpu.json")
    args = ap.parse_args(argv)
    load_start = load_average()
    b, hq, hkv, d = 1, 8, 2, 64
    rows = []
    print(
        f"{'n_k':>8} {'dense ms':>10} {'SANTA ms':>10} {'dense/SANTA':>12} {'V rows read':>14} {'max|err|':>9}"
    )
    for nk in args.nk:
        kq, kk, kv, ku = jax.random.split(jax.random.key(nk), 4)
        q = jax.random.normal(kq, (b, hq, d), jnp.bfloat16)
        k = jax.random.normal(kk, (b, nk, hkv, d), jnp.bfloat16)
        v = jax.random.normal(kv, (b, nk, hkv, d), jnp.bfloat16)
        spt = samples_per_tile_for(args.samples, nk, args.block_k)
        u = R.make_uniforms(
            ku, b, hq, nk, block_k=args.block_k, samples_per_tile=spt, method="systematic"
        )
        dense = jax.jit(R.dense_decode_reference)
        santa = jax.jit(
            lambda q, k, v, u, spt=spt: R.santa_decode_reference(
                q,
                k,
                v,
                u,
                samples_per_tile=spt,
                method="systematic",
                block_k=args.block_k,
                value_stage="gather",
            )
        )
        t_dense = median_seconds(dense, q, k, v, repeats=args.repeats)
        t_santa = median_seconds(santa, q, k, v, u, repeats=args.repeats)
        err = float(
            jnp.max(
                jnp.abs(santa(q, k, v, u).astype(jnp.float32) - dense(q, k, v).astype(jnp.float32))
            )
        )
        n_rows = R.distinct_value_rows(q, k, u, samples_per_tile=spt, block_k=args.block_k)
        row = dict(
            n_k=nk,
            dense_ms=1e3 * t_dense,
            santa_ms=1e3 * t_santa,
            ratio=t_dense / t_santa,
            samples_per_tile=spt,
            v_rows_read=n_rows,
            v_rows_total=b * hkv * nk,
            max_abs_err=err,
        )
        rows.append(row)
        print(
            f"{nk:>8} {row['dense_ms']:>10.2f} {row['santa_ms']:>10.2f} {row['ratio']:>12.2f} "
            f"{n_rows:>7}/{b * hkv * nk:<7} {err:>8.3f}",
            flush=True,
        )
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = dict(
        jax=jax.__version__,
        machine=platform.machine(),
        processor=platform.processor(),
        shapes=dict(batch=b, q_heads=hq, kv_heads=hkv, head_dim=d, dtype="bfloat16"),
        samples=args.samples,
        block_k=args.block_k,
        method="systematic",
    )
    table = {
        "columns": ["n_k", "dense ms", "SANTA ms", "dense / SANTA", "distinct V rows sampled",
                    "max abs err vs dense"],
        "rows": [[f"{r['n_k']:,}".replace(",", "\u2009"), r["dense_ms"], r["santa_ms"],
                  r["ratio"], f"{r['v_rows_read']:,} / {r['v_rows_total']:,}".replace(",", "\u2009"),
                  r["max_abs_err"]] for r in rows],
        "formats": [None, ".2f", ".2f", ".2f", None, ".3f"],
    }  # fmt: skip
    write_results(out.stem, {"decode": table}, load_start=load_start,
                  extra={"meta": meta, "rows": rows}, out=out)  # fmt: skip
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
