"""Builds the fidelity fixture of residual geometry (eRank, ΔD, TME) from the authors' code.

Authors' code: https://github.com/Lrbomchz/vlms_lost_in_attn (Xi et al., "Large vision-language
models get lost in attention", ICML 2026), commit ``2ca01fdd2ddf4047dc47f6ce4a116d22c1142f3d``
(2026-05-13), file ``utils/interp_utils.py``. Functions called (imported from the checkout at
run time; nothing of them is copied here):

* ``compute_eranks_for_hiddens`` (``effective_rank_matrix``): eRank of each hidden state;
* ``novelty_from_hiddens_96``: ΔD ("novelty") of the attention and FFN outputs of a layer
  against the column and row subspaces of the layer input, with ``combine="l2"`` (default) and
  ``combine="sum"``, and the default numerical-rank cutoff (``tol=None``);
* ``tme_delta_2xnlayer`` / ``tme_state_3xnlayer`` (``tme_hidden`` with its defaults: ``mode=
  "shift"``, ``agg="last"``, ``normalize=True``, ``alpha=8``): TME of the updates and states;
  ``tme_hidden`` also with ``agg="mean"``, ``mode="relu"`` and ``alpha=1``;
* ``torch.linalg.matrix_rank`` (not the authors' function: the default rule that their
  ``tol=None`` cutoff copies, ``σ > max(S, H) · eps(dtype) · σ_max``), to record the rank used.

ΔS, RID and MixIG are not in the released code (its README lists them as "coming soon"), so
they have no fixture.

Usage (from the repository root; nothing is downloaded at run time)::

  # a checkout of the authors' repository at the commit above, e.g.
  #   git --git-dir=<bare mirror> archive 2ca01fdd | tar -x -C /tmp/authors_rg
  python tools/residual_geometry_make_fixture.py --authors-dir /tmp/authors_rg

It creates a throwaway virtual environment ``/tmp/peer_rg`` (``torch==2.13.0``, ``numpy``) if
absent, then re-runs itself inside it with ``--peer``. Inputs: per case one "layer" — the
input ``X_in`` (``(S, H)``, some rank-deficient), ``X_attn = X_in + Δattn`` and ``X_ffn =
X_attn + Δffn`` — drawn from ``numpy.random.default_rng(SEED)`` in float64 and cast to float32
for the float32 cases; the authors' functions run on CPU torch tensors of that dtype.

Outputs: ``tests/data/residual_geometry/authors_fixture.npz`` (inputs ``<case>/x_in``,
``x_attn``, ``x_ffn`` in float64 — a float32 case casts them with ``astype`` —, outputs
``<case>/<dtype>/<name>`` as float64) and ``authors_fixture.json`` (commit, seed, versions, cases). torch is never a
dependency of fidia_jax: only this script and its venv use it.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys

import _peer  # tools/_peer.py (this script's folder is on sys.path)

VENV = pathlib.Path("/tmp/peer_rg")
ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "tests" / "data" / "residual_geometry"
REPO = "Lrbomchz/vlms_lost_in_attn"
COMMIT = "2ca01fdd2ddf4047dc47f6ce4a116d22c1142f3d"
SEED = 20261204
#: (name, S tokens, H features, rank of X_in (None: full), scale of the entries)
CASES = [
    ("wide_full", 8, 16, None, 1.0),
    ("tall_full", 16, 8, None, 1.0),
    ("rank4", 12, 10, 4, 1.0),
    ("wide_rank2", 6, 24, 2, 3.0),
    ("square_rank3_large", 10, 10, 3, 250.0),
    ("rescale", 9, 12, None, 1.0),  # X_attn = 1.5 X_in: ΔD of attention ≈ 0 (cancellation)
]
DTYPES = ("float32", "float64")


def make_venv() -> pathlib.Path:
    return _peer.make_venv(VENV, ["torch==2.13.0", "numpy"])


def _layer(rng, s, h, rank, scale, name):
    """(X_in, X_attn, X_ffn) float64: a residual, an attention-like and a token-wise update."""
    import numpy as np

    if rank is None:
        x = rng.normal(size=(s, h))
    else:
        x = rng.normal(size=(s, rank)) @ rng.normal(size=(rank, h)) / np.sqrt(rank)
    x = scale * x
    if name == "rescale":
        d_attn = 0.5 * x
    else:  # token mixing of x (inside its column space) plus a new direction
        mix = np.tril(rng.uniform(size=(s, s)))
        mix /= mix.sum(axis=1, keepdims=True)
        d_attn = 0.7 * mix @ x + 0.3 * scale * rng.normal(size=(s, h))
    x_attn = x + d_attn
    w = rng.normal(size=(h, h)) / np.sqrt(h)
    d_ffn = scale * np.tanh(x_attn @ w / scale)
    return x, x_attn, x_attn + d_ffn


def peer(authors_dir: str) -> None:
    import numpy as np
    import torch

    sys.path.insert(0, str(pathlib.Path(authors_dir).resolve()))
    from utils import interp_utils as au  # the authors' module, from the checkout

    rng = np.random.default_rng(SEED)
    out: dict[str, np.ndarray] = {}
    for name, s, h, rank, scale in CASES:
        layer64 = _layer(rng, s, h, rank, scale, name)
        for dt in DTYPES:
            key = f"{name}/{dt}"
            tdt = getattr(torch, dt)
            hid = [torch.tensor(a.astype(dt), dtype=tdt) for a in layer64]
            if dt == "float64":  # the float32 inputs are these cast (round to nearest)
                for part, a in zip(("x_in", "x_attn", "x_ffn"), layer64, strict=True):
                    out[f"{name}/{part}"] = a
            out[f"{key}/erank"] = au.compute_eranks_for_hiddens(hid).double().numpy()
            out[f"{key}/matrix_rank_x_in"] = np.float64(torch.linalg.matrix_rank(hid[0]).item())
            for combine in ("l2", "sum"):
                nov = au.novelty_from_hiddens_96(hid, combine=combine)
                out[f"{key}/novelty_{combine}"] = nov.double().numpy()
            out[f"{key}/tme_delta"] = au.tme_delta_2xnlayer(hid).double().numpy()
            out[f"{key}/tme_state"] = au.tme_state_3xnlayer(hid).double().numpy()
            d_attn = hid[1] - hid[0]
            for label, kw in (
                ("mean", {"agg": "mean"}),
                ("relu", {"mode": "relu"}),
                ("alpha1", {"alpha": 1.0}),
                ("mean_alpha1_raw", {"agg": "mean", "alpha": 1.0, "normalize": False}),
            ):
                out[f"{key}/tme_attn_{label}"] = np.float64(au.tme_hidden(d_attn, **kw).item())
    # the degenerate input: X_in = 0 (the authors' rank-0 branch returns an unnormalised norm)
    x_attn = rng.normal(size=(5, 7))
    zero = [np.zeros((5, 7)), x_attn, x_attn + rng.normal(size=(5, 7))]
    hid = [torch.tensor(a) for a in zero]
    for part, a in zip(("x_in", "x_attn", "x_ffn"), zero, strict=True):
        out[f"zero_input/{part}"] = a
    out["zero_input/float64/novelty_l2"] = au.novelty_from_hiddens_96(hid).double().numpy()
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT_DIR / "authors_fixture.npz", **out)
    from importlib.metadata import version

    meta = {
        "repository": f"https://github.com/{REPO}",
        "commit": COMMIT,
        "file": "utils/interp_utils.py",
        "functions": [
            "compute_eranks_for_hiddens",
            "novelty_from_hiddens_96",
            "tme_delta_2xnlayer",
            "tme_state_3xnlayer",
            "tme_hidden",
        ],
        "seed": SEED,
        "cases": [{"name": n, "S": s, "H": h, "rank": r, "scale": sc} for n, s, h, r, sc in CASES],
        "dtypes": list(DTYPES),
        "versions": {"torch": version("torch"), "numpy": version("numpy")},
        "python": sys.version.split()[0],
        "script": "tools/residual_geometry_make_fixture.py",
    }
    (OUT_DIR / "authors_fixture.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUT_DIR / 'authors_fixture.npz'} ({len(out)} arrays)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--authors-dir", required=True, help="checkout of Lrbomchz/vlms_lost_in_attn"
    )
    parser.add_argument("--peer", action="store_true", help="(internal) run inside the venv")
    args = parser.parse_args()
    src = pathlib.Path(args.authors_dir) / "utils" / "interp_utils.py"
    if not src.is_file():
        sys.exit(f"--authors-dir: {src} not found (a checkout of {REPO} @ {COMMIT[:12]})")
    if args.peer:
        peer(args.authors_dir)
        return
    py = make_venv()
    subprocess.run(
        [
            str(py),
            __file__,
            "--peer",
            "--authors-dir",
            str(pathlib.Path(args.authors_dir).resolve()),
        ],
        check=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        cwd="/tmp",
    )


if __name__ == "__main__":
    main()
