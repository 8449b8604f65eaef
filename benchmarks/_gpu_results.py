"""What a cell of the GPU benchmarks' tables (``gpu_attention.py``, ``gpu_paso.py``; issues 41,
44) holds instead of a number: :func:`cell_error` when a measurement failed, :data:`NOT_FINISHED`
when a time limit cut it off. Their results files are written by ``_results.write_results``,
whose machine field names the accelerator and whose commit is ``$FIDIA_COMMIT`` on a copy of
the tree without ``.git``.
"""

from __future__ import annotations

#: The cell of a measurement that had started when the results were last written: if the run is
#: stopped by a time limit (``timeout``), the file keeps this instead of a number.
NOT_FINISHED = "not finished (the run was stopped while measuring this)"


def cell_error(error: str, limit: int = 160) -> str:
    """``"failed: <type>: <first line of the message>"``, cut to ``limit`` characters."""
    first = str(error).strip().splitlines()[0] if str(error).strip() else "error"
    text = f"failed: {first}"
    return text if len(text) <= limit else text[: limit - 1] + "…"
