"""PASO vs sequential training on one GPU (designed to finish in < 5 minutes on one H100/H200).

On a single accelerator the window's P gradients run as one batched (``vmap``) computation, so
an iteration costs about one large-batch gradient; small models leave the GPU under-used by
sequential training and PASO turns the spare width into fewer sequential rounds. With several
GPUs the window is sharded over all of them.

Tasks (same batches for both methods): the digits MLP (T = 2048) and the small byte-level
LLaMA on Shakespeare (T = 512), exact mode, windows 16 and 32. Prints K vs T, gradient
evaluations, final-loss parity and the wall-clock ratio (compile excluded), and writes
``benchmarks/results/gpu_paso.json``.

Not run in this repository's CI (no GPU); see docs/benchmarks.md.

Usage: python benchmarks/gpu_paso.py --data-dir ../shared/data [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys

import jax
import numpy as np
import optax

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import paso as cpu_bench  # noqa: E402  (tasks of benchmarks/paso.py; LLaMA from the lm driver)

from fidia_jax._io import atomic_write_text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", default=os.environ.get("FIDIA_DATA_DIR", "../shared/data"))
    ap.add_argument("--quick", action="store_true", help="smaller T (smoke test)")
    ap.add_argument("--out", default="benchmarks/results/gpu_paso.json")
    args = ap.parse_args()
    backend = jax.default_backend()
    if backend not in ("gpu", "cuda", "rocm"):
        print(f"warning: default backend is {backend!r}, not a GPU; figures are not GPU figures")
    devices = jax.devices()
    mesh = None
    if len(devices) > 1:
        mesh = jax.sharding.Mesh(np.array(devices), ("window",))
    t_digits, t_llama = (256, 64) if args.quick else (2048, 512)
    rows = []
    digits = cpu_bench.digits_task(0)
    llama = cpu_bench.llama_task(0, args.data_dir)
    for window in (16, 32):
        if mesh is not None and window % len(devices):
            continue
        rows.append(
            cpu_bench.bench(
                "digits MLP", digits, "adam(1e-3)", optax.adam(1e-3), t_digits, window, mesh
            )
        )
        rows.append(
            cpu_bench.bench(
                "tiny LLaMA", llama, "adam(1e-3)", optax.adam(1e-3), t_llama, window, mesh
            )
        )
    print(f"\nPASO vs sequential on {len(devices)} x {devices[0].device_kind}")
    print(
        "| task | window | T | K | T/K | grad evals / T | loss seq | loss PASO | "
        "wall seq s | wall PASO s | wall speed-up |"
    )
    print("|" + "---|" * 11)
    for r in rows:
        print(
            f"| {r['task']} | {r['window']} | {r['T']} | {r['K']} | {r['T_over_K']:.2f} | "
            f"{r['grad_evals'] / r['T']:.2f} | {r['loss_seq']:.4f} | {r['loss_paso']:.4f} | "
            f"{r['wall_seq_s']:.2f} | {r['wall_paso_s']:.2f} | "
            f"{r['wall_seq_s'] / r['wall_paso_s']:.2f} |"
        )
    out = pathlib.Path(args.out)
    atomic_write_text(
        out, json.dumps({"rows": rows, "devices": [str(d) for d in devices]}, indent=2)
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
