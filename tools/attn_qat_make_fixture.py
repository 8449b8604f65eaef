"""Builds the Attn-QAT fidelity fixture (tests/data/attn_qat/) from the authors' torch reference.

Authors' code: hao-ai-lab/FastVideo, commit 20e4f7d3fc6114b85d285d67c4a8681f5bab843f,
``fastvideo-kernel/tests/qat_forward_reference.py`` (functions ``fp4_fake_quantize``,
``quantize_qkv``, ``forward_reference``): the pure-torch reference the authors test their Triton
Attn-QAT training kernel against (``fastvideo-kernel/python/fastvideo_kernel/triton_kernels/
attn_qat_train.py`` with ``nvfp4_utils.py``; per-group scales only, i.e. ``global_scale=False``
as their backend's ``use_global_sf_qkv=False, use_global_sf_p=False``). That commit is not on
the default branch (HEAD 2f3d4074 has no ``qat_forward_reference.py``): check it out with
``git checkout 20e4f7d3`` (or ``git show 20e4f7d3:fastvideo-kernel/tests/qat_forward_reference.py``
into ``<dir>/fastvideo-kernel/tests/``).

Usage (from the repository root)::

  python tools/attn_qat_make_fixture.py --authors-dir /tmp/authors_attn_qat

It creates a throwaway virtual environment ``/tmp/peer_attn_qat`` (``torch==2.13.0``,
``numpy``) if absent, then re-runs itself inside it with ``--peer``, imports the authors' module
from ``<authors-dir>/fastvideo-kernel/tests`` and runs it once on CPU on small seeded inputs:

* ``fp4_fake_quantize`` on 16-element float32 blocks (one block per row): exact E2M1 ties at
  every E4M3 scale mantissa, bf16-valued random blocks, subnormal and zero block scales,
  saturating block scales (amax / 6 above 448), zeros including -0.0, and constant blocks;
* ``quantize_qkv`` and ``forward_reference`` (non-causal; output, the log2-sum-exp statistic,
  the running maxima per 32-key tile, the denominator, the high-precision "STE" output and dV
  through the frozen online FP4 weights) on three attention cases: random bf16 q, k, v; peaked
  scores (large q, many small P groups); uniform attention over 256 keys (q = 0).

Outputs: ``tests/data/attn_qat/authors_reference.npz`` (inputs and outputs as float32; bf16
outputs are exact in float32) and ``authors_reference.json`` (versions, commit, seed, shapes,
the md5 of the authors' file). torch is never a dependency of fidia_jax: only this script and
its venv use it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pathlib
import subprocess
import sys

import _peer  # tools/_peer.py (this script's folder is on sys.path)

VENV = pathlib.Path("/tmp/peer_attn_qat")
ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "tests" / "data" / "attn_qat"
COMMIT = "20e4f7d3fc6114b85d285d67c4a8681f5bab843f"
REL_PATH = "fastvideo-kernel/tests/qat_forward_reference.py"
SEED = 20261204
#: name -> (H, T, S, D, q multiplier, k multiplier); layout (B=1, H, L, D) as the authors'.
ATTN_CASES = {
    "random": (1, 32, 64, 32, 1.0, 1.0),
    "peaked": (1, 32, 64, 16, 4.0, 1.0),
    "uniform": (1, 32, 256, 16, 0.0, 0.0),  # all scores 0: uniform attention over 256 keys
}
E2M1_MIDS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)


def make_venv() -> pathlib.Path:
    return _peer.make_venv(VENV, ["torch==2.13.0", "numpy"])


def _quantiser_blocks(rng):
    """(R, 16) float32 blocks and a case label per row."""
    import numpy as np

    rows, labels = [], []

    def add(label, block):
        block = np.asarray(block, np.float32)
        assert block.shape == (16,), block.shape
        rows.append(block)
        labels.append(label)

    # exact ties: amax = 6 s gives the scale s exactly; the other elements sit on E2M1 midpoints
    for e in (-3, 0, 4):
        for mant in range(8):
            s = np.float32(2.0**e * (1 + mant / 8))
            mids = np.float32(E2M1_MIDS) * s
            add("ties", np.concatenate([[6 * s], mids, -mids, [np.float32(-0.0)]]))
    # bf16-valued random blocks (the case where float32(1/scale) flips ties)
    for _ in range(24):
        x = rng.normal(scale=2.0, size=16).astype(np.float32)
        bits = x.view(np.uint32)
        bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)  # to bf16
        add("bf16", bits.view(np.float32))
    # subnormal block scales (amax / 6 < 2**-6), the scale rounding to 0, and its tie
    for amax in [6 * k * 2.0**-9 for k in range(1, 8)] + [6 * 2.0**-10, 5.8e-3, 6e-3, 1e-4]:
        x = (rng.uniform(-1, 1, size=16) * amax).astype(np.float32)
        x[0] = np.float32(amax)
        x[1] = np.float32(-amax * 0.4)
        add("subnormal", x)
    # saturating block scales: amax / 6 at and above 448
    for amax in (2688.0, 2700.0, 2750.0, 2800.0, 3000.0, 1e4, 1e6):
        x = (rng.uniform(-1, 1, size=16) * amax).astype(np.float32)
        x[0] = np.float32(-amax)
        add("saturating", x)
    # zeros, including -0.0; negatives that round to zero
    add("zeros", np.zeros(16))
    add("zeros", np.full(16, -0.0))
    add("zeros", np.where(np.arange(16) % 2, -0.0, 0.0))
    x = rng.normal(size=16).astype(np.float32)
    x[::3] = -0.0
    x[1] = np.float32(-1e-3)  # tiny against amax: rounds to -0
    add("zeros", x)
    # constant blocks
    for c in (1.0, 0.3, -2.5, 1e-3, 100.0, 7e-3, -4.6875):
        add("constant", np.full(16, c))
    return np.stack(rows), np.asarray(labels)


def _bf16(torch, rng, shape, scale):
    import numpy as np

    return torch.tensor(rng.normal(scale=scale, size=shape).astype(np.float32)).to(torch.bfloat16)


def peer(authors_dir: pathlib.Path) -> None:
    import numpy as np
    import torch

    sys.path.insert(0, str(authors_dir / "fastvideo-kernel" / "tests"))
    import qat_forward_reference as ref  # the authors' module, imported from their checkout

    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    rng = np.random.default_rng(SEED)
    out: dict[str, np.ndarray] = {}

    blocks, labels = _quantiser_blocks(rng)
    out["quant/x"] = blocks
    out["quant/label"] = labels
    out["quant/y"] = ref.fp4_fake_quantize(torch.tensor(blocks)).float().numpy()

    for name, (h, t, s, d, qmul, kmul) in ATTN_CASES.items():
        q = _bf16(torch, rng, (1, h, t, d), 1.0) * qmul
        k = _bf16(torch, rng, (1, h, s, d), 1.0) * kmul
        v = _bf16(torch, rng, (1, h, s, d), 1.0)
        do = _bf16(torch, rng, (1, h, t, d), 1.0).float()
        for key, val in (("q", q), ("k", k), ("v", v), ("do", do)):
            out[f"{name}/{key}"] = val.float().numpy()
        o, dv, ste, stats, maxima, denom = ref.forward_reference(q, k, v, do)
        for key, val in (
            ("o", o),
            ("dv", dv),
            ("o_ste", ste),
            ("lse2", stats),
            ("maxima2", maxima),
            ("denominator", denom),
        ):
            out[f"{name}/{key}"] = val.detach().float().numpy()
        if name == "random":
            for key, x in (("q_hat", q), ("k_hat", k), ("v_hat", v)):
                out[f"{name}/{key}"] = ref.quantize_qkv(x).float().numpy()

    OUT_DIR.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT_DIR / "authors_reference.npz", **out)
    from importlib.metadata import version

    src = authors_dir / REL_PATH
    meta = {
        "repository": "hao-ai-lab/FastVideo",
        "commit": COMMIT,
        "file": REL_PATH,
        "file_md5": hashlib.md5(src.read_bytes()).hexdigest(),
        "functions": ["fp4_fake_quantize", "quantize_qkv", "forward_reference"],
        "seed": SEED,
        "attention_cases": {
            n: dict(zip(["H", "T", "S", "D", "q_mul", "k_mul"], c, strict=True))
            for n, c in ATTN_CASES.items()
        },
        "quantiser_rows": int(blocks.shape[0]),
        "layout": "attention arrays (B=1, H, L, D) as the authors'; lse2 and maxima2 in base 2",
        "versions": {pkg: version(pkg) for pkg in ("torch", "numpy")},
        "python": sys.version.split()[0],
        "script": "tools/attn_qat_make_fixture.py",
    }
    (OUT_DIR / "authors_reference.json").write_text(
        json.dumps(meta, indent=1, sort_keys=True) + "\n"
    )
    print(f"wrote {OUT_DIR / 'authors_reference.npz'} ({len(out)} arrays)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--authors-dir",
        type=pathlib.Path,
        required=True,
        help=f"checkout of hao-ai-lab/FastVideo at {COMMIT[:8]} (holds {REL_PATH})",
    )
    parser.add_argument("--peer", action="store_true", help="(internal) run inside the venv")
    args = parser.parse_args()
    authors_dir = args.authors_dir.resolve()
    if not (authors_dir / REL_PATH).exists():
        raise SystemExit(f"{authors_dir / REL_PATH} not found: check out commit {COMMIT[:8]}")
    if args.peer:
        peer(authors_dir)
        return
    py = make_venv()
    cmd = [
        str(py),
        str(pathlib.Path(__file__).resolve()),
        "--peer",
        "--authors-dir",
        str(authors_dir),
    ]
    subprocess.run(cmd, check=True, cwd="/tmp")


if __name__ == "__main__":
    main()
