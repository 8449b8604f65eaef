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
# # Divisiveness-consistent label distribution learning (LDL-DVS)
#
# A label distribution spreads one example's description over `c` labels (e.g. how strongly a
# face shows each of six emotions). Lu, Wu, Li, Jia (ICML 2026) observe that a model trained
# with KL alone can get the *divisiveness* wrong: how much the mass is split between
# "positive" and "negative" labels, `psi(d) = min(d . pos, d . neg)` with per-dataset polarity
# weights. LDL-DVS adds a smooth, pairwise divisiveness-consistency term to KL:
# `loss = KL(D || P) + alpha * L_dvs`. Formulas follow the authors' code (`LDL_DVS` in
# `python-ldl`); see `docs/ldl.md`.
#
# Data: with `FIDIA_DATA_DIR` set (the shared data, `../shared/data/ldl/`) and not in tiny
# mode, the SJAFFE facial-expression set; otherwise a **synthetic** label-distribution set
# (`data.synthetic_ldl_dataset`), so the notebook runs without any data.
# `FIDIA_NOTEBOOK_TINY=1` shrinks the run to a few seconds.

# %% [markdown]
# ## Install
#
# In a fresh Colab or Jupyter kernel the next cell installs fidia_jax with this notebook's extra
# (`sciml`). The package has no PyPI release yet: set `FIDIA_JAX_SOURCE` to a
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

    needs_install = bool(missing_extras("ldl"))
if needs_install:
    fidia_source = os.environ.get("FIDIA_JAX_SOURCE") or sys.exit(
        "set FIDIA_JAX_SOURCE to a fidia_jax clone's folder or its git URL: no PyPI release yet")
    req = f"fidia_jax[sciml] @ {fidia_source}" if "://" in fidia_source else f"{fidia_source}[sciml]"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", req], check=True)

# %%
import os

import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

from fidia_jax import metrics
from fidia_jax.projects import ldl
from fidia_jax.projects.ldl import data, losses

TINY = os.environ.get("FIDIA_NOTEBOOK_TINY", "0") == "1"
DATA_DIR = os.environ.get("FIDIA_DATA_DIR")
USE_REAL = bool(DATA_DIR) and os.path.isdir(os.path.join(DATA_DIR or "", "ldl")) and not TINY

# %% [markdown]
# ## Divisiveness and its smooth surrogate
#
# Along `d(t) = t * (all mass on a positive label) + (1 - t) * (all on a negative label)`,
# `psi = min(t, 1 - t)` peaks at the evenly split `t = 1/2`. The surrogate `psi_k` (a softmin
# with sharpness `k`) is what the loss differentiates; it lies above `psi` and meets it as `k`
# grows.

# %%
pos, neg = np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0])
t = np.linspace(0, 1, 101)
line = np.stack([t, 1 - t, np.zeros_like(t)], axis=1)
fig, ax = plt.subplots(figsize=(5, 3.2))
ax.plot(t, losses.divisiveness(line, pos, neg), "k", lw=2, label="psi = min")
for k in (3.0, 10.0, 30.0):
    ax.plot(t, losses.soft_divisiveness(line, pos, neg, k=k), label=f"psi_k, k={k:g}")
ax.set_xlabel("mass on the positive label t")
ax.set_ylabel("divisiveness")
ax.legend()
plt.show()

# %% [markdown]
# ## The authors' pairwise loss versus the symmetric variant
#
# The authors' `ovo` mode compares the target's divisiveness under the **full** polarity masks
# with the prediction's under **one label pair** at a time. So even a perfect prediction
# (`P = D`) pays a positive loss; the symmetric variant (both sides per pair) and the `full`
# mode are zero there up to the Charbonnier constant.

# %%
rng = np.random.default_rng(0)
d_demo = rng.dirichlet(np.ones(6), size=64)
pos6, neg6 = (np.asarray(p) for p in data.LDL_POLARITY["SJAFFE"])
floors = {mode: float(losses.divisiveness_loss(d_demo, d_demo, pos6, neg6, mode=mode))
          for mode in losses.DIVISIVENESS_MODES}
