"""Teacher-forced log-probs of N samples per backbone: shared encoder vs structures repeated N times.

The FIDIA update needs ``log pi`` (and its gradient) of ``N`` sampled sequences on each of ``B``
backbones. ``ProteinMPNN.log_probs_many`` encodes each backbone once and decodes its ``N``
sequences; the peer repeats every structure ``N`` times and runs the full model (what the
training loop did before). Both are timed in the same run, value and gradient, on the built-in
5PTI backbone padded to ``L`` slots.

Usage::

  python benchmarks/mpnn_log_probs_many.py --batch 2 --num-samples 16 --length 64 --repeats 5
"""

from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import platform

import jax
import jax.numpy as jnp
import numpy as np
from _timing import median_seconds
from flax import nnx

from fidia_jax import models, protein
from fidia_jax._io import atomic_write_text


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

    rows = {}
    for name, fn in (("shared_encoder", shared), ("repeated_structures", repeated)):
        rows[name] = median_seconds(nnx.jit(nnx.value_and_grad(fn)), model, repeats=args.repeats)
        print(f"{name:20s} value+grad {1e3 * rows[name]:8.1f} ms", flush=True)
    speedup = rows["repeated_structures"] / rows["shared_encoder"]
    print(f"speed-up of log_probs_many over the repeated-structure peer: {speedup:.2f}x")
    result = {
        "benchmark": "mpnn_log_probs_many",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.processor() or platform.machine()}, {jax.default_backend()}",
        "jax": jax.__version__,
        "batch": b,
        "num_samples": n,
        "length": length,
        "seconds": rows,
        "speedup": speedup,
    }
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
