"""PASO vs sequential training on one GPU (sized to finish in about 2-3 minutes on one H200).

On a single accelerator the window's P gradients run as one batched (``vmap``) computation, so
an iteration costs about one large-batch gradient; small models leave the GPU under-used by
sequential training and PASO turns the spare width into fewer sequential rounds. With several
devices the window is sharded over all of them.

Tasks (those of ``benchmarks/paso.py``; same batches for both methods): the digits MLP
(T = 2048) and the small byte-level LLaMA on Shakespeare (T = 512), Adam 1e-3, exact mode,
windows 16 and 32. Reported per row: Picard iterations K vs T, gradient evaluations, final-loss
parity, parameter difference and the wall clock of both (the second call of each jitted run, so
compile is excluded; one timed call each).

The results file is written before and after every row: a run stopped by a time limit keeps the
finished rows, and the row it was running says "not finished"; a row that fails records its
error.

Usage:
  python benchmarks/gpu_paso.py --data-dir ../shared/data           # on a GPU
  python benchmarks/gpu_paso.py --quick                              # T = 256 / 64
  python benchmarks/gpu_paso.py --smoke --out /tmp/gp.json          # T = 32 / 16, window 8 (CPU)

Writes ``benchmarks/results/gpu_paso.json`` (``benchmarks/_results.py``): the table ``paso`` that
docs/benchmarks.md renders, and the raw rows.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import traceback

import jax
import numpy as np
import optax

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import paso as cpu_bench  # noqa: E402  (tasks of benchmarks/paso.py; LLaMA from the lm driver)
from _gpu_results import NOT_FINISHED, cell_error  # noqa: E402
from _results import load_average, write_results  # noqa: E402

COLUMNS = ["task", "optimizer", "window", "T", "K", "T/K", "grad evals / T", "final loss seq",
           "final loss PASO", "param rel diff", "wall seq (s)", "wall PASO (s)",
           "wall PASO / seq"]  # fmt: skip
FORMATS = [None, None, None, None, None, ".2f", ".2f", ".4f", ".4f", ".1e", ".3f", ".3f", ".2f"]


def table_row(r: dict) -> list:
    """One row of the ``paso`` table: the numbers, or the error / "not finished" after T."""
    head = [r["task"], r["optimizer"], r["window"], r["T"]]
    if r["status"] != "ok":
        text = cell_error(r["error"]) if r["status"] == "failed" else NOT_FINISHED
        return [*head, text] + [None] * (len(COLUMNS) - 5)
    return [*head, r["K"], r["T_over_K"], r["grad_evals"] / r["T"], r["loss_seq"],
            r["loss_paso"], r["param_rel_diff"], r["wall_seq_s"], r["wall_paso_s"],
            r["wall_paso_s"] / r["wall_seq_s"]]  # fmt: skip


def main(argv=None):
    ap = argparse.ArgumentParser(description="PASO vs sequential training on one GPU")
    ap.add_argument("--data-dir", default=os.environ.get("FIDIA_DATA_DIR", "../shared/data"))
    ap.add_argument("--quick", action="store_true", help="T = 256 (digits) / 64 (LLaMA)")
    ap.add_argument("--smoke", action="store_true", help="T = 32 / 16, window 8: a CPU check")
    ap.add_argument("--digits-steps", type=int, help="T of the digits MLP (default 2048)")
    ap.add_argument("--llama-steps", type=int, help="T of the tiny LLaMA (default 512)")
    ap.add_argument("--windows", help="comma-separated windows (default 16,32)")
    ap.add_argument("--skip-llama", action="store_true")
    ap.add_argument("--out", default="benchmarks/results/gpu_paso.json")
    args = ap.parse_args(argv)
    load_start = load_average()
    backend = jax.default_backend()
    if backend not in ("gpu", "cuda", "rocm"):
        print(f"warning: default backend is {backend!r}, not a GPU; figures are not GPU figures")
    devices = jax.devices()
    mesh = None
    if len(devices) > 1:
        mesh = jax.sharding.Mesh(np.array(devices), ("window",))
    t_digits, t_llama, windows = 2048, 512, (16, 32)
    if args.quick:
        t_digits, t_llama = 256, 64
    if args.smoke:
        t_digits, t_llama, windows = 32, 16, (8,)
    t_digits = args.digits_steps or t_digits
    t_llama = args.llama_steps or t_llama
    if args.windows:
        windows = tuple(int(w) for w in args.windows.split(","))
    if mesh is not None:
        windows = tuple(w for w in windows if w % len(devices) == 0)

    meta = {
        "devices": [str(d) for d in devices],
        "device_kind": devices[0].device_kind,
        "jax": jax.__version__,
        "optax": optax.__version__,
        "mode": "exact",
        "default_matmul_precision": str(getattr(jax.config, "jax_default_matmul_precision", "?")),
        "windows": list(windows),
        "steps": {"digits MLP": t_digits, "tiny LLaMA": t_llama},
        "wall": "second call of each jitted run (compile excluded), one call",
    }
    rows: list[dict] = []
    out = pathlib.Path(args.out)

    def save():
        paso_table = {"columns": COLUMNS, "rows": [table_row(r) for r in rows], "formats": FORMATS}
        try:
            write_results(
                "gpu_paso",
                {"paso": paso_table},
                load_start=load_start,
                extra={"meta": meta, "rows": rows},
                out=out,
            )
        except Exception:  # noqa: BLE001 - the measurements go on; the rows are printed
            traceback.print_exc()

    tasks: dict[str, object] = {}

    def task(name):
        if name not in tasks:
            tasks[name] = (
                cpu_bench.digits_task(0)
                if name == "digits MLP"
                else cpu_bench.llama_task(0, args.data_dir)
            )
        return tasks[name]

    plan = []
    for window in windows:
        plan.append(("digits MLP", t_digits, window))
        if not args.skip_llama:
            plan.append(("tiny LLaMA", t_llama, window))
    for name, steps, window in plan:
        row = {"task": name, "optimizer": "adam(1e-3)", "mode": "exact", "T": steps,
               "window": window, "status": "running"}  # fmt: skip
        rows.append(row)
        save()
        try:
            result = cpu_bench.bench(
                name, task(name), "adam(1e-3)", optax.adam(1e-3), steps, window, mesh
            )
            row.update(result, status="ok")
        except Exception as e:  # noqa: BLE001 - report and continue
            row.update(status="failed", error=f"{type(e).__name__}: {e}"[:500])
            print(f"{name} window {window}: FAILED {row['error'][:300]}", flush=True)
        save()

    print(f"\nPASO vs sequential on {len(devices)} x {devices[0].device_kind}")
    print("| " + " | ".join(COLUMNS) + " |")
    for r in rows:
        print(
            "| "
            + " | ".join(_text(c, f) for c, f in zip(table_row(r), FORMATS, strict=True))
            + " |"
        )
    print(f"wrote {out}")
    print(json.dumps({"rows_ok": sum(r["status"] == "ok" for r in rows), "rows": len(rows)}))


def _text(cell, fmt):
    if cell is None:
        return "—"
    if isinstance(cell, float):
        return format(cell, fmt or ".4g")
    return str(cell)


if __name__ == "__main__":
    main()
