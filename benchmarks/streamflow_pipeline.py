"""StreamFlow serving: the authors' fixed pipeline as a peer of the stream batch, and per-request
conditioning with classifier-free guidance, on one fixed-schedule workload.

The authors' serving loop (``PipelineBatchStreamFlow`` in github.com/World-Snapshot/StreamFlow,
``src/streamflow/pipeline_batch_pipeline.py``, StreamDiffusion-style) serves every request with
ONE schedule of ``n`` steps, keeps ``n - 1`` latents in a buffer, admits one new request per
call and always runs the full batch of ``n`` rows. It cannot serve requests with different
schedules, so this benchmark gives every request the same ``--steps``-step uniform schedule and
runs, on the same requests and the same virtual clocks as ``benchmarks/streamflow.py``:

  (a) sequential: ``sample_euler`` on one request at a time;
  (b) naive batching of same-t requests (``refill="static"``), up to 16;
  (c) the stream batch (continuous refill, AOT buckets 1..16);
  (e) the authors' fixed pipeline (``refill="pipeline"``: ``n`` slots, one admission per
      call, every call a batch of ``n``).

With ``--cfg W`` every request is class-conditional with guidance ``W``: two rows per request
(the conditional row and its unconditional partner), for every policy ((a) runs its two rows as
one batch of 2; the pipeline's calls are then ``2n`` rows, as the authors' CFG doubles the
batch). The network: the driver's U-Net (default preset sizes) with random weights, plus a
class embedding for the conditional run (serving cost does not depend on the weights; the
images are compared with (a)'s, max |delta|).

Clocks (as in ``benchmarks/streamflow.py``): "measured" charges each call its own wall time;
"model" charges the median wall time of a call of that policy and bucket, measured round-robin
just before. Rates are multiples of (a)'s burst capacity on each clock.

Results (issue 41): ``--out`` (default ``benchmarks/results/streamflow_pipeline.json``;
``streamflow_pipeline_cfg.json`` with ``--cfg``) through :func:`_results.write_results`, the raw
results kept beside the tables; ``docs/streamflow.md`` renders them. Tables (built by
:func:`tables` from the raw record alone): ``serving`` (every clock, arrivals and server),
``latency_paired`` (per-request latency of (c) against (e) and (b), and (e) against (a),
paired over the same requests), ``paired`` (model clock, burst: the images/s ratios priced
round by round with the probe rounds' costs, paired tests) and ``call_cost`` (the probe calls).

Usage: python benchmarks/streamflow_pipeline.py [--requests 64] [--steps 4] [--cfg 0]
       [--smoke] [--out PATH]
       python benchmarks/streamflow_pipeline.py --report [--cfg W] [--out PATH]   # re-table
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
from _results import command_line, default_out, load_average, retable, write_results
from _streamflow_table import (
    call_cost_table,
    latency_paired_table,
    paired_burst_table,
    serving_table,
)

from fidia_jax.projects import streamflow

POLICIES = {
    "a": "sequential (1 at a time)",
    "b": "naive batching (same t)",
    "c": "stream batch, AOT buckets",
    "e": "authors' fixed pipeline (n slots, 1 new per call)",
}
RATES = {"mid": 2.0, "high": 4.0}
NUM_CLASSES = 10


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def make_model(cfg, conditional: bool):
    """``(apply_fn, params)``: the driver's U-Net; conditional: ``v(x + e[c], t)`` with a
    class-embedding table ``e`` of ``NUM_CLASSES + 1`` rows (the last one the null class)."""
    base_fn, unet_params = streamflow.init_flow(cfg)
    if not conditional:

        def apply_fn(p, x, t):
            return base_fn(p, x, t)

        return apply_fn, unet_params
    s = cfg.image_size
    emb = 0.3 * np.random.default_rng(1).standard_normal((NUM_CLASSES + 1, s, s, 1))
    params = {"unet": unet_params, "emb": jnp.asarray(emb, jnp.float32)}

    def cond_fn(p, x, t, c):
        return base_fn(p["unet"], x + p["emb"][c], t)

    return cond_fn, params


def serve_sequential(apply_fn, params, noise, ts, arrivals, conds, guidance, cost=None):
    clock, finish, out = 0.0, np.zeros(len(arrivals)), {}
    for i in np.argsort(arrivals, kind="stable"):
        clock = max(clock, arrivals[i])
        t0 = time.perf_counter()
        kw = {}
        if conds is not None:
            kw = {"cond": conds[i : i + 1], "guidance": guidance, "null_cond": NUM_CLASSES}
        out[i] = streamflow.sample_euler(apply_fn, params, noise[i : i + 1], ts, **kw)[0]
        wall = time.perf_counter() - t0
        clock += wall if cost is None else cost * (len(ts) - 1)
        finish[i] = clock
    return finish, out, {"a_step": len(arrivals) * (len(ts) - 1)}


def serve_batcher(batcher, noise, ts, arrivals, conds, guidance, cost=None, kind=None):
    """The batcher's calls on the virtual clock; ``cost``: model clock (bucket -> seconds);
    ``kind``: bucket -> the probe kind it is priced as (for the returned call counts)."""
    order = list(np.argsort(arrivals, kind="stable"))
    clock, finish, out = 0.0, np.zeros(len(arrivals)), {}
    while order or not batcher.idle:
        while order and arrivals[order[0]] <= clock:
            i = order.pop(0)
            kw = {} if conds is None else {"cond": conds[i], "guidance": guidance}
            batcher.submit(noise[i], ts, request_id=int(i), **kw)
        if batcher.idle:
            clock = arrivals[order[0]]
            continue
        before = dict(batcher.bucket_calls)
        t0 = time.perf_counter()
        done = batcher.step()
        wall = time.perf_counter() - t0
        bucket = next(b for b in before if batcher.bucket_calls[b] != before[b])
        clock += wall if cost is None else cost[bucket]
        for rid, img in done:
            finish[rid], out[rid] = clock, img
    counts: dict = {}
    for b, n in batcher.bucket_calls.items():
        if n:
            k = kind[b] if kind else str(b)
            counts[k] = counts.get(k, 0) + n
    return finish, out, counts


def summarise(finish, arrivals):
    lat = finish - arrivals
    return {
        "images_per_s": float(len(finish) / (finish.max() - arrivals.min())),
        "latency_p50_s": float(np.percentile(lat, 50)),
        "latency_p95_s": float(np.percentile(lat, 95)),
        "latency_s": [float(x) for x in lat],  # per request, in request order
    }


POLICY_KEYS = list(POLICIES)
PAIRS = [("c", "a"), ("c", "b"), ("c", "e"), ("e", "a")]


def call_labels(probe_s: dict) -> dict:
    """Row labels of the probe kinds: ``a_step``, ``c<b>`` and ``e<b>`` (``b``: rows)."""
    labels = {"a_step": "(a) one sequential step"}
    for k in sorted(probe_s, key=lambda k: (k[0], int(k[1:]) if k[1:].isdigit() else 0)):
        if k[0] == "c" and k[1:].isdigit():
            labels[k] = f"(b)/(c) call of bucket {k[1:]} (rows)"
        elif k[0] == "e" and k[1:].isdigit():
            labels[k] = f"(e) pipeline call of {k[1:]} rows"
    return labels


def tables(record: dict) -> dict:
    """The results file's tables, from the raw record alone (see the module docstring)."""
    serving = record["serving"]
    rates = {
        c: {n: r["rate"] for n, r in crows.items() if "rate" in r} for c, crows in serving.items()
    }
    out = {"serving": serving_table(serving, POLICY_KEYS, rates, ratio_to=("a", "e"))}
    latency = latency_paired_table(serving, rates, [("c", "e"), ("c", "b"), ("e", "a")])
    if latency["rows"]:
        out["latency_paired"] = latency
    probe = record.get("probe_s")
    if probe:
        out["paired"] = paired_burst_table(
            serving["model"]["burst"], probe, PAIRS, record.get("probe_rounds")
        )
        out["call_cost"] = call_cost_table(probe, call_labels(probe))
    return out


