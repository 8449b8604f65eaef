"""Shared helpers of the benchmark scripts (run as ``python benchmarks/NAME.py``): timing and
writing a result record."""

from __future__ import annotations

import pathlib
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


def write_record(path: str | pathlib.Path, record: dict) -> None:
    """Write ``record`` as strict JSON (``_io.json_text``: non-finite numbers become ``null``) to
    ``path``, creating its folder, and say where."""
    from fidia_jax._io import atomic_write_text, json_text  # after the caller chose its tree

    out = pathlib.Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, json_text(record, indent=1))
    print(f"wrote {out}")
