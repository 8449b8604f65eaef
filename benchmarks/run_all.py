"""Every speed comparison the documentation cites, in one command (``make bench``, issue 44).

Each benchmark runs as its own process (``python benchmarks/<script>.py ...``), one after the
other, and writes its own results file; this script times each process (wall seconds, and CPU
seconds of the child: user + sys), records the 1-minute load average before and after it, and
collects every results file into one, ``benchmarks/results/bench.json``::

    {"command": ..., "date": ..., "machine": ..., "commit": ..., "load_average": ...,
     "tables": {"benchmarks": {...}},          # one row per benchmark (status, times, load)
     "benchmarks": {"<name>": {"command": ..., "mode": "quick" | "full", "status": "ok" |
                    "skipped: <reason>" | "failed: ...", "interleaved": ..., "wall_s": ...,
                    "cpu_s": ..., "load_average": "a -> b", "date": ..., "results": {...}}}}

``results`` is the benchmark's own results file (with its own min / median / max of CPU and
wall time where the script measures them, and its interleaving: SCALE vs AdamW, the original vs
fidia_jax vs ColabDesign rounds, ...). Entries of benchmarks not run this time are kept from the
previous ``bench.json``, so ``--only`` updates a part.

Modes: full (the protocols the documentation quotes; in its canonical results file each) and
``--quick`` (few rounds, 8 backbones for the design throughput; results files go to a scratch
folder, so a quick run never replaces the full results the pages are rendered from).

Peers: the original ProteinMPNN (torch) and ColabDesign run from the venvs that
``tools/mpnn_make_peer_venvs.sh`` builds (``/tmp/peer_mpnn_torch``,
``/tmp/peer_mpnn_colabdesign``). A benchmark whose required peer is missing is skipped with a
line saying so (``"skipped: ..."`` in ``bench.json``); an optional peer that is missing is left
out of that benchmark and named under ``peers_skipped``. GPU-only benchmarks are skipped
without a GPU, and those that need a file that is not there (a GGUF checkpoint) likewise.

    python benchmarks/run_all.py --quick                       # a few minutes' check
    python benchmarks/run_all.py                               # everything (hours on 2 cores)
    python benchmarks/run_all.py --quick --only scale_update_cost
    python benchmarks/run_all.py --list
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import pathlib
import resource
import shlex
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import _peers  # noqa: E402
import _results  # noqa: E402

#: Peer interpreters by kind; a benchmark takes one as ``--<kind>-python``.
PEER_VENVS = {
    "torch": "/tmp/peer_mpnn_torch/bin/python",
    "colabdesign": "/tmp/peer_mpnn_colabdesign/bin/python",
    "mldtypes07": "/tmp/peer_ml_dtypes_070/bin/python",
}
#: How each peer venv is built.
PEER_HINTS = {
    "torch": "build it with tools/mpnn_make_peer_venvs.sh",
    "colabdesign": "build it with tools/mpnn_make_peer_venvs.sh",
    "mldtypes07": "build it with python benchmarks/import_cost.py --make-peer-venv /tmp/peer_ml_dtypes_070",
}


@dataclasses.dataclass(frozen=True)
class Bench:
    """One benchmark script and how to run it.

    Attributes:
      name: key in ``bench.json`` (and ``--only``).
      script: file under ``benchmarks/``.
      full, quick: arguments of the two modes.
      interleaved: how the script interleaves what it compares (``""``: it does not).
      needs: kinds of required peers (:data:`PEER_VENVS`), passed as ``--<kind>-python``.
      optional: optional peers: ``(kind, flag that skips it)``.
      gpu: needs a GPU backend.
      env_file: environment variable naming a file the benchmark needs.
      data: needs ``--data-dir`` (the shared data).
    """

    name: str
    script: str
    full: tuple[str, ...] = ()
    quick: tuple[str, ...] = ()
    interleaved: str = ""
    needs: tuple[str, ...] = ()
    optional: tuple[tuple[str, str], ...] = ()
    gpu: bool = False
    env_file: str = ""
    data: bool = False


BENCHMARKS: tuple[Bench, ...] = (
    Bench(
        "scale_update_cost",
        "scale_update_cost.py",
        quick=("--quick",),
        interleaved="SCALE, AdamW alternating every round; CPU + wall min/median/max",
    ),
    Bench(
        "scale_llama",
        "scale_llama.py",
        full=("--steps", "150", "--seeds", "0,1"),
        quick=("--steps", "20", "--seeds", "0"),
        interleaved="the optimisers' steps round-robin, order rotated every step",
        data=True,
    ),
    Bench(
        "import_cost",
        "import_cost.py",
        quick=("--rounds", "2"),
        interleaved="the two environments alternate every round",
        needs=("mldtypes07",),
    ),
    Bench(
        "mpnn_one_backbone",
        "mpnn_one_backbone.py",
        full=("--rounds", "2"),
        quick=("--rounds", "1"),
        interleaved="original, fidia_jax cold, fidia_jax warm per round; CPU + wall",
        needs=("torch",),
        data=True,
    ),
    Bench(
        "mpnn_design_throughput",
        "mpnn_design_throughput.py",
        quick=("--limit", "8"),
        interleaved="",
        needs=("torch",),
        optional=(("colabdesign", "--no-colabdesign"),),
        data=True,
    ),
    Bench(
        "mpnn_sampling",
        "mpnn_sampling.py",
        full=("--threads", "1,2"),
        quick=("--repeats", "2", "--torch-repeats", "1"),
        optional=(("torch", "--no-torch"),),
        data=True,
    ),
    Bench(
        "mpnn_sampler_flops",
        "mpnn_sampler_flops.py",
        full=("--rounds", "9"),
        quick=("--rounds", "1"),
        interleaved="rounds alternate the samplers",
        data=True,
    ),
    Bench(
        "mpnn_sampler_scaling",
        "mpnn_sampler_scaling.py",
        quick=("--repeats", "1"),
        data=True,
    ),
    Bench("mpnn_log_probs_many", "mpnn_log_probs_many.py", quick=("--repeats", "2")),
    Bench(
        "fidia_reward_judge",
        "fidia_reward_judge.py",
        quick=("--repeats", "2"),
        interleaved="the judge, the peer and the full reward call alternate per round",
    ),
    Bench(
        "fidia_step_time",
        "fidia_step_time.py",
        quick=("--warmup", "2", "--steps", "3", "--repeats", "1"),
        interleaved="before / after processes alternate",
    ),
    Bench(
        "fidia_update_profile",
        "fidia_update_profile.py",
        quick=("--backbones", "1", "--repeats", "2"),
    ),
    Bench("attention_cpu", "attention_cpu.py", quick=("--nk", "4096", "--repeats", "2")),
    Bench("gpu_attention", "gpu_attention.py", gpu=True),
    Bench("gpu_paso", "gpu_paso.py", gpu=True, data=True),
    Bench("lm_load", "lm_load.py", env_file="FIDIA_GEMMA3_GGUF"),
)


def _has_gpu() -> bool:
    """Whether jax sees a GPU (asked in a child process, so this one stays jax-free)."""
    code = "import jax; print(jax.default_backend())"
    try:
        out = _peers.run_command([sys.executable, "-c", code], name="jax backend check")
    except SystemExit:
        return False
    return out.decode().strip() in ("gpu", "cuda", "rocm")


def plan(b: Bench, quick: bool, data_dir: str | None, gpu: bool | None):
    """``(argv, peers_skipped, skip_reason)`` of one benchmark (argv without ``--out``)."""
    args = list(b.quick if quick else b.full)
    skipped = []
    for kind in b.needs:
        python = PEER_VENVS[kind]
        if not pathlib.Path(python).exists():
            return None, skipped, f"skipped: peer interpreter {python} missing ({PEER_HINTS[kind]})"
        args += [f"--{kind}-python", python]
    for kind, off in b.optional:
        python = PEER_VENVS[kind]
        if pathlib.Path(python).exists():
            args += [f"--{kind}-python", python]
        else:
            args.append(off)
            skipped.append(f"{python} missing ({PEER_HINTS[kind]}); ran with {off}")
    if b.gpu and not gpu:
        return None, skipped, "skipped: needs a GPU (jax.default_backend() is not gpu)"
    if b.env_file:
        path = os.environ.get(b.env_file)
        if not path or not pathlib.Path(path).exists():
            return None, skipped, f"skipped: ${b.env_file} names no file"
    if b.data and data_dir:
        args += ["--data-dir", data_dir]
    return args, skipped, None


def run_one(b: Bench, args: list[str], out: pathlib.Path, log: pathlib.Path) -> dict:
    """Runs one benchmark process (output to ``log``); its wall and CPU seconds, load average
    and results."""
    shown = shlex.join(["python", f"benchmarks/{b.script}", *args, "--out", str(out)])
    print(f"== {b.name}: {shown}", flush=True)
    load0 = _results.load_average()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    failure = None
    try:
        proc = _peers.start_peer(sys.executable, b.script, *args, "--out", out, log_path=log)
        _peers.wait_peer(proc, name=b.name)
    except SystemExit as e:  # a failing benchmark is recorded; the others still run
        failure = str(e)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    entry = {
        "command": shown,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "load_average": f"{load0} -> {_results.load_average()}",
        "interleaved": b.interleaved or None,
    }
    if failure is not None:
        entry["status"] = f"failed: {failure.splitlines()[0]} (log {log})"
        print(failure, file=sys.stderr)
    elif not out.is_file():
        entry["status"] = f"failed: no results file {out}"
    else:
        entry["status"] = "ok"
        entry["results"] = json.loads(out.read_text())
    print(f"   {entry['status']}  wall {wall:.1f} s  cpu {cpu:.1f} s  load {entry['load_average']}")
    for key, table in (entry.get("results") or {}).get("tables", {}).items():
        _print_table(key, table)
    return entry


def _print_table(key: str, table: dict) -> None:
    """A results table on the console (the benchmark's own min / median / max columns)."""

    def cell(c):
        return f"{c:.4g}" if isinstance(c, float) else "—" if c is None else str(c)

    print(f"   [{key}] " + " | ".join(map(str, table["columns"])))
    for r in table["rows"]:
        print("     " + " | ".join(cell(c) for c in r))


def _row(name: str, e: dict) -> list:
    res = e.get("results") or {}
    return [
        name,
        e.get("mode"),
        e["status"],
        e.get("wall_s"),
        e.get("cpu_s"),
        e.get("load_average"),
        res.get("date") or e.get("date"),
    ]


def _parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="few rounds; 8 backbones")
    p.add_argument("--only", default="", help="comma-separated benchmark names")
    p.add_argument("--skip", default="", help="comma-separated benchmark names not to run")
    p.add_argument("--data-dir", default=os.environ.get("FIDIA_DATA_DIR"))
    p.add_argument("--out", default=str(HERE / "results" / "bench.json"))
    p.add_argument("--list", action="store_true", help="print the benchmarks and exit")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = _parse_args(argv)
    os.chdir(ROOT)  # the benchmarks' relative defaults (../shared/data, benchmarks/results)
    names = [b.name for b in BENCHMARKS]
    only = [n for n in args.only.split(",") if n]
    skip = [n for n in args.skip.split(",") if n]
    unknown = sorted(set(only + skip) - set(names))
    if unknown:
        raise SystemExit(f"unknown benchmark(s) {unknown}; known: {names}")
    todo = [b for b in BENCHMARKS if (not only or b.name in only) and b.name not in skip]
    if args.list:
        for b in todo:
            print(f"{b.name:24} benchmarks/{b.script}  quick: {' '.join(b.quick) or '-'}")
        return 0
    out_path = pathlib.Path(args.out)
    previous = {}
    if out_path.is_file():
        previous = json.loads(out_path.read_text()).get("benchmarks", {})
    gpu = _has_gpu() if any(b.gpu for b in todo) else None
    load_start = _results.load_average()
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="fidia_bench_"))
    entries = dict(previous)
    failed = 0
    for b in todo:
        bargs, peers_skipped, reason = plan(b, args.quick, args.data_dir, gpu)
        if reason:
            print(f"== {b.name}: {reason}", flush=True)
            entries[b.name] = {"status": reason, "mode": "quick" if args.quick else "full"}
            continue
        for s in peers_skipped:
            print(f"   {b.name}: optional peer {s}", flush=True)
        res = (scratch if args.quick else HERE / "results") / f"{b.name}.json"
        entry = run_one(b, bargs, res, scratch / f"{b.name}.log")
        entry["mode"] = "quick" if args.quick else "full"
        if peers_skipped:
            entry["peers_skipped"] = peers_skipped
        failed += entry["status"].startswith("failed")
        entries[b.name] = entry
    table = {
        "columns": ["benchmark", "mode", "status", "wall s", "CPU s", "load average", "date"],
        "rows": [_row(n, entries[n]) for n in names if n in entries],
        "formats": [None, None, None, ".1f", ".1f", None, None],
    }
    path = _results.write_results(
        "bench",
        {"benchmarks": table},
        load_start=load_start,
        out=out_path,
        extra={"benchmarks": {n: entries[n] for n in names if n in entries}},
    )
    print(f"wrote {path} (logs in {scratch})")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
