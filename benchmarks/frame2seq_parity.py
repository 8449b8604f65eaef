"""Frame2seq port vs Frame2seq's torch outputs stored in tests/data/frame2seq (docs/frame2seq.md).

Prints and writes (``--out``, default /tmp/frame2seq_parity.json) the maximum |logit error| per
model in float32 for three batch layouts (each backbone alone; both padded to 79 slots in one
batch of 4, as the tests; that batch twice) and in float64, and the ensemble score path's
per-residue and average errors. Needs the frame2seq wheel (``pip install --no-deps
frame2seq==0.0.8``). Run from the repository root::

    PYTHONPATH=. .venv/bin/python benchmarks/frame2seq_parity.py
"""

import argparse
import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from fidia_jax.models import frame2seq_log_probs, frame2seq_sequence_log_likelihood, load_frame2seq

ap = argparse.ArgumentParser()
ap.add_argument("--out", default="/tmp/frame2seq_parity.json")
args = ap.parse_args()

DATA = pathlib.Path("tests/data/frame2seq")
CASES = ("3a4rA", "5PTI")
fx = {c: dict(np.load(DATA / f"{c}.npz")) for c in CASES}
models = [load_frame2seq(i) for i in (1, 2, 3)]
call = nnx.jit(lambda mod, x, mk, tk: mod(x, mk, tk, with_unknown=True))
res = {}


def rows(length):
    xs, ms, ts, ref = [], [], [], []
    for c in CASES:
        f = fx[c]
        n = f["aatype"].shape[0]
        for tag, toks in (("masked", np.full(n, 20)), ("partial", f["tokens_partial"])):
            x = np.zeros((length, 3, 3), np.float32)
            x[:n] = f["X"][:, :3]
            m = np.zeros(length, bool)
            m[:n] = f["mask"]
            t = np.full(length, 20, np.int32)
            t[:n] = toks
            xs.append(x)
            ms.append(m)
            ts.append(t)
            ref.append((c, tag, n))
    return np.stack(xs), np.stack(ms), np.stack(ts), ref


for k, mod in enumerate(models, start=1):
    worst = {}
    X, M, T, ref = rows(79)
    for layout, (x, m, t) in {
        "batch4_pad79": (X, M, T),
        "batch8_pad79": (np.concatenate([X, X]), np.concatenate([M, M]), np.concatenate([T, T])),
    }.items():
        out = np.asarray(call(mod, x, m, t))
        worst[layout] = max(
            float(np.abs(out[i, :n] - fx[c][f"logits_m{k}_{tag}"]).max())
            for i, (c, tag, n) in enumerate(ref)
        )
    e = 0.0
    for c in CASES:
        f = fx[c]
        n = f["aatype"].shape[0]
        for tag, toks in (("masked", np.full(n, 20)), ("partial", f["tokens_partial"])):
            out = np.asarray(
                call(
                    mod,
                    f["X"][None, :, :3].astype(np.float32),
                    f["mask"][None],
                    toks[None].astype(np.int32),
                )
            )[0]
            e = max(e, float(np.abs(out - fx[c][f"logits_m{k}_{tag}"]).max()))
    worst["single"] = e
    with jax.enable_x64(True):
        gd, state = nnx.split(mod)
        m64 = nnx.merge(gd, jax.tree.map(lambda a: jnp.asarray(a, jnp.float64), state))
        e64 = 0.0
        for c in CASES:
            f = fx[c]
            n = f["aatype"].shape[0]
            x4 = jnp.asarray(np.stack([f["X"][:, :4]] * 2))
            tok = jnp.asarray(np.stack([np.full(n, 20), f["tokens_partial"]]))
            out = np.asarray(
                nnx.jit(lambda mod, x, mk, tk: mod._logits_from_atoms(x, mk, tk, True))(
                    m64, x4, jnp.ones((2, n), bool), tok
                )
            )
            for i, tag in enumerate(("masked", "partial")):
                e64 = max(e64, float(np.abs(out[i] - f[f"logits_m{k}_{tag}_f64"]).max()))
    worst["float64"] = e64
    worst["max_abs_logit"] = max(
        float(np.abs(fx[c][f"logits_m{k}_{t}"]).max()) for c in CASES for t in ("masked", "partial")
    )
    res[f"model{k}"] = worst
    print(k, worst, flush=True)
sc = {}
for c in CASES:
    f = fx[c]
    lp = frame2seq_log_probs(models, f["X"][None, :, :3].astype(np.float32), f["mask"][None])
    ll = np.asarray(frame2seq_sequence_log_likelihood(lp, f["seqs"][None], f["mask"][None]))[0]
    per = -np.take_along_axis(np.asarray(lp)[0], f["seqs"].T, 1).T
    sc[c] = {
        "per_residue_max_err": float(np.abs(per - f["neg_pll"]).max()),
        "avg_ours": (-ll).tolist(),
        "avg_ref": f["avg_neg_pll"].tolist(),
        "avg_max_err": float(np.abs(-ll - f["avg_neg_pll"]).max()),
    }
res["score"] = sc
print(json.dumps(res, indent=1))
pathlib.Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
