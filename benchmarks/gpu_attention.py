"""GPU benchmark for the attention kernels (run once on an H200: see docs/benchmarks.md).

Decode (one step, Llama-3-8B-like: 32 query heads, 8 kv heads, head dim 128, bf16, 32k context):
  * copy bandwidth first (``x + 0`` on a 1 GiB bf16 buffer: read + write), the roofline;
  * Pallas SANTA (systematic, S in {512, 2048}) vs Pallas flash-decoding vs
    ``jax.nn.dot_product_attention`` (implementation "xla" and "cudnn" where available);
  * time per step (median of repeats), achieved GB/s (K and V bytes read / time; for SANTA also
    the bytes a gather kernel would read), distinct V rows SANTA samples, max |error| vs dense.
Training (Attn-QAT): forward and forward+backward of the Pallas FP4 kernels vs bf16
``jax.nn.dot_product_attention`` (cudnn if available, else xla); B=1, T=S=4096, 32 heads, D=128.

Every measurement is wrapped: a kernel that fails to lower is reported with its error and the
script goes on. Results are written after every measurement. On the H200 the decode half took
about 1 minute; the Attn-QAT backward's compile did not finish within the 5-minute budget.

Usage:
  python benchmarks/gpu_attention.py            # on a GPU
  python benchmarks/gpu_attention.py --smoke    # tiny shapes, Pallas interpret mode (CPU check)
  python benchmarks/gpu_attention.py --only train --train-len 1024 --repeats 5

Writes benchmarks/results/gpu_attention.json.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time
import traceback

import jax
import jax.numpy as jnp
from _timing import median_seconds

from fidia_jax._io import atomic_write_text
from fidia_jax.kernels.attn_qat import BlockSizes as QatBlocks
from fidia_jax.kernels.attn_qat import attn_qat_pallas
from fidia_jax.kernels.santa import BlockSizes, flash_decode_pallas, santa_decode_pallas
from fidia_jax.kernels.santa import reference as R
from fidia_jax.kernels.santa.api import samples_per_tile_for

_SAVE = []  # set by main: writes the results so far (a run cut off by a time limit keeps them)


def attempt(name, results, f):
    t0 = time.perf_counter()
    try:
        row = f()
        row["name"] = name
        results.append(row)
        print(json.dumps(row), flush=True)
    except Exception as e:  # noqa: BLE001 - report and continue
        results.append({"name": name, "error": f"{type(e).__name__}: {e}"[:500]})
        print(f"{name}: FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
    results[-1]["wall_s_incl_compile"] = time.perf_counter() - t0
    for save in _SAVE:
        save()
        traceback.print_exc(limit=2)


def _decode(res, args, smoke, interpret, reps, shape, nk, bk):
    b, hq, hkv, d = shape

    # 1) copy bandwidth
    def copy_bw():
        n = (1 << 20) if smoke else (1 << 29)  # bf16 elements (1 GiB on GPU)
        x = jnp.ones((n,), jnp.bfloat16)
        t = median_seconds(jax.jit(lambda x: x + 1), x, repeats=reps)
        return {"bytes": 2 * 2 * n, "ms": 1e3 * t, "GBps": 2 * 2 * n / t / 1e9}

    attempt("copy_bandwidth", res["decode"], copy_bw)

    kq, kk, kv, ku = jax.random.split(jax.random.key(0), 4)
    q = jax.random.normal(kq, (b, hq, d), jnp.bfloat16)
    k = jax.random.normal(kk, (b, nk, hkv, d), jnp.bfloat16)
    v = jax.random.normal(kv, (b, nk, hkv, d), jnp.bfloat16)
    kv_bytes = 2 * b * nk * hkv * d * 2
    exact = R.dense_decode_reference(q, k, v).astype(jnp.float32)

    def decode_row(fn, *a, extra=None):
        t = median_seconds(fn, *a, repeats=reps)
        out = fn(*a).astype(jnp.float32).reshape(b, hq, d)
        row = {
            "ms": 1e3 * t,
            "GBps_kv": kv_bytes / t / 1e9,
            "max_abs_err": float(jnp.max(jnp.abs(out - exact))),
        }
        row.update(extra or {})
        return row

    lengths = jnp.full((b,), nk, jnp.int32)
    flash = jax.jit(
        lambda q, k, v: flash_decode_pallas(
            q, k, v, lengths, block_sizes=BlockSizes(bk), interpret=interpret
        )
    )
    attempt("pallas_flash_decode", res["decode"], lambda: decode_row(flash, q, k, v))

    for s_total in (512, 2048):
        spt = samples_per_tile_for(s_total, nk, bk)
        u = R.make_uniforms(ku, b, hq, nk, block_k=bk, samples_per_tile=spt, method="systematic")
        santa = jax.jit(
            lambda q, k, v, u, spt=spt: santa_decode_pallas(
                q,
                k,
                v,
                u,
                lengths,
                samples_per_tile=spt,
                method="systematic",
                block_sizes=BlockSizes(bk),
                interpret=interpret,
            )
        )

        def santa_row2(santa=santa, u=u, spt=spt, s_total=s_total):
            rows = R.distinct_value_rows(q, k, u, samples_per_tile=spt, block_k=bk)
            k_bytes = b * nk * hkv * d * 2
            gather_bytes = k_bytes + rows * d * 2
            extra = {
                "S": s_total,
                "samples_per_tile": spt,
                "distinct_v_rows": rows,
                "v_rows_total": b * nk * hkv,
            }
            row = decode_row(santa, q, k, v, u, extra=extra)
            row["GBps_if_gather"] = gather_bytes / (row["ms"] / 1e3) / 1e9
            return row

        attempt(f"pallas_santa_S{s_total}", res["decode"], santa_row2)

    q4 = q[:, None]
    for impl in ("xla", "cudnn"):
        f = jax.jit(
            lambda q, k, v, impl=impl: jax.nn.dot_product_attention(q, k, v, implementation=impl)
        )
        attempt(f"dot_product_attention_{impl}", res["decode"], lambda f=f: decode_row(f, q4, k, v))


def _train(res, args, smoke, interpret, reps, hq, d):
    # 2) Attn-QAT training kernels vs bf16 attention
    t_len = 64 if smoke else args.train_len
    h = hq
    kq2, kk2, kv2 = jax.random.split(jax.random.key(1), 3)
    Q = jax.random.normal(kq2, (1, t_len, h, d), jnp.bfloat16)
    K = jax.random.normal(kk2, (1, t_len, h, d), jnp.bfloat16)
    V = jax.random.normal(kv2, (1, t_len, h, d), jnp.bfloat16)
    blocks = QatBlocks(32, 32) if smoke else QatBlocks(64, 64)

    def train_rows(fn, name):
        fwd = jax.jit(fn)
        bwd = jax.jit(
            jax.grad(lambda q, k, v: jnp.sum(fn(q, k, v).astype(jnp.float32)), argnums=(0, 1, 2))
        )
        attempt(
            f"{name}_fwd",
            res["train"],
            lambda: {"ms": 1e3 * median_seconds(fwd, Q, K, V, repeats=reps)},
        )
        attempt(
            f"{name}_fwd_bwd",
            res["train"],
            lambda: {"ms": 1e3 * median_seconds(bwd, Q, K, V, repeats=reps)},
        )

    train_rows(
        lambda q, k, v: attn_qat_pallas(
            q, k, v, causal=True, block_sizes=blocks, interpret=interpret
        ),
        "attn_qat_pallas",
    )
    for impl in ("cudnn", "xla"):
        train_rows(
            lambda q, k, v, impl=impl: jax.nn.dot_product_attention(
                q, k, v, is_causal=True, implementation=impl
            ),
            f"bf16_dpa_{impl}",
        )


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="GPU attention benchmark (SANTA, flash-decode, Attn-QAT)"
    )
    ap.add_argument("--smoke", action="store_true", help="tiny shapes in interpret mode (CPU)")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--out", default="benchmarks/results/gpu_attention.json")
    ap.add_argument("--only", choices=("decode", "train"), help="run one half of the benchmark")
    ap.add_argument(
        "--train-len", type=int, default=4096, help="sequence length of the Attn-QAT part"
    )
    args = ap.parse_args(argv)
    smoke = args.smoke
    interpret = smoke
    reps = 1 if smoke else args.repeats
    b, hq, hkv, d = (1, 8, 2, 64) if smoke else (1, 32, 8, 128)
    nk = 256 if smoke else 32768
    bk = 64 if smoke else 128
    res = {
        "device": str(jax.devices()[0]),
        "jax": jax.__version__,
        "smoke": smoke,
        "decode": [],
        "train": [],
    }
    out = pathlib.Path(args.out)
    _SAVE[:] = [lambda: atomic_write_text(out, json.dumps(res, indent=1))]

    if args.only != "train":
        _decode(res, args, smoke, interpret, reps, (b, hq, hkv, d), nk, bk)
    if args.only != "decode":
        _train(res, args, smoke, interpret, reps, hq, d)
    print("\nname                              ms      GB/s(kv)")
    for row in res["decode"] + res["train"]:
        if "error" in row:
            print(f"{row['name']:30s}  FAILED")
        else:
            print(
                f"{row['name']:30s} {row.get('ms', float('nan')):8.3f}  {row.get('GBps_kv', row.get('GBps', float('nan'))):8.1f}"
            )
    dec = {r["name"]: r for r in res["decode"] if "error" not in r}
    if "pallas_flash_decode" in dec and "pallas_santa_S2048" in dec:
        ratio = dec["pallas_flash_decode"]["ms"] / dec["pallas_santa_S2048"]["ms"]
        res["santa_speedup_vs_flash_S2048"] = ratio
        print(f"SANTA(S=2048) speed-up over Pallas flash-decoding: {ratio:.2f}x (goal >= 1.3x)")
    atomic_write_text(out, json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
