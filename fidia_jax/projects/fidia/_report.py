"""What every FIDIA table and report shares: the criteria note and the summary rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: Printed under every table and stored in every report.
PROXY_NOTE = (
    "success/precision use proxy thresholds (gate, no function penalty, judge "
    "log-likelihood, instability index); no structure predictor was used"
)
#: The same for ``reward.criteria = "structure"``.
STRUCTURE_NOTE = (
    "success/precision use the structure criteria on a folded design (gate, no function "
    "penalty, scRMSD < 2 A, motif RMSD < 1 A, mean pLDDT > 70)"
)


def criteria_note(criteria: str) -> str:
    """The note of ``reward.criteria`` (``"proxy"`` or ``"structure"``)."""
    return STRUCTURE_NOTE if criteria == "structure" else PROXY_NOTE


def summary_rows(results: dict[str, dict[str, Any] | None], ns: Sequence[int], bon_n: int):
    """Columns and rows of the max@N / success / precision table, one row per evaluated policy
    (``None`` results are skipped)."""
    rows = []
    for label, res in results.items():
        if res is None:
            continue
        s = res["summary"]
        rows.append(
            [label]
            + [s[f"max@{n}"] for n in ns]
            + [s["success"], s["precision"], s["identity"], s["recovery"]]
        )
    cols = (
        ["policy"]
        + [f"max@{n}" for n in ns]
        + [f"success@{bon_n}*", "precision*", "identity", "recovery"]
    )
    return cols, rows
