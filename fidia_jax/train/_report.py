"""The files every run leaves: ``metrics.jsonl``, ``summary.json`` and pictures (PNG).

``metrics.jsonl`` has one JSON object a line: ``{"run": name, "step": s, ...}`` for each
training step (the step's scalar metrics) and ``{"run", "step", "eval/<name>": ...}`` for each
evaluation. :func:`plot_curves` draws it; :func:`plot_bars` draws a results table as a chart.
Writes are atomic (temporary file, then rename) and happen on process 0 only.
"""

from __future__ import annotations

import math
import os
import pathlib
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from fidia_jax import parallel
from fidia_jax._io import atomic_path, atomic_write_text, json_text, read_json_lines
from fidia_jax.errors import MissingExtraError, needs_extra

__all__ = [
    "append_metrics",
    "plot_bars",
    "plot_curves",
    "pyplot",
    "read_metrics",
    "write_json",
    "write_summary",
]


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend (files only, no display needed).

    matplotlib is imported here, not when the package loads: it comes with the ``plot`` extra
    (and every method's extra), and ``import fidia_jax.train`` works without it.

    Raises:
      MissingExtraError: matplotlib is not installed (``pip install 'fidia_jax[plot]'``).
    """
    with needs_extra("plot", "drawing a figure"):
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

    return plt


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Writes ``obj`` as strict JSON (:func:`fidia_jax._io.json_text`, indented) atomically,
    on process 0 only."""
    if parallel.is_primary():
        atomic_write_text(path, json_text(obj, indent=2) + "\n")


def write_summary(
    workdir: str | os.PathLike, summary: Mapping[str, Any], *, config: Any = None
) -> pathlib.Path:
    """``<workdir>/summary.json``: the run's headline numbers (what its console table shows),
    with the config under ``"config"`` when given (:func:`fidia_jax.config.write_summary`).

    Returns:
      The path written.
    """
    path = pathlib.Path(workdir) / "summary.json"
    if config is not None and parallel.is_primary():
        from fidia_jax.config import write_summary as write_with_config

        write_with_config(path, dict(summary), config)
    else:
        write_json(path, dict(summary))
    return path


def read_metrics(path: str | os.PathLike, run: str | None = None) -> list[dict[str, Any]]:
    """The records of a ``metrics.jsonl`` (only ``run``'s when given; ``[]`` when absent)."""
    path = pathlib.Path(path)
    if not path.is_file():
        return []
    records = [r for _, r in read_json_lines(path, what="metrics file")]
    return [r for r in records if run is None or r.get("run") == run]


def append_metrics(path: str | os.PathLike, records: Sequence[Mapping[str, Any]]) -> None:
    """Appends ``records`` to a ``metrics.jsonl`` (process 0 only), one line each."""
    if records and parallel.is_primary():
        with open(path, "a", encoding="utf-8") as f:
            f.writelines(json_text(dict(r)) + "\n" for r in records)


def truncate_metrics(path: str | os.PathLike, run: str, from_step: int) -> None:
    """Drops ``run``'s records with ``step > from_step`` (a run resuming from ``from_step``), so
    the file ends as an uninterrupted run's would."""
    path = pathlib.Path(path)
    if not path.is_file() or not parallel.is_primary():
        return
    keep = [r for r in read_metrics(path) if r.get("run") != run or r.get("step", 0) <= from_step]
    atomic_write_text(path, "".join(json_text(r) + "\n" for r in keep))


def _finite(values: Sequence[Any]) -> list[float]:
    return [
        float(v) if isinstance(v, (int, float)) and math.isfinite(v) else math.nan for v in values
    ]


def plot_curves(
    metrics_path: str | os.PathLike,
    out_png: str | os.PathLike,
    *,
    keys: Sequence[str] = ("loss",),
    title: str | None = None,
) -> pathlib.Path | None:
    """Training curves of every run in a ``metrics.jsonl``: one panel per key in ``keys`` (the
    runs overlaid, log scale when positive), then one per ``eval/*`` metric.

    Returns:
      The PNG written, or ``None`` when the file has no records or matplotlib is not installed
      (nothing is written).

    Warns:
      UserWarning: matplotlib is missing (the core install: :func:`fidia_jax.train.fit` still
        runs and writes ``metrics.jsonl``; ``pip install 'fidia_jax[plot]'`` for the figure).
    """
    records = read_metrics(metrics_path)
    if not records or not parallel.is_primary():
        return None
    runs = list(dict.fromkeys(r.get("run", "train") for r in records))
    eval_keys = sorted({k for r in records for k in r if k.startswith("eval/")})
    panels = [k for k in keys if any(k in r for r in records)] + eval_keys
    if not panels:
        return None
    try:
        plt = pyplot()
    except MissingExtraError as e:
        warnings.warn(f"{out_png} not drawn: {e}", UserWarning, stacklevel=2)
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4), squeeze=False)
    for ax, key in zip(axes[0], panels, strict=True):
        positive = True
        for run in runs:
            rows = [r for r in records if r.get("run", "train") == run and key in r]
            if not rows:
                continue
            ys = _finite([r[key] for r in rows])
            positive &= all(y > 0 for y in ys if y == y)
            ax.plot([r["step"] for r in rows], ys, marker="." if len(rows) < 30 else None,
                    label=run, lw=1.2)  # fmt: skip
        if positive and key.startswith(("loss", "train")):
            ax.set_yscale("log")
        ax.set_title(key.removeprefix("eval/") + (" (eval)" if key.startswith("eval/") else ""))
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    if len(runs) > 1:
        axes[0][0].legend(fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    with atomic_path(out_png) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return pathlib.Path(out_png)


def plot_bars(
    rows: Sequence[Mapping[str, Any]],
    out_png: str | os.PathLike,
    *,
    label: str,
    values: Sequence[str],
    errors: Mapping[str, str] | None = None,
    title: str | None = None,
    higher_is_better: Mapping[str, bool] | None = None,
) -> pathlib.Path:
    """A results table as grouped bar charts: one panel per column in ``values``, one bar per
    row (named by ``rows[i][label]``), with error bars from ``errors[value]`` when given. The
    best bar of each panel is outlined (``higher_is_better[value]``, default ``False``).

    Args:
      rows: the table (dicts); a missing or non-finite value draws no bar.
      out_png: the PNG to write.
      label: the key naming each row (the method).
      values: the keys drawn, one panel each.
      errors: value key -> key of its standard deviation / error.
      title: the figure's title.
      higher_is_better: value key -> whether larger is better (for the outline).

    Returns:
      The PNG written.
    """
    plt = pyplot()
    errors, hib = errors or {}, higher_is_better or {}
    names = [str(r[label]) for r in rows]
    fig, axes = plt.subplots(
        1, len(values), figsize=(max(3.2, 0.55 * len(rows) + 1.6) * len(values), 3.6), squeeze=False
    )
    for ax, key in zip(axes[0], values, strict=True):
        ys = _finite([r.get(key) for r in rows])
        es = _finite([r.get(errors[key]) for r in rows]) if key in errors else None
        bars = ax.bar(range(len(rows)), [0 if y != y else y for y in ys],
                      yerr=None if es is None else [0 if e != e else e for e in es],
                      color=[f"C{i % 10}" for i in range(len(rows))], capsize=3)  # fmt: skip
        ok = [i for i, y in enumerate(ys) if y == y]
        if ok:
            best = (max if hib.get(key, False) else min)(ok, key=lambda i: ys[i])
            bars[best].set_edgecolor("black")
            bars[best].set_linewidth(2)
        ax.set_xticks(range(len(rows)), names, rotation=35, ha="right", fontsize=8)
        arrow = "↑" if hib.get(key, False) else "↓"
        ax.set_title(f"{key} ({arrow} better)", fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    with atomic_path(out_png) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return pathlib.Path(out_png)
