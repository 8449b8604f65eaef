"""Residual geometry's pictures: RID and MixIG per layer, and accuracy under the interventions."""

from __future__ import annotations

import os
import pathlib
from typing import Any

import numpy as np

from fidia_jax import train
from fidia_jax._io import atomic_path
from fidia_jax.projects.residual_geometry.configs import INTERVENTIONS

__all__ = ["ROW_NAMES", "accuracy_rows", "plot_geometry"]

#: Display names of the geometry rows (the plain model's updates, then the interventions).
ROW_NAMES = {
    "attention": "attention",
    "ffn": "FFN",
    **INTERVENTIONS,
    "noise": "noise, attention update's RMS (control)",
}

_PANELS = (
    ("rid", "RID = |ΔS| + ΔD (innovation)"),
    ("mixig", "MixIG, nats (reconfiguration)"),
    ("delta_s", "ΔS: log eRank change"),
    ("delta_d", "ΔD: outside the residual's subspaces"),
)


def plot_geometry(
    geometry: dict[str, dict[str, list[float]]],
    out_png: str | os.PathLike,
    *,
    layers=None,
    title: str = "Residual-update geometry per layer (held-out sequences)",
):
    """RID, MixIG, ΔS and ΔD per layer, one line per update (the plain model's attention and
    FFN updates, and the attention update under each intervention on the visual tokens; on a
    released checkpoint the matched-RMS noise control instead). The paper's ordering is
    attention below the FFN in RID and above it in MixIG.

    Args:
      geometry: the ``geometry`` entry of the results (row -> measure -> per-layer list).
      out_png: the file to write.
      layers: the block index of each entry of the per-layer lists (default ``0 .. n - 1``;
        a checkpoint run may measure a subset, ``checkpoint_layers``).
      title: the figure's title.

    Returns:
      The PNG written.
    """
    plt = train.pyplot()
    fig, axes = plt.subplots(1, len(_PANELS), figsize=(4.3 * len(_PANELS), 3.8))
    styles = {"attention": ("C0", "o-", 2.2), "ffn": ("C3", "s-", 2.2)}
    for ax, (key, panel) in zip(axes, _PANELS, strict=True):
        for i, (row, g) in enumerate(geometry.items()):
            color, style, lw = styles.get(row, (f"C{i + 2}", "^--", 1.2))
            ys = np.asarray(g[key], float)
            ax.plot(np.arange(len(ys)), ys, style, color=color, lw=lw,
                    label=ROW_NAMES.get(row, row))  # fmt: skip
        n = len(next(iter(geometry.values()))[key])
        names = list(range(n)) if layers is None else list(layers)
        step = max(1, -(-n // 8))  # at most about 8 tick labels (a released model: 18+ layers)
        ax.set_xticks(range(0, n, step), [f"layer {names[i]}" for i in range(0, n, step)],
                      fontsize=8)  # fmt: skip
        ax.set_title(panel, fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    with atomic_path(out_png) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return pathlib.Path(out_png)


def accuracy_rows(accuracy: dict[str, Any]) -> list[dict[str, Any]]:
    """The accuracy table as rows ``{"model", "all", "visual", "text_only", <kind> ...}``: the
    plain model, then each intervention on all layers and, when measured, on one layer."""
    rows = [{"model": "plain", **accuracy["plain"]}]
    for name, by_layers in accuracy.items():
        if name == "plain":
            continue
        for where, a in by_layers.items():
            label = "all layers" if where == "all_layers" else where.replace("_", " ")
            rows.append({"model": f"{INTERVENTIONS.get(name, name)}, {label}", **a})
    return rows
