"""How long ``fidia-jax <project> demo`` takes, as a user runs it: wall and CPU seconds per demo.

Each demo runs as a fresh process (``fidia-jax <project> demo --workdir <temp>``) with the
persistent compilation cache in a fresh empty directory (``FIDIA_COMPILATION_CACHE``), so the
time includes every compile, as on a first run. CPU seconds are user + system of the child
(all its threads); on a 2-core machine they bound the wall time of an idle machine from below
by about CPU / 2. Each demo also records its exit code and its longest silence (the largest gap
between two output lines, the house rule being at most 10 s).

    python benchmarks/demo_times.py                          # the demos docs/ quote
    python benchmarks/demo_times.py --projects optimizers    # one
    python benchmarks/demo_times.py --report                 # re-table the file, no run

Writes ``benchmarks/results/demo_times.json`` (``_results``: the table ``demos``, and one
table per project, keyed by the project's name, which its page renders).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _peers  # noqa: E402
from _results import load_average, retable, write_results  # noqa: E402

DEMOS = ("optimizers", "ldl", "hypcl", "multifidelity", "safesci", "streamflow", "teamwork",
         "causal", "dycon", "algotrace", "hist", "fidia", "attention", "td", "varjepa",
         "residual_geometry", "hitvar")  # fmt: skip
"""Every project's ``demo`` (each project's page renders its row), in the order they run."""

NO_DATA_DIR = frozenset({"fidia"})
"""Demos without a ``--data-dir`` option (``fidia-jax fidia demo`` uses the built-in backbone)."""

COLUMNS = ["command", "exit code", "wall s", "CPU s", "longest silence s"]
FORMATS = [None, None, ".0f", ".0f", ".1f"]


def run_demo(project: str, work: pathlib.Path, data_dir: str | None) -> dict:
    """One demo in a fresh process; ``{"project", "command", "exit", "wall", "cpu",
    "longest_gap", "tail"}``."""
    env = {k: v for k, v in os.environ.items() if k != "FIDIA_COMPILATION_CACHE"}
    env["FIDIA_COMPILATION_CACHE"] = str(work / f"cache_{project}")
    env["PYTHONUNBUFFERED"] = "1"
    command = ["fidia-jax", project, "demo", "--workdir", str(work / f"run_{project}")]
    if data_dir and project not in NO_DATA_DIR:
        command += ["--data-dir", data_dir]
    exe = pathlib.Path(sys.executable).parent / "fidia-jax"
    run = _peers.run_timestamped([str(exe), *command[1:]], env=env, cwd=str(work))
    stamps = [run.start] + [t for t, _ in run.lines] + [run.end]
    gaps = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    shown = " ".join(command[:3])  # the temp workdir is not part of what a reader runs
    summary = work / f"run_{project}" / "summary.json"
    return {"project": project, "command": shown, "exit": run.returncode,
            "wall": run.end - run.start, "cpu": run.cpu_s, "longest_gap": max(gaps),
            "tail": [line.replace(str(work), "<work>") for _, line in run.lines[-8:]],
            "summary": json.loads(summary.read_text()) if summary.is_file() else None}  # fmt: skip


def _row(r: dict) -> list:
    return [f"`{r['command']}`", r["exit"], r["wall"], r["cpu"], r["longest_gap"]]


FIDIA_DEMO = ("max@1", "max@8", "max@32", "success@8", "precision", "identity", "recovery")
"""The columns of FIDIA's demo table (docs/fidia.md, *Demo*), from the demo's ``summary.json``."""


def _fidia_demo_table(summary: dict) -> dict:
    labels = {"before": "ProteinMPNN (before)", "after": "FIDIA (after)"}
    return {
        "columns": ["policy", *(f"{k} (proxy)" if k in ("success@8", "precision") else k
                                for k in FIDIA_DEMO)],
        "rows": [[label, *(summary[when][k] for k in FIDIA_DEMO)]
                 for when, label in labels.items() if summary.get(when)],
        "formats": [None, *([".2f"] * len(FIDIA_DEMO))],
    }  # fmt: skip


def _causal_demo_table(summary: dict) -> dict:
    """Replication 1 of IHDP as the causal demo ran it (2 arms): every method's held-out
    sqrt(PEHE) and ATE error, best first."""
    (by_method,) = summary["summary"].values()
    rows = sorted(([f"`{m}`", v["sqrt_pehe_mean"], v["ate_error_mean"]]
                   for m, v in by_method.items()), key=lambda r: r[1])  # fmt: skip
    return {"columns": ["method", "sqrt(PEHE), held out", "ATE error"], "rows": rows,
            "formats": [None, ".3f", ".3f"]}  # fmt: skip


def tables(record: dict) -> dict:
    """The ``demos`` table (every demo), one single-row table per project, ``fidia_demo``
    (FIDIA's max@N table before and after its demo training) and ``causal_demo`` (replication 1
    of IHDP, every method) when those demos ran."""
    runs = record["runs"]
    out = {"demos": {"columns": COLUMNS, "rows": [_row(r) for r in runs], "formats": FORMATS}}
    for r in runs:
        out[r["project"]] = {"columns": COLUMNS, "rows": [_row(r)], "formats": FORMATS}
        if r["exit"] == 0 and r.get("summary"):
            if r["project"] == "fidia":
                out["fidia_demo"] = _fidia_demo_table(r["summary"])
            elif r["project"] == "causal":
                out["causal_demo"] = _causal_demo_table(r["summary"])
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--projects", default=",".join(DEMOS), help="comma-separated")
    ap.add_argument("--data-dir", default=None, help="passed to demos that read data")
    ap.add_argument("--out", default=str(HERE / "results" / "demo_times.json"))
    ap.add_argument("--report", action="store_true", help="no run: re-table --out")
    args = ap.parse_args(argv)
    if args.report:
        retable(args.out, tables)
        return 0
    projects = [p for p in args.projects.split(",") if p]
    if not projects:
        ap.error("--projects is empty")
    unknown = [p for p in projects if p not in DEMOS]
    if unknown:
        ap.error(f"--projects: no demo timed for {', '.join(unknown)} (known: {', '.join(DEMOS)})")
    default_out = str(HERE / "results" / "demo_times.json")
    if set(projects) != set(DEMOS) and args.out == default_out:
        ap.error("--projects with some demos would replace the committed demo_times.json that "
                 "every page renders from: give --out FILE")  # fmt: skip
    load_start = load_average()
    runs = []
    with tempfile.TemporaryDirectory(prefix="fidia_demo_") as work:
        for p in projects:
            print(f"demo {p} ...", flush=True)
            r = run_demo(p, pathlib.Path(work), args.data_dir)
            print(f"  exit {r['exit']}, {r['wall']:.0f} s wall, {r['cpu']:.0f} CPU s, "
                  f"longest silence {r['longest_gap']:.1f} s", flush=True)  # fmt: skip
            runs.append(r)
            # written after every demo, so a stopped run keeps the demos it finished
            record = {"runs": runs, "projects": projects}
            path = write_results("demo_times", tables(record), load_start=load_start,
                                 extra=record, out=args.out)  # fmt: skip
    print(f"wrote {path}")
    failed = [r["project"] for r in runs if r["exit"] != 0]
    if failed:
        print(f"demos that failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
