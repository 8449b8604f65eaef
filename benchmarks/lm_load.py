"""Loading a released language model with and without the conversion cache (issue 39, Deliver 3).

Loads the Gemma 3 270M GGUF (Q4_K_M) with :func:`fidia_jax.models.load_lm_checkpoint` (model and
tokenizer) in fresh processes, one after the other:

0. ``baseline`` (with ``--baseline-tree DIR``): the code before the cache, from ``DIR``;
1. ``uncached``: ``cache=False``;
2. ``cold``: an empty cache directory (conversion + writing the entry);
3. ``warm`` x ``--repeats``: the same cache directory (read back).

Each child process reports the wall and CPU seconds (``time.process_time``: all threads) of the
``load_lm_checkpoint`` call alone, the import time of ``fidia_jax.models`` separately, its peak
resident memory and the load average before and after; it then runs the model on a short prompt
and saves the logits. The parent asserts that the logits of every cached load equal the
uncached ones bit for bit, and writes ``benchmarks/results/lm_load.json`` with the command, the
date, the machine and the git commit.

The file is written through ``benchmarks/_results.py`` (table ``loads``, rendered into
``docs/lm_checkpoints.md``); the raw runs stay under ``runs``.

Usage::

    nice -n 10 python benchmarks/lm_load.py [PATH.gguf] [--repeats 3] [--cache-dir DIR]

Re-deriving the table of an existing results file from its raw ``runs`` (no measurement; the
file keeps its command, date, machine and commit)::

    python benchmarks/lm_load.py --retable [--out FILE]

With the code before the cache as a baseline (run first)::

    mkdir -p /tmp/lm_base && git archive HEAD fidia_jax | tar -x -C /tmp/lm_base
    nice -n 10 python benchmarks/lm_load.py PATH.gguf --baseline-tree /tmp/lm_base

``PATH`` defaults to ``$FIDIA_GEMMA3_GGUF`` (``tools/gemma3_270m_gguf.py`` makes the file). The
cache directory defaults to a new temporary one, removed at the end.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import re
import shutil
import sys
import tempfile
import time

import _peers
import _results

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
PROMPT = "The capital of France is"
MODES = {
    "baseline": "before the cache (`--baseline-tree`: the code before it)",
    "uncached": "`cache=False` (one GGUF parse for model and tokenizer)",
    "cold": "cold: empty cache directory (converts and writes the entries)",
    "warm": "warm: the same cache directory again (reads the entries back)",
}
CACHE_HIT = re.compile(r"loaded from cache .* in ([0-9.]+) s")


def load_table(runs: list[dict]) -> dict:
    """The ``loads`` table from the raw runs: per load its mode, the wall and CPU seconds of
    the ``load_lm_checkpoint`` call, the import of ``fidia_jax.models``, the seconds the loader's
    ``loaded from cache ... in N s`` lines report (model + tokenizer; ``None`` without a hit or
    when the run kept no messages), the peak RSS and the 1-minute load average before it."""
    rows = []
    for r in runs:
        hits = [float(m[1]) for s in r.get("messages") or [] if (m := CACHE_HIT.search(s))]
        rows.append([
            r["mode"], MODES.get(r["mode"].rstrip("0123456789"), ""), r["load_wall_s"],
            r["load_cpu_s"], r["import_wall_s"], round(sum(hits), 1) if hits else None,
            r["peak_rss_mib"], r["loadavg_before"][0],
        ])  # fmt: skip
    return {
        "columns": [
            "load",
            "what",
            "load wall s",
            "load CPU s",
            "import s",
            "cache-reported s (model + tokenizer)",
            "peak RSS MiB",
            "1-min load average before",
        ],  # fmt: skip
        "rows": rows,
        "formats": [None, None, ".1f", ".1f", ".1f", ".1f", ".0f", ".1f"],
    }


def _caption(record: dict) -> dict:
    """The caption keys of ``write_results`` (command, date, machine, commit, load average)
    from a raw record of this script (or from a file already written by it)."""
    date = record["date"]
    try:
        date = datetime.datetime.strptime(date, "%Y-%m-%dT%H:%M:%SZ").strftime("%Y-%m-%d %H:%M UTC")
    except ValueError:
        pass  # already in write_results' form
    machine = record.get("machine_details", record.get("machine"))
    if isinstance(machine, dict):
        machine = (f"{machine['platform']}, {machine['cpu_count']} CPUs "
                   f"({machine.get('affinity')} usable), python {machine['python']}")  # fmt: skip
    commit = record.get("git_commit") or record.get("commit") or "unknown"
    if record.get("git_uncommitted") and not commit.endswith("+dirty"):
        commit += "+dirty"
    runs = record["runs"]
    load = f"{runs[0]['loadavg_before'][0]} -> {runs[-1]['loadavg_after'][0]}"
    return {"command": record["command"], "date": date, "machine": machine, "commit": commit,
            "load_average": load}  # fmt: skip


def write_table(record: dict, out: str | os.PathLike) -> pathlib.Path:
    """Writes ``record`` (this script's raw record) through ``_results.write_results`` with the
    ``loads`` table derived from its runs; the caption keys are the record's own (its command,
    date, machine, commit and load average), not those of the process that writes."""
    extra = {k: v for k, v in record.items() if k not in _results.RESERVED}
    if isinstance(record.get("machine"), dict):
        extra["machine_details"] = record["machine"]
    return _results.write_results(
        "lm_load", {"loads": load_table(record["runs"])}, extra=extra, out=out,
        caption=_caption(record),
    )  # fmt: skip


def _child(mode: str, path: str, cache_dir: str, logits_out: str) -> None:
    """One load in this (fresh) process; prints one JSON line."""
    import resource

    load0 = os.getloadavg()
    t0 = time.perf_counter()
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx

    from fidia_jax import models

    import_s = time.perf_counter() - t0
    w0, c0 = time.perf_counter(), time.process_time()
    if mode == "baseline":  # the code before the cache (--baseline-tree): no cache arguments
        model, tok = models.load_lm_checkpoint(path, max_seq_len=64)
    else:
        model, tok = models.load_lm_checkpoint(
            path, max_seq_len=64, cache=mode != "uncached", cache_dir=cache_dir
        )
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    load1 = os.getloadavg()
    ids = jnp.asarray([tok.encode(PROMPT)], jnp.int32)
    logits = np.asarray(nnx.jit(lambda m, t: m(t))(model, ids))
    np.save(logits_out, logits)
    rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        json.dumps(
            {
                "mode": mode,
                "load_wall_s": round(wall, 3),
                "load_cpu_s": round(cpu, 3),
                "import_wall_s": round(import_s, 3),
                "peak_rss_mib": round(rss_kib / 1024, 1),
                "loadavg_before": [round(x, 2) for x in load0],
                "loadavg_after": [round(x, 2) for x in load1],
                "prompt_ids": [int(i) for i in ids[0]],
                "fidia_jax": os.path.dirname(os.path.dirname(models.__file__)),
            }
        )
    )


def _run_child(mode: str, path: str, cache_dir: str, logits_out: str, tree=ROOT) -> dict:
    cmd = [sys.executable, __file__, "--child", mode, path, "--cache-dir", cache_dir]
    cmd += ["--logits-out", logits_out]
    env = dict(os.environ, PYTHONPATH=str(tree) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    out = _peers.run_command(cmd, name=f"lm_load: the {mode} child", env=env, cwd=ROOT)
    row = json.loads(out.decode().strip().splitlines()[-1])
    row["process_wall_s"] = round(time.perf_counter() - t0, 3)
    print(
        f"{mode:9s} load {row['load_wall_s']:7.1f} s wall, {row['load_cpu_s']:7.1f} s CPU "
        f"(import {row['import_wall_s']:.1f} s; load average {row['loadavg_before'][0]:.1f})",
        flush=True,
    )
    return row


def _git(*args: str) -> str:
    try:
        return _peers.run_command(["git", *args], name="git", cwd=ROOT).decode().strip()
    except SystemExit:
        return ""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("path", nargs="?", default=os.environ.get("FIDIA_GEMMA3_GGUF"))
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--cache-dir", default=None)
    p.add_argument("--out", default=str(HERE / "results" / "lm_load.json"))
    p.add_argument(
        "--baseline-tree",
        default=None,
        help="a tree of the code before the cache (e.g. `git archive HEAD fidia_jax | tar -x "
        "-C DIR`): one more load with it, first",
    )
    p.add_argument(
        "--retable",
        action="store_true",
        help="re-derive the table of the --out file from its raw runs (no measurement)",
    )
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--logits-out", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.retable:
        print(f"wrote {write_table(json.loads(pathlib.Path(args.out).read_text()), args.out)}")
        return 0
    if not args.path:
        p.error("give the GGUF path or set FIDIA_GEMMA3_GGUF")
    if args.child:
        _child(args.child, args.path, args.cache_dir, args.logits_out)
        return 0
    import numpy as np

    command = " ".join(["python", "benchmarks/lm_load.py", *(argv or sys.argv[1:])])
    own_tmp = args.cache_dir is None
    cache_dir = args.cache_dir or tempfile.mkdtemp(prefix="fidia_lm_cache_")
    if os.path.isdir(cache_dir) and os.listdir(cache_dir):
        p.error(f"--cache-dir {cache_dir} is not empty (the cold load needs an empty one)")
    work = tempfile.mkdtemp(prefix="fidia_lm_load_")
    rows, logits = [], {}
    try:
        modes = ["uncached", "cold", *(f"warm{i + 1}" for i in range(args.repeats))]
        if args.baseline_tree:
            modes.insert(0, "baseline")
        for mode in modes:
            out = os.path.join(work, f"{mode}.npy")
            tree = args.baseline_tree if mode == "baseline" else ROOT
            row = _run_child(mode.rstrip("0123456789"), args.path, cache_dir, out, tree)
            row["mode"] = mode
            rows.append(row)
            logits[mode] = np.load(out)
        entries = sorted(os.listdir(cache_dir))
        entry_bytes = {
            e: sum(f.stat().st_size for f in pathlib.Path(cache_dir, e).iterdir()) for e in entries
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if own_tmp:
            shutil.rmtree(cache_dir, ignore_errors=True)
    identical = all(np.array_equal(logits[m], logits["uncached"]) for m in logits)
    assert identical, "cached logits differ from the uncached ones"
    assert len({tuple(r["prompt_ids"]) for r in rows}) == 1, "prompt ids differ"
    warm = [r for r in rows if r["mode"].startswith("warm")]
    by_mode = {r["mode"]: r for r in rows}
    record = {
        "what": "models.load_lm_checkpoint (model + tokenizer) of the Gemma 3 270M GGUF, "
        "fresh process per load; load_* timings cover the call alone",
        "command": command,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "git_commit": _git("rev-parse", "HEAD"),
        "git_uncommitted": _git(
            "status", "--porcelain", "--", "fidia_jax/models", "benchmarks/lm_load.py"
        ).splitlines(),
        "machine": {
            "node": platform.node(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpu_count": os.cpu_count(),
            "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        },
        "source": {"path": args.path, "bytes": os.path.getsize(args.path)},
        "cache_entries_bytes": entry_bytes,
        "logits_identical_to_uncached": identical,
        "prompt": PROMPT,
        "runs": rows,
        "summary": {
            "baseline_load_wall_s": by_mode.get("baseline", {}).get("load_wall_s"),
            "baseline_load_cpu_s": by_mode.get("baseline", {}).get("load_cpu_s"),
            "uncached_load_wall_s": by_mode["uncached"]["load_wall_s"],
            "uncached_load_cpu_s": by_mode["uncached"]["load_cpu_s"],
            "cold_load_wall_s": by_mode["cold"]["load_wall_s"],
            "cold_load_cpu_s": by_mode["cold"]["load_cpu_s"],
            "warm_load_wall_s": [r["load_wall_s"] for r in warm],
            "warm_load_cpu_s": [r["load_cpu_s"] for r in warm],
            "warm_max_load_wall_s": max(r["load_wall_s"] for r in warm),
            "loadavg_1min_range": [
                min(r["loadavg_before"][0] for r in rows),
                max(r["loadavg_after"][0] for r in rows),
            ],
        },
    }
    print(f"wrote {write_table(record, args.out)}")
    print(json.dumps(record["summary"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
