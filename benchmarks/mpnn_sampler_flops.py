"""ProteinMPNN sampler FLOP rate against the machine's float32 matmul rate, per wall and CPU second.

Issue 27's goal, restated by issue 44: the sampler at >= 60 % of the machine's measured matmul
FLOP rate, judged **per CPU second** of the process. One backbone
(``protein/motif_problems/1PRW.pdb`` chain A, L = 148), ``--num-samples`` (16) rows at T = 0.1,
v_48_020, ``fidia_jax.models.sample`` with ``score_native=True`` (what ``fidia-jax sample``
runs: the loop decodes 2N rows, N sampled and N teacher-forced on the native sequence), compiled
once, then timed; interleaved in rounds with a large float32 matmul (``--matmul`` square, jitted
``jnp.dot``, ``--matmul-reps`` calls per round), the order of the two alternating from round to
round, so both see about the same machine load. Each call is timed in wall seconds
(``time.perf_counter``) and in CPU seconds of this process (``time.process_time``: every
thread, so a product spread over two cores costs two CPU seconds per wall second). On a
2-core machine the large matmul uses both cores, the sampler's small per-step work less, so the
two rates differ; the goal is judged on the CPU-second ratio.

FLOPs are counted by hand, matrix products only (2 m n k each; elementwise work, GELU, norms,
gathers and the softmax are not counted, so the rate is of the useful matmul work):

* per decoding step, row and decoder layer (``DecLayer.step``): ``h W1a`` (2 C^2), the message
  MLP's ``W2`` on K neighbours (2 K C^2), ``(sum g) W3`` (2 C^2), the FFN ``C -> 4C -> C``
  (16 C^2), and the next layer's projection ``h W1d`` (2 C^2, not after the last layer); per
  step and row ``W_out`` (2 C 21);
* once per structure: the encoder (per layer: node messages ``W1`` on ``[h_i, h_ij, h_j]``
  (2 L K 3C C), ``W2``, ``W3`` (2 x 2 L K C^2), FFN (16 L C^2), edge messages ``W11``,
  ``W12``, ``W13`` (2 L K (3C C + 2 C^2))), the edge embedding (2 L K 416 C), and the
  decoder's ``step_cache`` per layer (2 L K C^2 + 2 L C^2 + 2 21 C^2).

XLA's own count (``compiled.cost_analysis()["flops"]``) is recorded beside it; it counts a
``while`` loop's body once, not once per iteration, so it is not used for the rate.

The profile (``--no-profile`` leaves it out): one more sampler call under ``jax.profiler``,
whose trace holds one event per XLA:CPU operation (thunk). XLA:CPU runs a loop body's
independent operations on every thread of its pool, so the events of the decoding loop's body
(names read from the compiled HLO) are collected from all threads, summed, and grouped by what
each operation computes, read from its HLO: products (``dot``; the message MLP's ``W2`` on
``(N K, C)`` rows apart from the small per-row ones), per-neighbour element-wise fusions (those
reading or making ``(N, K, C)`` arrays: the neighbour gathers, sums and first GELU; the bias and
second GELU; the sum over ``K``), cache and output writes (``scatter`` /
``dynamic-update-slice``), copies, and the per-row rest (layer norms, FFN GELU, softmax, the
draw). Table ``profile``: operation milliseconds per decoding step summed over threads (the
profiler adds a little to each operation) and each part's share of them; table
``profile_wall``: that sum, the loop's wall milliseconds per step (its body's first operation
to its last) and their ratio, the threads busy on average. Until 2026-12-05 the profile read
the thread that runs the program only, and the operations run on the other thread showed up as
a "loop overhead" of about half the step.

    python benchmarks/mpnn_sampler_flops.py --rounds 3

Prints the tables and writes ``benchmarks/results/mpnn_sampler_flops.json``
(``benchmarks/_results.py``): table ``rates`` (min / median / max over rounds of each rate and
of the per-round ratio) and tables ``profile`` and ``profile_wall``.
"""

from __future__ import annotations

import argparse
import collections
import glob
import math
import os
import pathlib
import re
import statistics
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _results  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[1]


def _parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--data-dir", default=os.environ.get("FIDIA_DATA_DIR", str(REPO.parent / "shared" / "data"))
    )
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--num-samples", type=int, default=16)
    p.add_argument("--matmul", type=int, default=2048)
    p.add_argument("--matmul-reps", type=int, default=5, help="matmul calls per round")
    p.add_argument("--sampler-reps", type=int, default=2, help="sampler calls per round")
    p.add_argument("--no-profile", action="store_true", help="leave out the per-step profile")
    p.add_argument("--out", default=None, help="results file (default benchmarks/results/...)")
    return p.parse_args(argv)


