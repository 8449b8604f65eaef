"""Builds the HiST attention-pattern fixture from the authors' code (tests/data/hist/).

Authors' code: github.com/wwyi1828/HiST at commit
``3e60ea39388d71a14d61063a2638db3b0b5294e6`` (MIT). Functions called:

* ``src/span/layers/attention.py``: ``AttentionBuilder`` (``forward``, hence
  ``generate_swin_windows``, ``build_graph`` and ``ATTENTION_CONFIGS``), modes ``'hybrid'``
  (their ``configs/model/hist.yaml``: ``trans_type``/``dtrans_type``) and ``'hybrid_noshift'``;
* ``src/span/preprocessing/padding.py``: ``SPAN_Padder`` (kernel 2, stride 2, dilation 1,
  ``n_layers = 2`` as in ``tasks/gene_prediction/main.py`` for ``slide_configs "111-21"``);
* ``src/span/layers/convolution.py``: ``_sparse_conv2d`` (the coordinates a stride-2, kernel-2
  "patchconv" produces; its weights do not matter here).

Usage (from the repository root; the checkout is not downloaded by this script)::

  python tools/hist_make_fixture.py --authors-dir /tmp/authors_hist

It creates a throwaway virtual environment ``/tmp/peer_hist`` (``torch==2.13.0``, ``numpy``) if
absent and re-runs itself inside it with ``--peer``. Stubs (clearly not the authors' code):

* ``dgl``: ``attention.py`` imports DGL only to hold the edge lists of its two graphs
  (``dgl.graph`` and ``DGLGraph.add_edges``); the stub records the ``(src, dst)`` pairs added,
  which is all ``AttentionBuilder.forward`` does with them. DGL has no wheel for this torch.
* ``timm.layers.DropPath`` and ``..functional.create_activation``: imported at the top of
  ``convolution.py`` but not used by ``_sparse_conv2d``.

For each case, positions are integer lattice coordinates; a DGL edge ``src -> dst`` means that
node ``dst`` (the query) attends to node ``src`` (the key). The fixture stores, per case and
level, the node coordinates and two boolean matrices ``A[query, key]`` of size
``(n + 3, n + 3)`` (the ``n`` lattice nodes, then the 3 slide tokens of ``token_init_types``):
``g1`` (local pattern: ``['swmsa', 'wmsa', 'lloop']`` de-duplicated) and ``g2`` (global pattern:
``['g2g', 'l2g', 'g2l', 'gloop']``), bit-packed (``np.packbits`` over the flattened matrix).

Two kinds of cases:

* ``raw_*``: ``AttentionBuilder`` applied directly to a fixed lattice, window sizes ``w`` 1, 2,
  3 (window side ``2 w``, shift ``w``), modes ``hybrid`` and ``hybrid_noshift``;
* ``pipe_*``: the authors' model pipeline: ``SPAN_Padder`` (adds a padding node at the canvas
  origin and one at its far corner, and moves the spots by the left/top padding), then the
  builder at level 0 and, after each stride-2 ``_sparse_conv2d``, at levels 1 and 2
  (``window_size`` 3 of ``hist.yaml``, and 2).

Outputs: ``tests/data/hist/attention_pattern.npz`` and ``attention_pattern.json`` (commit,
versions, seed, the case list). torch is never a dependency of fidia_jax.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import types

import _peer  # tools/_peer.py (this script's folder is on sys.path)

VENV = pathlib.Path("/tmp/peer_hist")
ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "tests" / "data" / "hist"
COMMIT = "3e60ea39388d71a14d61063a2638db3b0b5294e6"
SEED = 20261204
N_TOKENS = 3  # token_init_types: ['max', 'mean', 'fix1e-4']


def lattices():
    """The fixed lattices ``name -> (n, 2) int array`` (seeded)."""
    import numpy as np

    rng = np.random.default_rng(SEED)

    def grid(h, w):
        return np.stack(np.meshgrid(np.arange(h), np.arange(w), indexing="ij"), -1).reshape(-1, 2)

    def blob(h, w, keep):
        g = grid(h, w)
        k = rng.random(len(g)) < keep
        # keep the bounding box: the extent decides the authors' shift rule
        k[[0, len(g) - 1]] = True
        return g[k]

    lshape = grid(10, 10)
    lshape = lshape[(lshape[:, 0] < 4) | (lshape[:, 1] < 3)]
    return {
        "grid7x5": grid(7, 5),
        "grid12x12": grid(12, 12),
        "blob13x9": blob(13, 9, 0.65),
        "blob12x18": blob(12, 18, 0.5),
        "tiny3x4": grid(3, 4),
        "lshape10": lshape,
        "blob20x15": blob(20, 15, 0.55),
    }


RAW = [
    ("grid7x5", (1, 2, 3)),
    ("grid12x12", (1, 2, 3)),
    ("blob13x9", (1, 2, 3)),
    ("blob12x18", (2, 3)),
    ("tiny3x4", (2, 3)),
    ("lshape10", (2, 3)),
]
PIPE = [("grid7x5", (3,)), ("blob13x9", (3, 2)), ("blob20x15", (3,)), ("lshape10", (3,))]


def make_venv() -> pathlib.Path:
    return _peer.make_venv(VENV, ["torch==2.13.0", "numpy"])


def _load(name: str, path: pathlib.Path, package: str | None = None):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    if package is not None:
        mod.__package__ = package
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _install_stubs():
    import torch

    class _EdgeList:
        """Stub of a DGL graph: records the edges added (``forward`` only calls ``add_edges``)."""

        def __init__(self, num_nodes):
            self.num_nodes = num_nodes
            self.src, self.dst = [], []

        def add_edges(self, src, dst):
            self.src.append(torch.as_tensor(src).long().reshape(-1))
            self.dst.append(torch.as_tensor(dst).long().reshape(-1))

    dgl = types.ModuleType("dgl")
    dgl.graph = lambda edges, num_nodes, device=None: _EdgeList(num_nodes)  # noqa: ARG005
    sys.modules["dgl"] = dgl
    timm = types.ModuleType("timm")
    timm_layers = types.ModuleType("timm.layers")
    timm_layers.DropPath = torch.nn.Identity  # stub: not used by _sparse_conv2d
    timm.layers = timm_layers
    sys.modules["timm"], sys.modules["timm.layers"] = timm, timm_layers
    for pkg in ("hist_authors", "hist_authors.layers"):
        m = types.ModuleType(pkg)
        m.__path__ = []
        sys.modules[pkg] = m
    func = types.ModuleType("hist_authors.functional")
    func.create_activation = lambda *a, **k: torch.nn.Identity()  # stub: unused here
    sys.modules["hist_authors.functional"] = func


def peer(authors_dir: pathlib.Path) -> None:
    import numpy as np
    import torch

    _install_stubs()
    src = authors_dir / "src" / "span"
    attention = _load("hist_authors.layers.attention", src / "layers" / "attention.py")
    padding = _load("hist_authors_padding", src / "preprocessing" / "padding.py")
    conv = _load(
        "hist_authors.layers.convolution", src / "layers" / "convolution.py", "hist_authors.layers"
    )

    def pattern(pos, w, mode):
        b = attention.AttentionBuilder(window_size=w, mode=mode)  # mask_padding False: as used
        g1, g2 = b(torch.as_tensor(pos, dtype=torch.long), N_TOKENS, mode=mode)
        n = len(pos) + N_TOKENS
        out = []
        for g in (g1, g2):
            a = np.zeros((n, n), bool)
            if g.src:
                s, d = torch.cat(g.src).numpy(), torch.cat(g.dst).numpy()
                a[d, s] = True  # query = dst, key = src
            out.append(np.packbits(a.reshape(-1)))
        return out

    lat = lattices()
    rec, cases = {}, []
    for name, ws in RAW:
        pos = lat[name]
        rec[f"raw_{name}/pos"] = pos.astype(np.int16)
        for w in ws:
            for mode in ("hybrid", "hybrid_noshift"):
                key = f"raw_{name}/w{w}/{mode}"
                rec[f"{key}/g1"], rec[f"{key}/g2"] = pattern(pos, w, mode)
                cases.append(key)
    padder = padding.SPAN_Padder(kernel_size=2, stride=2, dilation=1, n_layers=2, pad_feats=None)
    cv = torch.nn.Conv2d(1, 1, 2, stride=2, bias=False)
    for name, ws in PIPE:
        pos0 = torch.as_tensor(lat[name], dtype=torch.long)
        feat = torch.zeros(len(pos0), 1)
        pos, feat = padder(pos0, feat)
        rec[f"pipe_{name}/spots"] = lat[name].astype(np.int16)
        shape = (pos.int().max(dim=0)[0] + 1).tolist()  # as SPAN_Encoder.forward
        for lvl in range(3):
            if lvl > 0:
                with torch.no_grad():
                    pos, feat, shape = conv._sparse_conv2d(pos, feat, shape, cv)
            rec[f"pipe_{name}/L{lvl}/pos"] = pos.numpy().astype(np.int16)
            rec[f"pipe_{name}/L{lvl}/shape"] = np.asarray(shape, np.int16)
            for w in ws:
                key = f"pipe_{name}/L{lvl}/w{w}/hybrid"
                rec[f"{key}/g1"], rec[f"{key}/g2"] = pattern(pos.numpy(), w, "hybrid")
                cases.append(key)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT_DIR / "attention_pattern.npz", **rec)
    meta = {
        "authors_repo": "github.com/wwyi1828/HiST",
        "commit": COMMIT,
        "files": [
            "src/span/layers/attention.py",
            "src/span/preprocessing/padding.py",
            "src/span/layers/convolution.py",
        ],
        "seed": SEED,
        "n_tokens": N_TOKENS,
        "torch": torch.__version__,
        "numpy": np.__version__,
        "python": sys.version.split()[0],
        "stubs": ["dgl (edge-list recorder)", "timm.layers.DropPath", "create_activation"],
        "encoding": "A[query, key] = 1 for DGL edge key -> query; np.packbits of the flat "
        "(n + n_tokens)^2 boolean matrix; nodes = lattice nodes in the authors' order, then tokens",
        "cases": cases,
    }
    (OUT_DIR / "attention_pattern.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(len(cases), "patterns ->", OUT_DIR / "attention_pattern.npz")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--authors-dir", required=True, help="checkout of wwyi1828/HiST @ " + COMMIT)
    ap.add_argument("--peer", action="store_true", help="(internal) run inside the venv")
    args = ap.parse_args()
    authors = pathlib.Path(args.authors_dir).resolve()
    if not (authors / "src" / "span" / "layers" / "attention.py").exists():
        raise SystemExit(f"{authors} is not a checkout of wwyi1828/HiST")
    if args.peer:
        peer(authors)
        return
    py = make_venv()
    env = dict(os.environ, PYTHONHASHSEED="0")
    subprocess.run(
        [str(py), __file__, "--peer", "--authors-dir", str(authors)],
        check=True,
        env=env,
        cwd="/tmp",
    )


if __name__ == "__main__":
    main()
