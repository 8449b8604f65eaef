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
# # Var-T-JEPA vs T-JEPA on a small table
#
# Two self-supervised encoders for tables, both feature-token transformers
# (`fidia_jax.projects.varjepa.model.TabularJepa`):
#
# 1. **T-JEPA** (Thimonier et al., ICLR 2025): the context encoder sees a random half of a row's
#    features, a predictor fills in the latent tokens of other features, the loss is the squared
#    error to an EMA target encoder that sees the whole row (`losses.tjepa_objective`).
# 2. **Var-T-JEPA** (Gögl & Yau, ICML 2026): the same modules read as a latent-variable model and
#    trained by one ELBO: reconstruction, KL of the context posterior to N(0, I), KL of the
#    target posterior to the predictor's conditional prior (`losses.var_tjepa_objective`). The
#    ELBO's terms are **our reconstruction** from the paper's abstract.
#
# Data: scikit-learn's bundled breast-cancer table (569 rows, 30 numeric features), so the
# notebook needs no data directory. `FIDIA_NOTEBOOK_TINY=1` shrinks it to a few steps and skips
# the MLPs. The driver behind it is `fidia_jax.projects.varjepa` (`fidia-jax varjepa demo`).

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

    needs_install = bool(missing_extras("varjepa"))
if needs_install:
    fidia_source = os.environ.get("FIDIA_JAX_SOURCE") or sys.exit(
        "set FIDIA_JAX_SOURCE to a fidia_jax clone's folder or its git URL: no PyPI release yet")
    req = f"fidia_jax[sciml] @ {fidia_source}" if "://" in fidia_source else f"{fidia_source}[sciml]"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", req], check=True)

# %%
import os

import matplotlib.pyplot as plt

from fidia_jax import metrics
from fidia_jax.projects import varjepa
from fidia_jax.projects.varjepa import data

TINY = os.environ.get("FIDIA_NOTEBOOK_TINY", "0") == "1"
config = varjepa.get_config("tiny" if TINY else "demo", dataset="breast_cancer")
splits = data.load_tabular(config.dataset, seed=config.seed, max_train=config.max_train)
print(f"{splits.name}: {len(splits.train.y)} train / {len(splits.test.y)} test rows, "
      f"{splits.schema.n_features} features, {splits.n_classes} classes")

# %% [markdown]
# ## Pretrain both, probe the frozen embeddings
#
# `varjepa.run` pretrains each method, embeds the train and test rows (mean over feature tokens
# of the encoder's posterior means, full row), fits a logistic-regression probe (and an MLP
# probe), and, outside tiny mode, the raw-feature MLP and LightGBM on the same split.

# %%
results = varjepa.run(config, splits)
print(varjepa.format_table(results))

# %% [markdown]
# ## Collapse check: effective rank of the embeddings over training
#
# `metrics.effective_rank` of the centred embeddings of fixed training rows: a collapsing
# encoder shows a falling rank.

# %%
fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
for name, row in results["methods"].items():
    h = row["history"]
    axes[0].plot(h["step"], h["effective_rank"], marker="o", label=name)
    axes[1].plot(h["step"], h["loss"], marker="o", label=name)
axes[0].set_xlabel("step")
axes[0].set_ylabel(f"effective rank (of {config.dim})")
axes[1].set_xlabel("step")
axes[1].set_ylabel("training loss (own objective)")
axes[1].set_yscale("log")
for ax in axes:
    ax.legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# ## Posterior variance as an uncertainty score
#
# Var-T-JEPA gives every row a posterior variance. Ranking the test rows by it and keeping the
# most certain first gives a risk-coverage curve of the linear probe's errors; the area under it
# (AURC) is compared with random order (the error rate) and the probe's own confidence.

# %%
model, _ = varjepa.pretrain(config, splits, "var_tjepa")
z_tr, _ = varjepa.embed(model, splits.train)
z_te, var_te = varjepa.embed(model, splits.test)
p = varjepa.probe(config, z_tr, splits.train.y, z_te, splits.test.y)
cov, risk_var = metrics.risk_coverage_curve(var_te, p["linear_errors"])
_, risk_conf = metrics.risk_coverage_curve(-p["linear_conf"], p["linear_errors"])
fig, ax = plt.subplots(figsize=(5, 3.5))
ax.plot(cov, risk_var, label=f"posterior variance (AURC {risk_var.mean():.3f})")
ax.plot(cov, risk_conf, label=f"probe confidence (AURC {risk_conf.mean():.3f})")
ax.axhline(p["linear_errors"].mean(), color="gray", ls="--", label="random order")
ax.set_xlabel("coverage")
ax.set_ylabel("risk (error rate of kept rows)")
ax.legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# ## Unseen categories
#
# A categorical value that the training split never showed maps to the explicit UNKNOWN id 0
# (`data.UNKNOWN_CATEGORY`), counted by the encoder; the model refuses any id outside a column's
# table instead of letting JAX clamp it to the last row.

# %%
import pandas as pd  # noqa: E402

train = pd.DataFrame({"age": [30.0, 40.0, 50.0], "job": ["clerk", "nurse", "clerk"]})
test = pd.DataFrame({"age": [35.0], "job": ["pilot"]})
enc = data.fit_tabular_encoder(train, ["age"], ["job"])
x_num, x_cat, n_unknown = enc.encode(test)
print("vocabulary:", enc.schema.categories, "-> test ids", x_cat.tolist(), f"({n_unknown} unknown)")
