"""Builds the VARSR parity fixture of VAR's multi-scale residual quantiser (tests/data/varsr/).

Authors' code: github qyp2000/VARSR (the VQ-VAE of VAR, Tian et al. NeurIPS 2024, as used by
VARSR, Qu et al. 2025), commit ``eca07cecaf42c020cb7aa4cd594928c659ad7ce3`` (2025-03-14),
files ``models/quant.py`` (``VectorQuantizer2``, ``Phi``, ``PhiShared``,
``PhiPartiallyShared``, ``PhiNonShared``) and ``models/vqvae.py`` (the ``VQVAE`` defaults:
``quant_resi=0.5``, ``share_quant_resi=4``, ``using_znorm=False``).

Usage (from the repository root; nothing is downloaded at run time except the torch wheel)::

  .venv/bin/python tools/varsr_make_fixture.py --authors-dir /tmp/authors_varsr

``--authors-dir`` is a checkout of qyp2000/VARSR at the commit above. The script creates a
throwaway virtual environment ``/tmp/peer_varsr`` (``torch==2.13.0``, ``numpy``) if absent and
re-runs itself there with ``--peer``. Inside, it imports ``models/quant.py`` from the checkout
(``models/__init__.py`` is bypassed: it imports the transformer and diffusers, which the
quantiser does not need) and, on seeded feature maps, codebooks and ``Phi`` weights, calls:

* ``VectorQuantizer2.f_to_idxBl_or_fhat`` (tokenisation, used to make VAR's training tokens):
  token indices per scale, the prefix sums ``f_hat`` after every scale and the residual
  ``f_rest`` entering the last scale. Note: VARSR applies ``Phi`` at every scale but the last
  here ("consistency"), as in ``get_next_autoregressive_input`` (generation);
* ``VectorQuantizer2.forward`` (VQ-VAE training): ``f_hat`` with ``Phi`` at every scale,
  the last included (upstream VAR's rule everywhere);
* ``VectorQuantizer2.embed_to_fhat(all_to_max_scale=True)`` (decoding of token embeddings):
  ``Phi`` at every scale, the last included;
* ``VectorQuantizer2.idxBl_to_var_input``: the teacher-forcing inputs of scales ``2..K``;
* ``torch.nn.functional.interpolate`` as the quantiser calls it: ``mode="area"`` to
  downsample the residual (adaptive average pooling: overlapping bins when the side does not
  divide) and ``mode="bicubic"`` (``align_corners=False``, Keys ``a = -0.75``, border pixels
  repeated, no antialiasing) to upsample code maps. These are the only two modes the quantiser
  uses.

Cases (``CASES``): patch-size schedules like theirs (``(1, 2, 3, 4)`` on a 4x4 map,
``(1, 2, 3, 4, 5, 6, 8)`` on 8x8, VAR's default ``(1, 2, 3, 4, 5, 6, 8, 10, 13, 16)`` on 16x16)
with the three ``Phi`` sharing rules (``share_quant_resi`` 4: partially shared, 0: one per
scale, 1: one for all) and ``quant_resi`` 0 (``Phi`` = identity).

Stubs: ``dist.initialized()`` is false without a process group, so the training branch of
``forward`` does nothing distributed; ``forward`` still calls ``tdist.get_world_size()`` for its
usage margin, which is replaced by ``lambda: 1`` (the margin is not part of the fixture).

Outputs: ``tests/data/varsr/varsr_quant.npz`` (float32 / int32 arrays, about 90 kB) and
``tests/data/varsr/varsr_quant.json`` (commit, seed, versions, cases). torch is never a
dependency of fidia_jax: only this script and its venv use it.

Then, back in the calling interpreter (the project's venv, where jax and fidia_jax import), it
measures the deviations that ``docs/hitvar.md`` quotes and writes
``tests/data/varsr/varsr_measured.json``: the largest difference from torch's
``area`` / ``bicubic`` of ``jax.image.resize(method="cubic")``, of this library's former rules
(antialiased bilinear up; area pooling when the side divides, antialiased bilinear otherwise)
and of :func:`fidia_jax.layers.resize_grid`'s defaults; and per case the share of token indices
and the largest ``f_hat`` difference of the former quantiser (former resizes, no ``Phi``) and of
:func:`fidia_jax.layers.multiscale_residual_quantize` with the authors' defaults.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys

import _peer  # tools/_peer.py (this script's folder is on sys.path)

VENV = pathlib.Path("/tmp/peer_varsr")
ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "tests" / "data" / "varsr"
COMMIT = "eca07cecaf42c020cb7aa4cd594928c659ad7ce3"
REPO = "qyp2000/VARSR"
SEED = 20261204
#: name, batch, channels Cvae, vocab, patch_nums, quant_resi, share_quant_resi, keep prefixes
CASES = [
    ("s4_share4", 2, 4, 16, (1, 2, 3, 4), 0.5, 4, True),
    ("s8_share0", 1, 4, 32, (1, 2, 3, 4, 5, 6, 8), 0.5, 0, False),
    ("s16_var_default", 1, 4, 32, (1, 2, 3, 4, 5, 6, 8, 10, 13, 16), 0.5, 4, False),
    ("s4_share1", 2, 3, 16, (1, 2, 4), 0.3, 1, True),
    ("s4_identity", 2, 4, 16, (1, 2, 3, 4), 0.0, 4, True),
]
#: (side in, side out) of the stand-alone resize checks
AREA_CASES = [(16, 3), (16, 5), (16, 6), (16, 10), (16, 13), (8, 3), (8, 5), (4, 3), (4, 2)]
BICUBIC_CASES = [(1, 4), (2, 4), (3, 4), (3, 8), (5, 16), (13, 16), (2, 3)]


def make_venv() -> pathlib.Path:
    return _peer.make_venv(VENV, ["torch==2.13.0", "numpy"])


def _import_quant(authors_dir: pathlib.Path):
    """``models.quant`` of the checkout, without running ``models/__init__.py``."""
    import importlib
    import types

    sys.path.insert(0, str(authors_dir))  # for their top-level ``dist`` module
    pkg = types.ModuleType("models")
    pkg.__path__ = [str(authors_dir / "models")]  # namespace stub: skips models/__init__.py
    sys.modules["models"] = pkg
    quant = importlib.import_module("models.quant")
    quant.tdist.get_world_size = lambda: 1  # stub: only the unused usage margin reads it
    return quant


def _phis(q) -> list:
    """The ``Phi`` modules (or identities) of a quantiser, in the order of their ticks."""
    qr = q.quant_resi
    if hasattr(qr, "qresi_ls"):  # PhiPartiallyShared
        return list(qr.qresi_ls)
    if hasattr(qr, "qresi"):  # PhiShared
        return [qr.qresi]
    return list(iter(qr))  # PhiNonShared (a ModuleList whose __getitem__ takes a float)


def peer(authors_dir: pathlib.Path) -> None:
    import numpy as np
    import torch
    import torch.nn.functional as F

    torch.set_grad_enabled(False)
    quant = _import_quant(authors_dir)
    rng = np.random.default_rng(SEED)
    out: dict[str, np.ndarray] = {}
    meta_cases = []
    for name, b, c, v, pns, ratio, share, keep in CASES:
        h = pns[-1]
        q = quant.VectorQuantizer2(
            vocab_size=v, Cvae=c, using_znorm=False, beta=0.25, v_patch_nums=pns,
            quant_resi=ratio, share_quant_resi=share,
        )  # fmt: skip
        f = rng.normal(size=(b, c, h, h)).astype(np.float32)
        cb = rng.normal(size=(v, c)).astype(np.float32)
        q.embedding.weight.copy_(torch.from_numpy(cb))
        phis = _phis(q)
        kern, bias = [], []
        for phi in phis:
            if isinstance(phi, torch.nn.Conv2d):
                w = (0.2 * rng.normal(size=tuple(phi.weight.shape))).astype(np.float32)
                bb = (0.1 * rng.normal(size=tuple(phi.bias.shape))).astype(np.float32)
                phi.weight.copy_(torch.from_numpy(w))
                phi.bias.copy_(torch.from_numpy(bb))
                kern.append(w)
                bias.append(bb)
        p = f"{name}/"
        out[p + "f"], out[p + "codebook"] = f, cb
        if kern:  # torch layout (P, C_out, C_in, 3, 3)
            out[p + "phi_kernel"], out[p + "phi_bias"] = np.stack(kern), np.stack(bias)
        ft = torch.from_numpy(f)
        fhats, _ = q.f_to_idxBl_or_fhat(ft, to_fhat=True)
        idx, _ = q.f_to_idxBl_or_fhat(ft, to_fhat=False)
        for si, pn in enumerate(pns):
            out[p + f"idx_{si}"] = idx[si].reshape(b, pn, pn).numpy().astype(np.int32)
            if keep or si == len(pns) - 1:
                out[p + f"fhat_{si}"] = fhats[si].numpy()
        # the residual entering the last scale, (B, H*W, C)
        out[p + "f_rest_last"] = fhats[-1].numpy()
        q.train()
        fhat_fwd, _, _ = q(ft.clone())
        out[p + "fhat_forward"] = fhat_fwd.numpy()
        q.eval()
        ms_h = [
            q.embedding(torch.from_numpy(out[p + f"idx_{si}"]).long()).permute(0, 3, 1, 2)
            for si in range(len(pns))
        ]
        out[p + "fhat_embed_to_fhat"] = q.embed_to_fhat(ms_h, all_to_max_scale=True)[-1].numpy()
        var_in = q.idxBl_to_var_input([i.reshape(b, -1) for i in idx[: len(pns)]])
        out[p + "var_input"] = var_in.numpy()
        ticks = getattr(q.quant_resi, "ticks", None)
        meta_cases.append({
            "name": name, "batch": b, "Cvae": c, "vocab_size": v, "v_patch_nums": list(pns),
            "quant_resi": ratio, "share_quant_resi": share, "num_phi": len(phis),
            "phi_ticks": None if ticks is None else [float(t) for t in ticks],
            "phi_of_scale": [
                next(j for j, m in enumerate(phis) if m is q.quant_resi[si / (len(pns) - 1)])
                for si in range(len(pns))
            ],
            "all_prefixes_stored": keep,
        })  # fmt: skip
    x = rng.normal(size=(1, 2, 16, 16)).astype(np.float32)
    out["area/x"] = x
    for hin, hout in AREA_CASES:
        xi = torch.from_numpy(x[:, :, :hin, :hin].copy())
        out[f"area/{hin}_{hout}"] = F.interpolate(xi, size=(hout, hout), mode="area").numpy()
    for hin, hout in BICUBIC_CASES:
        xi = torch.from_numpy(x[:, :, :hin, :hin].copy())
        y = F.interpolate(xi, size=(hout, hout), mode="bicubic")
        out[f"bicubic/{hin}_{hout}"] = y.numpy()
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT_DIR / "varsr_quant.npz", **out)
    from importlib.metadata import version

    meta = {
        "repository": f"github.com/{REPO}",
        "commit": COMMIT,
        "files": ["models/quant.py", "models/vqvae.py"],
        "seed": SEED,
        "cases": meta_cases,
        "area_cases": AREA_CASES,
        "bicubic_cases": BICUBIC_CASES,
        "interpolation": {
            "downsample_residual": "F.interpolate(mode='area') (adaptive average pooling)",
            "upsample_codes": "F.interpolate(mode='bicubic', align_corners=False), a=-0.75",
            "teacher_forcing_inputs": "F.interpolate(mode='area')",
        },
        "phi_rule": {
            "f_to_idxBl_or_fhat": "Phi at scales 1..K-1, not at the last",
            "forward": "Phi at every scale",
            "embed_to_fhat": "Phi at every scale",
            "idxBl_to_var_input": "Phi at scales 1..K-1 (the last is never used)",
            "phi_index": "argmin |ticks - si/(K-1)|; ticks = linspace(1/(3P), 1-1/(3P), P) if "
            "P == 4 else linspace(1/(2P), 1-1/(2P), P)",
        },
        "layout": "torch NCHW; phi_kernel (P, C_out, C_in, 3, 3); idx_k (B, s_k, s_k) int32; "
        "f_rest_last (B, H*W, C); var_input (B, sum_{k>=2} s_k^2, C)",
        "versions": {pkg: version(pkg) for pkg in ("torch", "numpy")},
        "python": sys.version.split()[0],
        "script": "tools/varsr_make_fixture.py",
    }
    (OUT_DIR / "varsr_quant.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUT_DIR / 'varsr_quant.npz'} ({len(out)} arrays)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--authors-dir",
        type=pathlib.Path,
        required=True,
        help=f"checkout of github.com/{REPO} at {COMMIT}",
    )
    parser.add_argument("--peer", action="store_true", help="(internal) run inside the venv")
    args = parser.parse_args()
    authors = args.authors_dir.resolve()
    if not (authors / "models" / "quant.py").is_file():
        raise SystemExit(f"--authors-dir {authors}: no models/quant.py (a VARSR checkout?)")
    if args.peer:
        peer(authors)
        return
    py = make_venv()
    cmd = [str(py), str(pathlib.Path(__file__).resolve()), "--peer", "--authors-dir", str(authors)]
    subprocess.run(cmd, check=True, env=dict(os.environ), cwd="/tmp")
    measure()


def _former_resize(x, size):
    """This library's rule before it followed the authors: area pooling when ``size`` divides
    the side, antialiased bilinear (``jax.image.resize(method="linear")``) otherwise."""
    from fidia_jax import layers

    h = x.shape[1]
    if size < h and h % size == 0:
        return layers.resize_grid(x, size, down="area")
    return layers.resize_grid(x, size, up="linear", down="linear")


def _former_quantize(f, cb, grids):
    from fidia_jax import layers

    fhat = f * 0.0
    codes = []
    for s in grids:
        c = layers.nearest_code(_former_resize(f - fhat, s), cb)
        fhat = fhat + _former_resize(cb[c], f.shape[1])
        codes.append(c)
    return codes, fhat


def measure() -> None:
    """Writes ``varsr_measured.json`` (needs jax and fidia_jax; skipped without them)."""
    try:
        import jax
        import numpy as np

        from fidia_jax import layers
    except ImportError as e:  # pragma: no cover - run from the project's venv
        print(f"skipped the measurements ({e}); run this script with the project's venv")
        return
    jax.config.update("jax_default_matmul_precision", "highest")
    meta = json.loads((OUT_DIR / "varsr_quant.json").read_text())
    with np.load(OUT_DIR / "varsr_quant.npz") as d:
        fx = {k: d[k] for k in d.files}

    def nhwc(a):
        return np.transpose(a, (0, 2, 3, 1))

    def maxdiff(a, b):
        return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))

    x = nhwc(fx["area/x"])
    out: dict = {"resize": {}, "quantiser": {}}
    for n_in, n_out in meta["bicubic_cases"]:
        xs, want = x[:, :n_in, :n_in], nhwc(fx[f"bicubic/{n_in}_{n_out}"])
        shape = (xs.shape[0], n_out, n_out, xs.shape[3])
        out["resize"][f"bicubic {n_in}->{n_out}"] = {
            "ours_default": maxdiff(layers.resize_grid(xs, n_out), want),
            "jax_image_resize_cubic": maxdiff(jax.image.resize(xs, shape, "cubic"), want),
            "former_rule": maxdiff(_former_resize(xs, n_out), want),
            "max_abs_torch": float(np.abs(want).max()),
        }
    for n_in, n_out in meta["area_cases"]:
        xs, want = x[:, :n_in, :n_in], nhwc(fx[f"area/{n_in}_{n_out}"])
        out["resize"][f"area {n_in}->{n_out}"] = {
            "ours_default": maxdiff(layers.resize_grid(xs, n_out), want),
            "former_rule": maxdiff(_former_resize(xs, n_out), want),
            "max_abs_torch": float(np.abs(want).max()),
        }
    for c in meta["cases"]:
        p, grids = c["name"] + "/", tuple(c["v_patch_nums"])
        f, cb = nhwc(fx[p + "f"]), fx[p + "codebook"]
        phi = None
        if p + "phi_kernel" in fx:
            phi = (np.transpose(fx[p + "phi_kernel"], (0, 3, 4, 2, 1)), fx[p + "phi_bias"])
        want_idx = [fx[p + f"idx_{k}"] for k in range(len(grids))]
        want_fhat = nhwc(fx[p + f"fhat_{len(grids) - 1}"])
        codes, prefixes, _ = layers.multiscale_residual_quantize(
            f, cb, grids, phi=phi, phi_ratio=c["quant_resi"]
        )
        fcodes, ffhat = _former_quantize(f, cb, grids)
        n_tok = sum(w.size for w in want_idx)

        def share(cs, want_idx=want_idx, n_tok=n_tok):
            return (
                sum(int(np.sum(np.asarray(a) != b)) for a, b in zip(cs, want_idx, strict=True))
                / n_tok
            )

        out["quantiser"][c["name"]] = {
            "tokens": n_tok,
            "ours_default_index_mismatch_share": share(codes),
            "ours_default_fhat_max_abs_diff": maxdiff(prefixes[-1], want_fhat),
            "former_index_mismatch_share": share(fcodes),
            "former_fhat_max_abs_diff": maxdiff(ffhat, want_fhat),
            "max_abs_fhat": float(np.abs(want_fhat).max()),
        }
    out["note"] = (
        "max |ours - authors'| on the fixture of varsr_quant.npz; former = this library's "
        "quantiser before it followed the authors (antialiased bilinear up, area or antialiased "
        "bilinear down, no Phi)"
    )
    out["versions"] = {"jax": jax.__version__}
    path = OUT_DIR / "varsr_measured.json"
    path.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
