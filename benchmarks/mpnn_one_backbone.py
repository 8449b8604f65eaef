"""ProteinMPNN on one backbone, whole process: fidia_jax cold / warm cache against the original.

Issue 27's single-backbone goal (cold >= 3x, warm >= 5x the original). One backbone
(``protein/motif_problems/1PRW.pdb``, chain A), ``--num-samples`` (16) sequences at
``--temperature`` (0.1), v_48_020. Each run is a fresh process, timed end to end (interpreter
start-up, imports, weights, parsing, compilation, sampling, writing), in rounds interleaved as
original, fidia_jax cold, fidia_jax warm:

* the original: ``protein_mpnn_run.py --pdb-path 1PRW.pdb --pdb-path-chains A
  --num-seq-per-target 16 --batch-size 16`` (``benchmarks/_mpnn_torch_peer.py one``;
  proteinmpnn 0.1.3, torch CPU venv of ``tools/mpnn_make_peer_venvs.sh``);
* fidia_jax cold: ``fidia-jax proteinmpnn sample --pdb 1PRW.pdb --chains A`` with its persistent
  compilation cache in a fresh empty directory (``FIDIA_COMPILATION_CACHE``; the start-up cache
  of parsed structures, weights and the compiled sampler lives inside it, ``proteinmpnn/``, so
  a cold run finds no cache of any kind);
* fidia_jax warm: the same command again on that directory.

Wall seconds and CPU seconds (user + sys of the child) per run; ratios per round (original /
fidia_jax), so a round's three runs see about the same machine load.

    python benchmarks/mpnn_one_backbone.py --rounds 2

Prints one table and writes ``benchmarks/results/mpnn_one_backbone.json`` (``_results``: the
``one_backbone`` table, min / median / max and the per-round ratios against the goals, with the
raw runs); ``--retable`` re-derives the table from the file's raw runs.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import resource
import statistics
import sys
import tempfile
import time

import _peers
import _results

REPO = pathlib.Path(__file__).resolve().parents[1]
VENV_TORCH = "/tmp/peer_mpnn_torch/bin/python"


def _parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--data-dir", default=os.environ.get("FIDIA_DATA_DIR", str(REPO.parent / "shared" / "data"))
    )
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--num-samples", type=int, default=16)
    p.add_argument("--temperature", type=float, default=0.1)
    p.add_argument("--torch-python", default=None, help=f"default {VENV_TORCH}")
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "mpnn_one_backbone.json"))
    p.add_argument(
        "--retable",
        action="store_true",
        help="re-derive the table of the --out file from its raw runs (no measurement)",
    )
    return p.parse_args(argv)


def _run(python, script, *args, name, env=None) -> tuple[float, float]:
    """Wall and CPU seconds (user + sys) of one child process (``_peers.run_peer``: its failure
    stops the benchmark)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    _peers.run_peer(python, script, *args, name=name, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main(argv=None) -> int:
    args = _parse_args(argv)
    if args.retable:
        print(f"wrote {write_table(json.loads(pathlib.Path(args.out).read_text()), args.out)}")
        return 0
    pdb = pathlib.Path(args.data_dir) / "protein" / "motif_problems" / "1PRW.pdb"
    if not pdb.is_file():
        raise SystemExit(f"{pdb} not found")
    torch_py = args.torch_python or (
        VENV_TORCH if pathlib.Path(VENV_TORCH).exists() else _peers.torch_python(None)
    )
    if torch_py is None:
        raise SystemExit("no interpreter for the original: run tools/mpnn_make_peer_venvs.sh")
    n, T = args.num_samples, args.temperature
    cli = pathlib.Path(sys.executable).parent / "fidia-jax"
    load_before = _results.load_average()
    runs: dict[str, list[tuple[float, float]]] = {"original": [], "cold": [], "warm": []}
    with tempfile.TemporaryDirectory(prefix="mpnn_one_") as tmp:
        tmp = pathlib.Path(tmp)
        original = [
            "one", pdb, "A", tmp / "orig", "--num-samples", n, "--temperature", T,
            "--pkg-dir", _peers.package_dir("proteinmpnn") or "",
        ]  # fmt: skip
        for r in range(args.rounds):
            runs["original"].append(
                _run(torch_py, "_mpnn_torch_peer.py", *original, name="torch peer")
            )
            env = {**os.environ, "FIDIA_COMPILATION_CACHE": str(tmp / f"cache{r}")}
            ours = [
                "proteinmpnn", "sample", "--pdb", pdb, "--chains", "A", "--num-samples", n,
                "--temperature", T, "--quiet", "--out", tmp / f"fidia{r}",
            ]  # fmt: skip
            runs["cold"].append(_run(sys.executable, cli, *ours, name="fidia-jax", env=env))
            runs["warm"].append(_run(sys.executable, cli, *ours, name="fidia-jax", env=env))
            print(f"round {r}: " + ", ".join(f"{k} {v[-1][0]:.1f} s" for k, v in runs.items()),
                  file=sys.stderr)  # fmt: skip
    record = {
        **_results.run_caption(load_before),
        "pdb": str(pdb),
        "chains": "A",
        "num_samples": n,
        "temperature": T,
        "rounds": args.rounds,
        "runs_wall_cpu_s": runs,
    }
    path = write_table(record, args.out)
    for row in json.loads(path.read_text())["tables"]["one_backbone"]["rows"]:
        print("  ".join(f"{c:.2f}" if isinstance(c, float) else str(c) for c in row))
    print(f"wrote {path}")
    return 0


#: The issue-44 goals: (run, original / fidia_jax at least this in CPU and in wall time).
GOALS = {"cold": 5.0, "warm": 8.0}


def one_backbone_table(runs: dict[str, list[list[float]]]) -> dict:
    """The ``one_backbone`` table from ``{"original" | "cold" | "warm": [[wall, cpu], ...]}``
    (one entry per round): min / median / max wall and CPU seconds per run, and the per-round
    ratio original / fidia_jax (median over rounds) in wall and CPU time against its goal."""
    rows = []
    for k in ("original", "cold", "warm"):
        w = [r[0] for r in runs[k]]
        c = [r[1] for r in runs[k]]
        rw = [o[0] / x[0] for o, x in zip(runs["original"], runs[k], strict=True)]
        rc = [o[1] / x[1] for o, x in zip(runs["original"], runs[k], strict=True)]
        goal = GOALS.get(k)
        met = None
        if goal is not None:
            ok = statistics.median(rw) >= goal and statistics.median(rc) >= goal
            met = f"{'met' if ok else 'not met'} (>= {goal:g}x both)"
        rows.append([
            "original (protein_mpnn_run.py)" if k == "original" else f"fidia_jax {k}",
            len(w), min(w), statistics.median(w), max(w), min(c), statistics.median(c), max(c),
            None if k == "original" else statistics.median(rw),
            None if k == "original" else statistics.median(rc), met,
        ])  # fmt: skip
    return {
        "columns": ["run", "rounds", "wall s min", "wall s median", "wall s max", "CPU s min",
                    "CPU s median", "CPU s max", "original / ours wall", "original / ours CPU",
                    "goal"],
        "rows": rows,
        "formats": [None, "d", ".1f", ".1f", ".1f", ".1f", ".1f", ".1f", ".2f", ".2f", None],
    }  # fmt: skip


def write_table(record: dict, out) -> pathlib.Path:
    """Writes ``record`` (the raw results and the run's caption keys) through
    ``_results.rewrite_results`` with the table derived from it."""
    return _results.rewrite_results(
        "mpnn_one_backbone",
        record,
        {"one_backbone": one_backbone_table(record["runs_wall_cpu_s"])},
        out,
    )


if __name__ == "__main__":
    sys.exit(main())
