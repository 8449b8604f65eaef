"""StreamFlow serving on 2 CPU cores: sequential vs naive batching vs stream batch (AOT / no AOT).

Part 1 trains the flow (``fidia_jax.projects.streamflow`` with ``--config``; default preset:
digits 16x16, one reflow round) and records the AlexNet Fréchet distance (a proxy, not FID) of
samples at 4/8/16 Euler steps; the sample grid goes to ``benchmarks/results/streamflow_samples.png``.

Part 2 serves ``--requests`` requests (noise + a schedule of 4, 8 or 16 uniform Euler steps,
drawn at random) with the trained model, four ways, each on the same requests:

  (a) sequential: one request at a time, ``streamflow.sample_euler`` on a batch of 1;
  (b) naive batching: ``StreamBatcher(refill="static")``: a batch starts only when the last one
      is done and takes only requests with the head's schedule (same t), up to 16;
  (c) stream batch: ``StreamBatcher`` (continuous refill), buckets {1,2,4,8,16} compiled ahead
      of time before the clock starts (compile time reported separately);
  (d) the same stream batch without AOT: a fresh ``jax.jit`` compiles each bucket on first use,
      inside the measured time (a cold server).

Clock: a discrete-event simulation on a *virtual* clock, in two versions. Arrivals are a
Poisson process in virtual seconds; each network call (for (a): each request) really runs, and
the clock advances by its cost; when the server is idle it jumps to the next arrival. Cost =
the call's measured wall time ("measured" clock), or the median wall time of a call of that
bucket measured just before, round-robin over the kinds ("model" clock; for (a) the median
``sample_euler`` step times the request's steps; (d) runs on the measured clock only, its cost
being compilation). Latency = finish - arrival (virtual seconds); images/s = requests / (last
finish - first arrival). Rates are multiples of (a)'s capacity on that clock (images/s with
every request queued at t = 0, the "burst" row): 0.5x, 2x, 4x. Outputs of (b)-(d) are compared
with (a)'s (max |delta|).

The 2 cores are shared with other jobs: the load average is recorded before and after each part;
the measured wall times (and so every ratio) move with it.

Results (issue 41): ``benchmarks/results/streamflow.json`` through :func:`_results.write_results`,
the raw results kept beside the tables; ``docs/streamflow.md`` renders them. Tables (built by
:func:`tables` from the raw record alone): ``serving`` (every clock, arrivals and server),
``goals`` (the page's two goals on each clock), ``latency_paired`` (per-request latency of
(c) against (b) and (a), paired over the same requests), ``paired`` (model clock, burst: the images/s
ratios priced round by round with the probe rounds' costs, paired tests), ``call_cost`` (the
probe calls) and ``fd_proxy`` (the samples' Fréchet proxy per model and step count).

Usage: python benchmarks/streamflow.py [--smoke] [--config default] [--requests 96] [--out PATH]
       python benchmarks/streamflow.py --report [--out PATH]   # re-table a finished run's file
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import statistics
import tempfile
import time

import numpy as np
from _results import command_line, default_out, load_average, retable, write_results
from _streamflow_table import (
    call_cost_table,
    latency_paired_table,
    paired_burst_table,
    serving_table,
)

from fidia_jax.config import config_to_dict
from fidia_jax.projects import streamflow

POLICIES = {
    "a": "sequential (1 at a time)",
    "b": "naive batching (same t)",
    "c": "stream batch, AOT buckets",
    "d": "stream batch, no AOT",
}
RATE_MULTIPLES = {"low": 0.5, "mid": 2.0, "high": 4.0}
STEP_CHOICES = (4, 8, 16)


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def make_requests(n: int, size: int, seed: int):
    rng = np.random.default_rng(seed)
    noise = rng.standard_normal((n, size, size, 1)).astype(np.float32)
    steps = rng.choice(STEP_CHOICES, size=n)
    return noise, [streamflow.linear_timesteps(int(s)) for s in steps], steps


def poisson_arrivals(n: int, rate: float, seed: int) -> np.ndarray:
    """Arrival times (virtual seconds) of a Poisson process; ``rate = inf`` -> all at 0."""
    if not np.isfinite(rate):
        return np.zeros(n)
    return np.cumsum(np.random.default_rng(seed).exponential(1.0 / rate, size=n))


def serve_sequential(apply_fn, params, noise, schedules, arrivals, step_cost=None):
    """(a): FIFO, one request at a time. ``step_cost``: model clock (seconds per Euler step)."""
    clock, finish, out = 0.0, np.zeros(len(arrivals)), {}
    for i in np.argsort(arrivals, kind="stable"):
        clock = max(clock, arrivals[i])
        t0 = time.perf_counter()
        out[i] = streamflow.sample_euler(apply_fn, params, noise[i : i + 1], schedules[i])[0]
        wall = time.perf_counter() - t0
        clock += wall if step_cost is None else step_cost * (len(schedules[i]) - 1)
        finish[i] = clock
    return finish, out, {"cost_calls": {"sequential_step": sum(len(s) - 1 for s in schedules)}}


def serve_batcher(batcher, noise, schedules, arrivals, call_cost=None):
    """(b)-(d): the batcher's calls on the virtual clock. ``call_cost``: model clock (bucket ->
    seconds); the first call of a bucket of a batcher without AOT is charged its measured time
    (it compiles)."""
    order = list(np.argsort(arrivals, kind="stable"))
    clock, finish, out, calls, call_s = 0.0, np.zeros(len(arrivals)), {}, 0, []
    while order or not batcher.idle:
        while order and arrivals[order[0]] <= clock:
            i = order.pop(0)
            batcher.submit(noise[i], schedules[i], request_id=int(i))
        if batcher.idle:
            clock = arrivals[order[0]]
            continue
        before = dict(batcher.bucket_calls)
        t0 = time.perf_counter()
        done = batcher.step()
        wall = time.perf_counter() - t0
        bucket = next(b for b in before if batcher.bucket_calls[b] != before[b])
        first_use = before[bucket] == 0 and batcher.compile_seconds == 0.0
        dt = wall if call_cost is None or first_use else call_cost[str(bucket)]
        clock += dt
        calls += 1
        call_s.append(dt)
        for rid, img in done:
            finish[rid], out[rid] = clock, img
    cost_calls = {str(b): n for b, n in batcher.bucket_calls.items() if n}
    return finish, out, {"calls": calls, "max_call_s": max(call_s), "cost_calls": cost_calls}


def summarise(finish, arrivals):
    lat = finish - arrivals
    return {
        "images_per_s": len(finish) / (finish.max() - arrivals.min()),
        "latency_p50_s": float(np.percentile(lat, 50)),
        "latency_p95_s": float(np.percentile(lat, 95)),
        "latency_s": [float(x) for x in lat],  # per request, in request order
    }


def call_costs(apply_fn, params, size, buckets, repeats):
    """Median wall time of one stream call per bucket (all slots busy with long schedules) and
    of one ``sample_euler`` step (batch 1), measured round-robin (one of each per round) so
    that the shared machine's load changes touch every kind alike. Returns the per-round
    seconds of each kind (``{kind: [s, ...]}``; the model clock uses their medians)."""
    batchers = {}
    for b in buckets:
        batchers[b] = streamflow.StreamBatcher(apply_fn, params, (size, size, 1), buckets=buckets)
        for i in range(b):
            batchers[b].submit(
                np.zeros((size, size, 1), np.float32),
                streamflow.linear_timesteps(10 * repeats + 10),
                request_id=i,
            )
        batchers[b].step()
    zeros = np.zeros((1, size, size, 1), np.float32)
    ts = {str(b): [] for b in buckets}
    ts["sequential_step"] = []
    for _ in range(repeats):
        for b in buckets:
            t0 = time.perf_counter()
            batchers[b].step()
            ts[str(b)].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        streamflow.sample_euler(apply_fn, params, zeros, streamflow.linear_timesteps(4))
        ts["sequential_step"].append((time.perf_counter() - t0) / 4)
    return ts


SEQ_LABEL = "sequential step (batch 1)"
GOAL_X = 2.0  # the page's throughput goal: (c) >= 2x (a) images/s at equal outputs
EXACT = 1e-5  # float32 limit for "the same images"


def _ratio(rows, arrivals, x, y, key="images_per_s"):
    return rows[arrivals][x][key] / rows[arrivals][y][key]


def goals(record: dict) -> dict:
    """The page's two goals on each clock, from the raw serving rows: (c) >= 2x (a) images/s
    with every request queued (and at the high Poisson rate), outputs within 1e-5; (c)'s p95
    latency below (b)'s at the middle rate."""
    serving = record["serving"]
    max_diff = max(
        r[k]["max_abs_diff_vs_a"] for c in serving.values() for r in c.values() for k in r
    )
    out = {"max_abs_diff_all_vs_sequential": max_diff}
    for clock, rows in serving.items():
        burst = _ratio(rows, "burst", "c", "a")
        p95 = _ratio(rows, "mid", "c", "b", "latency_p95_s")
        out[clock] = {
            "c_vs_a_images_per_s_burst": burst,
            "c_vs_b_images_per_s_burst": _ratio(rows, "burst", "c", "b"),
            "c_vs_a_images_per_s_high": _ratio(rows, "high", "c", "a"),
            "b_vs_a_images_per_s_high": _ratio(rows, "high", "b", "a"),
            "goal_throughput_2x_met": bool(burst >= GOAL_X and max_diff <= EXACT),
            "c_p95_vs_b_p95_mid": p95,
            "goal_p95_below_naive_at_mid_met": bool(p95 < 1.0),
        }
    return out


