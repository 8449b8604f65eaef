"""Teacher-forced log-probs of N samples per backbone: shared encoder vs structures repeated N times.

The FIDIA update needs ``log pi`` (and its gradient) of ``N`` sampled sequences on each of ``B``
backbones. ``ProteinMPNN.log_probs_many`` encodes each backbone once and decodes its ``N``
sequences; the peer repeats every structure ``N`` times and runs the full model (what the
training loop did before). Both are timed in the same run, value and gradient, on the built-in
5PTI backbone padded to ``L`` slots, in interleaved rounds (one call of each per round, after one
compiling call each), wall and CPU seconds. Writes
``benchmarks/results/mpnn_log_probs_many.json`` (``_results``: the ``log_probs_many`` table).

Usage::

  python benchmarks/mpnn_log_probs_many.py --batch 2 --num-samples 16 --length 64 --repeats 5
"""

from __future__ import annotations

import argparse
import statistics
import time

import _results
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from fidia_jax import models, protein


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--num-samples", type=int, default=16)
    ap.add_argument("--length", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default="benchmarks/results/mpnn_log_probs_many.json")
    args = ap.parse_args(argv)
    b, n, length = args.batch, args.num_samples, args.length

    prot = protein.load_structure(protein.default_backbone_path())
    one = models.MPNNInputs.from_protein(prot)
    if one.S.shape[0] > length:
        raise SystemExit(f"--length must be >= the backbone length {one.S.shape[0]}")
    pad = length - one.S.shape[0]
    one = jax.tree.map(
        lambda a: np.pad(np.asarray(a), [(0, pad)] + [(0, 0)] * (np.ndim(a) - 1)), one
    )
    inputs = jax.tree.map(lambda a: np.broadcast_to(a, (b,) + a.shape), one)
    rng = np.random.default_rng(0)
    seqs = jnp.asarray(rng.integers(0, 20, (b, n, length)), jnp.int32)
    orders = jnp.asarray(
        np.stack([rng.permutation(length) for _ in range(b * n)]).reshape(b, n, length), jnp.int32
    )
    model = models.ProteinMPNN.from_checkpoint("v_48_020")

    def shared(m):
        lp = m.log_probs_many(inputs, seqs, orders)
        return jnp.mean(jnp.take_along_axis(lp, seqs[..., None], -1))

    def repeated(m):
        flat = jax.tree.map(lambda a: jnp.repeat(jnp.asarray(a), n, axis=0), inputs)
        flat = flat._replace(S=seqs.reshape(b * n, length))
        lp = m(flat, orders.reshape(b * n, length)).reshape(b, n, length, -1)
        return jnp.mean(jnp.take_along_axis(lp, seqs[..., None], -1))

    load_start = _results.load_average()
    fns = {"shared_encoder": shared, "repeated_structures": repeated}
    jitted = {k: nnx.jit(nnx.value_and_grad(f)) for k, f in fns.items()}
    for f in jitted.values():
        jax.block_until_ready(f(model))  # compile + warm up
    times: dict[str, list[list[float]]] = {k: [] for k in fns}
    for _ in range(args.repeats):
        for k, f in jitted.items():
            t0, c0 = time.perf_counter(), time.process_time()
            jax.block_until_ready(f(model))
            times[k].append([time.perf_counter() - t0, time.process_time() - c0])
    table = log_probs_table(times)
    for row in table["rows"]:
        print("  ".join(f"{c:.3g}" if isinstance(c, float) else str(c) for c in row), flush=True)
    path = _results.write_results(
        "mpnn_log_probs_many", {"log_probs_many": table}, load_start=load_start, out=args.out,
        extra={"batch": b, "num_samples": n, "length": length, "times_wall_cpu_s": times},
    )  # fmt: skip
    print(f"wrote {path}")
    return table


NAMES = {
    "shared_encoder": "ProteinMPNN.log_probs_many (encoder once per backbone)",
    "repeated_structures": "peer: each structure repeated N times through the full model",
}


def log_probs_table(times: dict[str, list[list[float]]]) -> dict:
    """Per variant: calls, wall seconds of one value-and-gradient call (min / median / max),
    median CPU seconds, and the peer's median time over this variant's (per round, median)."""
    rows = []
    for k, ts in times.items():
        w, c = [t[0] for t in ts], [t[1] for t in ts]
        ratio = statistics.median(
            p[0] / t[0] for p, t in zip(times["repeated_structures"], ts, strict=True)
        )
        rows.append([NAMES[k], len(ts), min(w), statistics.median(w), max(w),
                     statistics.median(c), ratio])  # fmt: skip
    return {
        "columns": ["variant", "calls", "wall s min", "wall s median", "wall s max",
                    "CPU s median", "peer time / this (per round)"],
        "rows": rows,
        "formats": [None, "d", ".2f", ".2f", ".2f", ".2f", ".2f"],
    }  # fmt: skip


if __name__ == "__main__":
    main()
