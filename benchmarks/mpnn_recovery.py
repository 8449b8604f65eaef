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
  ``--torch-python`` (torch is not a dependency of fidia_jax); skipped with ``--no-torch``. The
  peer is ``benchmarks/_mpnn_torch_peer.py`` (numpy + torch only) and runs first; if it fails,
  the script exits non-zero with the peer's output (``benchmarks/_peers.py``).
* ``composition``: the recovery expected from drawing residues i.i.d. from the chain's own amino
  acid composition, ``sum_a f_a^2`` (a null model).

To bound compilation (one sampler compile per distinct length), chains of >= 48 residues are
padded to a multiple of ``--bucket`` with slots exactly like the original's batch padding
(``mask`` 0, ``chain_mask`` 0, ``residue_idx`` -100, ``chain_encoding`` 0); the run checks on one
chain that padding leaves the teacher-forced log-probabilities of the real positions unchanged.

    python benchmarks/mpnn_recovery.py --data-dir ../shared/data --num-samples 8 \
        --torch-python /tmp/torchvenv/bin/python

Prints one table and writes ``benchmarks/results/mpnn_recovery.json`` (``_results``: the
``recovery`` summary with the paired Wilcoxon test over chains, and the ``per_chain`` table).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import sys
import tempfile
import time

import _peers
import _results
import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]


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
    p.add_argument(
        "--retable",
        action="store_true",
        help="re-derive the tables of the --out file from its raw results (no measurement)",
    )
    return p.parse_args(argv)


def _run_torch(args, chains, checkpoint) -> dict | None:
    """The torch peer (``_mpnn_torch_peer.py recovery``) on ``chains``; None when skipped.

    Raises SystemExit (via ``_peers.run_peer``) when the peer fails.
    """
    if args.no_torch:
        return None
    python = _peers.torch_python(args.torch_python)
    if python is None:
        print("torch peer skipped: no interpreter with torch (use --torch-python)", file=sys.stderr)
        return None
    with tempfile.TemporaryDirectory() as tmp:
        cfg = {
            "chains": chains, "num_samples": args.num_samples, "temperature": args.temperature,
            "seed": args.seed, "threads": args.threads, "checkpoint": str(checkpoint),
            "pkg_dir": _peers.package_dir("proteinmpnn"),
        }  # fmt: skip
        inp, outp = pathlib.Path(tmp) / "in.json", pathlib.Path(tmp) / "out.json"
        inp.write_text(json.dumps(cfg))
        _peers.run_peer(
            python, "_mpnn_torch_peer.py", "recovery", inp, outp, name=f"torch peer ({python})"
        )
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


def recovery_tables(rows: list[dict]) -> dict:
    """The ``recovery`` table (mean native-sequence recovery over chains per implementation and
    the composition null, the difference to fidia_jax's and the two-sided Wilcoxon signed-rank
    p over chains, ``None`` without scipy or without a difference) and the ``per_chain`` table
    (chain, length, fidia_jax, torch, composition null)."""
    ours = [r["mean_recovery"] for r in rows]
    others = {"torch original": [r.get("torch_mean_recovery") for r in rows],
              "composition null (sum f_a^2)": [r["composition_baseline"] for r in rows]}  # fmt: skip
    summary = [["fidia_jax", len(rows), float(np.mean(ours)), 0.0, None]]
    for name, vals in others.items():
        if any(v is None for v in vals):
            continue
        diff = [v - o for v, o in zip(vals, ours, strict=True)]
        p = None
        try:
            from scipy.stats import wilcoxon

            if any(diff):
                p = float(wilcoxon(diff).pvalue)
        except ImportError:
            pass
        summary.append([name, len(rows), float(np.mean(vals)), float(np.mean(diff)), p])
    per_chain = [[", ".join(r["problems"]), r["length"], r["mean_recovery"], r.get("torch_mean_recovery"),
                  r["composition_baseline"]] for r in rows]  # fmt: skip
    return {
        "recovery": {
            "columns": ["implementation", "chains", "mean recovery", "minus fidia_jax",
                        "Wilcoxon p (paired by chain)"],
            "rows": summary,
            "formats": [None, "d", ".3f", "+.3f", ".3f"],
        },
        "per_chain": {
            "columns": ["chain", "L", "fidia_jax", "torch original", "composition null"],
            "rows": per_chain,
            "formats": [None, "d", ".3f", ".3f", ".3f"],
        },
    }  # fmt: skip


def main(argv=None) -> int:
    args = _parse_args(argv)
    if args.retable:
        record = json.loads(pathlib.Path(args.out).read_text())
        tables = recovery_tables(record["chains"])
        print(f"wrote {_results.rewrite_results('mpnn_recovery', record, tables, args.out)}")
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

    # the peer runs first: a peer that cannot run fails the benchmark before the long part
    load_start = _results.load_average()
    t = time.perf_counter()
    peer = _run_torch(
        args,
        [(g[0].name, str(g[0].pdb_path), "A") for g in groups],
        checkpoint_path("v_48_020", "vanilla"),
    )
    torch_s = time.perf_counter() - t

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

    raw = {
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
    path = _results.write_results(
        pathlib.Path(args.out).stem, recovery_tables(rows), load_start=load_start, extra=raw,
        out=args.out,
    )  # fmt: skip
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
