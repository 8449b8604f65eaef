"""The results-file tables shared by ``benchmarks/streamflow.py`` and
``benchmarks/streamflow_pipeline.py`` (issue 41; run as scripts from ``benchmarks/``).

Every function here is a pure function of a run's raw record (the ``extra`` keys of its results
file), so ``--report`` re-tables a file without running anything.

Raw serving rows, ``{clock: {arrivals: {policy key: row}}}`` with ``row`` holding
``images_per_s``, ``latency_p50_s``, ``latency_p95_s``, ``max_abs_diff_vs_a`` and, on the model
clock, ``cost_calls`` (``{cost kind: how many times the server was charged that kind}``); an
arrivals entry may also hold ``"rate"`` (a float, skipped as a policy).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from _stats import paired_tests

SHORT = {
    "a": "(a) sequential",
    "b": "(b) naive, same t",
    "c": "(c) stream batch, AOT",
    "d": "(d) stream batch, no AOT",
    "e": "(e) authors' fixed pipeline",
}
CLOCK_ORDER = ("model", "measured")


def arrivals_label(name: str, rate: float | None) -> str:
    return "burst (all at t=0)" if name == "burst" else f"Poisson {name} ({rate:.0f}/s)"


def serving_table(
    by_clock: Mapping[str, Mapping[str, Mapping[str, Any]]],
    policies: Sequence[str],
    rates: Mapping[str, Mapping[str, float]],
    ratio_to: Sequence[str] = ("a",),
) -> dict:
    """One row per (clock, arrivals, policy): model clock first, then measured.

    Args:
      by_clock: the raw serving rows (module docstring); a policy missing from an arrivals
        entry is skipped.
      policies: the policy keys in row order.
      rates: ``{clock: {rate name: images/s}}`` of the Poisson arrivals (row labels).
      ratio_to: a "ratio to (k)" column (images/s over policy ``k``'s) for each key.
    """
    columns = ["clock", "arrivals", "server", "images/s"]
    columns += [f"ratio to ({k})" for k in ratio_to]
    columns += ["p50 latency s", "p95 latency s", "max abs diff vs (a)"]
    rows = []
    for clock in [c for c in CLOCK_ORDER if c in by_clock]:
        for name, by in by_clock[clock].items():
            label = arrivals_label(name, rates.get(clock, {}).get(name))
            for key in policies:
                if key not in by:
                    continue
                r = by[key]
                ratios = [r["images_per_s"] / by[k]["images_per_s"] for k in ratio_to]
                rows.append([clock, label, SHORT[key], r["images_per_s"], *ratios,
                             r["latency_p50_s"], r["latency_p95_s"], r["max_abs_diff_vs_a"]])  # fmt: skip
    formats = [None, None, None, ".1f", *[".2f"] * len(ratio_to), ".3f", ".3f", ".1e"]
    return {"columns": columns, "rows": rows, "formats": formats}


def call_cost_table(probe_s: Mapping[str, Sequence[float]], labels: Mapping[str, str]) -> dict:
    """Median (and min / max) wall time per call kind over the round-robin probe rounds, in
    ms; ``labels``: kind -> row label, in row order (kinds not in ``probe_s`` are skipped)."""
    rows = []
    for kind, label in labels.items():
        if kind not in probe_s:
            continue
        v = [1e3 * x for x in probe_s[kind]]
        rows.append([label, statistics.median(v), min(v), max(v), len(v)])
    return {
        "columns": ["call", "median ms", "min ms", "max ms", "probe calls"],
        "rows": rows,
        "formats": [None, ".1f", ".1f", ".1f", None],
    }


def round_series(
    probe_s: Mapping[str, Sequence[float]],
    probe_rounds: Mapping[str, Sequence[int]] | None = None,
) -> dict[str, list[float]]:
    """Each probe kind's cost in every probe round (as many rounds as the longest kind): its
    own measurement where it was probed in that round (``probe_rounds[kind]``: the rounds of its
    values; without it, a kind with a value for every round is taken in order), its median in
    a round where it was not (a kind probed in only some rounds, or with unknown rounds)."""
    n = max(len(v) for v in probe_s.values())
    out = {}
    for kind, values in probe_s.items():
        med = statistics.median(values)
        series = [med] * n
        if probe_rounds is not None and kind in probe_rounds:
            for r, v in zip(probe_rounds[kind], values, strict=True):
                series[r] = v
        elif len(values) == n:
            series = list(values)
        out[kind] = series
    return out


def per_round_seconds(cost_calls: Mapping[str, int], series: Mapping[str, Sequence[float]]):
    """A server's total model-clock time for its calls, priced with each probe round's own
    costs (one value per round, ``series`` from :func:`round_series`):
    ``sum_k count_k * series[k][round]``."""
    n = min(len(series[k]) for k in cost_calls)
    return [sum(c * series[k][r] for k, c in cost_calls.items()) for r in range(n)]


def median_seconds(cost_calls: Mapping[str, int], probe_s: Mapping[str, Sequence[float]]):
    """The same total priced at each kind's median: what the model clock charged."""
    return sum(c * statistics.median(probe_s[k]) for k, c in cost_calls.items())


def paired_burst_table(
    burst: Mapping[str, Mapping[str, Any]],
    probe_s: Mapping[str, Sequence[float]],
    pairs: Sequence[tuple[str, str]],
    probe_rounds: Mapping[str, Sequence[int]] | None = None,
) -> dict:
    """Model clock, every request queued at t = 0: how sure is ``x`` faster than ``y``?

    With every request queued the servers' call sequences do not depend on the costs, so each
    server's serving time is ``sum_k count_k * cost_k``. Pricing it with each round-robin probe
    round's own costs gives one time per round, paired across servers (the rounds saw the same
    load); the columns are the ratio of images/s at the median costs (the serving table's),
    its median / min / max over the rounds, the rounds where ``x`` is faster, and the paired
    Wilcoxon / t-test p-values of the per-round times. A kind probed in only some rounds is
    priced at its median in the others (:func:`round_series`).
    """
    series = round_series(probe_s, probe_rounds)
    rows = []
    for x, y in pairs:
        if x not in burst or y not in burst:
            continue
        tx = per_round_seconds(burst[x]["cost_calls"], series)
        ty = per_round_seconds(burst[y]["cost_calls"], series)
        n = min(len(tx), len(ty))
        tx, ty = tx[:n], ty[:n]
        ratio = median_seconds(burst[y]["cost_calls"], probe_s) / median_seconds(
            burst[x]["cost_calls"], probe_s
        )
        per_round = np.asarray(ty) / np.asarray(tx)  # images/s ratio x / y, round by round
        t = paired_tests(tx, ty)
        rows.append([f"{SHORT[x]} / {SHORT[y]}", n, ratio, float(np.median(per_round)),
                     float(per_round.min()), float(per_round.max()), t["a_lower"],
                     t["p_wilcoxon"], t["p_ttest"]])  # fmt: skip
    return {
        "columns": [
            "images/s ratio",
            "probe rounds",
            "at median costs",
            "per-round median",
            "per-round min",
            "per-round max",
            "rounds x faster",
            "Wilcoxon p",
            "paired t p",
        ],  # fmt: skip
        "rows": rows,
        "formats": [None, None, ".2f", ".2f", ".2f", ".2f", None, ".2g", ".2g"],
    }


def latency_paired_table(
    by_clock: Mapping[str, Mapping[str, Mapping[str, Any]]],
    rates: Mapping[str, Mapping[str, float]],
    pairs: Sequence[tuple[str, str]],
) -> dict:
    """Per-request latency of ``x`` against ``y`` on the same requests (rows with
    ``latency_s``, one latency per request in request order): the median paired difference
    ``x - y``, the requests ``x`` finished sooner / later, and the paired Wilcoxon p-value;
    model clock first. Rows without ``latency_s`` are skipped."""
    rows = []
    for clock in [c for c in CLOCK_ORDER if c in by_clock]:
        for name, by in by_clock[clock].items():
            for x, y in pairs:
                if "latency_s" not in by.get(x, {}) or "latency_s" not in by.get(y, {}):
                    continue
                t = paired_tests(by[x]["latency_s"], by[y]["latency_s"])
                rows.append([clock, arrivals_label(name, rates.get(clock, {}).get(name)),
                             f"{SHORT[x]} − {SHORT[y]}", t["n"], t["median_diff"],
                             t["a_lower"], t["a_higher"], t["p_wilcoxon"]])  # fmt: skip
    return {
        "columns": [
            "clock",
            "arrivals",
            "latency of",
            "requests",
            "median difference s",
            "requests sooner",
            "requests later",
            "Wilcoxon p",
        ],  # fmt: skip
        "rows": rows,
        "formats": [None, None, None, None, ".3f", None, None, ".2g"],
    }
