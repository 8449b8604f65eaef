"""SafeSci's picture: per-discipline scores of each model, with the official bootstrap as bars."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from fidia_jax import train
from fidia_jax._io import atomic_path

__all__ = ["SCORES", "plot_disciplines"]

#: The scores drawn, one panel each: report key -> panel title.
SCORES = {
    "choice_accuracy": "choice accuracy",
    "tf_accuracy": "true/false accuracy",
    "refusal_rate": "refusal rate",
}


def plot_disciplines(
    breakdowns: Mapping[str, Mapping[str, Mapping[str, Any]]],
    out_png: str | os.PathLike,
    *,
    title: str = "",
) -> pathlib.Path:
    """Grouped bars per discipline (and ``Overall``), one bar per model, one panel per score.

    A bar is the official bootstrap mean with ± its standard deviation as the error bar; a
    group too small for a subsample (``boot_mean`` is ``None``) shows its full-sample mean,
    hatched, without an error bar. A black dot marks every full-sample mean.

    Args:
      breakdowns: model -> score key (of :data:`SCORES`) -> the breakdown of
        :func:`~fidia_jax.projects.safesci.scoring.safesci_breakdown` (group -> ``{"n", "mean",
        "boot_mean", "boot_std"}``); a missing or empty breakdown leaves its panel empty.
      out_png: the file to write.
      title: the figure's title.

    Returns:
      The PNG written.
    """
    plt = train.pyplot()
    models = list(breakdowns)
    panels = [k for k in SCORES if any(breakdowns[m].get(k) for m in models)] or ["choice_accuracy"]
    groups = {
        k: sorted({g for m in models for g in (breakdowns[m].get(k) or {}) if g != "Overall"})
        + ["Overall"]
        for k in panels
    }
    width = 0.8 / max(len(models), 1)
    fig, axes = plt.subplots(
        len(panels), 1, figsize=(max(6.0, 0.9 * max(len(g) for g in groups.values()) + 2.5),
                                 2.9 * len(panels)), squeeze=False,
    )  # fmt: skip
    for ax, key in zip(axes[:, 0], panels, strict=True):
        names = groups[key]
        x = np.arange(len(names))
        for i, model in enumerate(models):
            rows = breakdowns[model].get(key) or {}
            labelled = False
            for j, g in enumerate(names):
                row = rows.get(g)
                if row is None:
                    continue
                boot = row.get("boot_mean") is not None
                xi = x[j] + (i - (len(models) - 1) / 2) * width
                ax.bar(xi, row["boot_mean"] if boot else row["mean"], width,
                       yerr=row["boot_std"] if boot else None, capsize=2, color=f"C{i}",
                       alpha=1.0 if boot else 0.45, hatch=None if boot else "//",
                       label=None if labelled else model)  # fmt: skip
                ax.plot(xi, row["mean"], "k.", ms=4)
                labelled = True
        ax.set_xticks(x, [f"{g}" for g in names], fontsize=8)
        ax.set_ylim(0, 1.15)
        ax.set_title(SCORES.get(key, key) + " (bars: bootstrap mean ± std; hatched: too few items, full-sample mean; dots: full sample)",
                     fontsize=9)  # fmt: skip
        ax.grid(axis="y", alpha=0.3)
    axes[0, 0].legend(fontsize=8, ncol=len(models), loc="upper left")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    with atomic_path(out_png) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return pathlib.Path(out_png)
