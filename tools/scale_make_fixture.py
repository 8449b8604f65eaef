"""Builds the SCALE fidelity fixture from the authors' code (tests/data/scale/).

Authors' code: github.com/OptimAI-Lab/Minimalist_LLM_Pretraining at commit
``f5bd4e754eb9c0b43f2b01330adeebe2d9b28fd3`` (2025-07-12):
``mem_eff_pt/pt_scale/scale_optimizer.py`` (the ``SCALE`` optimiser),
``mem_eff_pt/utils/train_utils.py::build_optimizer`` (the parameter split) and
``mem_eff_pt/eff_pretraining/training_utils.py::get_cyclical_cosine_schedule_with_min_lr``
(the training script's default ``--scheduler cosine``).

Usage (from the repository root; nothing is downloaded at run time except the venv's wheels)::

  python tools/scale_make_fixture.py --authors-dir /tmp/authors_scale

``--authors-dir`` is a checkout of that repository (e.g. ``git --git-dir=<mirror> archive HEAD |
tar -x -C /tmp/authors_scale``). The script creates a throwaway virtual environment
``/tmp/peer_scale_paso`` (``torch==2.13.0``, ``numpy``) if absent and re-runs itself inside it
with ``--peer``. There it loads the three files above from the checkout (the package
``__init__`` files import ``transformers`` and ``loguru``, which these functions do not use:
the two modules are loaded by file path, and ``transformers`` is replaced by an empty module),
builds a tiny PyTorch model whose module names route every parameter group of
``build_optimizer``:

* ``model.embed_tokens`` (``nn.Embedding(11, 6)``): "main", column norm over the vocabulary;
* ``model.layers.0.mlp.up_proj`` (``nn.Linear(6, 9)``): weight "main" (norm over fan-in), bias
  1-D AdamW;
* ``model.norm`` (``nn.LayerNorm(6)``): weight and bias 1-D AdamW;
* ``lm_head`` (``nn.Linear(6, 11, bias=False)``): "secondary" (last-layer momentum);

and runs 12 ``optimizer.step()`` + ``scheduler.step()`` with seeded gradients scaled by 1e-4,
one token row of the embedding gradient and one output row of ``up_proj.weight``'s gradient
zero at every step, and one zero entry of the bias gradient, weight decay 0.1, momentum 0.9,
``lr = 1e-3``, ``adam_lr = 2e-2`` (the script's default), warm-up 3 of 12 steps, min ratio 0.1,
in float32 and in float64.

Outputs: ``tests/data/scale/authors_scale.npz`` (PyTorch layout: initial parameters and the
gradients of every step, float32 values used for both dtypes; the learning rate of the matrices and of the 1-D AdamW at every step,
the parameters after step 5 and after the last step, per dtype) and
``tests/data/scale/authors_scale.json`` (commit, seed, hyperparameters, versions). torch is never
a dependency of fidia_jax: only this script and its venv use it.
"""

from __future__ import annotations

import json
import pathlib
import sys

import _peer  # tools/_peer.py (this script's folder is on sys.path)

VENV = pathlib.Path("/tmp/peer_scale_paso")
ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "tests" / "data" / "scale"
COMMIT = "f5bd4e754eb9c0b43f2b01330adeebe2d9b28fd3"
SEED = 20261204
STEPS = 12
SAVE_AFTER = (5, STEPS)
HYPER = {
    "lr": 1e-3,
    "adam_lr": 2e-2,
    "weight_decay": 0.1,
    "momentum": 0.9,
    "adam_beta_1": 0.9,
    "adam_beta_2": 0.999,
    "adamw_eps": 1e-8,
    "warmup_steps": 3,
    "num_training_steps": STEPS,
    "min_lr_ratio": 0.1,
    "grad_scale": 1e-4,
    "zero_embedding_row": 4,
    "zero_up_proj_row": 2,
    "zero_bias_entry": 7,
}
V, C, H = 11, 6, 9


def make_venv() -> pathlib.Path:
    return _peer.make_venv(VENV, ["torch==2.13.0", "numpy"])


