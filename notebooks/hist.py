# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # HiST: gene expression maps predicted from histology on the spot lattice
#
# HiST (Wu et al., ICML 2026) predicts spatial gene expression from per-spot image features
# with a U-shaped transformer over the *sparse* set of measured spots: window attention
# (regular ∪ shifted windows) at several scales, stride-2 patch pooling and pixel-shuffle
# unpooling over the active spots only, and three slide tokens. This notebook trains it with
# leave-one-section-out (`fidia_jax.projects.hist.train_and_evaluate`) and draws predicted
# vs measured expression on the lattice of the held-out section.
#
# **Data.** With `$FIDIA_DATA_DIR` set (see `../shared/data/README.md`) and not in tiny mode:
# HER2ST patient C, features from a fixed colour-deconvolution + texture featuriser (the
# paper's UNI features are not available). Otherwise (and always with
# `FIDIA_NOTEBOOK_TINY=1`): **synthetic lattices** from `fidia_jax.projects.hist.synthetic_sections`,
# whose expression follows a smooth hidden field that the per-spot features see only through
# noise, so the maps below are of synthetic data, not tissue.

# %% [markdown]
# ## Install
#
# In a fresh Colab or Jupyter kernel the next cell installs fidia_jax with this notebook's extra
# (`spatial`). The package has no PyPI release yet: set `FIDIA_JAX_SOURCE` to a
# clone's folder or to the repository's git URL first. Where fidia_jax is already importable
# (the repository's `.venv`), the cell installs nothing.

# %%
import importlib.util
import os
import subprocess
import sys

needs_install = importlib.util.find_spec("fidia_jax") is None
if not needs_install:  # installed: does it have this notebook's extra?
    from fidia_jax.projects import missing_extras

    needs_install = bool(missing_extras("hist"))
if needs_install:
    fidia_source = os.environ.get("FIDIA_JAX_SOURCE") or sys.exit(
        "set FIDIA_JAX_SOURCE to a fidia_jax clone's folder or its git URL: no PyPI release yet")
    req = f"fidia_jax[spatial] @ {fidia_source}" if "://" in fidia_source else f"{fidia_source}[spatial]"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", req], check=True)

# %%
import dataclasses
import os
import tempfile

import matplotlib.pyplot as plt
import numpy as np

from fidia_jax.projects import hist

TINY = os.environ.get("FIDIA_NOTEBOOK_TINY", "0") == "1"
DATA_DIR = os.environ.get("FIDIA_DATA_DIR")
USE_HER2ST = bool(DATA_DIR and os.path.isdir(os.path.join(DATA_DIR, "her2st"))) and not TINY

if TINY:
    config = hist.get_config("tiny")
elif USE_HER2ST:
    config = dataclasses.replace(hist.get_config("demo"), folds=1, methods=("hist", "mlp", "ridge"))
else:
    config = hist.get_config(
        "tiny",
        syn_sections=4,
        syn_shape=(28, 28),
        syn_features=16,
        syn_genes=32,
        num_genes=32,
        eval_genes=16,
        dim=32,
        enc_depths=(1, 1, 1),
        dec_depths=(1, 1),
        window=6,
        epochs=60,
        methods=("hist", "mlp", "ridge"),
    )
print("data:", "HER2ST" if USE_HER2ST else "synthetic lattices", "| tiny:", TINY)

# %% [markdown]
# ## The sparse hierarchy: active spots at each scale and the two window partitions

# %%
prep = hist.prepare_sections(config)
coords = prep.coords[0]
plan = hist.plan_hierarchy(coords, levels=3, window=config.window)
fig, axes = plt.subplots(1, 4, figsize=(14, 3.4))
for lvl, ax in enumerate(axes[:3]):
    c = plan[lvl].coords[plan[lvl].mask]
    ax.scatter(c[:, 0], c[:, 1], s=12 * 4**lvl / max(1, len(coords) / 200), marker="s")
    ax.set_title(f"level {lvl}: {len(c)} active spots")
    ax.set_aspect("equal")
for name, wp, mk in (("regular", plan[0].regular, "o"), ("shifted", plan[0].shifted, "x")):
    ax = axes[3]
    win = wp.spot_window
    ax.scatter(
        coords[:, 0],
        coords[:, 1],
        c=win % 7,
        cmap="tab10",
        s=14,
        marker=mk,
        alpha=0.6,
        label=f"{name}: {wp.table.shape[0]} windows",
    )
axes[3].set_title("windows (colour = window id)")
axes[3].legend(fontsize=7)
axes[3].set_aspect("equal")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Leave-one-section-out: HiST and baselines in one run

# %%
workdir = tempfile.mkdtemp(prefix="hist_nb_")
res = hist.train_and_evaluate(config, workdir)

# %% [markdown]
# ## Predicted vs measured expression on the lattice of the held-out section
# The genes with the highest HiST per-gene PCC and one of the lowest, so that both what works
# and what does not are visible.

# %%
fold = res["folds"][0]
test = fold["test"]
i = prep.names.index(test)
y = res["prepared"].y[i]
c = res["prepared"].coords[i]
methods = [m for m in ("hist", "mlp", "ridge") if m in res["predictions"]]
pcc = np.array(
    [
        np.corrcoef(y[:, g], res["predictions"]["hist"][test][:, g])[0, 1]
        if y[:, g].std() > 0
        else np.nan
        for g in range(y.shape[1])
    ]
)
order = np.argsort(-np.nan_to_num(pcc, nan=-2))
genes = [int(order[0]), int(order[1]), int(order[np.isfinite(pcc[order]).sum() - 1])]
fig, axes = plt.subplots(
    len(genes), 1 + len(methods), figsize=(3.2 * (1 + len(methods)), 3 * len(genes))
)
for r, g in enumerate(genes):
    vmin, vmax = np.percentile(y[:, g], [2, 98])
    panels = [("measured", y[:, g])] + [(m, res["predictions"][m][test][:, g]) for m in methods]
    for k, (name, v) in enumerate(panels):
        ax = axes[r, k]
        ax.scatter(c[:, 0], c[:, 1], c=v, s=28, marker="s", cmap="magma", vmin=vmin, vmax=vmax)
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
        title = f"{prep.genes[g]}: {name}"
        if name != "measured":
            title += f"\nPCC {np.corrcoef(y[:, g], v)[0, 1]:.2f}" if v.std() > 0 else "\nPCC n/a"
        ax.set_title(title, fontsize=9)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Per-gene PCC: HiST against each baseline (one point per gene)

# %%
fig, axes = plt.subplots(1, len(methods) - 1, figsize=(4.2 * (len(methods) - 1), 4), squeeze=False)
for ax, m in zip(axes[0], [m for m in methods if m != "hist"], strict=True):
    pm = np.array(
        [
            np.corrcoef(y[:, g], res["predictions"][m][test][:, g])[0, 1]
            if y[:, g].std() > 0 and res["predictions"][m][test][:, g].std() > 0
            else np.nan
            for g in range(y.shape[1])
        ]
    )
    ax.scatter(pm, pcc, s=10)
    ax.plot([-1, 1], [-1, 1], "k--", lw=0.8)
    ax.set_xlabel(f"{m} per-gene PCC")
    ax.set_ylabel("HiST per-gene PCC")
    ax.set_title(f"HiST above the line for {np.nanmean(pcc > pm):.0%} of genes")
plt.tight_layout()
plt.show()
print(hist.format_table(res))