def tables(record: dict) -> dict:
    """The results file's tables, from the raw record alone (see the module docstring)."""
    serving = record["serving"]
    g = goals(record)
    goal_rows = [
        [clock, g[clock]["c_vs_a_images_per_s_burst"], g[clock]["c_vs_b_images_per_s_burst"],
         g[clock]["c_vs_a_images_per_s_high"], g[clock]["b_vs_a_images_per_s_high"],
         "met" if g[clock]["goal_throughput_2x_met"] else "NOT met",
         g[clock]["c_p95_vs_b_p95_mid"],
         "met" if g[clock]["goal_p95_below_naive_at_mid_met"] else "NOT met",
         g["max_abs_diff_all_vs_sequential"]]
        for clock in ("model", "measured") if clock in serving
    ]  # fmt: skip
    out = {
        "serving": serving_table(serving, list(POLICIES), record["rates_images_per_s"]),
        "goals": {
            "columns": [
                "clock",
                "(c) / (a) images/s, burst",
                "(c) / (b) images/s, burst",
                "(c) / (a) images/s, Poisson high",
                "(b) / (a) images/s, Poisson high",
                "goal (c) >= 2x (a), burst",
                "(c) p95 / (b) p95, Poisson mid",
                "goal (c) p95 < (b) p95",
                "max abs diff vs (a), all rows",
            ],
            "rows": goal_rows,
            "formats": [None, ".2f", ".2f", ".2f", ".2f", None, ".2f", None, ".1e"],
        },  # fmt: skip
    }
    latency = latency_paired_table(serving, record["rates_images_per_s"], [("c", "b"), ("c", "a")])
    if latency["rows"]:
        out["latency_paired"] = latency
    probe = record.get("probe_s")
    if probe:
        out["paired"] = paired_burst_table(
            serving["model"]["burst"], probe, [("c", "a"), ("c", "b"), ("b", "a")]
        )
        labels = {"sequential_step": SEQ_LABEL}
        labels.update({k: f"stream call, bucket {k}" for k in probe if k != "sequential_step"})
        out["call_cost"] = call_cost_table(probe, labels)
    training = record.get("training", {})
    has_fd = any(
        row.get("alexnet_fd_proxy") is not None
        for ev in training.get("eval", {}).values()
        for row in ev["steps"].values()
    )
    if has_fd:
        cfg = record.get("config", {})
        steps = [str(n) for n in cfg.get("eval_steps", (4, 8, 16))]
        names = {
            "base": f"base ({cfg.get('train_steps', '?')} steps)",
            "reflow": f"reflow (+ {cfg.get('reflow_rounds', 1)} reflow round, "
            f"{cfg.get('reflow_train_steps', '?')} steps)",
        }
        rows = [
            [names.get(stage, stage)] + [ev["steps"][n].get("alexnet_fd_proxy") for n in steps]
            for stage, ev in training["eval"].items()
        ]
        if training.get("fd_proxy_floor") is not None:
            rows.append(["floor: training digits vs held-out", training["fd_proxy_floor"]]
                        + [None] * (len(steps) - 1))  # fmt: skip
        out["fd_proxy"] = {
            "columns": ["model", *[f"{n} steps" for n in steps]],
            "rows": rows,
            "formats": [None, *[".1f"] * len(steps)],
        }
    return out


