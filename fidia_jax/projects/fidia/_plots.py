"""The two figures of a training run (PNG, :func:`fidia_jax.train.pyplot`, atomic writes)."""

from __future__ import annotations

import pathlib
from collections.abc import Sequence
from typing import Any

from fidia_jax import train
from fidia_jax._io import atomic_path

__all__ = ["plot_max_at_n", "plot_training"]


def _save(fig, out_png: pathlib.Path) -> None:
    with atomic_path(out_png) as tmp:
        fig.savefig(tmp, dpi=100, format="png")


def plot_training(metrics: Sequence[dict[str, Any]], out_png: pathlib.Path, *, k_bon: int) -> None:
    """Training curves: mean reward, max@k of the rollout batch, loss, KL.

    Args:
      metrics: one dict per step (the lines of ``metrics.jsonl``); missing keys plot as gaps.
      out_png: output file.
      k_bon: the ``k`` of the ``max@k`` column.
    """
    plt = train.pyplot()
    keys = [
        ("reward_mean", "mean reward"),
        (f"max@{k_bon}", f"batch max@{k_bon}"),
        ("loss", "loss"),
        ("kl", "KL (k3, per token)"),
    ]
    fig, axes = plt.subplots(1, 4, figsize=(14, 3))
    steps = [m["step"] for m in metrics]
    for ax, (key, title) in zip(axes, keys, strict=True):
        ax.plot(steps, [m.get(key, float("nan")) for m in metrics], marker=".")
        ax.set_title(title)
        ax.set_xlabel("step")
    fig.tight_layout()
    _save(fig, out_png)
    plt.close(fig)


def plot_max_at_n(
    curves: dict[str, dict[str, float]],
    ns: Sequence[int],
    out_png: pathlib.Path,
    *,
    title: str = "held-out max@N",
) -> None:
    """max@N vs N, one line per label (e.g. ``before`` / ``after`` or one per method).

    Args:
      curves: ``{label: summary}`` with ``summary["max@N"]`` for each ``N`` in ``ns``.
      ns: the ``N`` on the (log2) x axis.
      out_png: output file.
      title: figure title.
    """
    plt = train.pyplot()
    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    for label, summary in curves.items():
        ax.plot(
            list(ns), [summary.get(f"max@{n}", float("nan")) for n in ns], marker="o", label=label
        )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("N (samples per backbone)")
    ax.set_ylabel("max@N (proxy reward)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    _save(fig, out_png)
    plt.close(fig)
