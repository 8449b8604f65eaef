"""AlgoTrace's pictures: cluster/primitive agreement, and the injection table as a heat map."""

from __future__ import annotations

import os
import pathlib
from typing import Any

import numpy as np

from fidia_jax import train
from fidia_jax._io import atomic_path

__all__ = ["plot_clustering", "plot_injection"]

#: Partitions of the clustering comparison, in display order, with their labels.
PARTITIONS = {
    "kmeans": "k-means clusters",
    "meta": "spectral meta-clusters",
    "token_identity": "token identity (control)",
    "random": "random, same sizes (control)",
}


def plot_clustering(
    clustering: dict[str, Any], out_png: str | os.PathLike, *, title: str = ""
) -> pathlib.Path:
    """Agreement of each partition of the trace tokens with the true primitives (purity, NMI,
    ARI; one panel each, higher is better), then k-means' NMI per layer.

    Args:
      clustering: :func:`fidia_jax.projects.algotrace.cluster_analysis`'s output (or a
        checkpoint run's ``clustering``, which has no spectral meta-clusters: partitions absent
        from it are left out of the bars).
      out_png: the file to write.
      title: the figure's title (default: the number of points and the layer).

    Returns:
      The PNG written.
    """
    plt = train.pyplot()
    metrics = ("purity", "nmi", "ari")
    fig, axes = plt.subplots(1, 4, figsize=(16, 3.9))
    names = [n for n in PARTITIONS if n in clustering]
    for ax, m in zip(axes[:3], metrics, strict=True):
        ys = [float(clustering[n][m]) for n in names]
        bars = ax.bar(range(len(names)), ys, color=[f"C{i}" for i in range(len(names))])
        bars[0].set_edgecolor("black")
        bars[0].set_linewidth(1.5)
        ax.set_xticks(range(len(names)), [PARTITIONS[n] for n in names], rotation=25, ha="right",
                      fontsize=8)  # fmt: skip
        ax.set_title(f"{m.upper() if m != 'purity' else m} (↑ better)", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    per_layer = clustering["per_layer"]
    layers = np.arange(len(per_layer))
    for m, style in (("purity", "o-"), ("nmi", "s-"), ("ari", "^-")):
        axes[3].plot(layers, [p[m] for p in per_layer], style, label=m)
    step = max(1, -(-len(layers) // 9))  # at most 9 labels (a released model: 18 blocks)
    axes[3].set_xticks(layers[::step], [str(i) for i in layers[::step]], fontsize=8)
    axes[3].set_xlabel("block")
    axes[3].set_title("k-means agreement per layer (resid_post)", fontsize=10)
    axes[3].legend(fontsize=8)
    axes[3].grid(alpha=0.3)
    fig.suptitle(
        title
        or f"AlgoTrace: clusters of {clustering['n_points']} trace-token activations vs the true "
        f"primitives (layer {clustering['layer']})"
    )
    fig.tight_layout()
    with atomic_path(out_png) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return pathlib.Path(out_png)


def plot_injection(
    injection: dict[str, Any], primitives, out_png: str | os.PathLike, *, title: str = ""
) -> pathlib.Path:
    """The injection table as a heat map: rows are the injected vectors (each primitive's, then
    the random control), columns the primitives whose rate in the sampled text changed; a
    primitive vector that works raises its own rate most (the diagonal).

    Args:
      injection: the ``injection`` entry of the results (``table``: row -> deltas, or, from a
        checkpoint run, row -> ``{"delta", "ci95"}`` cells: the mean change is shown).
      primitives: the primitive names (columns).
      out_png: the file to write.
      title: appended to the figure's title (e.g. the variant).

    Returns:
      The PNG written.
    """
    plt = train.pyplot()
    rows = list(injection["table"])
    m = np.asarray(
        [[c["delta"] if isinstance(c, dict) else c for c in injection["table"][r]] for r in rows],
        float,
    )
    lim = max(float(np.nanmax(np.abs(m))) if m.size else 0.0, 1e-3)
    fig, ax = plt.subplots(figsize=(1.2 * len(primitives) + 2.5, 0.55 * len(rows) + 1.8))
    im = ax.imshow(m, cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto")
    for i in range(m.shape[0]):
        for j in range(m.shape[1]):
            ax.text(j, i, f"{m[i, j]:+.3f}", ha="center", va="center", fontsize=8,
                    fontweight="bold" if i == j else "normal")  # fmt: skip
    ax.set_xticks(range(len(primitives)), list(primitives))
    ax.set_yticks(range(len(rows)), [f"{r} vector" for r in rows])
    ax.set_xlabel("change of the primitive's rate in the sampled traces")
    fig.colorbar(im, ax=ax, fraction=0.05)
    ax.set_title("AlgoTrace injection table" + (f" ({title})" if title else ""), fontsize=10)
    fig.tight_layout()
    with atomic_path(out_png) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return pathlib.Path(out_png)
