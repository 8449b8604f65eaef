"""Where a one-backbone ``fidia-jax proteinmpnn sample`` process spends its time, phase by phase.

The process of ``benchmarks/mpnn_one_backbone.py`` (``fidia-jax proteinmpnn sample --pdb
1PRW.pdb --chains A --num-samples 16 --temperature 0.1 --quiet``), cold (a fresh, empty
``FIDIA_COMPILATION_CACHE`` directory: no cache of any kind) then warm (the same directory
again), each a fresh process. The child runs the CLI's ``main`` in-process with time stamps
(wall and process CPU, all threads) around its phases: interpreter start-up, importing the CLI,
argument parsing (which imports the project), JAX's import and cache set-up, the structure,
the weights, tracing and lowering, XLA compilation, (de)serializing the executable, sampling,
writing, and the interpreter's exit. Phases nest; each row's time includes its sub-rows
(``.`` prefixes). JAX's own monitoring events name every compiled program with its trace,
lowering and XLA durations.

    python benchmarks/mpnn_startup_profile.py --rounds 2
    python benchmarks/mpnn_startup_profile.py --rounds 2 --baseline-tree /tmp/mpnn_head

``--baseline-tree DIR`` also profiles the code of ``DIR`` (e.g. ``git archive HEAD fidia_jax |
tar -x -C DIR``: its ``fidia_jax`` comes first on ``PYTHONPATH``), interleaved with this tree's
runs, and the FASTA of every run must equal the first one's. ``--importtime`` adds one warm run
under ``python -X importtime`` and lists the largest top-level imports.

Writes ``benchmarks/results/mpnn_startup_profile.json`` (``_results``: the ``phases`` table,
median over rounds; the ``compiles`` table; the raw spans and events of every run).
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

REPO = pathlib.Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- the child
def _child(stamp_file: str, cli_args: list[str]) -> int:
    """Runs ``fidia_jax.cli.main(cli_args)`` with its phases timed; writes ``stamp_file``."""
    first_wall, first_cpu = time.time(), time.process_time()
    t0 = time.perf_counter()
    spans: list[dict] = []
    events: list[dict] = []
    depth = [0]

    def now():
        return time.perf_counter() - t0, time.process_time()

    def timed(label, fn):
        def wrapper(*a, **k):
            d = depth[0]
            depth[0] += 1
            w, c = now()
            try:
                return fn(*a, **k)
            finally:
                depth[0] = d
                w1, c1 = now()
                spans.append({"name": label, "depth": d, "start": w, "wall": w1 - w,
                              "cpu": c1 - c})  # fmt: skip

        wrapper.__wrapped__ = fn
        return wrapper

    def wrap(owner, attr, label):
        fn = getattr(owner, attr, None)
        if fn is not None:
            setattr(owner, attr, timed(label, fn))

    w, c = now()
    import fidia_jax.cli as cli

    w1, c1 = now()
    spans.append({"name": "import fidia_jax.cli", "depth": 0, "start": w, "wall": w1 - w,
                  "cpu": c1 - c})  # fmt: skip

    def listen():
        import jax

        def duration(event, secs, **kw):
            events.append({"event": event.rsplit("/", 1)[-1], "fun": kw.get("fun_name"),
                           "secs": secs, "at": time.perf_counter() - t0})  # fmt: skip

        def event(name, **kw):
            if "compilation_cache" in name:
                events.append({"event": name.rsplit("/", 1)[-1], "fun": None, "secs": None,
                               "at": time.perf_counter() - t0})  # fmt: skip

        jax.monitoring.register_event_duration_secs_listener(duration)
        jax.monitoring.register_event_listener(event)
        wrap(jax.stages.Lowered, "compile", "XLA compile (Lowered.compile)")
        from jax.experimental import serialize_executable as se

        wrap(se, "serialize", "serialize executable")
        wrap(se, "deserialize_and_load", "deserialize + load executable")

    def hooks():  # after the arguments are parsed: the project's modules are imported
        from fidia_jax.projects.proteinmpnn import _startup, _structure_cache, design

        wrap(design, "prepare_structure", "structure (parse or cache) + prepare_design")
        wrap(_structure_cache, "load_structure_cached", "load_structure_cached")
        wrap(design, "load_model", "load ProteinMPNN model (flax, .pt)")
        wrap(_startup, "open_sampler", "weights (open_sampler)")
        wrap(_startup.FastSampler, "_read_weights", "weights entry read / write")
        wrap(_startup.FastSampler, "sample", "sample call (executable + sampling)")
        wrap(_startup.FastSampler, "_executable", "get the compiled sampler")
        wrap(_startup.FastSampler, "_lower", "trace + lower the sampler")
        wrap(_startup, "_environment", "environment key")
        wrap(design, "write_sample_files", "write FASTA + summary")
        wrap(design, "_sample_summary", "summary")
        for name in ("compile_sampler", "_compile"):  # later versions' names
            wrap(_startup.FastSampler, name, f"compile ({name})")

    parse = cli._parse_args

    def parse_then_hook(*a, **k):
        try:
            return parse(*a, **k)
        finally:
            hooks()

    cli._parse_args = timed("CLI: parse arguments (imports the project)", parse_then_hook)
    use = cli._use_compilation_cache

    def use_then_listen(*a, **k):
        try:
            return use(*a, **k)
        finally:
            listen()

    cli._use_compilation_cache = timed("CLI: compilation cache set-up (imports jax)",
                                       use_then_listen)  # fmt: skip
    code = timed("cli.main", cli.main)(cli_args)
    w_end = time.perf_counter() - t0
    pathlib.Path(stamp_file).write_text(json.dumps({
        "first_wall_epoch": first_wall, "first_cpu": first_cpu, "end": w_end,
        "end_cpu": time.process_time(), "spans": spans, "events": events, "code": code,
    }))  # fmt: skip
    return code


# ----------------------------------------------------------------------------- the parent
def _run(tree: pathlib.Path, cache: pathlib.Path, out: pathlib.Path, pdb, importtime=False):
    """One child process; returns its record (spans, events, total wall / CPU, FASTA)."""
    stamp = out.with_suffix(".json")
    args = ["proteinmpnn", "sample", "--pdb", str(pdb), "--chains", "A", "--num-samples", "16",
            "--temperature", "0.1", "--quiet", "--out", str(out)]  # fmt: skip
    env = {**os.environ, "FIDIA_COMPILATION_CACHE": str(cache)}
    if tree != REPO:
        env["PYTHONPATH"] = os.pathsep.join([str(tree), env.get("PYTHONPATH", "")]).rstrip(":")
    cmd = [sys.executable, *(["-X", "importtime"] if importtime else []), __file__,
           "--child", str(stamp), "--", *args]  # fmt: skip
    from _peers import run_command  # benchmarks/ is on sys.path (main)

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    w0, e0 = time.perf_counter(), time.time()
    output = run_command(cmd, name="the profiled process", env=env, tail=4000,
                         merge_stderr=importtime).decode(errors="replace")  # fmt: skip
    wall = time.perf_counter() - w0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    rec = json.loads(stamp.read_text())
    rec.update(total_wall=wall, total_cpu=cpu, start_wall=rec["first_wall_epoch"] - e0,
               fasta=(out / "samples.fasta").read_text())  # fmt: skip
    if importtime:
        rec["importtime"] = _top_imports(output)
    return rec


def _top_imports(stderr: str, n: int = 15) -> list[list]:
    """The ``n`` largest top-level imports of ``-X importtime`` output: ``[name, cumulative s]``."""
    rows = []
    for line in stderr.splitlines():
        parts = line[len("import time:") :].split("|")
        if not line.startswith("import time:") or len(parts) != 3 or "cumulative" in line:
            continue
        name = parts[2][1:]  # "| " then two spaces per nesting level
        if not name.startswith(" "):
            rows.append([name.strip(), int(parts[1]) / 1e6])
    return sorted(rows, key=lambda r: -r[1])[:n]


def _phases(rec: dict) -> list[tuple[str, float, float]]:
    """``(label, wall s, CPU s)`` in time order: interpreter start-up, the spans, the exit."""
    rows = [("interpreter start-up (before the first line)", rec["start_wall"], rec["first_cpu"])]
    for s in sorted(rec["spans"], key=lambda s: (s["start"], s["depth"])):
        if s["name"] == "cli.main":
            continue
        depth = s["depth"] - (1 if s["depth"] > 0 else 0)
        rows.append(("." * 2 * depth + s["name"], s["wall"], s["cpu"]))
    main = next(s for s in rec["spans"] if s["name"] == "cli.main")
    top = [s for s in rec["spans"] if s["depth"] == 1]
    rows.append(("cli.main, outside the phases above", main["wall"] - sum(s["wall"] for s in top),
                 main["cpu"] - sum(s["cpu"] for s in top)))  # fmt: skip
    exit_wall = rec["total_wall"] - rec["start_wall"] - rec["end"]
    rows.append(("interpreter exit (after main)", exit_wall, rec["total_cpu"] - rec["end_cpu"]))
    rows.append(("TOTAL (process)", rec["total_wall"], rec["total_cpu"]))
    return rows


def _compiles(rec: dict) -> list[list]:
    """Per compiled program: name, trace s, lower s, XLA s (monitoring events)."""
    table: dict[str, list] = {}
    key = {"jaxpr_trace_duration": 1, "jaxpr_to_mlir_module_duration": 2,
           "backend_compile_duration": 3}  # fmt: skip
    for e in rec["events"]:
        if e["event"] in key and e["fun"] is not None:
            row = table.setdefault(e["fun"], [e["fun"], 0.0, 0.0, 0.0, 0])
            row[key[e["event"]]] += e["secs"]
            if e["event"] == "backend_compile_duration":
                row[4] += 1
    return sorted(table.values(), key=lambda r: -(r[1] + r[2] + r[3]))


def _median_phases(recs: list[dict]) -> dict[str, tuple[float, float]]:
    per: dict[str, list] = {}
    for rec in recs:
        seen: dict[str, int] = {}
        for label, w, c in _phases(rec):
            k = seen.get(label, 0)
            seen[label] = k + 1
            per.setdefault(label if k == 0 else f"{label} #{k + 1}", []).append((w, c))
    return {k: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v))
            for k, v in per.items()}  # fmt: skip


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", default=os.environ.get("FIDIA_DATA_DIR",
                                                        str(REPO.parent / "shared" / "data")))  # fmt: skip
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--baseline-tree", default=None,
                   help="also profile the fidia_jax of DIR (PYTHONPATH), interleaved")  # fmt: skip
    p.add_argument("--importtime", action="store_true")
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results" /
                                        "mpnn_startup_profile.json"))  # fmt: skip
    args = p.parse_args(argv)
    sys.path.insert(0, str(REPO / "benchmarks"))
    import _results

    pdb = pathlib.Path(args.data_dir) / "protein" / "motif_problems" / "1PRW.pdb"
    if not pdb.is_file():
        raise SystemExit(f"{pdb} not found")
    load0 = _results.load_average()
    trees = {"this tree": REPO}
    if args.baseline_tree:
        trees["baseline"] = pathlib.Path(args.baseline_tree).resolve()
    runs: dict[str, list[dict]] = {f"{t} {k}": [] for t in trees for k in ("cold", "warm")}
    importtime = None
    with tempfile.TemporaryDirectory(prefix="mpnn_profile_") as tmp:
        tmp = pathlib.Path(tmp)
        for r in range(args.rounds):
            for tag, tree in trees.items():
                cache = tmp / f"cache_{tag.replace(' ', '_')}_{r}"
                for kind in ("cold", "warm"):
                    rec = _run(tree, cache, tmp / f"{tag.replace(' ', '_')}_{kind}_{r}", pdb)
                    runs[f"{tag} {kind}"].append(rec)
                    print(f"round {r} {tag} {kind}: {rec['total_wall']:.2f} s wall, "
                          f"{rec['total_cpu']:.2f} s CPU", file=sys.stderr)  # fmt: skip
        if args.importtime:
            cache = tmp / "cache_this_tree_0"
            importtime = _run(REPO, cache, tmp / "importtime", pdb, importtime=True)["importtime"]
    fastas = {rec["fasta"] for v in runs.values() for rec in v}
    if len(fastas) != 1:
        raise SystemExit("the runs' FASTA files differ")
    medians = {k: _median_phases(v) for k, v in runs.items()}
    labels: list[str] = []
    for k in runs:
        for label in medians[k]:
            if label not in labels:
                labels.append(label)
    order = [lab for lab in labels if not lab.startswith(("cli.main,", "interpreter exit",
                                                           "TOTAL"))]  # fmt: skip
    order += [lab for lab in labels if lab not in order]
    columns = ["phase"]
    for k in runs:
        columns += [f"{k} wall s", f"{k} CPU s"]
    rows = []
    for label in order:
        row = [label]
        for k in runs:
            w, c = medians[k].get(label, (None, None))
            row += [w, c]
        rows.append(row)
    compiles = []
    for k, v in runs.items():
        for name, tr, lo, xla, n in _compiles(v[0]):
            compiles.append([k, name, n, tr, lo, xla])
    tables = {
        "phases": {"columns": columns, "rows": rows,
                   "formats": [None] + [".3f"] * (len(columns) - 1)},
        "compiles": {"columns": ["run (first round)", "program", "XLA compiles", "trace s",
                                 "lower s", "XLA s"], "rows": compiles,
                     "formats": [None, None, "d", ".3f", ".3f", ".3f"]},
    }  # fmt: skip
    extra = {
        "pdb": str(pdb), "rounds": args.rounds,
        "baseline_tree": args.baseline_tree,
        "same_fasta": True,
        "top_imports_s": importtime,
        "runs": {k: [{kk: vv for kk, vv in rec.items() if kk != "fasta"} for rec in v]
                 for k, v in runs.items()},
    }  # fmt: skip
    path = _results.write_results("mpnn_startup_profile", tables, load_start=load0, extra=extra,
                                  out=args.out)  # fmt: skip
    width = max(len(r[0]) for r in rows)
    print(f"{'phase':<{width}}  " + "  ".join(f"{k:>20}" for k in runs))
    for row in rows:
        cells = [
            "—".rjust(20) if row[i] is None else f"{row[i]:8.3f} / {row[i + 1]:8.3f}".rjust(20)
            for i in range(1, len(row), 2)
        ]  # fmt: skip
        print(f"{row[0]:<{width}}  " + "  ".join(cells))
    print("compiles (first round):")
    for row in compiles:
        print(f"  {row[0]:<16} {row[1]:<40} n={row[2]} trace {row[3]:.3f} lower {row[4]:.3f} "
              f"XLA {row[5]:.3f}")  # fmt: skip
    if importtime:
        print("top-level imports (warm run, -X importtime, cumulative s):")
        for name, s in importtime:
            print(f"  {name:<40} {s:.3f}")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        sys.exit(_child(sys.argv[2], sys.argv[4:]))
    sys.exit(main())
