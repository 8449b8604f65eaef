"""Builds the PyLDL parity fixture of the LDL-DVS primitives (tests/data/ldl/pyldl_parity.npz).

Usage (from the repository root)::

  python tools/ldl_make_fixture.py            # makes /tmp/peer_ldl if absent, then the fixture

It creates a throwaway virtual environment ``/tmp/peer_ldl`` (``torch==2.13.0``, ``python-ldl
0.1.2`` without its optional solvers, ``keras``, ``numpy``, ``scipy``, ``scikit-learn``), then
re-runs itself inside it with ``--peer`` and ``KERAS_BACKEND=torch``. There, on seeded random
label distributions (some with exact zeros), it evaluates the authors' code:

* ``LDL_DVS._psi`` (smooth divisiveness), ``LDL_DVS.dvs`` (mode "full"), ``LDL_DVS._ovo_dvs``
  (mode "ovo"), the symmetric ovo variant assembled from ``LDL_DVS.dvs`` per label pair, the
  Keras KL term and the full ``KL + alpha * ovo`` objective, and its gradient with respect to
  the logits of a softmax prediction (torch autograd);
* ``pyldl.metrics``: chebyshev, clark, canberra, kl_divergence, cosine, intersection,
  divisiveness_error.

Outputs: ``tests/data/ldl/pyldl_parity.npz`` (inputs and values, float64) and
``tests/data/ldl/pyldl_parity.json`` (package versions, seed). torch is never a dependency of
fidia_jax: only this script and its venv use it.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess

import _peer  # tools/_peer.py (this script's folder is on sys.path)

VENV = pathlib.Path("/tmp/peer_ldl")
ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "tests" / "data" / "ldl"
SEED = 20261130
#: (name, pos, neg): PyLDL presets of three data sets with 6, 9 and 5 labels.
CASES = [
    ("SJAFFE", [1.0, 0.0, 1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 1.0, 1.0, 1.0]),
    (
        "Music",
        [1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.5, 0.5],
        [0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.5, 0.5],
    ),
    ("M2B", [0.0, 0.25, 0.5, 0.75, 1.0], [1.0, 0.75, 0.5, 0.25, 0.0]),
]
N_ROWS = 24
KS = (10.0, 3.0)
ALPHA = 0.1


def make_venv() -> pathlib.Path:
    return _peer.make_venv(
        VENV,
        ["torch==2.13.0"],
        ["--no-deps", "python-ldl==0.1.2"],
        ["keras", "numpy", "scipy", "scikit-learn"],
    )


def _inputs(rng, c):
    import numpy as np

    d = rng.dirichlet(np.full(c, 0.7), size=N_ROWS)
    logits = rng.normal(size=(N_ROWS, c)) * 1.5
    # exact zeros: rows 0-3 of the target, rows 2-5 of the "metric prediction" (rows 2, 3 share
    # a zero label: the 0/0 case of Clark and Canberra; rows 4, 5: zero prediction, KL clipped).
    for r in range(4):
        d[r, r % c] = 0.0
        d[r] /= d[r].sum()
    p_metric = rng.dirichlet(np.full(c, 0.7), size=N_ROWS)
    for r in range(2, 6):
        p_metric[r, (r if r < 4 else r + 1) % c] = 0.0
        p_metric[r] /= p_metric[r].sum()
    return d.astype(np.float32), logits.astype(np.float32), p_metric


def peer() -> None:
    import keras
    import numpy as np
    import pyldl.metrics as metrics
    import torch
    from pyldl.algorithms import LDL_DVS

    rng = np.random.default_rng(SEED)
    out: dict[str, np.ndarray] = {}
    for name, pos, neg in CASES:
        c = len(pos)
        pos = np.asarray(pos, np.float32)
        neg = np.asarray(neg, np.float32)
        d, logits, p_metric = _inputs(rng, c)
        out[f"{name}/pos"], out[f"{name}/neg"] = pos, neg
        out[f"{name}/d"], out[f"{name}/logits"], out[f"{name}/p_metric"] = d, logits, p_metric
        z = torch.tensor(logits, requires_grad=True)
        p = torch.softmax(z, dim=1)
        out[f"{name}/p"] = p.detach().numpy()
        dt = torch.tensor(d)
        for k in KS:
            psi_d = LDL_DVS._psi(dt, pos, neg, k)
            out[f"{name}/k{k:g}/psi_d"] = psi_d.numpy()
            out[f"{name}/k{k:g}/full"] = float(LDL_DVS.dvs(psi_d, p, pos, neg, k))
            out[f"{name}/k{k:g}/ovo"] = float(LDL_DVS._ovo_dvs(psi_d, p, pos, neg, k))
            sym = 0.0
            for i in range(c):
                for j in range(c):
                    if i != j:
                        pi = np.eye(c, dtype=np.float32)[i] * pos
                        nj = np.eye(c, dtype=np.float32)[j] * neg
                        sym += float(LDL_DVS.dvs(LDL_DVS._psi(dt, pi, nj, k), p, pi, nj, k))
            out[f"{name}/k{k:g}/ovo_symmetric"] = sym / (c * (c - 1))
        kl = torch.mean(keras.losses.kl_divergence(dt, p))
        out[f"{name}/kl_loss"] = float(kl)
        total = kl + ALPHA * LDL_DVS._ovo_dvs(LDL_DVS._psi(dt, pos, neg, 10.0), p, pos, neg, 10.0)
        (grad,) = torch.autograd.grad(total, [z])
        out[f"{name}/total_loss"] = float(total)
        out[f"{name}/total_grad_logits"] = grad.numpy()
        u = d.astype(np.float64)
        for metric in ("chebyshev", "clark", "canberra", "kl_divergence", "cosine", "intersection"):
            out[f"{name}/metric/{metric}"] = float(getattr(metrics, metric)(u, p_metric))
        out[f"{name}/metric/divisiveness_error"] = float(
            metrics.divisiveness_error(u, p_metric, pos=pos, neg=neg)
        )
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        OUT_DIR / "pyldl_parity.npz", **{k: np.asarray(v, np.float64) for k, v in out.items()}
    )
    from importlib.metadata import version

    meta = {
        "seed": SEED,
        "alpha": ALPHA,
        "ks": list(KS),
        "rows": N_ROWS,
        "cases": [name for name, _, _ in CASES],
        "keras_backend": keras.backend.backend(),
        "versions": {
            pkg: version(pkg) for pkg in ("python-ldl", "keras", "torch", "numpy", "scikit-learn")
        },
        "script": "tools/ldl_make_fixture.py",
    }
    (OUT_DIR / "pyldl_parity.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUT_DIR / 'pyldl_parity.npz'} ({len(out)} arrays)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", action="store_true", help="(internal) run inside the venv")
    args = parser.parse_args()
    if args.peer:
        peer()
        return
    py = make_venv()
    env = {**os.environ, "KERAS_BACKEND": "torch"}
    subprocess.run([str(py), __file__, "--peer"], check=True, env=env, cwd="/tmp")


if __name__ == "__main__":
    main()
