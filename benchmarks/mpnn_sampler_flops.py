"""ProteinMPNN sampler FLOP rate against the machine's float32 matmul rate, in one process.

Issue 27's goal: the sampler at >= 60 % of the machine's measured matmul FLOP rate. One backbone
(``protein/motif_problems/1PRW.pdb`` chain A, L = 148), ``--num-samples`` (16) rows at T = 0.1,
v_48_020, ``fidia_jax.models.sample`` with ``score_native=True`` (what ``fidia-jax sample``
runs: the loop decodes 2N rows, N sampled and N teacher-forced on the native sequence), compiled
once, then timed; interleaved in rounds with a large float32 matmul (``--matmul`` square, jitted
``jnp.dot``), so both see about the same machine load.

FLOPs are counted by hand, matrix products only (2 m n k each; elementwise work, GELU, norms,
gathers and the softmax are not counted, so the rate is of the useful matmul work):

* per decoding step, row and decoder layer (``DecLayer.step``): ``h W1a`` (2 C^2), the message
  MLP's ``W2`` on K neighbours (2 K C^2), ``(sum g) W3`` (2 C^2), the FFN ``C -> 4C -> C``
  (16 C^2), and the next layer's projection ``h W1d`` (2 C^2, not after the last layer); per
  step and row ``W_out`` (2 C 21);
* once per structure: the encoder (per layer: node messages ``W1`` on ``[h_i, h_ij, h_j]``
  (2 L K 3C C), ``W2``, ``W3`` (2 x 2 L K C^2), FFN (16 L C^2), edge messages ``W11``,
  ``W12``, ``W13`` (2 L K (3C C + 2 C^2))), the edge embedding (2 L K 416 C), and the
  decoder's ``step_cache`` per layer (2 L K C^2 + 2 L C^2 + 2 21 C^2).

XLA's own count (``compiled.cost_analysis()["flops"]``) is printed beside it; it counts a
``while`` loop's body once, not once per iteration, so it is not used for the rate.

    python benchmarks/mpnn_sampler_flops.py --rounds 3

Prints one table and writes ``benchmarks/results/mpnn_sampler_flops.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]


def _parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--data-dir", default=os.environ.get("FIDIA_DATA_DIR", str(REPO.parent / "shared" / "data"))
    )
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--num-samples", type=int, default=16)
    p.add_argument("--matmul", type=int, default=2048)
    p.add_argument(
        "--out", default=str(REPO / "benchmarks" / "results" / "mpnn_sampler_flops.json")
    )
    return p.parse_args(argv)


def sampler_flops(length: int, rows: int, layers: int = 3, c: int = 128, k: int = 48) -> dict:
    """Matmul FLOPs of one sampler call (see the module docstring), by part."""
    per_row_step = layers * (2 * c * c + 2 * k * c * c + 2 * c * c + 16 * c * c)
    per_row_step += (layers - 1) * 2 * c * c + 2 * c * 21
    decode = length * rows * per_row_step
    enc_layer = 2 * length * k * 3 * c * c + 2 * 2 * length * k * c * c + 16 * length * c * c
    enc_layer += 2 * length * k * (3 * c * c + 2 * c * c)
    encoder = layers * enc_layer + 2 * length * k * 416 * c
    setup = layers * (2 * length * k * c * c + 2 * length * c * c + 2 * 21 * c * c)
    return {"decode": decode, "encoder": encoder, "step_cache": setup,
            "total": decode + encoder + setup}  # fmt: skip


def main(argv=None) -> int:
    args = _parse_args(argv)
    import jax
    import jax.numpy as jnp
    import numpy as np

    from fidia_jax._io import atomic_write_text
    from fidia_jax.models import MPNNInputs, ProteinMPNN, sample
    from fidia_jax.protein import load_structure

    pdb = pathlib.Path(args.data_dir) / "protein" / "motif_problems" / "1PRW.pdb"
    inputs = MPNNInputs.from_protein(load_structure(str(pdb), ["A"]))
    length = int(inputs.S.shape[0])
    model = ProteinMPNN.from_checkpoint("v_48_020")
    n = args.num_samples

    def run_sampler():
        res = sample(model, jax.random.key(0), inputs, num_samples=n, temperature=0.1,
                     score_native=True)  # fmt: skip
        jax.block_until_ready(res)

    m = args.matmul
    a = jax.random.normal(jax.random.key(1), (m, m), jnp.float32)
    b = jax.random.normal(jax.random.key(2), (m, m), jnp.float32)
    dot = jax.jit(jnp.dot)

    def run_matmul():
        jax.block_until_ready(dot(a, b))

    run_sampler()  # compile
    run_matmul()
    flops = sampler_flops(length, 2 * n)
    mm_flops = 2 * m**3
    rates = {"sampler": [], "matmul": []}
    for _ in range(args.rounds):
        for name, fn, f, reps in (("matmul", run_matmul, mm_flops, 5), ("sampler", run_sampler, flops["total"], 1)):  # fmt: skip
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            rates[name].append(f * reps / (time.perf_counter() - t0) / 1e9)
    xla = None
    try:
        from flax import nnx

        from fidia_jax.models.proteinmpnn._inputs import canonical, omit_mask
        from fidia_jax.models.proteinmpnn._sampling import _sample_jit

        g, st = nnx.split(model)
        low = _sample_jit.lower(g, st, jax.random.key(0), canonical(inputs), jnp.float32(0.1),
                                np.zeros(length, bool), omit_mask("X") > 0,
                                jnp.zeros((length, 21), jnp.float32), n, None, True, None)  # fmt: skip
        xla = float(low.compile().cost_analysis()["flops"])
    except Exception as e:  # the cost analysis is informative only
        print(f"(no XLA cost analysis: {type(e).__name__}: {e})", file=sys.stderr)
    frac = [s / mm for s, mm in zip(rates["sampler"], rates["matmul"], strict=True)]
    result = {
        "pdb": str(pdb), "length": length, "rows": 2 * n, "flops_by_hand": flops,
        "xla_cost_analysis_flops": xla, "matmul_size": m, "gflops_per_s": rates,
        "fraction_of_matmul_rate": frac, "median_fraction": statistics.median(frac),
        "load_average_1_5_15": os.getloadavg(), "jax": jax.__version__,
        "machine": "2-core CPU sandbox, shared with other jobs, no GPU",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }  # fmt: skip
    lines = [
        f"sampler: L={length}, {2 * n} rows, {flops['total'] / 1e9:.1f} GFLOP by hand "
        f"(decode {flops['decode'] / 1e9:.1f}); XLA cost analysis {xla and xla / 1e9:.2f} GFLOP",
        f"{'round':6s} {'matmul GFLOP/s':>15s} {'sampler GFLOP/s':>16s} {'fraction':>9s}",
    ]
    for i, (mm, s, f) in enumerate(zip(rates["matmul"], rates["sampler"], frac, strict=True)):
        lines.append(f"{i:<6d} {mm:15.1f} {s:16.1f} {f:9.2f}")
    print("\n".join(lines))
    result["table"] = lines
    atomic_write_text(args.out, json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
