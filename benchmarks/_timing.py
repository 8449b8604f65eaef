"""Shared timing helper of the benchmark scripts (run as ``python benchmarks/NAME.py``)."""

from __future__ import annotations

import statistics
import time

import jax


def median_seconds(fn, *args, repeats: int = 10) -> float:
    """Median wall time of ``fn(*args)`` over ``repeats`` calls, after one call that compiles.

    Each call is waited for with ``jax.block_until_ready``.
    """
    jax.block_until_ready(fn(*args))  # compile + warm up
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)
