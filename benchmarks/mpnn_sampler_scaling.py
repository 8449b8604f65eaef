"""ProteinMPNN sampler cost per sample and residue against length, optionally against an older sampler.

For each structure (whole structure, every chain designed) the jitted sampler draws
``--num-samples`` sequences at ``T = --temperature`` with the vanilla v_48_020 weights; the
table gives the median wall time per call and the median CPU time (all threads; less sensitive
to the load of a shared machine) per sample per residue (microseconds). A decoder
whose cost per step is constant gives a flat column; a step that copies ``(N, L, C)`` buffers
grows with ``L``.

``--baseline FILE`` loads another version of ``fidia_jax/models/proteinmpnn/_sampling.py`` (for
example ``git show 3b420c6:fidia_jax/models/proteinmpnn/_sampling.py > /tmp/old_sampling.py``)
as a second module and times it in the same process, the two calls alternating in every
repeat (their order swapped each time), and checks that both give the same sequences. Prints one
table and writes JSON to ``benchmarks/results/mpnn_sampler_scaling.json``.

    python benchmarks/mpnn_sampler_scaling.py --baseline /tmp/old_sampling.py \
        --pdbs 1YCR,1PRW,5YUI,il7ra_gc --repeats 3
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pathlib
import statistics
import time

from fidia_jax._io import atomic_write_text

REPO = pathlib.Path(__file__).resolve().parents[1]


def _parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--data-dir", default=os.environ.get("FIDIA_DATA_DIR", str(REPO.parent / "shared" / "data"))
    )
    p.add_argument(
        "--pdbs",
        default="1YCR,1PRW,5YUI,il7ra_gc",
        help="names under <data-dir>/protein/motif_problems (without .pdb), comma-separated",
    )
    p.add_argument("--num-samples", type=int, default=16)
    p.add_argument("--temperature", type=float, default=0.1)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--baseline", default=None, help="another _sampling.py to time alongside")
    p.add_argument(
        "--out", default=str(REPO / "benchmarks" / "results" / "mpnn_sampler_scaling.json")
    )
    return p.parse_args(argv)


def _load_module(path):
    spec = importlib.util.spec_from_file_location("_baseline_mpnn_sampling", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(argv=None):
    args = _parse_args(argv)

    import jax
    import numpy as np

    from fidia_jax.models import MPNNInputs, ProteinMPNN
    from fidia_jax.models.proteinmpnn import _sampling
    from fidia_jax.protein import load_structure

    samplers = {"current": _sampling.sample}
    if args.baseline:
        samplers["baseline"] = _load_module(args.baseline).sample
    model = ProteinMPNN.from_checkpoint("v_48_020")
    n = args.num_samples
    rows = []
    for name in args.pdbs.split(","):
        pdb = pathlib.Path(args.data_dir) / "protein" / "motif_problems" / f"{name}.pdb"
        inputs = MPNNInputs.from_protein(load_structure(pdb))
        length = int(inputs.S.shape[0])

        def call(fn, seed, inputs=inputs):
            r = fn(model, jax.random.key(seed), inputs, num_samples=n, temperature=args.temperature)
            return np.asarray(jax.block_until_ready(r.sequences))

        first, times, cpu = {}, {k: [] for k in samplers}, {k: [] for k in samplers}
        for k, fn in samplers.items():
            t0 = time.perf_counter()
            call(fn, 0)
            first[k] = time.perf_counter() - t0
        seqs = {}
        for r in range(args.repeats):
            keys = list(samplers) if r % 2 == 0 else list(samplers)[::-1]
            for k in keys:
                t0, c0 = time.perf_counter(), time.process_time()
                seqs[k] = call(samplers[k], r + 1)
                times[k].append(time.perf_counter() - t0)
                cpu[k].append(time.process_time() - c0)
        same = len({v.tobytes() for v in seqs.values()}) == 1
        row = {"pdb": name, "L": length, "same_sequences": same, "first_call_s": first}
        for k, ts in times.items():
            med, cmed = statistics.median(ts), statistics.median(cpu[k])
            row[k] = {"times_s": ts, "median_s": med, "cpu_s": cpu[k], "median_cpu_s": cmed,
                      "us_per_sample_residue": 1e6 * med / (n * length),
                      "cpu_us_per_sample_residue": 1e6 * cmed / (n * length)}  # fmt: skip
        rows.append(row)
        print(json.dumps(row), flush=True)

    load = os.getloadavg()
    print(
        f"ProteinMPNN v_48_020 sampler, {n} samples, T={args.temperature}, median of "
        f"{args.repeats}; load avg {load[0]:.2f} on {os.cpu_count()} cores; jax {jax.__version__}"
    )
    print("median wall s per call; median CPU us (all threads) per sample per residue")
    head = f"{'structure':<10} {'L':>5}"
    for k in samplers:
        head += f" {k + ' s/call':>16} {k + ' CPU us/(N*L)':>24}"
    if "baseline" in samplers:
        head += f" {'CPU speed-up':>12} {'same seqs':>9}"
    print(head)
    for row in rows:
        line = f"{row['pdb']:<10} {row['L']:>5}"
        for k in samplers:
            line += f" {row[k]['median_s']:16.3f} {row[k]['cpu_us_per_sample_residue']:24.1f}"
        if "baseline" in samplers:
            line += f" {row['baseline']['median_cpu_s'] / row['current']['median_cpu_s']:12.2f}"
            line += f" {str(row['same_sequences']):>9}"
        print(line)
    result = {
        "num_samples": n,
        "temperature": args.temperature,
        "repeats": args.repeats,
        "jax": jax.__version__,
        "cpu_count": os.cpu_count(),
        "load_average": load,
        "rows": rows,
    }
    atomic_write_text(pathlib.Path(args.out), json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