def sampler_flops(length: int, rows: int, layers: int = 3, c: int = 128, k: int = 48) -> dict:
    """Matmul FLOPs of one sampler call (see the module docstring), by part."""
    per_row_step = layers * (2 * c * c + 2 * k * c * c + 2 * c * c + 16 * c * c)
    per_row_step += (layers - 1) * 2 * c * c + 2 * c * 21
    decode = length * rows * per_row_step
    enc_layer = 2 * length * k * 3 * c * c + 2 * 2 * length * k * c * c + 16 * length * c * c
    enc_layer += 2 * length * k * (3 * c * c + 2 * c * c)
    encoder = layers * enc_layer + 2 * length * k * 416 * c
    setup = layers * (2 * length * k * c * c + 2 * length * c * c + 2 * 21 * c * c)
    return {"decode": decode, "encoder": encoder, "step_cache": setup,
            "total": decode + encoder + setup}  # fmt: skip


def _stats(xs) -> dict:
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs), "n": len(xs)}


def timed(fn, reps: int) -> tuple[float, float]:
    """``(CPU seconds, wall seconds)`` of ``reps`` calls of ``fn``."""
    c0, w0 = time.process_time(), time.perf_counter()
    for _ in range(reps):
        fn()
    return time.process_time() - c0, time.perf_counter() - w0


# ---- the profile of one decoding step ------------------------------------------------------

_HEAD = re.compile(r"^(?:ENTRY )?%([\w.\-]+) \(.*\{\s*$")
_INSTR = re.compile(r"^\s*(?:ROOT )?%([\w.\-]+) = (.*)$")
_OPCODE = re.compile(r" ([a-z][a-z0-9\-]*)\(")
_SHAPE = re.compile(r"^\(?[a-z0-9]+\[([\d,]*)\]")


def hlo_computations(hlo: str) -> dict[str, list[tuple[str, str]]]:
    """Compiled HLO text -> {computation: [(instruction name, text after ``=``)]}."""
    comps: dict[str, list[tuple[str, str]]] = {}
    name = None
    for line in hlo.splitlines():
        head = _HEAD.match(line)
        if head:
            name = head.group(1)
            comps[name] = []
        elif line.strip() == "}":
            name = None
        elif name is not None:
            m = _INSTR.match(line)
            if m:
                comps[name].append((m.group(1), re.sub(r", metadata=\{[^}]*\}", "", m.group(2))))
    return comps


def _opcode(rhs: str) -> str:
    m = _OPCODE.search(" " + rhs)
    return m.group(1) if m else "?"


def _elements(rhs: str) -> int:
    m = _SHAPE.match(rhs)
    return math.prod(int(d) for d in m.group(1).split(",") if d) if m else 0


def _sizes(comps, rhs: str) -> set[int]:
    """Element counts of an instruction's output and of every array in the computations it calls."""
    sizes = {_elements(rhs)}
    for callee in re.findall(r"calls=%([\w.\-]+)", rhs):
        sizes |= {_elements(sub) for _, sub in comps.get(callee, [])}
    return sizes


def _opcodes_of(comps, rhs: str, seen=None) -> set[str]:
    """Opcodes of an instruction and of the computations it calls (fusions, nested)."""
    seen = set() if seen is None else seen
    ops = {_opcode(rhs)}
    for callee in re.findall(r"(?:calls|to_apply)=%([\w.\-]+)", rhs):
        if callee in seen or callee not in comps:
            continue
        seen.add(callee)
        for _, sub in comps[callee]:
            ops |= _opcodes_of(comps, sub, seen)
    return ops


def decoding_loop(hlo: str, rows: int, length: int, c: int, k: int = 48):
    """``{body instruction: part}`` of the ``while`` loop carrying the caches."""
    comps = hlo_computations(hlo)
    cache = f"f32[{rows},{length},{c}]"
    for instrs in comps.values():
        for _, rhs in instrs:
            if _opcode(rhs) != "while" or cache not in rhs.split(" while(")[0]:
                continue
            body = re.search(r"body=%([\w.\-]+)", rhs).group(1)
            parts = {}
            for iname, irhs in comps[body]:
                op = _opcode(irhs)
                if op in ("parameter", "constant", "get-tuple-element", "tuple", "bitcast"):
                    continue
                parts[iname] = classify(
                    _opcodes_of(comps, irhs), _elements(irhs), _sizes(comps, irhs), rows * k * c
                )
            return parts
    raise RuntimeError(f"no while loop carries an {cache} cache")


