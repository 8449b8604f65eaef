"""Builds the PASO fidelity fixture from the authors' code (tests/data/paso/).

Authors' code: github.com/Jianrong-Lu/PASO at commit
``31f368c5ab001c14d90f17640905b09479fae5ac`` (2025-11-20), ``optex_cmp.py``:
``run_paso_synthetic_core`` (the adaptive PASO loop, one gradient worker process),
``sphere_function``, ``rosenbrock_function``, ``Config``, ``ModelWrapper``, ``ThetaModel`` and
``optimizer_state_clone``.

Usage (from the repository root)::

  python tools/paso_make_fixture.py --authors-dir /tmp/authors_paso

``--authors-dir`` is a checkout of that repository (e.g. ``git --git-dir=<mirror> archive HEAD |
tar -x -C /tmp/authors_paso``). The script creates a throwaway virtual environment
``/tmp/peer_scale_paso`` (``torch==2.13.0``, ``numpy``, ``matplotlib``, ``tqdm``: what
``optex_cmp.py`` imports) if absent and re-runs itself inside it with ``--peer``. ``optex_cmp``
also imports the OptEx baseline (``optex/``, which needs ``gpytorch``); PASO does not use it, so
an empty ``optex`` module with a placeholder ``OptEx`` class is registered first (also in the
spawned worker, through the environment variable ``PASO_FIXTURE_AUTHORS``).

For each case (sphere and Rosenbrock; SGD, SGD with momentum 0.9, Adam; d = 16, T = 60,
window P = 8, the authors' ``Config`` defaults threshold 1e-5, EMA 0.999, ``"median"``; plus
Rosenbrock with SGD at lr 1e-3, where the authors' loop ends NaN and sequential SGD does not) it
runs
``run_paso_synthetic_core`` on CPU with ``devices=["cpu", "cpu"]`` (one master, one gradient
worker) twice:

* ``shared``: the authors' code as is. ``optimizer_state_clone`` is
  ``b.load_state_dict(a.state_dict())``, which in this torch keeps references to ``a``'s state
  tensors (checked below and recorded as ``load_state_dict_shares_tensors``), so the next
  window starts from the optimiser state at the end of the sweep;
* ``copied``: ``optex_cmp.optimizer_state_clone`` replaced by the same call on a
  ``copy.deepcopy`` of the state dict (the clone its name promises).

The loop's locals at its return (``total_iters``, ``total_Grad``, ``thresh``, ``models[T]``) are
read with ``sys.settrace`` (the function returns only the loss history). A plain sequential
torch run of the same optimiser is stored as well.

Outputs: ``tests/data/paso/authors_paso.npz`` (per case: initial theta, final theta of both
semantics and of the sequential run) and ``tests/data/paso/authors_paso.json`` (commit, seed,
cases with K, gradient count and final threshold per semantics, versions).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import pathlib
import subprocess
import sys
import types

import _peer  # tools/_peer.py (this script's folder is on sys.path)

VENV = pathlib.Path("/tmp/peer_scale_paso")
ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "tests" / "data" / "paso"
COMMIT = "31f368c5ab001c14d90f17640905b09479fae5ac"
SEED = 20261204
D = 16
T = 60
P = 8
THRESHOLD = 1e-5  # the authors' Config defaults
EMA = 0.999
ADAPTIVITY = "median"
#: (case name, function, optimiser, momentum, lr); theta0 ~ U(-1, 1)^D as in the authors' main.
#: The last case is one where the authors' loop ends NaN while sequential SGD stays finite.
CASES = [
    ("sphere/sgd", "sphere", "sgd", 0.0, 0.05),
    ("sphere/momentum", "sphere", "sgd", 0.9, 0.01),
    ("sphere/adam", "sphere", "adam", 0.0, 0.01),
    ("rosenbrock/sgd", "rosenbrock", "sgd", 0.0, 2e-4),
    ("rosenbrock/momentum", "rosenbrock", "sgd", 0.9, 5e-5),
    ("rosenbrock/adam", "rosenbrock", "adam", 0.0, 1e-2),
    ("rosenbrock/sgd_diverging", "rosenbrock", "sgd", 0.0, 1e-3),
]

if os.environ.get("PASO_FIXTURE_AUTHORS"):  # peer process and its spawned worker
    sys.path.insert(0, os.environ["PASO_FIXTURE_AUTHORS"])
    _optex = types.ModuleType("optex")

    class _OptExPlaceholder:  # the OptEx baseline is not used by run_paso_synthetic_core
        pass

    _optex.OptEx = _OptExPlaceholder
    sys.modules.setdefault("optex", _optex)


def make_venv() -> pathlib.Path:
    return _peer.make_venv(VENV, ["torch==2.13.0", "numpy", "matplotlib", "tqdm"])


def _shares(torch) -> bool:
    a_p = torch.nn.Parameter(torch.ones(3))
    b_p = torch.nn.Parameter(torch.ones(3))
    a = torch.optim.SGD([a_p], lr=0.1, momentum=0.9)
    b = torch.optim.SGD([b_p], lr=0.1, momentum=0.9)
    a_p.grad = torch.ones(3)
    a.step()
    b.load_state_dict(a.state_dict())
    return b.state[b_p]["momentum_buffer"] is a.state[a_p]["momentum_buffer"]


def _run_authors(oc, torch, fn, opt, mom, lr, theta0):
    config = oc.Config()
    config.update(T, lr, opt, ["cpu", "cpu"])
    config.P, config.threshold, config.ema_decay = P, THRESHOLD, EMA
    config.adaptivity_type, config.momentum, config.seed = ADAPTIVITY, mom, SEED
    model = oc.ModelWrapper(oc.ThetaModel(D, "cpu"))
    model.model.theta.data = torch.tensor(theta0)
    captured = {}
    target = oc.run_paso_synthetic_core.__code__

    def local(frame, event, arg):
        if event == "return":
            loc = frame.f_locals
            captured["K"] = int(loc["total_iters"])
            captured["grads"] = int(loc["total_Grad"])
            captured["thresh"] = float(loc["thresh"])
            final = loc["models"][T].get_params()[0]
            captured["theta"] = final.detach().numpy().copy()
        return local

    def tracer(frame, event, arg):
        if frame.f_code is target:
            frame.f_trace_lines = False
            return local
        return None

    sys.settrace(tracer)
    try:
        losses = oc.run_paso_synthetic_core(
            config, model, getattr(oc, f"{fn}_function"), ["cpu"] * 2
        )
    finally:
        sys.settrace(None)
    assert len(losses) == captured["K"]
    return captured


def _sequential(torch, fn_torch, opt, mom, lr, theta0):
    theta = torch.nn.Parameter(torch.tensor(theta0))
    if opt == "sgd":
        o = torch.optim.SGD([theta], lr=lr, momentum=mom)
    else:
        o = torch.optim.Adam([theta], lr=lr)
    for _ in range(T):
        o.zero_grad()
        fn_torch(theta).backward()
        o.step()
    return theta.detach().numpy().copy()


def peer(authors: pathlib.Path) -> None:
    import numpy as np
    import optex_cmp as oc
    import torch

    rng = np.random.default_rng(SEED)
    out, cases = {}, {}
    for name, fn, opt, mom, lr in CASES:
        theta0 = rng.uniform(-1.0, 1.0, D).astype(np.float32)
        out[f"{name}/theta0"] = theta0
        record = {"function": fn, "optimizer": opt, "momentum": mom, "lr": lr}
        original = oc.optimizer_state_clone
        for semantics in ("shared", "copied"):
            if semantics == "copied":
                oc.optimizer_state_clone = lambda a, b: b.load_state_dict(
                    copy.deepcopy(a.state_dict())
                )
            try:
                r = _run_authors(oc, torch, fn, opt, mom, lr, theta0)
            finally:
                oc.optimizer_state_clone = original
            out[f"{name}/{semantics}/theta"] = r.pop("theta")
            record[semantics] = r
        out[f"{name}/sequential/theta"] = seq = _sequential(
            torch, getattr(oc, f"{fn}_function"), opt, mom, lr, theta0
        )
        record["sequential_finite"] = bool(np.isfinite(seq).all())
        for semantics in ("shared", "copied"):
            record[semantics]["finite"] = bool(np.isfinite(out[f"{name}/{semantics}/theta"]).all())
        cases[name] = record
        print(name, record, flush=True)

    OUT_DIR.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT_DIR / "authors_paso.npz", **out)
    from importlib.metadata import version

    meta = {
        "repository": "github.com/Jianrong-Lu/PASO",
        "commit": COMMIT,
        "files": ["optex_cmp.py::run_paso_synthetic_core"],
        "devices": ["cpu", "cpu"],
        "seed": SEED,
        "d": D,
        "T": T,
        "P": P,
        "threshold": THRESHOLD,
        "ema_decay": EMA,
        "adaptivity": ADAPTIVITY,
        "load_state_dict_shares_tensors": _shares(torch),
        "cases": cases,
        "versions": {pkg: version(pkg) for pkg in ("torch", "numpy")},
        "python": sys.version.split()[0],
    }
    (OUT_DIR / "authors_paso.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    print("wrote", OUT_DIR)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--authors-dir", type=pathlib.Path, required=True)
    parser.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    authors = args.authors_dir.resolve()
    if not (authors / "optex_cmp.py").exists():
        raise SystemExit(f"{authors} is not a checkout of Jianrong-Lu/PASO")
    if args.peer:
        peer(authors)
        return
    py = make_venv()
    env = dict(os.environ, PASO_FIXTURE_AUTHORS=str(authors))
    subprocess.run(
        [str(py), str(pathlib.Path(__file__).resolve()), "--peer", "--authors-dir", str(authors)],
        check=True,
        env=env,
    )


if __name__ == "__main__":
    main()
