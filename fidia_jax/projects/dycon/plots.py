"""DyCon's pictures: accuracy against reasoning length per decoder, and the probe per layer."""

from __future__ import annotations

import os
import pathlib
from typing import Any

import numpy as np

from fidia_jax import train
from fidia_jax._io import atomic_path

__all__ = ["plot_tradeoff"]

_MARKERS = ("o", "s", "^", "D")
_LABELS = {"baseline": "baseline", "nowait": "NoWait", "static": "static probe", "dycon": "DyCon"}


def _finite(x) -> float:
    return float(x) if x is not None and np.isfinite(x) else float("nan")


def plot_tradeoff(
    summary: dict[str, Any] | None,
    probe: dict[str, Any],
    buckets,
    out_png: str | os.PathLike,
    *,
    control: dict[str, Any] | None = None,
    baselines: dict[str, float] | None = None,
    title: str = "DyCon: accuracy vs reasoning length of the controlled and static decoders",
) -> pathlib.Path:
    """Three panels: accuracy vs generated tokens of each decoder on all test prompts (± one
    standard error on both axes); the same per difficulty bucket (one line per decoder, easiest
    bucket first); the probe's held-out R² per layer against the shuffled-label control.

    Args:
      summary: :func:`fidia_jax.projects.dycon.summarize`'s output (method -> cell per bucket);
        ``None`` when no decoder was run (the checkpoint mode): the two decoder panels are then
        omitted and the figure is the probe panel alone.
      probe: :func:`fidia_jax.projects.dycon.fit_probe`'s report (``r2``, ``r2_shuffled``).
      buckets: the config's ``(k_lo, k_hi)`` buckets.
      out_png: the file to write.
      control: the chosen ``{"static"|"dycon": {"lam", "tau"}}`` (shown in the legend).
      baselines: held-out R² of baselines drawn as horizontal lines on the probe panel
        (label -> R²), e.g. the checkpoint mode's position-only and counter ridges.
      title: the figure's title.

    Returns:
      The PNG written.
    """
    plt = train.pyplot()
    if summary is None:
        fig, ax = plt.subplots(1, 1, figsize=(7.5, 4.4))
        axes = [None, None, ax]
        summary = {}
    else:
        fig, axes = plt.subplots(1, 3, figsize=(14.5, 4.2))
    names = [f"{lo}-{hi}" for lo, hi in buckets]
    short = [str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in buckets]
    for i, (method, cells) in enumerate(summary.items()):
        label = _LABELS.get(method, method)
        if control and method in control:
            label += f" (λ={control[method]['lam']:g}, τ={control[method]['tau']:g})"
        c = cells["all"]
        axes[0].errorbar(
            _finite(c["tokens"]), _finite(c["accuracy"]),
            xerr=_finite(c["tokens_se"]), yerr=_finite(c["accuracy_se"]),
            fmt=_MARKERS[i % 4], ms=8, capsize=3, color=f"C{i}", alpha=0.85, label=label,
        )  # fmt: skip
        xs = [_finite(cells[b]["tokens"]) for b in names]
        ys = [_finite(cells[b]["accuracy"]) for b in names]
        axes[1].plot(xs, ys, _MARKERS[i % 4] + "-", color=f"C{i}", alpha=0.85, label=label)
        for b, x, y in zip(short, xs, ys, strict=True):
            if np.isfinite(x) and np.isfinite(y) and i == 0:
                axes[1].annotate(f"k={b}", (x, y), textcoords="offset points", xytext=(4, -10),
                                 fontsize=7)  # fmt: skip
    if axes[0] is not None:
        for ax, panel in zip(
            axes[:2], ("all test prompts (± 1 SE)", "per difficulty bucket (k operands)"),
            strict=True,
        ):  # fmt: skip
            ax.set_xlabel("generated tokens (mean)")
            ax.set_ylabel("accuracy")
            ax.set_title(panel, fontsize=10)
            ax.grid(alpha=0.3)
        axes[0].legend(fontsize=8)
    r2 = np.asarray(probe["r2"], float)
    shuf = np.asarray(probe["r2_shuffled"], float)
    layers = np.arange(len(r2))
    axes[2].bar(layers - 0.2, r2, width=0.4, label="probe (true targets)", color="C0")
    axes[2].bar(layers + 0.2, shuf, width=0.4, label="shuffled-label control", color="C7")
    axes[2].axhline(0.0, color="black", lw=0.8)
    for j, (name, value) in enumerate((baselines or {}).items()):
        axes[2].axhline(float(value), color=f"C{j + 1}", ls="--", lw=1.2,
                        label=f"{name}: {float(value):.3f}")  # fmt: skip
    step = max(1, -(-len(layers) // 10))  # at most about 10 labels (a released model: 19)
    shown = layers[::step]
    axes[2].set_xticks(
        shown, ["embeddings" if i == 0 else f"after block {i - 1}" for i in shown],
        fontsize=8, rotation=30 if len(layers) > 6 else 0,
    )  # fmt: skip
    axes[2].set_ylabel("held-out R²")
    axes[2].set_title("remaining-length probe per layer", fontsize=10)
    axes[2].legend(fontsize=8)
    axes[2].grid(axis="y", alpha=0.3)
    fig.suptitle(title, fontsize=10 if len(title) > 90 else 12, wrap=True)
    fig.tight_layout()
    with atomic_path(out_png) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return pathlib.Path(out_png)