PARTS = (
    "W2 on the K neighbours (counted products)",
    "sum over K + W3 in one fusion (counted)",
    "small per-row products: W1a, W3, FFN, W1d, W_out (counted)",
    "per-neighbour element-wise: gathers + sum + GELU before W2",
    "per-neighbour element-wise: bias + GELU after W2",
    "sum over the K neighbours (element-wise, apart from W3)",
    "cache and output writes (scatter, dynamic-update-slice)",
    "copies",
    "per-row rest: layer norms, FFN GELU, softmax, draw, indices",
)


def classify(ops: set[str], out_elements: int, sizes: set[int], per_neighbour: int) -> str:
    """One of :data:`PARTS` for a loop-body operation, from its opcodes and array sizes.

    ``out_elements``: its output's size; ``sizes``: those of every array it makes or reads (a
    fusion's parameters included); ``per_neighbour``: the size of an ``(N, K, C)`` array, which
    marks per-neighbour work (per-row arrays are ``(N, <= 4C)``, caches ``(N, L, C)``).
    """
    if "dot" in ops:
        if out_elements == per_neighbour:
            return PARTS[0]
        return PARTS[1] if per_neighbour in sizes else PARTS[2]
    if "scatter" in ops or "dynamic-update-slice" in ops:
        return PARTS[6]
    if per_neighbour in sizes:
        if "gather" in ops:
            return PARTS[3]
        return PARTS[5] if ops & {"reduce", "reduce-window"} else PARTS[4]
    if ops == {"copy"}:
        return PARTS[7]
    return PARTS[8]


def profile_step(run, hlo: str, rows: int, length: int, c: int) -> dict:
    """Per-step milliseconds of the decoding loop's parts, from a ``jax.profiler`` trace of ``run``.

    XLA:CPU runs a loop body's independent operations on the threads of its pool, so the
    operations of one step are spread over every thread: each part's time is summed over all
    threads (operation milliseconds, about CPU time while it runs), and the loop's wall time is
    the span from its body's first operation to its last.
    """
    import jax
    from jax.profiler import ProfileData

    parts = decoding_loop(hlo, rows, length, c)
    with tempfile.TemporaryDirectory() as d:
        with jax.profiler.trace(d):
            run()
        (path,) = glob.glob(os.path.join(d, "**", "*.xplane.pb"), recursive=True)
        data = ProfileData.from_file(path)
        body = [
            (e.name, e.duration_ns, e.start_ns, e.end_ns, line.name)
            for plane in data.planes
            for line in plane.lines
            for e in line.events
            if e.name in parts
        ]
    by_part = collections.Counter()
    for n, dur, *_ in body:
        by_part[parts[n]] += dur
    ops_ns = sum(by_part.values())
    wall_ns = max(e[3] for e in body) - min(e[2] for e in body) if body else 0
    return {
        "ops_ms_per_step": ops_ns / 1e6 / length,
        "wall_ms_per_step": wall_ns / 1e6 / length,
        "ms_per_step": {p: by_part[p] / 1e6 / length for p in PARTS},
        "threads": sorted({e[4] for e in body}),
        "operations_in_body": len(parts),
        "body_operations_without_event": sorted(set(parts) - {e[0] for e in body}),
    }