print({m: round(v, 6) for m, v in floors.items()})
fig, ax = plt.subplots(figsize=(4.5, 3))
ax.bar(list(floors), list(floors.values()))
ax.set_ylabel("loss at P = D")
plt.show()

# %% [markdown]
# ## Cross-validation: KL-only (alpha = 0) against KL + alpha * divisiveness
#
# The driver trains, per fold, one model per alpha from the same initial weights, and scores
# the test fold with the six standard LDL metrics and the divisiveness error. Ratios are to
# KL-only (below 1 is better for every metric except cosine and intersection).

# %%
if USE_REAL:
    config = ldl.get_config("demo", data_dir=DATA_DIR, hidden=(), learning_rate=1e-2,
                            epochs=300, alphas=(0.0, 0.1, 1.0))
else:
    config = ldl.get_config("tiny") if TINY else ldl.get_config(
        "tiny", n_samples=600, n_features=12, n_labels=6, epochs=300, n_folds=5,
        alphas=(0.0, 0.1, 1.0), learning_rate=2e-2)
results = ldl.cross_validate(config)
print(ldl.format_table(results))

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 3.5))
for alpha, curve in results["loss_curves"].items():
    axes[0].plot(curve, label=f"alpha={alpha}")
axes[0].set_xlabel(f"epoch / {max(1, config.epochs // 100)}")
axes[0].set_ylabel("training loss (mean over folds)")
axes[0].set_yscale("log")
axes[0].legend()
names = list(ldl.METRICS)
width = 0.8 / max(1, len(results["alphas"]) - 1)
for i, alpha in enumerate(a for a in results["ratio_vs_kl"] if a != "0.0"):
    ratios = [results["ratio_vs_kl"][alpha][m] for m in names]
    axes[1].bar(np.arange(len(names)) + i * width, ratios, width, label=f"alpha={alpha}")
axes[1].axhline(1.0, color="k", lw=0.8)
axes[1].set_xticks(np.arange(len(names)) + width / 2, [n[:10] for n in names], rotation=30)
axes[1].set_ylabel("ratio to KL-only")
axes[1].set_ylim(0.85, 1.1)
axes[1].legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Does the divisiveness of the predictions follow the targets?
#
# One split (80 % train), KL-only against the largest alpha: the predicted divisiveness
# against the true one (on the diagonal is perfect).

# %%
ds = ldl.load_config_data(config)
train_idx, test_idx = ldl.kfold_splits(len(ds.labels), 5, seed=0)[0]
mu, sd = ds.features[train_idx].mean(0), ds.features[train_idx].std(0) + 1e-8
preds, _ = ldl.fit_predict((ds.features[train_idx] - mu) / sd, ds.labels[train_idx],
                           (ds.features[test_idx] - mu) / sd, ds.pos, ds.neg, config)
psi_true = np.asarray(losses.divisiveness(ds.labels[test_idx], ds.pos, ds.neg))
fig, ax = plt.subplots(figsize=(4.5, 4))
for a in (0, len(config.alphas) - 1):
    psi_pred = np.asarray(losses.divisiveness(jnp.asarray(preds[a]), ds.pos, ds.neg))
    err = float(metrics.divisiveness_error(ds.labels[test_idx], preds[a], ds.pos, ds.neg))
    ax.scatter(psi_true, psi_pred, s=8, alpha=0.6,
               label=f"alpha={config.alphas[a]:g} (DE {err:.4f})")
hi = float(max(psi_true.max(), 0.05))
ax.plot([0, hi], [0, hi], "k", lw=0.8)
ax.set_xlabel("true divisiveness")
ax.set_ylabel("predicted divisiveness")
ax.legend()
plt.show()

# %% [markdown]
# On the real sets the effect is small: see the eight-set table in `docs/ldl.md`
# (`python benchmarks/ldl.py`), which says plainly where the paper's goal is and is not met.
