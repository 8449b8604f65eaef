"""Small-scale CPU experiments for the attention kernels (docs/kernels.md).

1. Attn-QAT: train the small LLaMA on Shakespeare bytes with bf16-input attention ("bf16"),
   the drop-in FP4 variant and Attn-QAT (same init, same batches, same steps); report loss
   curves and final validation loss.
2. SANTA: take the model trained with bf16 attention, prefill half of a validation window
   densely, then decode the second half teacher-forced with dense attention and with SANTA
   (S in {32, 128, 512, 2048}, iid / stratified / systematic); report validation perplexity of the
   decoded positions and top-1 agreement of the SANTA logits with dense decoding.

Usage:
  python benchmarks/attention_experiments.py --data-dir ../shared/data [--steps 300]
  python benchmarks/attention_experiments.py --report   # re-table --out without a run

Writes benchmarks/results/attention_experiments.json through ``_results.write_results``: the
tables ``attn_qat`` and ``santa`` that docs/kernels.md renders, and the raw results (``args``,
``jax``, ``devices``, ``qat``, ``santa``, ``wall_s``). CPU only; a few minutes on 2 cores.

The experiments are the attention driver's (:func:`fidia_jax.projects.attention.run_experiments`,
the ``default`` preset; ``fidia-jax attention train --config tiny|demo|default`` runs them at
other scales). The flags below override that preset.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time
from collections.abc import Mapping
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _results import load_average, retable, write_results  # noqa: E402

QAT_LABELS = {
    "bf16": "bf16 attention (inputs rounded to bf16)",
    "attn_qat": "Attn-QAT (FP4 fwd, matched bwd)",
    "attn_qat_dropin": "drop-in FP4 (FP4 fwd, plain flash bwd)",
}
QAT_ORDER = ("bf16", "attn_qat", "attn_qat_dropin")
GOAL_REL = 0.02
"""The page's goal: Attn-QAT's validation loss within 2 % of bf16's."""
CURVE_EVERY = 50
"""The loss table shows the curve's steps ``t % 50 == 0`` and the last step."""


def qat_table(qat: list[Mapping[str, Any]]) -> dict[str, Any]:
    """The Attn-QAT table: per variant (bf16, Attn-QAT, drop-in) its training loss at the bf16
    curve's steps ``t % CURVE_EVERY == 0`` and its last step, the validation loss, its ratio to
    bf16's minus one, whether that is within ``GOAL_REL``, the step a non-finite loss stopped
    it (``—`` when none) and the wall time."""
    by = {r["impl"]: r for r in qat}
    base = by["bf16"]
    last = base["curve"][-1][0]
    steps = [t for t, _ in base["curve"] if t % CURVE_EVERY == 0 or t == last]
    rows = []
    for impl in [i for i in QAT_ORDER if i in by] + [i for i in by if i not in QAT_ORDER]:
        r = by[impl]
        curve = {int(t): float(x) for t, x in r["curve"]}
        rel = r["val_loss"] / base["val_loss"] - 1.0
        rows.append(
            [QAT_LABELS.get(impl, impl)]
            + [curve.get(t) for t in steps]
            + [
                r["val_loss"],
                None if impl == "bf16" else rel,
                None if impl == "bf16" else ("yes" if abs(rel) <= GOAL_REL else "no"),
                r.get("nonfinite_step"),
                r["seconds"],
            ]
        )
    columns = (
        ["step"]
        + [str(t) for t in steps]
        + [
            "val",
            "val vs bf16",
            f"within {GOAL_REL:.0%} of bf16",
            "stopped (non-finite) at",
            "wall (s)",
        ]
    )
    formats = [None] + [".3f"] * len(steps) + [".3f", "+.1%", None, None, ".0f"]
    return {"columns": columns, "rows": rows, "formats": formats}


def santa_table(santa: Mapping[str, Any]) -> dict[str, Any]:
    """The SANTA table: ``"<ppl> / <top-1 agreement>"`` per sampler (rows, in run order) and
    sample budget S (columns, ascending); a first row ``dense`` (the reference: its perplexity,
    agreement 1)."""
    srows = santa["rows"]
    budgets = sorted({int(r["S"]) for r in srows})
    methods = list(dict.fromkeys(r["method"] for r in srows))
    cell = {
        (r["method"], int(r["S"])): f"{r['ppl']:.3f} / {r['top1_agreement']:.3f}" for r in srows
    }
    rows = [["dense (reference)"] + [f"{santa['dense_ppl']:.3f} / 1.000"] * len(budgets)]
    rows += [[m] + [cell.get((m, s)) for s in budgets] for m in methods]
    columns = ["method"] + [f"S={s} ppl / agree" for s in budgets]
    return {"columns": columns, "rows": rows}


def tables(record: Mapping[str, Any]) -> dict[str, Any]:
    """The page's tables from a raw record (a run's, or a results file read back)."""
    out = {}
    if record.get("qat"):
        out["attn_qat"] = qat_table(record["qat"])
    if record.get("santa"):
        out["santa"] = santa_table(record["santa"])
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=os.environ.get("FIDIA_DATA_DIR", "../shared/data"))
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--santa-batch", type=int, default=16)
    ap.add_argument("--skip-qat", action="store_true")
    ap.add_argument("--out", default=str(HERE / "results" / "attention_experiments.json"))
    ap.add_argument("--report", action="store_true", help="no run: re-table --out")
    args = ap.parse_args(argv)
    if args.report:
        retable(args.out, tables)
        return 0

    from fidia_jax.projects import attention

    load_start = load_average()
    t0 = time.perf_counter()
    config = attention.get_config(
        "default",
        data={"data_dir": args.data_dir, "seq_len": args.seq_len},
        qat={
            "steps": args.steps,
            "batch_size": args.batch,
            "learning_rate": args.lr,
            "impls": ("bf16",) if args.skip_qat else attention.QAT_IMPLS,
        },
        santa={"batch_size": args.santa_batch},
    )
    results = {"args": vars(args), **attention.run_experiments(config)}
    results["wall_s"] = time.perf_counter() - t0
    path = pathlib.Path(args.out)
    write_results(path.stem, tables(results), load_start=load_start, extra=results, out=path)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
