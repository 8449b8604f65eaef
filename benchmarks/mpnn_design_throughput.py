"""ProteinMPNN design throughput: backbones per hour, end to end, against ColabDesign and the original.

Issue 10 ("Speed"): the 50 single-chain backbones of ``protein/mdanalysistests_dssp/`` plus the
MotifBench reference chains (``protein/motifbench/example/reference_pdb_baseline/*/*.pdb``),
``--num-samples`` (8) sequences each at ``--temperature`` (0.1), v_48_020, all chains designed.
Each tool runs as a fresh process, timed end to end (interpreter start-up, imports, weights,
parsing, every compilation, sampling, writing outputs):

* fidia_jax: one ``fidia-jax proteinmpnn sample --pdb-dir DIR --bucket 64`` (lengths padded into
  buckets, one compile per bucket, two worker threads so that new buckets compile while others
  sample), cold: its persistent compilation cache is a fresh empty directory
  (``FIDIA_COMPILATION_CACHE``), so every program is compiled inside the timed run;
* ColabDesign 1.1.1 (``benchmarks/_mpnn_colabdesign_peer.py`` in its venv): ``mk_mpnn_model``
  once, then ``prep_inputs`` + ``sample(batch=N)`` per backbone (compiles per length);
* the original (``benchmarks/_mpnn_torch_peer.py design`` in a torch CPU venv): the structures
  parsed into one JSONL with the original ``parse_PDB``, then one ``protein_mpnn_run.py`` run.

Native-sequence recovery is each tool's own (fraction of designed residues equal to the native,
averaged over samples, then over backbones). The venvs: ``tools/mpnn_make_peer_venvs.sh``.

    python benchmarks/mpnn_design_throughput.py --smoke          # 2 backbones
    python benchmarks/mpnn_design_throughput.py                  # the full protocol (~80 backbones)

Each tool's wall time and the CPU time (user + sys) of its processes. Prints one table and writes
``benchmarks/results/mpnn_design_throughput.json`` (``_results``: the ``throughput`` table with the
raw results); ``--retable`` re-derives the table from the file's raw results.
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
VENV_COLABDESIGN = "/tmp/peer_mpnn_colabdesign/bin/python"


def _parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--data-dir", default=os.environ.get("FIDIA_DATA_DIR", str(REPO.parent / "shared" / "data"))
    )
    p.add_argument("--smoke", action="store_true", help="2 backbones only")
    p.add_argument("--limit", type=int, default=None, help="first N backbones only")
    p.add_argument("--num-samples", type=int, default=8)
    p.add_argument("--temperature", type=float, default=0.1)
    p.add_argument("--bucket", type=int, default=64, help="fidia_jax length bucket")
    p.add_argument(
        "--torch-python",
        default=None,
        help=f"interpreter of the original (torch CPU + proteinmpnn 0.1.3); default {VENV_TORCH}",
    )
    p.add_argument(
        "--colabdesign-python",
        default=None,
        help=f"interpreter with ColabDesign 1.1.1; default {VENV_COLABDESIGN}",
    )
    p.add_argument("--no-colabdesign", action="store_true", help="skip the ColabDesign peer")
    p.add_argument(
        "--workers", type=int, default=None, help="fidia-jax --workers (default: its own)"
    )
    p.add_argument(
        "--serial-row", action="store_true", help="also run fidia-jax with --workers 1 (a row)"
    )
    p.add_argument(
        "--out", default=str(REPO / "benchmarks" / "results" / "mpnn_design_throughput.json")
    )
    p.add_argument(
        "--retable",
        action="store_true",
        help="re-derive the table of the --out file from its raw runs (no measurement)",
    )
    return p.parse_args(argv)


def backbones(data_dir: pathlib.Path) -> list[pathlib.Path]:
    """The 50 single-chain DSSP-test backbones, then the MotifBench reference chains (sorted)."""
    dssp = sorted((data_dir / "protein" / "mdanalysistests_dssp").glob("*.pdb.gz"))
    motif = sorted(
        (data_dir / "protein" / "motifbench" / "example" / "reference_pdb_baseline").glob("*/*.pdb")
    )
    if not dssp or not motif:
        raise SystemExit(
            f"backbones not found under {data_dir}/protein (mdanalysistests_dssp, motifbench)"
        )
    return dssp + motif


def _name(path: pathlib.Path) -> str:
    return path.name.removesuffix(".gz").rsplit(".", 1)[0]


def _recovery_of(per_backbone: dict[str, list[float]]) -> float:
    return statistics.fmean(statistics.fmean(v) for v in per_backbone.values())


def _paired_p(rec: dict, ours: dict) -> float | None:
    """Two-sided Wilcoxon signed-rank p-value of the per-backbone mean recoveries against fidia_jax's
    (paired by backbone; ``None`` when all differences are 0 or scipy is missing)."""
    try:
        from scipy.stats import wilcoxon
    except ImportError:
        return None
    d = [statistics.fmean(rec[k]) - statistics.fmean(ours[k]) for k in ours]
    if not any(d):
        return None
    return float(wilcoxon(d).pvalue)


def _timed(fn) -> tuple[float, float]:
    """Wall seconds of ``fn()`` and CPU seconds (user + sys) of the child processes it ran."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    fn()
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


