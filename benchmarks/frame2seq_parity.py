"""Frame2seq port vs Frame2seq's torch outputs stored in tests/data/frame2seq (docs/frame2seq.md).

Measures the largest |logit difference| per model against the fixtures' logits (made by
Frame2seq's own torch code, ``tools/frame2seq_make_fixture.py``; no torch here): the float32
port in three batch layouts (each backbone alone; both backbones' two inputs padded to 79 slots
in one batch of 4, as the tests run them; that batch twice, 8 rows) and the float64 port against
Frame2seq in float64; and the ensemble ``score`` path's per-residue negative pseudo-log-likelihood
and average score per backbone and sequence (native, shuffled).

Writes ``benchmarks/results/frame2seq_parity.json`` through ``benchmarks/_results.py`` (tables
``logits`` and ``score``, which docs/frame2seq.md renders). Needs the frame2seq wheel for the
weights (``pip install --no-deps frame2seq==0.0.8``). Run from the repository root::

    python benchmarks/frame2seq_parity.py             # the run (minutes: three models compiled)
    python benchmarks/frame2seq_parity.py --report    # re-table the file, no run
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _results import ROOT, default_out, load_average, retable, write_results  # noqa: E402

DATA = ROOT / "tests" / "data" / "frame2seq"
CASES = ("3a4rA", "5PTI")
MODELS = (1, 2, 3)
LAYOUTS = {
    "single": "float32, each backbone alone",
    "batch4_pad79": "float32, batch of 4 (padded to 79)",
    "batch8_pad79": "float32, batch of 8 (padded to 79)",
    "float64": "float64 port (`jax.enable_x64`) vs Frame2seq in float64",
}
"""The raw record's layout keys, in the table's row order, and their row labels."""
SEQUENCES = ("native", "shuffled")
"""The fixtures' ``seqs`` rows (``tools/frame2seq_make_fixture.py``)."""


def logit_table(record: dict) -> dict:
    """Largest |logit difference| to Frame2seq, one row per layout, one column per model."""
    models = [k for k in (f"model{i}" for i in MODELS) if k in record]
    rows = [[label, *(record[m][key] for m in models)] for key, label in LAYOUTS.items()]
    return {"columns": ["", *(m.replace("model", "model ") for m in models)], "rows": rows,
            "formats": [None] + [".1e"] * len(models)}  # fmt: skip


def score_table(record: dict) -> dict:
    """The ensemble ``score`` path per backbone and sequence: largest per-residue error, average
    negative pseudo-log-likelihood of ours and of Frame2seq, and their difference."""
    rows = []
    for case, s in record["score"].items():
        for i, seq in enumerate(SEQUENCES[: len(s["avg_ours"])]):
            ours, ref = s["avg_ours"][i], s["avg_ref"][i]
            rows.append([case, seq, s["per_residue_max_err"][i], ours, ref, abs(ours - ref)])
    return {"columns": ["backbone", "sequence", "largest per-residue error (nats)",
                        "average score, ours", "average score, Frame2seq", "difference"],
            "rows": rows, "formats": [None, None, ".1e", ".5f", ".5f", ".1e"]}  # fmt: skip


def tables(record: dict) -> dict:
    return {"logits": logit_table(record), "score": score_table(record)}


def measure() -> dict:
    """The raw record: ``model<k>`` -> the largest |logit difference| per layout (and the
    largest |logit| of Frame2seq's outputs), ``score`` -> the ensemble score path per backbone."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx

    from fidia_jax.models import (
        frame2seq_log_probs,
        frame2seq_sequence_log_likelihood,
        load_frame2seq,
    )

    fx = {c: dict(np.load(DATA / f"{c}.npz")) for c in CASES}
    models = [load_frame2seq(i) for i in MODELS]
    call = nnx.jit(lambda mod, x, mk, tk: mod(x, mk, tk, with_unknown=True))
    res = {}

    def inputs(f):
        n = f["aatype"].shape[0]
        return (("masked", np.full(n, 20)), ("partial", f["tokens_partial"]))

    def rows(length):
        xs, ms, ts, ref = [], [], [], []
        for c in CASES:
            f = fx[c]
            n = f["aatype"].shape[0]
            for tag, toks in inputs(f):
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

    for k, mod in zip(MODELS, models, strict=True):
        worst = {}
        X, M, T, ref = rows(79)
        for layout, (x, m, t) in {
            "batch4_pad79": (X, M, T),
            "batch8_pad79": (
                np.concatenate([X, X]),
                np.concatenate([M, M]),
                np.concatenate([T, T]),
            ),  # fmt: skip
        }.items():
            out = np.asarray(call(mod, x, m, t))
            worst[layout] = max(
                float(np.abs(out[i, :n] - fx[c][f"logits_m{k}_{tag}"]).max())
                for i, (c, tag, n) in enumerate(ref)
            )
        e = 0.0
        for c in CASES:
            f = fx[c]
            for tag, toks in inputs(f):
                x1 = f["X"][None, :, :3].astype(np.float32)
                out = np.asarray(call(mod, x1, f["mask"][None], toks[None].astype(np.int32)))[0]
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
            float(np.abs(fx[c][f"logits_m{k}_{t}"]).max())
            for c in CASES
            for t in ("masked", "partial")
        )
        res[f"model{k}"] = worst
        print(k, worst, flush=True)
    sc = {}
    for c in CASES:
        f = fx[c]
        lp = frame2seq_log_probs(models, f["X"][None, :, :3].astype(np.float32), f["mask"][None])
        ll = np.asarray(frame2seq_sequence_log_likelihood(lp, f["seqs"][None], f["mask"][None]))[0]
        per = -np.take_along_axis(np.asarray(lp)[0], f["seqs"].T, 1).T  # (sequences, residues)
        sc[c] = {
            "per_residue_max_err": np.abs(per - f["neg_pll"]).max(axis=1).tolist(),
            "avg_ours": (-ll).tolist(),
            "avg_ref": f["avg_neg_pll"].tolist(),
            "avg_max_err": float(np.abs(-ll - f["avg_neg_pll"]).max()),
        }
        print(c, sc[c], flush=True)
    res["score"] = sc
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="default: benchmarks/results/frame2seq_parity.json")
    ap.add_argument("--report", action="store_true", help="no run: re-table --out from its record")
    args = ap.parse_args(argv)
    out = pathlib.Path(args.out) if args.out else default_out("frame2seq_parity")
    if args.report:
        retable(out, tables)
        return 0
    load_start = load_average()
    t0 = time.perf_counter()
    record = measure()
    record["wall_s"] = time.perf_counter() - t0  # from the weights' load to the last score
    path = write_results("frame2seq_parity", tables(record), load_start=load_start,
                         extra=record, out=out)  # fmt: skip
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
