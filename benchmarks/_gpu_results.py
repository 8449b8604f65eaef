"""Results files of the GPU benchmarks (``gpu_attention.py``, ``gpu_paso.py``; issues 41, 44).

:func:`write_gpu_results` is ``_results.write_results`` with two additions for a run on a device
machine that has a copy of the working tree but no ``.git``:

* the ``machine`` field names the accelerator (``..., jax 0.11.2 gpu, NVIDIA H200``), since
  ``_results.machine`` names only the host's CPUs;
* the ``commit`` field is ``$FIDIA_COMMIT`` when it is set (``git rev-parse HEAD`` of the tree
  that was copied, ``+dirty`` when it had changes), and ``git`` otherwise (``"unknown"`` without
  a checkout).

Also :func:`cell_error` / :data:`NOT_FINISHED`: what a table cell holds instead of a number when
a measurement failed or was cut off by a time limit.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

import _results

#: The cell of a measurement that had started when the results were last written: if the run is
#: stopped by a time limit (``timeout``), the file keeps this instead of a number.
NOT_FINISHED = "not finished (the run was stopped while measuring this)"


def cell_error(error: str, limit: int = 160) -> str:
    """``"failed: <type>: <first line of the message>"``, cut to ``limit`` characters."""
    first = str(error).strip().splitlines()[0] if str(error).strip() else "error"
    text = f"failed: {first}"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def device_machine(base=None) -> str:
    """``_results.machine()`` (or ``base()``) plus the devices' count and kind on an
    accelerator backend (``..., jax 0.11.2 gpu, 1 x NVIDIA H200``)."""
    text = (base or _results.machine)()
    jax = sys.modules.get("jax")
    if jax is not None:
        try:
            if jax.default_backend() != "cpu":
                devices = jax.devices()
                text += f", {len(devices)} x {devices[0].device_kind}"
        except Exception:  # noqa: BLE001 - a broken backend must not lose the results
            pass
    return text


def write_gpu_results(name: str, tables: Mapping[str, Mapping[str, Any]], **kwargs: Any):
    """``_results.write_results(name, tables, **kwargs)`` with the machine and commit above.

    Returns:
      The path written.

    Raises:
      ValueError: as ``_results.write_results``.
    """
    saved = _results.machine, _results.commit
    _results.machine = lambda: device_machine(saved[0])
    env_commit = os.environ.get("FIDIA_COMMIT", "").strip()
    if env_commit:
        _results.commit = lambda: env_commit
    try:
        return _results.write_results(name, tables, **kwargs)
    finally:
        _results.machine, _results.commit = saved