def _load(name: str, path: pathlib.Path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _authors_modules(authors: pathlib.Path):
    import types

    # Bare package objects so that `from mem_eff_pt.pt_scale import SCALE` resolves without
    # running the package __init__ files (they import the LLaMA model, hence transformers).
    for pkg in ("mem_eff_pt", "mem_eff_pt.pt_scale", "mem_eff_pt.eff_pretraining"):
        m = types.ModuleType(pkg)
        m.__path__ = [str(authors / pkg.replace(".", "/"))]
        sys.modules[pkg] = m
    sys.modules.setdefault("transformers", types.ModuleType("transformers"))
    so = _load(
        "mem_eff_pt.pt_scale.scale_optimizer", authors / "mem_eff_pt/pt_scale/scale_optimizer.py"
    )
    sys.modules["mem_eff_pt.pt_scale"].SCALE = so.SCALE
    tu = _load("mem_eff_pt.utils.train_utils", authors / "mem_eff_pt/utils/train_utils.py")
    sched = _load(
        "mem_eff_pt.eff_pretraining.training_utils",
        authors / "mem_eff_pt/eff_pretraining/training_utils.py",
    )
    return tu, sched


def peer(authors: pathlib.Path) -> None:
    import argparse as ap

    import numpy as np
    import torch
    from torch import nn

    tu, sched_mod = _authors_modules(authors)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.mlp = nn.Module()
            self.mlp.up_proj = nn.Linear(C, H)

    class Inner(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(V, C)
            self.layers = nn.ModuleList([Block()])
            self.norm = nn.LayerNorm(C)

    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = Inner()
            self.lm_head = nn.Linear(C, V, bias=False)

    names = [
        "model.embed_tokens.weight",
        "model.layers.0.mlp.up_proj.weight",
        "model.layers.0.mlp.up_proj.bias",
        "model.norm.weight",
        "model.norm.bias",
        "lm_head.weight",
    ]
    rng = np.random.default_rng(SEED)
    shapes = {
        "model.embed_tokens.weight": (V, C),
        "model.layers.0.mlp.up_proj.weight": (H, C),
        "model.layers.0.mlp.up_proj.bias": (H,),
        "model.norm.weight": (C,),
        "model.norm.bias": (C,),
        "lm_head.weight": (V, C),
    }
    # float32 values (exact in float64 too), shared by both dtypes and stored once.
    init = {n: rng.standard_normal(shapes[n]) for n in names}
    init["model.norm.weight"] = 1.0 + 0.1 * init["model.norm.weight"]
    init = {n: v.astype(np.float32) for n, v in init.items()}
    grads = {
        n: (rng.standard_normal((STEPS, *shapes[n])) * HYPER["grad_scale"]).astype(np.float32)
        for n in names
    }
    grads["model.embed_tokens.weight"][:, HYPER["zero_embedding_row"]] = 0.0
    grads["model.layers.0.mlp.up_proj.weight"][:, HYPER["zero_up_proj_row"]] = 0.0
    grads["model.layers.0.mlp.up_proj.bias"][:, HYPER["zero_bias_entry"]] = 0.0

    out: dict[str, np.ndarray] = {}
    for n in names:
        out[f"init/{n}"], out[f"grads/{n}"] = init[n], grads[n]
    groups = {}
    for dname, dtype, npdt in (
        ("float32", torch.float32, np.float32),
        ("float64", torch.float64, np.float64),
    ):
        model = Tiny().to(dtype)
        params = dict(model.named_parameters())
        assert sorted(params) == sorted(names), sorted(params)
        with torch.no_grad():
            for n in names:
                params[n].copy_(torch.tensor(init[n].astype(npdt)))
        args = ap.Namespace(
            optimizer="scale",
            lr=HYPER["lr"],
            weight_decay=HYPER["weight_decay"],
            debug=False,
            momentum=HYPER["momentum"],
            adam_lr=HYPER["adam_lr"],
            adam_beta_1=HYPER["adam_beta_1"],
            adam_beta_2=HYPER["adam_beta_2"],
        )
        opt = tu.build_optimizer(model, list(model.parameters()), args)
        groups = {
            params_name: opt.state[params[params_name]]["param_type"] for params_name in names
        }
        scheduler = sched_mod.get_scheculer(
            opt,
            scheduler_type="cosine",
            num_training_steps=HYPER["num_training_steps"],
            warmup_steps=HYPER["warmup_steps"],
            min_lr_ratio=HYPER["min_lr_ratio"],
        )
        lrs, adam_lrs = [], []
        for t in range(STEPS):
            for n in names:
                g = grads[n][t].astype(npdt)
                params[n].grad = torch.tensor(g)
            group_lr = opt.param_groups[0]["lr"]
            lrs.append(group_lr)
            adam_lrs.append(opt.param_groups[0]["adam_lr"] / opt.max_lr * group_lr)
            opt.step()
            scheduler.step()
            if t + 1 in SAVE_AFTER:
                for n in names:
                    out[f"{dname}/after{t + 1}/{n}"] = params[n].detach().numpy().copy()
        out[f"{dname}/lr"] = np.asarray(lrs, np.float64)
        out[f"{dname}/adam_lr"] = np.asarray(adam_lrs, np.float64)

    OUT_DIR.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT_DIR / "authors_scale.npz", **out)
    from importlib.metadata import version

    meta = {
        "repository": "github.com/OptimAI-Lab/Minimalist_LLM_Pretraining",
        "commit": COMMIT,
        "files": [
            "mem_eff_pt/pt_scale/scale_optimizer.py",
            "mem_eff_pt/utils/train_utils.py::build_optimizer",
            "mem_eff_pt/eff_pretraining/training_utils.py::get_scheculer(cosine)",
        ],
        "seed": SEED,
        "steps": STEPS,
        "saved_after": list(SAVE_AFTER),
        "hyperparameters": HYPER,
        "parameter_groups": groups,
        "layout": "PyTorch: Linear weight (out, in), Embedding (vocab, features)",
        "versions": {pkg: version(pkg) for pkg in ("torch", "numpy")},
        "python": sys.version.split()[0],
    }
    (OUT_DIR / "authors_scale.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    print("wrote", OUT_DIR, groups)


def main() -> None:
    _peer.authors_main(
        __doc__,
        __file__,
        repo="OptimAI-Lab/Minimalist_LLM_Pretraining",
        marker="mem_eff_pt/pt_scale/scale_optimizer.py",
        peer=peer,
        venv=make_venv,
    )


if __name__ == "__main__":
    main()
