"""Make the Frame2seq parity fixtures with Frame2seq's own torch code (run in a throwaway venv).

Not part of fidia_jax (torch is never a dependency). Environment (2026-11-30)::

    python3 -m venv /tmp/peer_f2s
    /tmp/peer_f2s/bin/pip install /opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl numpy
    /tmp/peer_f2s/bin/pip install --no-deps frame2seq==0.0.8   # or the downloaded wheel file
    /tmp/peer_f2s/bin/pip install pytorch-lightning einops biopython scipy dm-tree pandas
    /tmp/peer_f2s/bin/python tools/frame2seq_make_fixture.py --data-dir ../shared/data

Cases: ``3a4rA`` (chain A of ``protein/mdanalysistests_dssp/3a4rA.pdb.gz``, 79 residues) and
``5PTI`` (chain A of fidia's built-in ``fidia_jax/protein/data/5PTI.cif.gz``, written to a PDB
file with Biopython's ``PDBIO`` because Frame2seq's parser reads PDB only). For each case the
script parses the file with Frame2seq's ``get_inference_inputs`` (its parser: ideal CB and O
placed, coordinates rounded to 1e-4 Å, float64), loads ``model{1,2,3}.ckpt`` with
``frame2seq.load_from_checkpoint(...).eval()`` and runs ``forward(X, seq_mask, onehot)`` under
``torch.no_grad()`` for (a) a fully masked input sequence (every one-hot row on class 20, as
``utils/score.py`` and ``utils/design.py`` do) and (b) a partially given sequence (the native
residue at every third position, class 20 elsewhere, as ``design(fixed_positions=...)`` does).
It then runs Frame2seq's own scoring path, ``Frame2seqRunner().score(pdb, chain, fasta,
save_indiv_neg_pll=True)`` on a FASTA holding the native sequence and a fixed permutation of it,
and reads the per-residue negative pseudo-log-likelihoods back from the CSV files it writes.

Written to ``tests/data/frame2seq/<case>.npz`` (float32 unless noted):
``X`` (L, 5, 3) float64 Frame2seq's parsed atoms N, CA, C, CB(ideal), O(ideal) in Å (kept in
float64 as the parser makes them: the network moves its logits by ~1e-4 per 1e-6 Å); ``mask`` (L,) bool;
``aatype`` (L,) int32 native (Frame2seq ids = ProteinMPNN ids, 20 = X); ``tokens_partial`` (L,)
int32; ``logits_m{k}_masked`` / ``logits_m{k}_partial`` (L, 21) per model (Frame2seq as it runs:
float32 weights, float64 coordinates); ``logits_m{k}_{masked,partial}_f64`` the same network cast
to float64 throughout (``copy.deepcopy(model).double()``, ``.float()`` redirected), stored as float32, to check the port's
operations independently of float32 rounding; ``seqs`` (2, L) int32
scored sequences; ``neg_pll`` (2, L) per-residue ensemble scores from the score CSVs (float64);
``avg_neg_pll`` (2,) from ``scores.csv`` (float64).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import gzip
import os
import pathlib
import tempfile

import frame2seq
import numpy as np
import pandas as pd
import torch
from Bio.PDB import PDBIO, MMCIFParser
from frame2seq import Frame2seqRunner
from frame2seq.model.Frame2seq import frame2seq as F2S
from frame2seq.utils.pdb2input import get_inference_inputs

REPO = pathlib.Path(__file__).resolve().parents[1]
ALPHABET = "ACDEFGHIKLMNPQRSTVWYX"


@contextlib.contextmanager
def _float64_everywhere():
    """Run Frame2seq's forward in float64: its featurizer calls ``.float()`` and builds tensors
    with the default dtype, so both are redirected to float64 for the duration (the sinusoid's
    ``div_term`` stays float32 as it is created with an explicit ``dtype=torch.float``)."""
    old_float, old_default = torch.Tensor.float, torch.get_default_dtype()
    torch.Tensor.float = lambda self, *a, **k: self.to(torch.float64)
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.Tensor.float = old_float
        torch.set_default_dtype(old_default)


def _write_pdb(case: str, data_dir: pathlib.Path, tmp: pathlib.Path) -> tuple[str, str]:
    out = tmp / f"{case}.pdb"
    if case == "3a4rA":
        out.write_bytes(
            gzip.decompress((data_dir / "protein/mdanalysistests_dssp/3a4rA.pdb.gz").read_bytes())
        )
    elif case == "5PTI":
        with (
            gzip.open(REPO / "fidia_jax/protein/data/5PTI.cif.gz", "rt") as fh,
            open(tmp / "5PTI.cif", "w") as g,
        ):
            g.write(fh.read())
        structure = MMCIFParser(QUIET=True).get_structure("5PTI", str(tmp / "5PTI.cif"))
        io = PDBIO()
        io.set_structure(structure)
        io.save(str(out))
    else:
        raise ValueError(case)
    return str(out), "A"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=os.environ.get("FIDIA_DATA_DIR", "../shared/data"))
    ap.add_argument("--out", default=str(REPO / "tests/data/frame2seq"))
    args = ap.parse_args()
    torch.manual_seed(0)
    outdir = pathlib.Path(args.out)
    outdir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as td:
        tmp = pathlib.Path(td)
        cwd = os.getcwd()
        os.chdir(tmp)  # the runner writes frame2seq_outputs/ into the working directory
        try:
            runner = Frame2seqRunner()
        finally:
            os.chdir(cwd)
        ckdir = pathlib.Path(frame2seq.__file__).parent / "trained_models"
        models = [F2S.load_from_checkpoint(str(ckdir / f"model{k}.ckpt")).eval() for k in (1, 2, 3)]
        for case in ("3a4rA", "5PTI"):
            pdb, chain = _write_pdb(case, pathlib.Path(args.data_dir), tmp)
            seq_mask, aatype, X = get_inference_inputs(pdb, chain)
            L = X.shape[1]
            native = aatype[0].numpy().astype(np.int32)
            partial = np.full(L, 20, np.int32)
            partial[::3] = native[::3]
            rec: dict[str, np.ndarray] = dict(
                X=X[0].numpy(),
                mask=seq_mask[0].numpy().astype(bool),
                aatype=native,
                tokens_partial=partial,
            )
            for tag, toks in (
                ("masked", np.full(L, 20, np.int64)),
                ("partial", partial.astype(np.int64)),
            ):
                onehot = torch.nn.functional.one_hot(torch.from_numpy(toks), 21).float()[None]
                with torch.no_grad():
                    for k, m in enumerate(models, 1):
                        rec[f"logits_m{k}_{tag}"] = (
                            m(X, seq_mask, onehot)[0].numpy().astype(np.float32)
                        )
                        with _float64_everywhere():
                            m64 = copy.deepcopy(m).double()
                            out = m64(X, seq_mask, onehot.double())[0].numpy()
                        rec[f"logits_m{k}_{tag}_f64"] = out.astype(np.float32)
            # Frame2seq's own scoring path, on the native sequence and a fixed permutation of it.
            perm = np.random.default_rng(0).permutation(L)
            seqs = np.stack([native, native[perm]])
            fasta = tmp / f"{case}.fasta"
            fasta.write_text(
                "".join(f">s{i}\n{''.join(ALPHABET[t] for t in s)}\n" for i, s in enumerate(seqs))
            )
            os.chdir(tmp)
            try:
                runner.score(pdb, chain, str(fasta), save_indiv_neg_pll=True, verbose=False)
            finally:
                os.chdir(cwd)
            csv_dir = tmp / "frame2seq_outputs/scores"
            rec["seqs"] = seqs.astype(np.int32)
            rec["neg_pll"] = np.stack(
                [
                    pd.read_csv(csv_dir / f"{case}_{chain}_seq{i}.csv")[
                        "Negative pseudo-log-likelihood"
                    ].to_numpy()
                    for i in range(2)
                ]
            )
            rec["avg_neg_pll"] = pd.read_csv(csv_dir / "scores.csv")[
                "Average negative pseudo-log-likelihood"
            ].to_numpy()
            np.savez_compressed(outdir / f"{case}.npz", **rec)
            print(case, "L", L, "avg_neg_pll", rec["avg_neg_pll"], "->", outdir / f"{case}.npz")


if __name__ == "__main__":
    main()
