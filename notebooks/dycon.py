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
# # DyCon: a probe of "how much reasoning is left" steering reflection tokens
#
# Tu et al. (ICML 2026, arXiv 2606.07108) read the remaining reasoning length from a reasoning
# model's hidden state with a linear probe, and at each step boundary push the logits of
# reflection tokens ("wait") up or down with it, without touching the weights. Here the model is
# a tiny LLaMA trained on step-wise modular-addition solutions that contain injected errors with
# **corrective** reflections and, after the answer is known, **redundant** ones
# (`fidia_jax.projects.dycon.task.make_dycon_task`, all synthetic: the notebook needs no data directory).
# The control `λ·(d̂ − τ)` is our reconstruction (the paper's formula is not public).
#
# `FIDIA_NOTEBOOK_TINY=1` runs the `tiny` preset (a few training steps: the numbers mean
# nothing); otherwise the `demo` preset (a few minutes on a CPU).

# %% [markdown]
# ## Install
#
# In a fresh Colab or Jupyter kernel the next cell installs fidia_jax with this notebook's extra
# (`plot`). The package has no PyPI release yet: set `FIDIA_JAX_SOURCE` to a
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

    needs_install = bool(missing_extras("dycon"))
if needs_install:
    fidia_source = os.environ.get("FIDIA_JAX_SOURCE") or sys.exit(
        "set FIDIA_JAX_SOURCE to a fidia_jax clone's folder or its git URL: no PyPI release yet")
    req = f"fidia_jax[plot] @ {fidia_source}" if "://" in fidia_source else f"{fidia_source}[plot]"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", req], check=True)

# %%
import os
import tempfile

import matplotlib.pyplot as plt
import numpy as np

from fidia_jax.projects import dycon
from fidia_jax.projects.dycon import task

TINY = os.environ.get("FIDIA_NOTEBOOK_TINY", "0") == "1"
config = dycon.get_config("tiny" if TINY else "demo")

# %% [markdown]
# ## The task: one solution, with its per-token roles

# %%
vocab = dycon.vocab_of(config)
example = task.make_dycon_task(1, vocab=vocab, error_rate=0.5, redundant_rate=0.7, seed=1)
names = {v: k for k, v in task.DYCON_ROLES.items()}


def show(tok):
    specials = {vocab.BOS: "<s>", vocab.EQ: "=", vocab.SEP: ";", vocab.WAIT: "wait",
                vocab.END_THINK: "</think>", vocab.EOS: "</s>", vocab.PAD: "_"}
    if tok in specials:
        return specials[tok]
    if vocab.is_digit(tok):
        return str(tok - 7)
    i, a = vocab.operand_parts(tok)
    return f"x{i}={a}"


n = example.length[0]
for t, r in zip(example.tokens[0, :n], example.roles[0, :n], strict=True):
    print(f"{show(int(t)):>9s}  {names[int(r)]}")

# %% [markdown]
# ## Train, probe, decode four ways

# %%
with tempfile.TemporaryDirectory() as workdir:
    results = dycon.train_and_evaluate(config, workdir)

# %% [markdown]
# ## Probe R² by layer (held-out examples) against a shuffled-label control
# Layer 0 is the token embedding; layer `l` is the residual stream after block `l`.

# %%
r2 = np.asarray(results["probe"]["r2"])
r2_shuf = np.asarray(results["probe"]["r2_shuffled"])
fig, ax = plt.subplots(figsize=(5, 3.2))
layers = np.arange(len(r2))
ax.plot(layers, r2, "o-", label="probe (true targets)")
ax.plot(layers, r2_shuf, "s--", label="shuffled-label control")
ax.axhline(0.8, color="grey", lw=0.8, ls=":", label="paper: about 0.8")
ax.set_xlabel("layer (0 = embeddings)")
ax.set_ylabel("held-out R²")
ax.set_xticks(layers)
ax.legend()
fig.tight_layout()

# %% [markdown]
# ## Accuracy and tokens per difficulty bucket (± one standard error)

# %%
buckets = [f"{lo}-{hi}" for lo, hi in config.buckets]
fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
width = 0.2
for i, method in enumerate(dycon.METHODS):
    cells = [results["summary"][method][b] for b in buckets]
    x = np.arange(len(buckets)) + (i - 1.5) * width
    for ax, key in zip(axes, ("accuracy", "tokens"), strict=True):
        ax.bar(x, [c[key] for c in cells], width, yerr=[c[f"{key}_se"] for c in cells], label=method, capsize=2)
for ax, key in zip(axes, ("accuracy", "generated tokens"), strict=True):
    ax.set_xticks(np.arange(len(buckets)), [f"k = {b}" for b in buckets])
    ax.set_xlabel("difficulty (steps)")
    ax.set_ylabel(key)
axes[0].legend(fontsize=8)
fig.tight_layout()

# %% [markdown]
# ## Reflections: redundant removed, corrective kept?

# %%
print(dycon.format_table(results["summary"], config.buckets))
print("redundant reflections removed (DyCon vs baseline):",
      f"{results['reflections']['redundant_removed_fraction']:.2f}")
print("corrective reflections kept (DyCon / baseline):",
      f"{results['reflections']['corrective_kept_ratio']:.2f}")
for name, goal in results["goals"].items():
    print(f"{name}: {'met' if goal['met'] else 'NOT met'}")