def main(argv=None) -> int:
    args = _parse_args(argv)
    load_start = _results.load_average()
    import jax
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx

    from fidia_jax.models import MPNNInputs, ProteinMPNN, sample
    from fidia_jax.models.proteinmpnn._inputs import canonical, omit_mask
    from fidia_jax.models.proteinmpnn._sampling import _sample_jit
    from fidia_jax.protein import load_structure

    pdb = pathlib.Path(args.data_dir) / "protein" / "motif_problems" / "1PRW.pdb"
    inputs = MPNNInputs.from_protein(load_structure(str(pdb), ["A"]))
    length = int(inputs.S.shape[0])
    model = ProteinMPNN.from_checkpoint("v_48_020")
    n = args.num_samples

    def run_sampler():
        res = sample(model, jax.random.key(0), inputs, num_samples=n, temperature=0.1,
                     score_native=True)  # fmt: skip
        jax.block_until_ready(res)

    m = args.matmul
    a = jax.random.normal(jax.random.key(1), (m, m), jnp.float32)
    b = jax.random.normal(jax.random.key(2), (m, m), jnp.float32)
    dot = jax.jit(jnp.dot)

    def run_matmul():
        jax.block_until_ready(dot(a, b))

    run_sampler()  # compile
    run_matmul()
    run_sampler()  # warm
    flops = sampler_flops(length, 2 * n)
    mm_flops = 2 * m**3
    jobs = {
        "matmul": (run_matmul, mm_flops, args.matmul_reps),
        "sampler": (run_sampler, flops["total"], args.sampler_reps),
    }
    raw = {k: {"cpu_s": [], "wall_s": [], "gflop_per_cpu_s": [], "gflop_per_wall_s": []}
           for k in jobs}  # fmt: skip
    for i in range(args.rounds):
        for name in ("matmul", "sampler") if i % 2 == 0 else ("sampler", "matmul"):
            fn, f, reps = jobs[name]
            cpu, wall = timed(fn, reps)
            r = raw[name]
            r["cpu_s"].append(cpu / reps)
            r["wall_s"].append(wall / reps)
            r["gflop_per_cpu_s"].append(f * reps / cpu / 1e9)
            r["gflop_per_wall_s"].append(f * reps / wall / 1e9)
    frac = {
        kind: [s / mm for s, mm in zip(raw["sampler"][key], raw["matmul"][key], strict=True)]
        for kind, key in (("wall", "gflop_per_wall_s"), ("cpu", "gflop_per_cpu_s"))
    }

    g, st = nnx.split(model)
    compiled = _sample_jit.program(True).lower(
        g, st, jax.random.key(0), canonical(inputs), jnp.float32(0.1), np.zeros(length, bool),
        omit_mask("X") > 0, jnp.zeros((length, 21), jnp.float32), n, None, True, None,
    ).compile()  # fmt: skip
    xla = None
    try:
        ca = compiled.cost_analysis()
        ca = ca[0] if isinstance(ca, list | tuple) else ca
        xla = float(ca["flops"])
    except Exception as e:  # the cost analysis is informative only
        print(f"(no XLA cost analysis: {type(e).__name__}: {e})", file=sys.stderr)

    profile = None
    if not args.no_profile:
        profile = profile_step(run_sampler, compiled.as_text(), 2 * n, length, model.hidden_dim)

    rows = []
    for kind in ("wall", "cpu"):
        unit = "wall" if kind == "wall" else "CPU"
        for stat in ("min", "median", "max"):
            pick = {"min": min, "median": statistics.median, "max": max}[stat]
            rows.append([
                f"per {unit} s, {stat}",
                pick(raw["matmul"][f"gflop_per_{kind}_s"]),
                pick(raw["sampler"][f"gflop_per_{kind}_s"]),
                pick(raw["sampler"][f"{kind}_s"]),
                pick(frac[kind]),
            ])  # fmt: skip
    tables = {
        "rates": {
            "columns": [
                "rate",
                f"{m}² matmul GFLOP/s",
                "sampler GFLOP/s",
                "sampler s per call",
                "sampler / matmul",
            ],  # fmt: skip
            "rows": rows,
            "formats": [None, ".1f", ".1f", ".3f", ".1%"],
        }
    }
    if profile is not None:
        ops = profile["ops_ms_per_step"]
        tables["profile"] = {
            "columns": ["part of a decoding step", "ms per step (all threads)", "share"],
            "rows": [[p, ms, ms / ops] for p, ms in profile["ms_per_step"].items()]
            + [["all operations of the step", ops, 1.0]],
            "formats": [None, ".3f", ".1%"],
        }
        tables["profile_wall"] = {
            "columns": ["decoding step (profiled call)", "value"],
            "rows": [
                ["operation ms per step, summed over threads", ops],
                ["wall ms per step (first to last operation of the loop)",
                 profile["wall_ms_per_step"]],
                ["threads busy on average (operation time / wall time)",
                 ops / profile["wall_ms_per_step"]],
            ],
            "formats": [None, ".3f"],
        }  # fmt: skip
    print(
        f"sampler: L={length}, {2 * n} rows, {flops['total'] / 1e9:.1f} GFLOP by hand "
        f"(decode {flops['decode'] / 1e9:.1f}); XLA cost analysis {xla and xla / 1e9:.2f} GFLOP"
    )
    for key, t in tables.items():
        print(f"\n[{key}]")
        print(" | ".join(t["columns"]))
        for r in t["rows"]:
            print(" | ".join(x if isinstance(x, str) else f"{x:{f}}"
                             for x, f in zip(r, t["formats"], strict=True)))  # fmt: skip
    path = _results.write_results(
        "mpnn_sampler_flops",
        tables,
        load_start=load_start,
        out=args.out,
        extra={
            "pdb": str(pdb.relative_to(pathlib.Path(args.data_dir))),
            "length": length,
            "rows": 2 * n,
            "rounds": args.rounds,
            "reps_per_round": {k: v[2] for k, v in jobs.items()},
            "flops_by_hand": flops,
            "xla_cost_analysis_flops": xla,
            "matmul_size": m,
            "raw": raw,
            "fraction_of_matmul_rate": {k: _stats(v) for k, v in frac.items()},
            "profile": profile,
        },
    )
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
