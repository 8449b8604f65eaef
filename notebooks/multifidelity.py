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
# # Multi-fidelity regression from trusted label subsets
#
# One MLP predicts the high-fidelity (HF) value. It learns from three "trusted subsets" of the
# labels, and it needs no input labelled at two fidelities:
#
# 1. the **absolute** HF labels (squared error);
# 2. the lower-fidelity labels as **intervals**: the affinely calibrated prediction
#    `a_k f(x) + b_k` should lie within a trust radius `r_k` of the label `y`; `r_k` is either
#    learnable or the `q`-quantile of the current residuals;
# 3. the **ordering** of labels within each fidelity (a squared hinge on the calibrated
#    prediction that only misordered pairs pay; the older pairwise logistic form is an ablation).
#
# The paper gives only an abstract ("Credible Information Subset Decomposition", ICML 2026), so
# every formula here is **our reconstruction** (`fidia_jax.projects.multifidelity.losses.trusted_subset_loss`).
#
# Data: the analytic Forrester function (HF, LF from Forrester et al. 2007; the medium fidelity
# `(HF + LF) / 2` is our construction), generated here, so the notebook needs no shared data.
# FreeSolv is in the benchmark (`benchmarks/multifidelity.py`). `FIDIA_NOTEBOOK_TINY=1` shrinks
# the run to a few training steps.

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

    needs_install = bool(missing_extras("multifidelity"))
if needs_install:
    fidia_source = os.environ.get("FIDIA_JAX_SOURCE") or sys.exit(
        "set FIDIA_JAX_SOURCE to a fidia_jax clone's folder or its git URL: no PyPI release yet")
    req = f"fidia_jax[sciml] @ {fidia_source}" if "://" in fidia_source else f"{fidia_source}[sciml]"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", req], check=True)

# %%
import os

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

from fidia_jax.projects import multifidelity as mf
from fidia_jax.projects.multifidelity import data, losses

TINY = os.environ.get("FIDIA_NOTEBOOK_TINY", "0") == "1"

# %% [markdown]
# ## The Forrester levels and one draw of disjoint training sets

# %%
config = mf.get_config("tiny" if TINY else "demo", n_mf=0 if TINY else 48)
task = mf.make_task(config, 0)
forrester = data.ANALYTIC_FUNCTIONS["forrester"]
grid = np.linspace(0, 1, 400)[:, None]
fig, ax = plt.subplots(figsize=(6, 3.5))
for level, style in (("hf", "k-"), ("mf", "C1--"), ("lf", "C0:")):
    ax.plot(grid[:, 0], forrester.level(level)(grid), style, label=f"f_{level.upper()[0]}")
for i, name in enumerate(task.fidelity_names):
    rows = task.fidelity_train == i
    ax.plot(
        task.x_train[rows, 0], task.y_train[rows], "o", ms=4, label=f"{name} labels ({rows.sum()})"
    )
ax.set_xlabel("x")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()
print(task.counts())

# %% [markdown]
# ## The loss terms on a toy example
#
# A prediction equal to the truth: the absolute term is 0; the interval term is 0 once the
# calibration `(a, b)` matches the low fidelity; the quantile radius keeps the worst
# `1 - q` residuals in play.

# %%
f = jnp.linspace(-1, 1, 8)
y = jnp.concatenate([f[:4], 2 * f[4:] - 1])  # HF rows, then LF = 2 f - 1
member = jnp.stack([jnp.arange(8) < 4, jnp.arange(8) >= 4], axis=1)
loss_fn = jax.jit(losses.trusted_subset_loss, static_argnames="weights")  # one compilation
for scale, shift in ((1.0, 0.0), (2.0, -1.0)):
    cal = losses.init_trusted_subset_calibration(2)._replace(
        scale_K=jnp.array([1.0, scale]), shift_K=jnp.array([0.0, shift])
    )
    total, terms = loss_fn(f, y, member, cal, weights=losses.TrustedSubsetWeights())
    print(
        f"a={scale}, b={shift}: total {float(total):.4f}",
        {k: np.round(np.asarray(v), 4).tolist() for k, v in terms.items()},
    )

# %% [markdown]
# ## Every method on the same runs
#
# `run_methods` trains the trusted-subset model, its ablations (each term off, the other radius
# mode) and the baselines on the same data, network and optimiser: an HF-only MLP, a multi-head
# MLP, LF pretraining then HF fine-tuning, and Δ-learning, which is an **oracle** here (it reads
# the low fidelity at the HF training and test inputs, i.e. paired labels).

# %%
results = mf.run_methods(config, keep_predictions=True)
print(mf.format_table(results))

# %%
rows = results["methods"]
names = list(rows)
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 3.8))
ratios = [rows[m]["ratio_vs_hf_only"] for m in names]
ax0.barh(names, ratios, color=["C3" if m == "trusted_subsets" else "C0" for m in names])
ax0.axvline(1.0, color="k", lw=0.8)
ax0.axvline(0.8, color="k", ls="--", lw=0.8, label="goal 0.8")
ax0.set_xlabel("HF test RMSE / HF-only")
ax0.legend(fontsize=8)
order = np.argsort(task.x_test[:, 0])
ax1.plot(task.x_test[order, 0], task.y_test[order], "k-", label="f_H (test)")
for m in ("hf_only", "trusted_subsets", "pretrain_finetune"):
    if m in rows:
        ax1.plot(task.x_test[order, 0], rows[m]["pred_test"][0][order], label=m)
hf_rows = task.fidelity_train == 0
ax1.plot(task.x_train[hf_rows, 0], task.y_train[hf_rows], "ko", ms=4, label="HF labels")
ax1.set_xlabel("x")
ax1.legend(fontsize=8)
fig.tight_layout()
plt.show()
