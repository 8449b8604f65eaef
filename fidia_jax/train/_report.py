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
import zlib
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


# One colour per method, the same in every figure (matplotlib's tab10 order). Names not listed
# get a colour from a stable hash of the name (crc32, not ``hash``, which changes per process).
_TAB10 = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)  # fmt: skip
METHOD_COLORS: dict[str, str] = {
    # the method of the page, then its baselines
    "fidia": _TAB10[0], "hist": _TAB10[0], "teamwork": _TAB10[0], "hypcl": _TAB10[0],
    "varjepa": _TAB10[0], "ldl": _TAB10[0], "dycon": _TAB10[0], "streamflow": _TAB10[0],
    "hitvar": _TAB10[0], "safesci": _TAB10[0], "algotrace": _TAB10[0], "causalegm": _TAB10[0],
    "train": _TAB10[0], "flow": _TAB10[0],
    "baseline": _TAB10[7], "euclidean": _TAB10[1], "adamw": _TAB10[1], "adam": _TAB10[1],
    "sgd": _TAB10[2], "reflow": _TAB10[3], "jepa": _TAB10[1], "mse": _TAB10[2],
    "val": _TAB10[4], "eval": _TAB10[4],
}  # fmt: skip


def _method_of(name: str) -> str:
    """The method a run belongs to: its name up to the first ``/`` (``"hypcl/order2"`` ->
    ``"hypcl"``), lower-cased."""
    return str(name).split("/", 1)[0].strip().lower()


def method_color(name: str) -> str:
    """The colour (hex) of a method or run in every figure: from :data:`METHOD_COLORS` for known
    methods, else from a stable hash of the method name into matplotlib's tab10 palette. Runs
    named ``"<method>/<detail>"`` take their method's colour."""
    method = _method_of(name)
    if method in METHOD_COLORS:
        return METHOD_COLORS[method]
    return _TAB10[zlib.crc32(method.encode("utf-8")) % len(_TAB10)]


def axis_scale(values: Sequence[float], *, decades: float = 2.0) -> tuple[str, dict[str, float]]:
    """The y-scale for ``values``: ``("log", {})`` when all are positive and span more than
    ``decades`` decades; ``("symlog", {"linthresh": t})`` when some are <= 0 and their
    magnitudes span more than ``decades`` decades (``t`` is a power of ten at or below the
    smallest non-zero magnitude, and at least ``max|v| * 1e-4``); else ``("linear", {})``.
    Non-finite values are ignored."""
    ys = [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    mags = [abs(y) for y in ys if y != 0.0]
    if not mags:
        return "linear", {}
    lo, hi = min(mags), max(mags)
    if all(y > 0 for y in ys):
        return ("log", {}) if hi / lo > 10.0**decades else ("linear", {})
    lo = max(lo, hi * 1e-4)
    if hi / lo <= 10.0**decades:
        return "linear", {}
    return "symlog", {"linthresh": 10.0 ** math.floor(math.log10(lo))}


def _curves_figure(
    records: Sequence[Mapping[str, Any]], keys: Sequence[str], title: str | None, plt: Any
) -> Any:
    """The figure :func:`plot_curves` saves (``None`` when there is nothing to draw): one panel
    per key, each with a y-label (the metric), x-label ``step``, a log / symlog y-axis when the
    values span decades (:func:`axis_scale`), every run in its method's colour
    (:func:`method_color`) and a legend on the first panel (even for one run)."""
    runs = list(dict.fromkeys(r.get("run", "train") for r in records))
    eval_keys = sorted({k for r in records for k in r if k.startswith("eval/")})
    panels = [k for k in keys if any(k in r for r in records)] + eval_keys
    if not panels:
        return None
    styles = ("-", "--", ":", "-.")
    seen: dict[str, int] = {}
    style = {}
    for run in runs:  # runs of one method share its colour and differ by line style
        m = _method_of(run)
        style[run] = styles[seen.get(m, 0) % len(styles)]
        seen[m] = seen.get(m, 0) + 1
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4), squeeze=False)
    for ax, key in zip(axes[0], panels, strict=True):
        drawn: list[float] = []
        for run in runs:
            rows = [r for r in records if r.get("run", "train") == run and key in r]
            if not rows:
                continue
            ys = _finite([r[key] for r in rows])
            drawn += ys
            ax.plot([r["step"] for r in rows], ys, marker="." if len(rows) < 30 else None,
                    label=run, lw=1.2, color=method_color(run), ls=style[run])  # fmt: skip
        scale, kw = axis_scale(drawn)
        if scale != "linear":
            ax.set_yscale(scale, **kw)
        name = key.removeprefix("eval/")
        ax.set_title(name + (" (eval)" if key.startswith("eval/") else ""))
        ax.set_ylabel(name + (" (eval)" if key.startswith("eval/") else "")
                      + ("" if scale == "linear" else f" [{scale}]"))  # fmt: skip
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7, ncol=1 if len(runs) <= 8 else 2)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_curves(
    metrics_path: str | os.PathLike,
    out_png: str | os.PathLike,
    *,
    keys: Sequence[str] = ("loss",),
    title: str | None = None,
) -> pathlib.Path | None:
    """Training curves of every run in a ``metrics.jsonl``: one panel per key in ``keys`` (the
    runs overlaid), then one per ``eval/*`` metric.

    Every panel has its metric as y-label and ``step`` as x-label; its y-axis is logarithmic
    when the values are positive and span more than two decades, ``symlog`` when they cross
    zero (a loss that goes negative) over more than two decades (:func:`axis_scale`). Each run
    is drawn in its method's colour, the same in every figure (:func:`method_color`; runs
    ``"<method>/<detail>"`` share it and differ by line style); the first panel has a legend.

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
    if not any(k in r for r in records for k in keys) and not any(
        k.startswith("eval/") for r in records for k in r
    ):
        return None
    try:
        plt = pyplot()
    except MissingExtraError as e:
        warnings.warn(f"{out_png} not drawn: {e}", UserWarning, stacklevel=2)
        return None
    fig = _curves_figure(records, keys, title, plt)
    if fig is None:
        return None
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
    best bar of each panel is outlined (``higher_is_better[value]``, default ``False``). Each
    bar has its method's colour (:func:`method_color`, the same as in :func:`plot_curves`); a
    panel whose values are positive and span more than two decades has a log y-axis.

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
                      color=[method_color(n) for n in names], capsize=3)  # fmt: skip
        ok = [i for i, y in enumerate(ys) if y == y]
        if ok:
            best = (max if hib.get(key, False) else min)(ok, key=lambda i: ys[i])
            bars[best].set_edgecolor("black")
            bars[best].set_linewidth(2)
        ax.set_xticks(range(len(rows)), names, rotation=35, ha="right", fontsize=8)
        arrow = "↑" if hib.get(key, False) else "↓"
        ax.set_title(f"{key} ({arrow} better)", fontsize=9)
        scale = axis_scale(ys)[0]
        if scale == "log":  # positive values over more than two decades
            ax.set_yscale("log")
        ax.set_ylabel(key + (" [log]" if scale == "log" else ""), fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    with atomic_path(out_png) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return pathlib.Path(out_png)
