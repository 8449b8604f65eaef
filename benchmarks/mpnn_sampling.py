"""ProteinMPNN sampling throughput: fidia_jax (jitted scan sampler) vs the original torch code.

Samples ``--num-samples`` sequences (default 16) for one chain (default 1PRW chain A, 147
residues) at temperature 0.1 with the vanilla v_48_020 weights, and reports sequences/second
over several repeats (compile time reported separately). The torch peer is the original
``proteinmpnn.protein_mpnn_utils.ProteinMPNN.sample`` with all samples in one batch, measured in
the same run when torch is importable here, or in a separate interpreter given with
``--torch-python`` (torch is not a dependency of fidia_jax); the peer is
``benchmarks/_mpnn_torch_peer.py`` (numpy + torch only) and runs first. If it fails, the script
exits non-zero with the peer's output (``benchmarks/_peers.py``). Prints one table and writes JSON
to ``benchmarks/results/mpnn_sampling.json``.

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

from fidia_jax._io import atomic_write_text

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

    t0 = time.perf_counter()
    run(0)
    first = time.perf_counter() - t0
    times = []
    for r in range(args.repeats):
        t0 = time.perf_counter()
        res = run(r + 1)
        times.append(time.perf_counter() - t0)
    jax_med = statistics.median(times)
    result = {
        "structure": str(pdb.name),
        "chain": args.chain,
        "L": L,
        "num_samples": n,
        "temperature": args.temperature,
        "repeats": args.repeats,
        "jax": jax.__version__,
        "jax_backend": jax.default_backend(),
        "cpu_count": os.cpu_count(),
        "load_average": os.getloadavg(),
        "fidia_first_call_s": first,
        "fidia_compile_s_est": first - jax_med,
        "fidia_times_s": times,
        "fidia_seq_per_s": n / jax_med,
        "mean_token_log_prob": float(np.mean(np.asarray(res.token_log_probs))),
    }

    rows = [("fidia_jax (jit, lax.scan)", result["fidia_seq_per_s"], jax_med)]
    result["torch"] = []
    for peer in peers:
        med = statistics.median(peer["times_s"])
        result["torch"].append(
            dict(
                version=peer["torch"],
                threads=peer["threads"],
                times_s=peer["times_s"],
                seq_per_s=n / med,
            )
        )
        rows.append(
            (f"torch {peer['torch']} ProteinMPNN.sample ({peer['threads']} thr)", n / med, med)
        )
    if peers:  # ratio against the fastest torch configuration measured
        best = max(rows[1:], key=lambda r: r[1])
        result["speedup_vs_best_torch"] = result["fidia_seq_per_s"] / best[1]
    print(
        f"ProteinMPNN v_48_020 sampling: {pdb.name} chain {args.chain}, L={L}, {n} samples, T={args.temperature}, "
        f"median of {args.repeats}; load avg {result['load_average'][0]:.2f} on {os.cpu_count()} cores"
    )
    ref = max(rows[1:], key=lambda r: r[1])[1] if peers else rows[0][1]
    print(f"{'implementation':<46} {'seq/s':>8} {'s/batch':>9} {'ratio':>7}")
    for name, sps, med in rows:
        print(f"{name:<46} {sps:8.2f} {med:9.3f} {sps / ref:7.2f}")
    print(f"fidia_jax first call (compile + run): {first:.2f} s (compile ~{first - jax_med:.2f} s)")
    if not peers:
        print("torch peer not measured (install torch in another venv and pass --torch-python)")

    out = pathlib.Path(args.out)
    atomic_write_text(out, json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
