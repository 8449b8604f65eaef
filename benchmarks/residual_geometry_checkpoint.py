"""Residual-update geometry on a released text model (Gemma 3 270M): the text-only check's tables.

Runs ``fidia-jax residual_geometry train --set checkpoint=PATH`` in this process (into a
workdir; :func:`fidia_jax.projects.residual_geometry.checkpoint.checkpoint_geometry`), reads
the run's ``residual_geometry_checkpoint.json`` and writes
``benchmarks/results/residual_geometry_checkpoint.json`` through
:func:`_results.write_results`; ``docs/residual_geometry.md`` renders its tables from that file
(``python tools/render_tables.py --write docs/residual_geometry.md``). Tables:

* ``layers``: per measured layer, the attention and FFN updates and the matched-RMS noise
  control: RID, ΔS, ΔD (means over sequences), RID pooled over every sequence's tokens,
  MixIG, held-out R² self → self+mix, TME (the authors' form, of the update) and TME of the
  attention weights (ours; attention only);
* ``paired``: per layer, attention − FFN RID paired over the sequences
  (:func:`_stats.paired_tests`: mean and median difference, sequences with attention lower,
  Wilcoxon signed-rank and paired t-test p), and attention − FFN MixIG (one number per layer);
* ``summary``: of the measured layers, how many have attention's RID below the FFN's (and with
  Wilcoxon p < 0.05), attention's MixIG above the FFN's and above the noise's, and the noise
  RID above both updates'.

The forms (ΔD, rank rule) are the config's: the defaults are the authors' (issue 38).

Declared protocol of the documented run (reduced: 8 sequences × 128 tokens, 7 of the 18
layers, one seed; on a shared 2-core CPU):
``python benchmarks/residual_geometry_checkpoint.py --checkpoint gemma-3-270m-q4_k_m.gguf``
(the file: ``python tools/gemma3_270m_gguf.py``).

Usage: python benchmarks/residual_geometry_checkpoint.py --checkpoint PATH [--sequences 8]
       [--layers 0,3,6,9,12,15,17] [--set key=value ...] [--workdir DIR]
       [--out benchmarks/results/residual_geometry_checkpoint.json]
       python benchmarks/residual_geometry_checkpoint.py --report [--out PATH]  # re-table
"""

from __future__ import annotations

import argparse
import math
import pathlib
import sys
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _results import (  # noqa: E402
    command_line,
    default_out,
    load_average,
    retable,
    run_fidia_cli,
    write_results,
)
from _stats import paired_cells, paired_tests  # noqa: E402

NAME = "residual_geometry_checkpoint"
UPDATES = {"attention": "attention", "ffn": "FFN", "noise": "noise (control)"}
"""The run's rows and their display names."""


def _finite(v) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


def layers_table(run: Mapping[str, Any]) -> dict:
    """One row per measured layer and update (attention, FFN, noise), from the run's
    ``geometry`` (per-layer lists)."""
    geo = run["geometry"]
    rows = []
    for i, layer in enumerate(run["layers"]):
        for key, label in UPDATES.items():
            g = geo[key]
            tme_w = g["tme_attention"][i] if "tme_attention" in g else None
            rows.append(
                [
                    layer,
                    label,
                    _finite(g["rid"][i]),
                    _finite(g["delta_s"][i]),
                    _finite(g["delta_d"][i]),
                    _finite(g["rid_pooled"][i]),
                    _finite(g["mixig"][i]),
                    f"{g['r2_self'][i]:.2f} → {g['r2_mix'][i]:.2f}",
                    _finite(g["tme"][i]),
                    _finite(tme_w),
                ]
            )
    return {
        "columns": ["layer", "update", "RID", "ΔS (nats)", "ΔD", "RID pooled", "MixIG (nats)",
                    "held-out R² self → self+mix", "TME", "TME of the attention weights (ours)"],
        "rows": rows,
        "formats": [None, None, ".3f", "+.3f", ".3f", ".3f", "+.3f", None, ".3f", ".3f"],
    }  # fmt: skip


def _pairs(run: Mapping[str, Any], i: int) -> tuple[np.ndarray, np.ndarray]:
    """Layer ``i``'s per-sequence RIDs of attention and the FFN, the pairs where both are
    finite (a RID that raised is ``null`` / NaN in the run and leaves its pair out)."""
    a = np.asarray([np.nan if v is None else v for v in run["geometry"]["attention"]["rid_per_sequence"][i]], float)  # fmt: skip
    f = np.asarray([np.nan if v is None else v for v in run["geometry"]["ffn"]["rid_per_sequence"][i]], float)  # fmt: skip
    ok = np.isfinite(a) & np.isfinite(f)
    return a[ok], f[ok]