#: Issue 44's goal: the full protocol at this many times the original's throughput or better.
GOAL_VS_ORIGINAL = 10.0


def throughput_table(record: dict) -> dict:
    """The ``throughput`` table from a raw record (``tools``: per tool ``wall_s``, ``cpu_s``
    (``None`` in records made before CPU time was kept), ``recovery``, ...): per tool its times,
    backbones per hour, how many times fidia_jax's time it took (wall and CPU), its mean
    native-sequence recovery, the difference to fidia_jax's and the paired Wilcoxon p."""
    tools = record["tools"]
    ours = tools["fidia_jax"]
    n = len(record["backbones"])
    rows = []
    for tool, t in tools.items():
        cpu = t.get("cpu_s")
        speed_cpu = None if cpu is None or ours.get("cpu_s") is None else cpu / ours["cpu_s"]
        goal = None
        if tool.startswith("original") and not record.get("smoke") and n >= 80:
            ok = t["wall_s"] / ours["wall_s"] >= GOAL_VS_ORIGINAL and (
                speed_cpu is None or speed_cpu >= GOAL_VS_ORIGINAL
            )
            goal = f"{'met' if ok else 'not met'} (>= {GOAL_VS_ORIGINAL:g}x)"
        rows.append([
            tool, n, t["wall_s"], cpu, 3600.0 * n / t["wall_s"], t["wall_s"] / ours["wall_s"],
            speed_cpu, t["recovery"], t["recovery"] - ours["recovery"],
            t.get("recovery_wilcoxon_p_vs_fidia"), goal,
        ])  # fmt: skip
    return {
        "columns": ["tool", "backbones", "wall s", "CPU s", "backbones / h",
                    "time / fidia_jax (wall)", "time / fidia_jax (CPU)", "recovery",
                    "recovery - fidia_jax", "Wilcoxon p", "goal"],
        "rows": rows,
        "formats": [None, "d", ".1f", ".1f", ".0f", ".2f", ".2f", ".3f", "+.3f", ".3f", None],
    }  # fmt: skip


def write_table(record: dict, out) -> pathlib.Path:
    """Writes ``record`` (the raw results and the run's caption keys) through
    ``_results.rewrite_results`` with the table derived from it."""
    return _results.rewrite_results(
        "mpnn_design_throughput", record, {"throughput": throughput_table(record)}, out
    )


