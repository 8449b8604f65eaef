"""ProteinMPNN sampling throughput: fidia_jax (jitted scan sampler) vs the original torch code.

Samples ``--num-samples`` sequences (default 16) for one chain (default 1PRW chain A, 147
residues) at temperature 0.1 with the vanilla v_48_020 weights, and reports sequences/second
over several repeats (compile time reported separately). The torch peer is the original
``proteinmpnn.protein_mpnn_utils.ProteinMPNN.sample`` with all samples in one batch, measured in
the same run when torch is importable here, or in a separate interpreter given with
``--torch-python`` (torch is not a dependency of fidia_jax); the peer is
``benchmarks/_mpnn_torch_peer.py`` (numpy + torch only) and runs first. If it fails, the script
exits non-zero with the peer's output (``benchmarks/_peers.py``). Prints one table and writes
``benchmarks/results/mpnn_sampling.json`` (``_results``: the ``sampling`` table, min / median /
max per call, with the raw times).

    python benchmarks/mpnn_sampling.py --data-dir ../shared/data --torch-python /tmp/torchvenv/bin/python --threads 1,2

The ratio column is relative to the fastest torch configuration measured.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import tempfile
import time

import _peers
import _results

REPO = pathlib.Path(__file__).resolve().parents[1]


def _parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--data-dir", default=os.environ.get("FIDIA_DATA_DIR", str(REPO.parent / "shared" / "data"))
    )
    p.add_argument(
        "--pdb",
        default=None,
        help="structure file (default: <data-dir>/protein/motif_problems/1PRW.pdb)",
    )
    p.add_argument("--chain", default="A")
    p.add_argument("--num-samples", type=int, default=16)
    p.add_argument("--temperature", type=float, default=0.1)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument(
        "--threads",
        default="2",
        help="torch intra-op thread counts, comma-separated (JAX uses its default pool)",
    )
    p.add_argument(
        "--torch-repeats",
        type=int,
        default=2,
        help="timed torch calls per thread count (no warm-up needed)",
    )
    p.add_argument(
        "--torch-python", default=None, help="interpreter with torch installed, for the peer"
    )
    p.add_argument("--no-torch", action="store_true", help="skip the torch peer")
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "mpnn_sampling.json"))
    return p.parse_args(argv)


# ---------------------------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------------------------


def _torch_peers(args, inputs, checkpoint) -> list[dict]:
    """Measure the torch peer (``_mpnn_torch_peer.py sampling``) once per ``--threads`` count.

    Raises SystemExit (via ``_peers.run_peer``) when the peer fails; returns [] when skipped.
    """
    import numpy as np

    python = None if args.no_torch else _peers.torch_python(args.torch_python)
    if python is None:
        return []
    peers = []
    with tempfile.TemporaryDirectory() as tmp:
        npz, out = os.path.join(tmp, "in.npz"), os.path.join(tmp, "out.json")
        np.savez(npz, **{k: np.asarray(v) for k, v in inputs._asdict().items()},
                 num_samples=args.num_samples, checkpoint=str(checkpoint))  # fmt: skip
        pkg_dir = _peers.package_dir("proteinmpnn")
        for threads in [int(t) for t in args.threads.split(",")]:
            peer_args = ["sampling", npz, out, "--repeats", args.torch_repeats, "--threads", threads,
                         "--temperature", repr(args.temperature)]  # fmt: skip
            if pkg_dir:
                peer_args += ["--pkg-dir", pkg_dir]
            _peers.run_peer(
                python, "_mpnn_torch_peer.py", *peer_args, name=f"torch peer ({python})"
            )
            peers.append(json.loads(pathlib.Path(out).read_text()))
    return peers


def main(argv=None):
    args = _parse_args(argv)

    import jax
    import numpy as np

    from fidia_jax.models import MPNNInputs, ProteinMPNN, sample
    from fidia_jax.models.proteinmpnn import checkpoint_path
    from fidia_jax.protein import load_structure

    pdb = pathlib.Path(
        args.pdb or pathlib.Path(args.data_dir) / "protein" / "motif_problems" / "1PRW.pdb"
    )
    protein = load_structure(pdb, chains=args.chain)
    inputs = MPNNInputs.from_protein(protein)
    L, n = protein.length, args.num_samples
    # the peer runs first: a peer that cannot run fails the benchmark before the long part
    peers = _torch_peers(args, inputs, checkpoint_path("v_48_020", "vanilla"))

    model = ProteinMPNN.from_checkpoint("v_48_020")

    def run(seed):
        r = sample(model, jax.random.key(seed), inputs, num_samples=n, temperature=args.temperature)
        jax.block_until_ready(r.sequences)
        return r

    load_start = _results.load_average()
    t0 = time.perf_counter()
    run(0)
    first = time.perf_counter() - t0
    times, cpu_times = [], []
    for r in range(args.repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        res = run(r + 1)
        times.append(time.perf_counter() - t0)
        cpu_times.append(time.process_time() - c0)
    raw = {
        "structure": str(pdb.name),
        "chain": args.chain,
        "L": L,
        "num_samples": n,
        "temperature": args.temperature,
        "repeats": args.repeats,
        "fidia_first_call_s": first,
        "fidia_compile_s_est": first - statistics.median(times),
        "fidia_times_s": times,
        "fidia_cpu_times_s": cpu_times,
        "mean_token_log_prob": float(np.mean(np.asarray(res.token_log_probs))),
        "torch": [
            {"version": p["torch"], "threads": p["threads"], "times_s": p["times_s"]} for p in peers
        ],
    }
    path = _results.write_results(
        pathlib.Path(args.out).stem, {"sampling": sampling_table(raw)}, load_start=load_start,
        extra=raw, out=args.out,
    )  # fmt: skip
    print(
        f"ProteinMPNN v_48_020 sampling: {pdb.name} chain {args.chain}, L={L}, {n} samples, "
        f"T={args.temperature}; fidia_jax first call (compile + run) {first:.2f} s"
    )
    for row in json.loads(path.read_text())["tables"]["sampling"]["rows"]:
        print("  ".join(f"{c:.3g}" if isinstance(c, float) else str(c) for c in row))
    if not peers:
        print("torch peer not measured (install torch in another venv and pass --torch-python)")
    print(f"wrote {path}")


def sampling_table(raw: dict) -> dict:
    """The ``sampling`` table: per implementation its timed calls, wall seconds per call (min /
    median / max), sequences per second at the median, and the ratio of that rate to the
    fastest torch configuration's (fidia_jax's row; ``None`` without a torch peer)."""
    n = raw["num_samples"]
    rows = [["fidia_jax sample (jit: encoder + lax.scan)", raw["fidia_times_s"]]]
    rows += [[f"torch {p['version']} ProteinMPNN.sample, {p['threads']} thread(s)", p["times_s"]]
             for p in raw["torch"]]  # fmt: skip
    rates = [n / statistics.median(t) for _, t in rows]
    best_torch = max(rates[1:], default=None)
    return {
        "columns": ["implementation", "calls", "s per call min", "s per call median",
                    "s per call max", "sequences / s", "fidia_jax / fastest torch"],
        "rows": [
            [name, len(t), min(t), statistics.median(t), max(t), rate,
             None if i or best_torch is None else rate / best_torch]
            for i, ((name, t), rate) in enumerate(zip(rows, rates, strict=True))
        ],
        "formats": [None, "d", ".2f", ".2f", ".2f", ".2f", ".2f"],
    }  # fmt: skip


if __name__ == "__main__":
    main()
