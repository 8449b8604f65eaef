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
# # Multi-treatment effects: CFR balancing schemes and CausalEGM
#
# Liang, Chi, Zhang, "Causal representation learning with optimal compression under complex
# treatments" (ICML 2026) balance a learned representation across K treatment arms with one of
# three schemes: **Pairwise** (all K(K-1)/2 arm pairs), **One-vs-All** (K terms) and
# **Treatment Aggregation** (one term, whatever K), with a balancing weight alpha estimated
# from a bound instead of a grid. Only the abstract was available: the scheme formulas and the
# alpha estimator in `fidia_jax.projects.causal.losses` are our reconstructions (see `docs/causal.md`).
#
# Data: with `$FIDIA_DATA_DIR` set, the covariates of IHDP replication 1 (747 real units);
# **without it, random Gaussian covariates** (400 units, 10 features), so the notebook runs
# anywhere. Outcomes come from `data.make_multiarm`, a K-arm generator with known potential
# outcomes. `FIDIA_NOTEBOOK_TINY=1` shrinks everything to a few steps (and skips CausalEGM,
# whose compilation alone takes longer than the tiny budget).

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

    needs_install = bool(missing_extras("causal"))
if needs_install:
    fidia_source = os.environ.get("FIDIA_JAX_SOURCE") or sys.exit(
        "set FIDIA_JAX_SOURCE to a fidia_jax clone's folder or its git URL: no PyPI release yet")
    req = f"fidia_jax[sciml] @ {fidia_source}" if "://" in fidia_source else f"{fidia_source}[sciml]"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", req], check=True)

# %%
import os
import time

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

from fidia_jax import metrics
from fidia_jax.projects import causal
from fidia_jax.projects.causal import data, losses

TINY = os.environ.get("FIDIA_NOTEBOOK_TINY", "0") == "1"
DATA_DIR = os.environ.get("FIDIA_DATA_DIR")
ITERATIONS = 20 if TINY else 600
K = 4
if DATA_DIR:
    covariates, source = data.load_ihdp(1, DATA_DIR).x, "IHDP replication 1 covariates"
else:
    covariates, source = np.random.default_rng(0).normal(size=(400, 10)), "random covariates"
print("covariates:", source, covariates.shape)

# %% [markdown]
# ## The K-arm generator
# Arms are doses `s_k = k/(K-1)`; assignment favours high doses for units with a high
# confounding score, more so as `imbalance` grows. Left: the true mean dose response; right:
# how the arms' score distributions separate (what the balancing terms try to undo in the
# representation).

# %%
d = data.make_multiarm(covariates, K, imbalance=2.0, seed=0)
score = d.x @ np.linalg.lstsq(d.x, d.mu[:, -1] - d.mu[:, 0], rcond=None)[0]
fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
axes[0].plot(np.arange(K) / (K - 1), d.mu.mean(0), "o-")
axes[0].set(xlabel="dose s_k", ylabel="mean potential outcome", title="true dose response")
for k in range(K):
    axes[1].hist(score[d.t == k], bins=20, alpha=0.5, label=f"arm {k} (n={np.sum(d.t == k)})")
axes[1].set(title="effect score by arm (imbalance = 2)")
axes[1].legend()
plt.tight_layout()

# %% [markdown]
# ## CFR with each balancing scheme, alpha from the plug-in estimate
# TARNet (no balancing) and CFR with the three schemes, MMD-RBF, held-out sqrt(PEHE) over all
# arm pairs. `estimate_alpha_for` fits a pilot TARNet and takes the median norm of the
# per-unit loss gradients w.r.t. the representation (reconstruction).

# %%
train, test = data.split_causal(d, 0.3, seed=0)
small = {"rep_hidden": (32, 32), "head_hidden": (16,)} if TINY else {}
settings = causal.CfrSettings(iterations=ITERATIONS, **small)
alpha_hat = causal.estimate_alpha_for(train, settings)
print(f"alpha_hat = {alpha_hat:.3g}")
scores = {}
# Tiny mode fits TARNet and one scheme only.
for scheme in ("none", "aggregation") if TINY else ("none", "pairwise", "one_vs_all", "aggregation"):
    s = causal.CfrSettings(scheme=scheme, alpha=alpha_hat, iterations=ITERATIONS, **small)
    predict, info = causal.fit_cfr(train, s)
    mu_hat = predict(test.x)
    scores["TARNet" if scheme == "none" else scheme] = (
        metrics.sqrt_pehe(test.mu, mu_hat), metrics.ate_error(test.mu, mu_hat))
for name, (pehe, ate) in scores.items():
    print(f"{name:<12} sqrt(PEHE) {pehe:.3f}  ATE error {ate:.3f}")
plt.figure(figsize=(5, 3))
plt.bar(list(scores), [v[0] for v in scores.values()])
plt.ylabel("held-out sqrt(PEHE)")
plt.title(f"K = {K}, alpha_hat = {alpha_hat:.2g}")

# %% [markdown]
# ## Cost of a balancing term vs K
# One jitted evaluation (value and gradient) of each scheme on a batch of 256 representations:
# Pairwise grows like K^2, One-vs-All like K, Treatment Aggregation stays flat.

# %%
ks = (2,) if TINY else (2, 4, 8, 16)
phi = jax.random.normal(jax.random.key(0), (256, 16))
timings = {scheme: [] for scheme in losses.SCHEMES}
for k in ks:
    t_arms = jnp.arange(256) % k
    for scheme in losses.SCHEMES:
        f = jax.jit(jax.value_and_grad(
            lambda p, t_arms=t_arms, k=k, scheme=scheme: losses.balancing_loss(
                scheme, p, t_arms, k, jax.random.key(1))))
        jax.block_until_ready(f(phi))
        start = time.perf_counter()
        for _ in range(3):
            jax.block_until_ready(f(phi))
        timings[scheme].append((time.perf_counter() - start) / 3)
plt.figure(figsize=(5, 3))
for scheme, ts in timings.items():
    plt.loglog(ks, ts, "o-", label=scheme)
plt.xlabel("K")
plt.ylabel("seconds per call")
plt.legend()

# %% [markdown]
# ## Multi-treatment CausalEGM (full mode only)
# The authors' CausalEGM with K outcome codes: one-hot plus an embedding of the arms that
# follows the 2-Wasserstein distances between their latent distributions (reconstruction).

# %%
if not TINY:
    predict, info = causal.fit_causalegm(train, causal.EgmSettings(n_iter=500))
    mu_hat = predict(test.x)
    print(f"multi-treatment CausalEGM sqrt(PEHE) {metrics.sqrt_pehe(test.mu, mu_hat):.3f}, "
          f"ATE error {metrics.ate_error(test.mu, mu_hat):.3f} ({info['wall_s']:.0f} s)")