def main(argv=None) -> int:
    args = _parse_args(argv)
    if args.retable:
        print(f"wrote {write_table(json.loads(pathlib.Path(args.out).read_text()), args.out)}")
        return 0
    files = backbones(pathlib.Path(args.data_dir))
    if args.smoke:
        files = files[:2]
    elif args.limit:
        files = files[: args.limit]
    torch_py = args.torch_python or (
        VENV_TORCH if pathlib.Path(VENV_TORCH).exists() else _peers.torch_python(None)
    )
    if torch_py is None:
        raise SystemExit(
            "no interpreter for the original: run tools/mpnn_make_peer_venvs.sh or pass --torch-python"
        )
    cd_py = None
    if not args.no_colabdesign:
        cd_py = args.colabdesign_python or VENV_COLABDESIGN
        if not pathlib.Path(cd_py).exists():
            raise SystemExit(
                f"{cd_py} not found: run tools/mpnn_make_peer_venvs.sh, pass --colabdesign-python, or --no-colabdesign"
            )
    n, T = args.num_samples, args.temperature
    rows = {}
    load_before = _results.load_average()
    with tempfile.TemporaryDirectory(prefix="mpnn_design_tp_") as tmp:
        tmp = pathlib.Path(tmp)
        listing = tmp / "list.txt"
        listing.write_text("\n".join(str(f) for f in files) + "\n")
        print(f"{len(files)} backbones, {n} samples each at T={T}", file=sys.stderr)

        # the original (torch CPU): its failure stops the benchmark before anything is written
        out = tmp / "torch.json"
        wall_cpu = _timed(
            lambda: _peers.run_peer(
                torch_py,
                "_mpnn_torch_peer.py",
                "design",
                listing,
                tmp / "torch",
                out,
                "--num-samples",
                n,
                "--temperature",
                T,
                "--pkg-dir",
                _peers.package_dir("proteinmpnn") or "",
                name="torch peer",
            )
        )
        rows["original (torch CPU)"] = (
            *wall_cpu,
            {k: v["recovery"] for k, v in json.loads(out.read_text()).items()},
        )

        if cd_py is not None:
            out = tmp / "colabdesign.json"
            wall_cpu = _timed(
                lambda: _peers.run_peer(
                    cd_py,
                    "_mpnn_colabdesign_peer.py",
                    listing,
                    tmp / "colabdesign",
                    out,
                    "--num-samples",
                    n,
                    "--temperature",
                    T,
                    name="colabdesign peer",
                )
            )
            rows["ColabDesign 1.1.1"] = (
                *wall_cpu,
                {k: v["recovery"] for k, v in json.loads(out.read_text()).items()},
            )

        pdb_dir = tmp / "pdbs"
        pdb_dir.mkdir()
        for f in files:
            (pdb_dir / f.name).symlink_to(f)
        cli = pathlib.Path(sys.executable).parent / "fidia-jax"
        runs = [("fidia_jax", args.workers)]
        if args.serial_row:
            runs.append(("fidia_jax (--workers 1)", 1))
        for tool, workers in runs:
            fj_out = tmp / f"fidia{len(rows)}"
            wall_cpu = _timed(
                lambda fj_out=fj_out, workers=workers: _peers.run_peer(
                    sys.executable, cli, "proteinmpnn", "sample", "--pdb-dir", pdb_dir,
                    "--num-samples", n, "--temperature", T, "--bucket", args.bucket,
                    "--out", fj_out, "--quiet", *(["--workers", workers] if workers else []),
                    name="fidia-jax",
                    # cold: a fresh persistent compilation cache for every run
                    env={**os.environ, "FIDIA_COMPILATION_CACHE": str(fj_out) + "_jax_cache"},
                )
            )  # fmt: skip
            rec = {}
            for f in files:
                summary = json.loads((fj_out / _name(f) / "summary.json").read_text())
                rec[_name(f)] = [s["recovery"] for s in summary["samples"]]
            rows[tool] = (*wall_cpu, rec)

    ours_rec = rows["fidia_jax"][2]
    record = {
        **_results.run_caption(load_before),
        "backbones": [_name(f) for f in files],
        "num_samples": n,
        "temperature": T,
        "bucket": args.bucket,
        "smoke": bool(args.smoke),
        "tools": {},
    }
    for tool, (wall, cpu, rec) in rows.items():
        missing = sorted(set(ours_rec) - set(rec))
        if missing:
            raise SystemExit(f"{tool}: no result for {missing}")
        record["tools"][tool] = {
            "wall_s": wall,
            "cpu_s": cpu,
            "recovery": _recovery_of({k: rec[k] for k in ours_rec}),
            "recovery_per_backbone": {k: statistics.fmean(v) for k, v in rec.items()},
            "recovery_wilcoxon_p_vs_fidia": _paired_p(rec, ours_rec),
        }
    path = write_table(record, args.out)
    for row in json.loads(path.read_text())["tables"]["throughput"]["rows"]:
        print("  ".join(f"{c:.3g}" if isinstance(c, float) else str(c) for c in row))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