def main(argv=None) -> int:
    load_start = load_average()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--cfg", type=float, default=0.0, help="guidance scale; 0 = unconditional")
    ap.add_argument("--repeats", type=int, default=20, help="calls per kind for the model clock")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument(
        "--out", default=None, help="results file (default: benchmarks/results/"
        "streamflow_pipeline[_cfg].json; --smoke: a temp file)"
    )  # fmt: skip
    ap.add_argument("--report", action="store_true", help="no run: re-table --out's raw record")
    args = ap.parse_args(argv)
    stem = "streamflow_pipeline_cfg" if args.cfg != 0.0 else "streamflow_pipeline"
    out_path = args.out or default_out(stem, args.smoke)
    if args.report:
        retable(out_path, tables)
        return 0
    command = command_line(None if argv is None else [str(pathlib.Path(__file__).resolve()), *argv])
    cfg = streamflow.get_config("tiny" if args.smoke else "default")
    n_req = 8 if args.smoke else args.requests
    conditional = args.cfg != 0.0
    apply_fn, params = make_model(cfg, conditional)
    size = cfg.image_size
    shape = (size, size, 1)
    rng = np.random.default_rng(0)
    noise = rng.standard_normal((n_req, *shape)).astype(np.float32)
    conds = rng.integers(0, NUM_CLASSES, n_req).astype(np.int32) if conditional else None
    ts = streamflow.linear_timesteps(args.steps)
    res: dict = {
        "load_avg_start": _load(),
        "requests": n_req,
        "steps": args.steps,
        "guidance": args.cfg if conditional else None,
    }
    ckw = (
        {"cond_shape": (), "cond_dtype": np.int32, "null_cond": NUM_CLASSES} if conditional else {}
    )

    def batcher(key):
        if key == "e":
            return streamflow.StreamBatcher(
                apply_fn, params, shape, refill="pipeline", timesteps=ts, **ckw
            )
        return streamflow.StreamBatcher(
            apply_fn, params, shape, buckets=cfg.buckets,
            refill="static" if key == "b" else "continuous", **ckw,
        )  # fmt: skip

    t0 = time.perf_counter()
    made = {k: batcher(k) for k in ("b", "c", "e")}
    res["aot_compile_s"] = time.perf_counter() - t0
    kw0 = {"cond": conds[:1], "guidance": args.cfg, "null_cond": NUM_CLASSES} if conditional else {}
    streamflow.sample_euler(apply_fn, params, noise[:1], ts, **kw0)  # compile (a)

    # model clock: median call cost per policy and bucket, round-robin over the kinds
    long_ts = streamflow.linear_timesteps(4 * args.repeats + 8)
    probes = {}
    for key in ("c", "e"):
        for b in made[key].buckets if key == "c" else made[key].buckets[:1]:
            pb = batcher(key)
            rows = b // 2 if conditional and b > 1 else b
            sched = ts if key == "e" else long_ts
            for i in range(max(rows, 1) if key != "e" else 1):
                kw = {} if not conditional else {"cond": 0, "guidance": args.cfg if b > 1 else 1.0}
                pb.submit(np.zeros(shape, np.float32), sched, request_id=i, **kw)
            probes[(key, b)] = pb
    times: dict = {"a_step": []}
    rounds: dict = {"a_step": list(range(args.repeats))}  # the rounds each kind was probed in
    for r in range(args.repeats):
        for (key, _b), pb in probes.items():
            if key == "e" and pb.queued == 0:
                kw = {} if not conditional else {"cond": 0, "guidance": args.cfg}
                pb.submit(np.zeros(shape, np.float32), ts, **kw)
            before = dict(pb.bucket_calls)
            t1 = time.perf_counter()
            pb.step()
            wall = time.perf_counter() - t1
            used = next(x for x in before if pb.bucket_calls[x] != before[x])
            times.setdefault(f"{key}{used}", []).append(wall)
            rounds.setdefault(f"{key}{used}", []).append(r)
        t1 = time.perf_counter()
        streamflow.sample_euler(apply_fn, params, noise[:1], ts, **kw0)
        times["a_step"].append((time.perf_counter() - t1) / args.steps)
    cost = {k: statistics.median(v) for k, v in times.items()}
    res["probe_s"] = times
    res["probe_rounds"] = rounds  # a guided pipeline probe runs 4 rows until it holds 3 requests
    res["call_cost_s"] = cost
    # the naive batcher compiles the same buckets as the stream batcher: same costs
    e_last = f"e{made['e'].buckets[-1]}"
    kind_by = {
        "b": {b: f"c{b}" for b in made["c"].buckets},
        "c": {b: f"c{b}" for b in made["c"].buckets},
        "e": {b: f"e{b}" if f"e{b}" in cost else e_last for b in made["e"].buckets},
    }
    cost_by = {p: {b: cost[k] for b, k in kinds.items()} for p, kinds in kind_by.items()}

    def run(key, arrivals, clock):
        model = clock == "model"
        if key == "a":
            return serve_sequential(
                apply_fn, params, noise, ts, arrivals, conds, args.cfg,
                cost["a_step"] if model else None,
            )  # fmt: skip
        return serve_batcher(
            batcher(key), noise, ts, arrivals, conds, args.cfg,
            cost_by[key] if model else None, kind_by[key],
        )  # fmt: skip

    table, ref = {}, None
    for clock in ("measured", "model"):
        burst = np.zeros(n_req)
        rows = table[clock] = {"burst": {}}
        for key in POLICIES:
            finish, out, calls = run(key, burst, clock)
            ref = out if ref is None else ref
            rows["burst"][key] = {**summarise(finish, burst), "cost_calls": calls}
            rows["burst"][key]["max_abs_diff_vs_a"] = max(
                float(np.abs(out[i] - ref[i]).max()) for i in range(n_req)
            )
        cap = rows["burst"]["a"]["images_per_s"]
        for name, mult in RATES.items():
            arrivals = np.cumsum(np.random.default_rng(1).exponential(1.0 / (mult * cap), n_req))
            rows[name] = {"rate": mult * cap}
            for key in POLICIES:
                finish, out, calls = run(key, arrivals, clock)
                rows[name][key] = {**summarise(finish, arrivals), "cost_calls": calls}
                rows[name][key]["max_abs_diff_vs_a"] = max(
                    float(np.abs(out[i] - ref[i]).max()) for i in range(n_req)
                )
    res["serving"] = table
    res["load_avg_end"] = _load()
    made = tables(res)
    path = write_results(
        stem, made, command=command, load_start=load_start, extra=res, out=out_path
    )
    print(
        f"StreamFlow serving, {n_req} requests of {args.steps} steps"
        + (f", class-conditional, guidance {args.cfg} (2 rows each)" if conditional else "")
        + f"; load avg {res['load_avg_start']} -> {res['load_avg_end']}"
    )
    for key, t in made.items():
        print(f"\n{key}: " + " | ".join(t["columns"]))
        for r in t["rows"]:
            print("  " + " | ".join(f"{c:.4g}" if isinstance(c, float) else str(c) for c in r))
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    jax.config.update("jax_platforms", "cpu")
    raise SystemExit(main())
