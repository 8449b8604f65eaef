"""CPU-bound baselines (scikit-learn, lightgbm, numpy/BLAS): a thread limit and a heartbeat.

On a shared machine the BLAS/OpenMP pools of scikit-learn default to every core the library can
see, which oversubscribes the cores the run was given (a GP fit measured 378 s with the default
pools on a 2-core share vs 28 s with one thread). :func:`cpu_stage` wraps such a step: it limits
the native thread pools (``threadpoolctl.threadpool_limits``) to :func:`available_cores` (or a
given count), shows the step as a :func:`~fidia_jax.train.stage`, and prints a line at least
every ``every_s`` seconds while it runs so a long fit never sits silent.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from fidia_jax._io import beat_every
from fidia_jax.train._progress import _err_console, stage

__all__ = ["available_cores", "cpu_stage", "limit_threads"]


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS reports one, else
    ``os.cpu_count()``), at least 1."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - macOS / Windows
        n = os.cpu_count() or 1
    return max(1, min(n, os.cpu_count() or n))


@contextlib.contextmanager
def limit_threads(threads: int | None = None) -> Iterator[int]:
    """Limits the native thread pools (BLAS, OpenMP: scikit-learn, lightgbm, numpy) inside the
    block to ``threads`` (``None`` or ``0``: :func:`available_cores`); yields the limit.

    Raises:
      ValueError: ``threads < 0``.
    """
    if threads is not None and threads < 0:
        raise ValueError(f"limit_threads: threads must be >= 0, got {threads}")
    n = threads or available_cores()
    from threadpoolctl import threadpool_limits  # a core dependency (small, pure Python)

    with threadpool_limits(limits=n):
        yield n


@contextlib.contextmanager
def _heartbeat(description: str, every_s: float) -> Iterator[None]:
    with beat_every(
        _err_console(), lambda s: f"  {description}: still running, {s:.0f} s", every_s
    ):
        yield


@contextlib.contextmanager
def cpu_stage(
    description: str, *, threads: int | None = None, every_s: float = 8.0
) -> Iterator[int]:
    """A :func:`~fidia_jax.train.stage` for a CPU-bound step: native thread pools limited
    (:func:`limit_threads`) and a ``still running, N s`` line every ``every_s`` seconds
    (``FIDIA_QUIET=1`` silences it like every stage). Yields the thread limit."""
    # the heartbeat names the step as the caller did, without the thread count
    with stage(f"{description} [{threads or available_cores()} thread(s)]", every_s=0):
        with limit_threads(threads) as n, _heartbeat(description, every_s):
            yield n
