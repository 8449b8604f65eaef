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
# # Residual-update geometry of a tiny vision-language model
#
# Xi et al. (ICML 2026, "Large vision-language models get lost in attention") read every block
# of a decoder as an additive update `ΔX` to the residual stream `X` and ask what it changes:
# the spectrum (effective rank, **ΔS**), the subspace (energy outside the residual's row space,
# **ΔD**; **RID** = |ΔS| + ΔD), and the movement of information between tokens (token-mixing
# entropy **TME**, mixing information gain **MixIG**). Their claim: attention *reconfigures*
# (low RID, high MixIG) while the FFN *innovates* (high RID, low MixIG), and noise in place of
# visual attention can even help. The formulas here are **reconstructions** (only the abstract
# was available; see `docs/residual_geometry.md`).
#
# Data: scikit-learn's bundled 8×8 digits (shipped inside the wheel, no download and no
# `FIDIA_DATA_DIR` needed) as 16 visual tokens of 2×2 patches, with synthetic questions (which
# digit, is it even, digit + k) and text-only arithmetic (a + b). `FIDIA_NOTEBOOK_TINY=1`
# shrinks the run to seconds (an untrained-scale model: the numbers then mean nothing).

# %% [markdown]
# ## Install
#
# In a fresh Colab or Jupyter kernel the next cell installs fidia_jax with this notebook's extra
# (`lm`). The package has no PyPI release yet: set `FIDIA_JAX_SOURCE` to a
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

    needs_install = bool(missing_extras("residual_geometry"))
if needs_install:
    fidia_source = os.environ.get("FIDIA_JAX_SOURCE") or sys.exit(
        "set FIDIA_JAX_SOURCE to a fidia_jax clone's folder or its git URL: no PyPI release yet")
    req = f"fidia_jax[lm] @ {fidia_source}" if "://" in fidia_source else f"{fidia_source}[lm]"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", req], check=True)

# %%
import os
import tempfile

import matplotlib.pyplot as plt
import numpy as np

from fidia_jax.projects import residual_geometry as rg
from fidia_jax.projects.residual_geometry import geometry

TINY = os.environ.get("FIDIA_NOTEBOOK_TINY", "0") == "1"

# %% [markdown]
# ## The primitives on constructed matrices
#
# In the page's form (`form="page"`, ΔD measured against the residual's row space) an update
# whose rows are combinations of the residual's rows adds no new direction (ΔD = 0) and an
# orthogonal one is pure innovation (ΔD = 1). The default, the authors' form, measures the part
# of the update outside both the column and the row subspaces of the residual (range [0, √2]).
# A token permutation of the update *and* the residual changes nothing in RID.

# %%
rng = np.random.default_rng(0)
x = rng.normal(size=(12, 4)) @ rng.normal(size=(4, 10))  # rank-4 residual, 12 tokens
inside = rng.normal(size=(12, 12)) @ x
q, _ = np.linalg.qr(np.concatenate([x.T, rng.normal(size=(10, 6))], axis=1))
outside = rng.normal(size=(12, 6)) @ q[:, 4:].T
for name, dx in [("inside the row space", inside), ("orthogonal", outside)]:
    r = geometry.residual_information_dynamics(x, dx, form="page", rtol=1e-8)
    print(f"{name:22s} ΔS={r['delta_s']:+.3f}  ΔD={r['delta_d']:.3f}  RID={r['rid']:.3f}")

# %% [markdown]
# ## Train, measure, intervene
#
# `train_and_evaluate` trains the `LlamaVL`, captures the residual and both updates per layer
# on held-out questions, and evaluates Noise Δ (matched-RMS noise in place of the attention
# update of the visual tokens), Noise QKV (noise visual queries, keys and values) and SAP
# (uniform predefined attention on the visual keys).

# %%
config = rg.get_config("tiny" if TINY else "demo")  # demo: ~3 CPU-minutes
results = rg.train_and_evaluate(config, tempfile.mkdtemp())

# %% [markdown]
# ## RID and MixIG per layer: attention vs FFN (and the noise rows)

# %%
geo = results["geometry"]
names = {"attention": "attention", "ffn": "FFN", **rg.INTERVENTIONS}
layers = np.arange(config.n_layers)
fig, axes = plt.subplots(1, 3, figsize=(13, 3.4))
for row, g in geo.items():
    style = "-o" if row in ("attention", "ffn") else "--x"
    axes[0].plot(layers, g["rid"], style, label=names[row])
    axes[1].plot(layers, g["mixig"], style, label=names[row])
    axes[2].plot(layers, g["delta_d"], style, label=names[row])
for ax, title in zip(
    axes, ["RID = |ΔS| + ΔD", "MixIG (nats)", "ΔD (share outside the row space)"], strict=True
):
    ax.set_title(title)
    ax.set_xlabel("layer")
    ax.set_xticks(layers)
axes[0].legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Sensitivity to the numerical rank of the residual subspace
#
# ΔD depends on how many directions count as "the residual's subspace": a looser threshold
# (larger `rtol`, or a smaller fixed rank) leaves more of any update outside.

# %%
sens = results["rank_sensitivity"]
fig, ax = plt.subplots(figsize=(6, 3.2))
for row in ("attention", "ffn"):
    ax.plot(list(sens), [np.mean(sens[rule][row]) for rule in sens], "-o", label=names[row])
ax.set_ylabel("ΔD (mean over layers)")
ax.set_xlabel("rank rule")
ax.legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Accuracy under the interventions, visual vs text-only questions

# %%
acc = results["accuracy"]
bars = {"plain": acc["plain"]} | {names[k]: v["all_layers"] for k, v in acc.items() if k != "plain"}
fig, ax = plt.subplots(figsize=(8, 3.4))
width = 0.8 / len(bars)
for i, (label, a) in enumerate(bars.items()):
    ax.bar(np.arange(2) + i * width, [a["visual"], a["text_only"]], width, label=label)
ax.set_xticks(np.arange(2) + 0.4 - width / 2, ["visual questions", "text-only questions"])
ax.set_ylabel("test accuracy")
ax.legend(fontsize=8)
plt.tight_layout()
plt.show()
print(rg.format_table(results))
