"""Builds the T-JEPA fidelity fixture (tests/data/tjepa/tjepa_reference.{npz,json}).

Authors' code: github.com/jose-melo/t-jepa at commit 98dda991dd5e5d12266b3557aa80a33c4e0a6606
(the T-JEPA baseline of Var-JEPA). Usage, from the repository root, with a checkout of that
commit (nothing is downloaded at run time)::

  python tools/tjepa_make_fixture.py --authors-dir /tmp/authors_tjepa

It creates a throwaway virtual environment ``/tmp/peer_tjepa`` (``torch==2.13.0``, ``numpy``) if
absent, then re-runs itself inside it with ``--peer``. There it imports, from the checkout:

* ``src/mask.py``: ``MaskCollator``, called on seeded batches (its own counter seeds the size
  draws, numpy's global RNG the masks) for several feature counts and share ranges; recorded per
  call: the context and target sizes, the masks (as booleans), and the ``torch.rand(1)`` stream
  of a ``torch.Generator`` seeded with the call index (the uniforms its size rule consumed);
* ``src/utils/train_utils.py``: ``apply_masks_from_idx``; with the loss object built by the
  expression ``self.loss_fn = ...`` of ``Trainer.__init__`` in ``src/train.py`` (read from the
  file with ``ast`` and evaluated), the loss of the transformer predictor path
  (``loss_fn(z, apply_masks_from_idx(h, masks_pred))``) on fixed seeded tensors;
* ``run.py``: the generator expression assigned to ``momentum_scheduler`` in ``main`` (read with
  ``ast`` and evaluated) for several ``(ema_start, ema_end, ipe, epochs, ipe_scale)``.

Stubs (modules that the imported files import but the used functions never touch):
``tabulate`` (``MaskCollator.print_params`` only prints a table), ``scipy.stats`` (``gaussian_kde``
is used only by ``train_utils.get_dist``, a logging metric), and the ``src.utils`` package
``__init__`` (it star-imports checkpointing / encoding modules with further dependencies; the
two submodules used are loaded from their files).

Outputs: ``tests/data/tjepa/tjepa_reference.npz`` and ``tjepa_reference.json`` (versions, commit,
seeds, cases). torch is never a dependency of fidia_jax: only this script and its venv use it.
"""

from __future__ import annotations

import ast
import json
import pathlib
import sys
import types

import _peer  # tools/_peer.py (this script's folder is on sys.path)

VENV = pathlib.Path("/tmp/peer_tjepa")
ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "tests" / "data" / "tjepa"
COMMIT = "98dda991dd5e5d12266b3557aa80a33c4e0a6606"
SEED = 20261204
#: (F, min_share, max_share): Adult (14), breast_cancer (30), digits (64) at the authors'
#: default shares; 10 (exact products); 25 / (0.1, 0.3): halves (2.5 -> 2, 7.5 -> 8);
#: 5 / (0.2, 0.6) and 7 / (0.3, 0.6): pairs that overflow the row and are redrawn.
SIZE_CASES = [
    (14, 0.2, 0.4),
    (30, 0.2, 0.4),
    (64, 0.2, 0.4),
    (10, 0.2, 0.4),
    (25, 0.1, 0.3),
    (5, 0.2, 0.6),
    (7, 0.3, 0.6),
]
N_CALLS = 48
BATCH = 6
N_PREDS = 4
N_UNIFORMS = 16  # 8 candidate pairs; a pair is redrawn with probability <= 1/16 here
N_MASK_CALLS = 8  # calls whose masks are stored
#: (ema_start, ema_end, ipe, epochs, ipe_scale)
EMA_CASES = [
    (0.996, 1.0, 10, 3, 1.0),
    (0.99, 0.999, 7, 2, 1.25),
    (0.9, 1.0, 5, 1, 1.0),
    (0.996, 0.996, 4, 2, 1.0),
]
LOSS_SHAPE = {"B": 5, "F": 9, "D": 6, "M": 4, "n_t": 3}