def main(argv=None) -> int:
    load_start = load_average()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="tiny model, 12 requests (seconds)")
    ap.add_argument("--config", default="default", help="streamflow preset or file")
    ap.add_argument("--requests", type=int, default=96)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--out", default=None, help="results file (default: benchmarks/results/streamflow.json; "
        "--smoke: a temp file)"
    )  # fmt: skip
    ap.add_argument("--report", action="store_true", help="no run: re-table --out's raw record")
    args = ap.parse_args(argv)
    out_path = args.out or default_out("streamflow", args.smoke)
    if args.report:
        retable(out_path, tables)
        return 0
    command = command_line(None if argv is None else [str(pathlib.Path(__file__).resolve()), *argv])
    cfg = streamflow.load_config("tiny" if args.smoke else args.config)
    n_req = 12 if args.smoke else args.requests
    results: dict = {"load_avg_start": load(), "config": config_to_dict(cfg)}

    # -- part 1: train, reflow, Fréchet proxy -----------------------------------------------------
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        run = streamflow.train_and_evaluate(cfg, tmp)
        if cfg.sample_grid and not args.smoke:
            shutil.copy(
                pathlib.Path(tmp) / "samples.png",
                pathlib.Path(out_path).with_name("streamflow_samples.png"),
            )
    trained_fn, params = run.pop("apply_fn"), run.pop("params")

    def apply_fn(p, x, t):  # a new function: the AOT compile below is measured, not cached
        return trained_fn(p, x, t)

    results["training"] = {
        k: run[k] for k in ("model", "train", "reflow", "eval", "fd_proxy_floor") if k in run
    }
    results["training"]["wall_s"] = time.perf_counter() - t0
    results["load_avg_after_training"] = load()

    # -- part 2: serving ----------------------------------------------------------------------
    size, buckets = cfg.image_size, cfg.buckets
    noise, schedules, steps = make_requests(n_req, size, args.seed)
    results["requests"] = {
        "n": n_req,
        "step_choices": list(STEP_CHOICES),
        "mean_steps": float(np.mean(steps)),
    }
    t0 = time.perf_counter()
    aot = streamflow.StreamBatcher(apply_fn, params, (size, size, 1), buckets=buckets)
    results["aot_compile_s"] = aot.compile_seconds
    streamflow.sample_euler(apply_fn, params, noise[:1], schedules[0])  # compile (a)'s step
    probe = call_costs(apply_fn, params, size, buckets, 5 if args.smoke else 30)
    results["probe_s"] = probe
    costs = {k: statistics.median(v) for k, v in probe.items()}
    results["sequential_step_s"] = costs.pop("sequential_step")
    results["bucket_call_s"] = costs

    def run_policy(key, arrivals, clock):
        model = clock == "model"
        if key == "a":
            return serve_sequential(
                apply_fn,
                params,
                noise,
                schedules,
                arrivals,
                results["sequential_step_s"] if model else None,
            )
        batcher = streamflow.StreamBatcher(
            apply_fn,
            params,
            (size, size, 1),
            buckets=buckets,
            refill="static" if key == "b" else "continuous",
            aot=key != "d",
        )
        return serve_batcher(
            batcher, noise, schedules, arrivals, results["bucket_call_s"] if model else None
        )

    by_clock, reference = {}, None
    for clock in ("measured", "model"):
        rows = by_clock[clock] = {}
        burst = np.zeros(n_req)
        for key in POLICIES:
            if key == "d" and clock == "model":
                continue
            finish, out, extra = run_policy(key, burst, clock)
            rows.setdefault("burst", {})[key] = {**summarise(finish, burst), **extra}
            if reference is None:
                reference = out
            rows["burst"][key]["max_abs_diff_vs_a"] = max(
                float(np.abs(out[i] - reference[i]).max()) for i in range(n_req)
            )
        capacity_a = rows["burst"]["a"]["images_per_s"]
        results.setdefault("rates_images_per_s", {})[clock] = {}
        for name, mult in RATE_MULTIPLES.items():
            rate = mult * capacity_a
            results["rates_images_per_s"][clock][name] = rate
            arrivals = poisson_arrivals(n_req, rate, args.seed + 1)
            for key in POLICIES:
                if key == "d" and clock == "model":
                    continue  # its cost is the compile time, measured on the other clock
                finish, out, extra = run_policy(key, arrivals, clock)
                rows.setdefault(name, {})[key] = {**summarise(finish, arrivals), **extra}
                rows[name][key]["max_abs_diff_vs_a"] = max(
                    float(np.abs(out[i] - reference[i]).max()) for i in range(n_req)
                )
    results["serving"] = by_clock
    results["serving_wall_s"] = time.perf_counter() - t0
    results["load_avg_end"] = load()
    results["goals"] = goals(results)

    made = tables(results)
    path = write_results(
        "streamflow", made, command=command, load_start=load_start, extra=results, out=out_path
    )
    print(
        f"StreamFlow serving, {n_req} requests of {STEP_CHOICES} steps, virtual clock "
        f"(load avg {results['load_avg_start']} -> {results['load_avg_end']}); "
        f"AOT compile {results['aot_compile_s']:.1f} s"
    )
    for key, t in made.items():
        print(f"\n{key}: " + " | ".join(t["columns"]))
        for r in t["rows"]:
            print("  " + " | ".join(f"{c:.4g}" if isinstance(c, float) else str(c) for c in r))
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