def paired_table(run: Mapping[str, Any]) -> dict:
    """Per layer: attention − FFN RID paired over the sequences, and attention − FFN MixIG."""
    geo = run["geometry"]
    rows = []
    for i, layer in enumerate(run["layers"]):
        a, f = _pairs(run, i)
        mixig = float(geo["attention"]["mixig"][i] - geo["ffn"]["mixig"][i])
        rows.append([layer, *paired_cells(paired_tests(a, f)), mixig])
    return {
        "columns": ["layer", "sequences", "RID attention − FFN, mean", "median",
                    "attention lower", "Wilcoxon p", "paired t-test p",
                    "MixIG attention − FFN (nats)"],
        "rows": rows,
        "formats": [None, None, "+.3f", "+.3f", None, ".2g", ".2g", "+.3f"],
    }  # fmt: skip


def summary_table(run: Mapping[str, Any]) -> dict:
    """Counts over the measured layers of the orderings the paper's claim is about."""
    geo = run["geometry"]
    att, ffn, noise = geo["attention"], geo["ffn"], geo["noise"]
    n = len(run["layers"])
    paired = paired_table(run)["rows"]
    below = [a < f for a, f in zip(att["rid"], ffn["rid"], strict=True)]
    below_p = [r[3] is not None and r[3] < 0 and r[5] is not None and r[5] < 0.05 for r in paired]
    above_p = [r[3] is not None and r[3] > 0 and r[5] is not None and r[5] < 0.05 for r in paired]
    rows = [
        ["attention RID below the FFN's (layer means)", sum(below), n],
        ["attention RID below the FFN's, Wilcoxon p < 0.05", sum(below_p), n],
        ["attention RID above the FFN's, Wilcoxon p < 0.05", sum(above_p), n],
        [
            "attention MixIG above the FFN's",
            sum(a > f for a, f in zip(att["mixig"], ffn["mixig"], strict=True)),
            n,
        ],  # fmt: skip
        [
            "attention MixIG above the noise's",
            sum(a > f for a, f in zip(att["mixig"], noise["mixig"], strict=True)),
            n,
        ],  # fmt: skip
        [
            "noise RID above attention's and the FFN's",
            sum(
                z > max(a, f) for z, a, f in zip(noise["rid"], att["rid"], ffn["rid"], strict=True)
            ),
            n,
        ],  # fmt: skip
        ["per-sequence RIDs that raised (left out)", len(run.get("rid_failures", [])), None],
    ]
    return {"columns": ["ordering", "layers", "of"], "rows": rows}


def tables(record: Mapping[str, Any]) -> dict[str, dict]:
    """Every table of the page from a results record's raw ``run`` (a pure function of it)."""
    run = record["run"]
    return {"layers": layers_table(run), "paired": paired_table(run), "summary": summary_table(run)}


def fidia_argv(checkpoint: str, sequences: int, layers: str, assignments, workdir) -> list[str]:
    """The ``fidia-jax`` arguments of the run."""
    argv = ["residual_geometry", "train", "--workdir", str(workdir),
            "--set", f"checkpoint={checkpoint}", "--set", f"checkpoint_sequences={sequences}",
            "--set", f"checkpoint_layers=[{layers}]"]  # fmt: skip
    for a in assignments:
        argv += ["--set", a]
    return argv


def main(argv=None) -> int:
    load_start = load_average()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", help="a .gguf file or a Hugging Face directory")
    ap.add_argument("--sequences", type=int, default=8)
    ap.add_argument("--layers", default="0,3,6,9,12,15,17")
    ap.add_argument("--set", dest="assignments", action="append", default=[])
    ap.add_argument("--workdir", default=None, help="the run's folder (default: a temp folder)")
    ap.add_argument("--out", default=None, help=f"results file (default: {default_out(NAME)})")
    ap.add_argument(
        "--report", action="store_true", help="no run: rebuild the tables of --out from its run"
    )
    args = ap.parse_args(argv)
    out = args.out or default_out(NAME)
    if args.report:
        retable(out, tables)
        return 0
    if not args.checkpoint:
        ap.error("--checkpoint PATH is required (or --report)")

    command = command_line(None if argv is None else [str(pathlib.Path(__file__).resolve()), *argv])
    t0 = time.time()
    run, shown, _ = run_fidia_cli(
        lambda w: fidia_argv(args.checkpoint, args.sequences, args.layers, args.assignments, w),
        "residual_geometry_checkpoint.json", args.workdir,
    )  # fmt: skip
    record = {"run": run}
    path = write_results(
        NAME,
        tables(record),
        command=command,
        load_start=load_start,
        extra={
            "fidia_command": shown,
            "wall_s": time.time() - t0,
            **record,
        },  # fmt: skip
        out=out,
    )
    print(f"wrote {path}")
    for label, k, n in tables(record)["summary"]["rows"]:
        print(f"{label}: {k}" + (f" of {n}" if n is not None else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
