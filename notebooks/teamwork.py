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
# # TeamWork: role-aware anomaly detection on a multivariate series
#
# TeamWork (ICML 2026) is known to us only from its abstract: **the method here is our
# reconstruction** (see `docs/teamwork.md`). Channels get *dominant* / *auxiliary* roles from
# how much each one reduces the others' one-step prediction uncertainty; dominant channels send
# gated messages to auxiliary ones; the model reconstructs spans masked along each channel's
# FFT period and scores each step by its uncertainty-weighted reconstruction error.
#
# Data: one SKAB run (`valve1/0`) when `$FIDIA_DATA_DIR` holds SKAB, else the **synthetic
# generator** of `fidia_jax.projects.teamwork.make_synthetic` (periodic channels, known driving structure,
# injected point / contextual / shapelet / seasonal / trend anomalies), so the notebook runs
# without any data. `FIDIA_NOTEBOOK_TINY=1` shrinks the series and the training to seconds.

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

    needs_install = bool(missing_extras("teamwork"))
if needs_install:
    fidia_source = os.environ.get("FIDIA_JAX_SOURCE") or sys.exit(
        "set FIDIA_JAX_SOURCE to a fidia_jax clone's folder or its git URL: no PyPI release yet")
    req = f"fidia_jax[spatial] @ {fidia_source}" if "://" in fidia_source else f"{fidia_source}[spatial]"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", req], check=True)

# %%
import os

import matplotlib.pyplot as plt
import numpy as np

from fidia_jax import metrics
from fidia_jax.projects import teamwork

TINY = os.environ.get("FIDIA_NOTEBOOK_TINY", "0") == "1"
DATA_DIR = os.environ.get("FIDIA_DATA_DIR")

# %% [markdown]
# ## The series

# %%
use_skab = bool(DATA_DIR) and os.path.isdir(os.path.join(DATA_DIR, "skab")) and not TINY
if use_skab:
    runs, _ = teamwork.load_skab(DATA_DIR)
    run = next(r for r in runs if r.name == "valve1/0")
    k = teamwork.SKAB_TRAIN_SIZE
    train, test, labels = run.values[:k], run.values[k:], run.anomaly[k:]
    channel_names = list(teamwork.SKAB_CHANNELS)
    source = f"SKAB {run.name} (train = first {k} points)"
    config = teamwork.get_config("skab", steps=150)
else:
    n = 400 if TINY else 2000
    syn = teamwork.make_synthetic(0, train_length=n, test_length=n, n_anomalies=4 if TINY else 10)
    train, test, labels = syn.train, syn.test, syn.labels
    channel_names = [("dominant " if d else "auxiliary ") + str(c)
                     for c, d in enumerate(syn.dominant)]
    source = "synthetic generator (no shared data)"
    config = teamwork.get_config("tiny" if TINY else "demo")
print(source, "| train", train.shape, "| test", test.shape, "| anomalous fraction",
      round(float(labels.mean()), 3))
periods = [teamwork.dominant_period(train[:, c]) for c in range(train.shape[1])]
print("FFT dominant period per channel:", periods,
      f"(the model's window is {config.window}: a longer period is taken as the window)")

# %% [markdown]
# ## Fit TeamWork and PCA T²+Q on the clean training part

# %%
detectors = {m: teamwork.fit_detector(m, train, config) for m in ("teamwork", "pca")}
scores = {m: d.score(test) for m, d in detectors.items()}
info = detectors["teamwork"].info
print("dominant channels:", [channel_names[c] for c, d in enumerate(info["dominant"]) if d])

fig, ax = plt.subplots(figsize=(4.5, 4))
im = ax.imshow(np.asarray(info["influence"]), cmap="viridis")
ax.set_xlabel("receiver j")
ax.set_ylabel("sender i")
ax.set_title("uncertainty reduction U[i, j] (nats)")
fig.colorbar(im)
plt.show()

# %% [markdown]
# ## Scores, thresholds and detected intervals over the labels
#
# Two thresholds: the top `anomaly_ratio` fraction of steps (deployable) and the best-F1
# threshold on these labels (an oracle upper bound). Detected intervals are drawn under the
# labelled ones.

# %%
s = scores["teamwork"]
thr_ratio = metrics.threshold_at_ratio(s, config.anomaly_ratio)
thr_oracle, _ = metrics.best_f1_threshold(s, labels)
n_show = min(3, test.shape[1])
fig, axes = plt.subplots(n_show + 2, 1, figsize=(12, 2 * (n_show + 2)), sharex=True)
t = np.arange(len(labels))
for a, b in metrics.anomaly_events(labels):
    for ax in axes[:-1]:
        ax.axvspan(a, b, color="red", alpha=0.15, lw=0)
for c in range(n_show):
    axes[c].plot(t, test[:, c], lw=0.8)
    axes[c].set_ylabel(channel_names[c][:14], fontsize=8)
axes[n_show].plot(t, s, lw=0.8, label="TeamWork score")
axes[n_show].axhline(thr_ratio, color="k", ls="--", lw=0.8, label="ratio threshold")
axes[n_show].axhline(thr_oracle, color="g", ls=":", lw=0.8, label="oracle threshold")
axes[n_show].set_yscale("log")
axes[n_show].legend(fontsize=8, loc="upper right")
rows = [("labels", labels.astype(bool)), ("TeamWork, ratio", s >= thr_ratio),
        ("TeamWork, oracle", s >= thr_oracle),
        ("PCA, ratio", scores["pca"] >= metrics.threshold_at_ratio(scores["pca"],
                                                                   config.anomaly_ratio))]
for i, (_name, pred) in enumerate(rows):
    for a, b in metrics.anomaly_events(pred.astype(int)):
        axes[-1].broken_barh([(a, b - a)], (i - 0.4, 0.8), color="red" if i == 0 else "C0")
axes[-1].set_yticks(range(len(rows)), [r[0] for r in rows], fontsize=8)
axes[-1].set_xlabel("test step")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Metrics
#
# `pa_f1` is point-adjusted F1: a labelled event counts as fully found once any of its steps is
# flagged, which **inflates** scores; read it next to the plain F1 and the affiliation F1.

# %%
print(f"{'method':10s} {'threshold':9s} " + " ".join(f"{k:>15s}" for k in
      ("f1", "pa_f1", "affiliation_f1", "auc_pr")))
for m, sc in scores.items():
    for rule, thr in (("ratio", metrics.threshold_at_ratio(sc, config.anomaly_ratio)),
                      ("oracle", metrics.best_f1_threshold(sc, labels)[0])):
        r = metrics.detection_metrics(sc, labels, thr)
        print(f"{m:10s} {rule:9s} " + " ".join(f"{r[k]:15.3f}" for k in
              ("f1", "pa_f1", "affiliation_f1", "auc_pr")))