def make_venv() -> pathlib.Path:
    return _peer.make_venv(VENV, ["torch==2.13.0", "numpy"])


def _expression(path: pathlib.Path, target: str) -> ast.expr:
    """The value expression of the first assignment to ``target`` (a name or ``self.attr``)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            t = node.targets[0]
            name = t.id if isinstance(t, ast.Name) else getattr(t, "attr", None)
            if name == target:
                return node.value
    raise SystemExit(f"no assignment to {target!r} in {path}")


#: Command-line options of the authors' ``src/configs.py`` whose defaults our config mirrors.
DEFAULT_OPTIONS = (
    "--model_ema_start",
    "--model_ema_end",
    "--exp_ipe_scale",
    "--mask_min_ctx_share",
    "--mask_max_ctx_share",
    "--mask_min_trgt_share",
    "--mask_max_trgt_share",
    "--mask_num_preds",
    "--mask_num_encs",
    "--mask_allow_overlap",
    "--pred_type",
)


def _option_defaults(path: pathlib.Path) -> dict:
    """``default=`` of the ``add_argument`` calls for :data:`DEFAULT_OPTIONS` (read with ast)."""
    found = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", None) == "add_argument"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in DEFAULT_OPTIONS
        ):
            for kw in node.keywords:
                if kw.arg == "default":
                    found[node.args[0].value.lstrip("-")] = ast.literal_eval(kw.value)
    return found


def _load_authors(authors: pathlib.Path):
    import importlib.util

    sys.path.insert(0, str(authors))
    stub = types.ModuleType("tabulate")  # stub: print_params only prints a table
    stub.tabulate = lambda *a, **k: ""
    sys.modules["tabulate"] = stub
    scipy, stats = types.ModuleType("scipy"), types.ModuleType("scipy.stats")
    stats.gaussian_kde = None  # stub: used only by train_utils.get_dist (a logging metric)
    scipy.stats = stats
    sys.modules.update({"scipy": scipy, "scipy.stats": stats})
    src = types.ModuleType("src")  # stub package inits: their star-imports are unused here
    src.__path__ = [str(authors / "src")]
    utils = types.ModuleType("src.utils")
    utils.__path__ = [str(authors / "src" / "utils")]
    sys.modules.update({"src": src, "src.utils": utils})

    def load(name: str, rel: str):
        spec = importlib.util.spec_from_file_location(name, authors / rel)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod

    mask = load("src.mask", "src/mask.py")
    load("src.utils.log_utils", "src/utils/log_utils.py")
    train_utils = load("src.utils.train_utils", "src/utils/train_utils.py")
    return mask, train_utils


def peer(authors: pathlib.Path) -> None:
    import contextlib
    import io

    import numpy as np
    import torch

    mask_mod, train_utils = _load_authors(authors)
    out: dict[str, np.ndarray] = {}

    # 1. MaskCollator: sizes, the uniforms behind them, the masks.
    for ci, (f, lo_s, hi_s) in enumerate(SIZE_CASES):
        with contextlib.redirect_stdout(io.StringIO()):
            coll = mask_mod.MaskCollator(
                False, lo_s, hi_s, lo_s, hi_s, N_PREDS, 1, f, []
            )  # allow_overlap, ctx shares, target shares, num_preds, num_encs, F, cardinalities
        np.random.seed(SEED + ci)
        gen = torch.Generator().manual_seed(SEED + ci)
        sizes, uniforms = [], []
        ctx_masks = np.zeros((N_MASK_CALLS, BATCH, f), bool)
        tgt_masks = np.zeros((N_MASK_CALLS, N_PREDS, BATCH, f), bool)
        for call in range(N_CALLS):
            batch = [(torch.randn(f, generator=gen), 0) for _ in range(BATCH)]
            _, m_ctx, m_tgt = coll(batch)
            n_c, n_t = m_ctx[0].shape[1], m_tgt[0].shape[1]
            sizes.append((n_c, n_t))
            for b in range(BATCH if call < N_MASK_CALLS else 0):
                ctx_masks[call, b, m_ctx[0][b].numpy()] = True
                for m in range(N_PREDS):
                    tgt_masks[call, m, b, m_tgt[m][b].numpy()] = True
            g = torch.Generator()
            g.manual_seed(call)  # the collator seeds its generator with its call counter
            uniforms.append([torch.rand(1, generator=g).item() for _ in range(N_UNIFORMS)])
        out[f"sizes_{ci}"] = np.asarray(sizes, np.int32)
        out["uniforms"] = np.asarray(uniforms, np.float32)  # the same stream for every case
        out[f"bounds_{ci}"] = np.asarray(
            [coll.min_context, coll.max_context, coll.min_target, coll.max_target], np.int32
        )
        out[f"context_{ci}"] = ctx_masks
        out[f"targets_{ci}"] = tgt_masks

    # 2. The loss of the transformer predictor path.
    torch.manual_seed(SEED)
    s = LOSS_SHAPE
    h_full = torch.randn(s["B"], s["F"], s["D"])
    masks_pred = [
        torch.stack([torch.randperm(s["F"])[: s["n_t"]] for _ in range(s["B"])])
        for _ in range(s["M"])
    ]
    z = torch.randn(s["M"] * s["B"], s["n_t"], s["D"])
    loss_expr = _expression(authors / "src" / "train.py", "loss_fn")
    loss_fn = eval(compile(ast.Expression(loss_expr), "train.py", "eval"), {"torch": torch})
    h = train_utils.apply_masks_from_idx(h_full, masks_pred)
    out["loss_h_full"] = h_full.numpy()
    out["loss_masks_pred"] = torch.stack(masks_pred).numpy().astype(np.int32)
    out["loss_z"] = z.numpy()
    out["loss_value_f32"] = np.float32(loss_fn(z, h).item())
    out["loss_value_f64"] = np.float64(loss_fn(z.double(), h.double()).item())

    # 3. The EMA momentum schedule.
    sched = _expression(authors / "run.py", "momentum_scheduler")
    code = compile(ast.Expression(sched), "run.py", "eval")
    for ei, (start, end, ipe, epochs, scale) in enumerate(EMA_CASES):
        env = {
            "ema_start": start,
            "ema_end": end,
            "ipe": ipe,
            "num_epochs": epochs,
            "ipe_scale": scale,
        }  # fmt: skip  (globals: a generator sees no eval locals)
        out[f"ema_{ei}"] = np.asarray(list(eval(code, env)))

    np.savez_compressed(OUT_DIR / "tjepa_reference.npz", **out)
    meta = {
        "script": "tools/tjepa_make_fixture.py",
        "authors_repo": "github.com/jose-melo/t-jepa",
        "commit": COMMIT,
        "files": ["src/mask.py", "src/train.py", "src/utils/train_utils.py", "run.py"],
        "seed": SEED,
        "size_cases": SIZE_CASES,
        "calls": N_CALLS,
        "mask_calls": N_MASK_CALLS,
        "uniforms_per_call": N_UNIFORMS,
        "batch": BATCH,
        "num_preds": N_PREDS,
        "ema_cases": EMA_CASES,
        "loss_shape": LOSS_SHAPE,
        "authors_defaults": _option_defaults(authors / "src" / "configs.py"),
        "versions": {"torch": torch.__version__, "numpy": np.__version__},
    }
    (OUT_DIR / "tjepa_reference.json").write_text(json.dumps(meta, indent=1, sort_keys=True))
    print(f"wrote {OUT_DIR}/tjepa_reference.npz and .json")


def main() -> None:
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    _peer.authors_main(
        __doc__, __file__, repo="jose-melo/t-jepa", marker="src/mask.py", peer=peer, venv=make_venv
    )


if __name__ == "__main__":
    main()
