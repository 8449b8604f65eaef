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
# # StreamFlow: serving a rectified flow with a stream batch
#
# A rectified-flow model turns noise into an image by integrating a learned velocity from
# `t = 1` (noise) to `t = 0` (image) in a few Euler steps. Served one request at a time, each
# step is a network call on a batch of 1. StreamFlow (ICML 2026) batches requests that are at
# *different* timesteps: every call advances each slot by one step with its own `t` and `dt`,
# finished images leave and queued requests take their slots, so the network keeps running on a
# full batch. Here:
#
# 1. train a small U-Net flow on scikit-learn's bundled digits (no download; this notebook needs
#    no shared data) with `fidia_jax.projects.streamflow`;
# 2. serve it with `streamflow.StreamBatcher` (AOT-compiled buckets 1/2/4/8/16), next to the naive
#    "same-t" batching, and watch the slots fill;
# 3. check that every streamed image equals the one-at-a-time sampler's.
#
# `FIDIA_NOTEBOOK_TINY=1` shrinks the run to a few seconds (8x8 digits, 3 training steps: the
# samples are noise, the mechanics are the same).

# %% [markdown]
# ## Install
#
# In a fresh Colab or Jupyter kernel the next cell installs fidia_jax with this notebook's extra
# (`vision`). The package has no PyPI release yet: set `FIDIA_JAX_SOURCE` to a
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

    needs_install = bool(missing_extras("streamflow"))
if needs_install:
    fidia_source = os.environ.get("FIDIA_JAX_SOURCE") or sys.exit(
        "set FIDIA_JAX_SOURCE to a fidia_jax clone's folder or its git URL: no PyPI release yet")
    req = f"fidia_jax[vision] @ {fidia_source}" if "://" in fidia_source else f"{fidia_source}[vision]"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", req], check=True)

# %%
import os
import tempfile

import matplotlib.pyplot as plt
import numpy as np

from fidia_jax.projects import streamflow

TINY = os.environ.get("FIDIA_NOTEBOOK_TINY", "0") == "1"
config = streamflow.get_config("tiny" if TINY else "demo")
print(config)

# %% [markdown]
# ## Train the flow
#
# `train_and_evaluate` trains the U-Net on the rectified-flow loss
# (`losses.rectified_flow_loss`: regress `noise - image` at `x_t = t noise + (1 - t) image`),
# then samples it through a stream batch at each step count of `eval_steps` and, in the `demo`
# preset, scores the samples with the AlexNet Fréchet distance against held-out digits (a
# *proxy*, not FID).

# %%
workdir = tempfile.mkdtemp(prefix="streamflow_")
run = streamflow.train_and_evaluate(config, workdir)
apply_fn, params = run["apply_fn"], run["params"]
print("loss first/last:", round(run["train"]["loss_first"], 3), round(run["train"]["loss_last"], 3))
for n, row in run["eval"][run["final_params"]]["steps"].items():
    print(f"{n:>2} steps: Fréchet proxy {row.get('alexnet_fd_proxy', 'not computed')}")

# %% [markdown]
# ## Samples at several step counts, from one stream batch
#
# The requests below are submitted together, interleaving 1, 2, 4 and 8 steps: each network
# call holds requests at different timesteps.

# %%
size = config.image_size
step_counts = (1, 2, 4, 8)
per = 2 if TINY else 8
noise = np.random.default_rng(0).standard_normal((len(step_counts) * per, size, size, 1)).astype(np.float32)
schedules = [streamflow.linear_timesteps(step_counts[i % len(step_counts)]) for i in range(len(noise))]
images, stats = streamflow.stream_generate(apply_fn, params, noise, schedules, config.buckets)
print("network calls:", stats["calls"], "by bucket:", stats["bucket_calls"])
fig, axes = plt.subplots(len(step_counts), per, figsize=(per * 0.9, len(step_counts) * 1.0), squeeze=False)
for k, n in enumerate(step_counts):
    for j in range(per):
        ax = axes[k][j]
        ax.imshow(np.clip((images[j * len(step_counts) + k, ..., 0] + 1) / 2, 0, 1), cmap="gray")
        ax.axis("off")
    axes[k][0].set_title(f"{n} steps", fontsize=8, loc="left")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Exactness: the stream batch equals the sequential sampler
#
# `streamflow.sample_euler` runs one request at a time with the same noise and schedule.

# %%
diffs = [np.abs(streamflow.sample_euler(apply_fn, params, noise[i : i + 1], schedules[i])[0] - images[i]).max()
         for i in range(len(noise))]
print(f"max |stream - sequential| over {len(noise)} images: {max(diffs):.2e}")
assert max(diffs) <= 1e-5

# %% [markdown]
# ## How the slots fill: stream batch vs naive same-t batching
#
# Twenty requests of 1 to 8 steps are queued at once. The stream batch (`refill="continuous"`)
# refills a slot as soon as its request finishes; the naive batch (`refill="static"`) starts a
# new batch only when the last one is done, and only with requests of the head's schedule.

# %%
rng = np.random.default_rng(1)
n_req = 8 if TINY else 20
req_steps = rng.choice([1, 2, 4, 8], size=n_req)
occupancy = {}
for refill in ("continuous", "static"):
    batcher = streamflow.StreamBatcher(apply_fn, params, (size, size, 1), buckets=config.buckets,
                                   refill=refill)
    for i, n in enumerate(req_steps):
        batcher.submit(noise[i % len(noise)], streamflow.linear_timesteps(int(n)), request_id=i)
    active = []
    while not batcher.idle:
        batcher.step()
        active.append(batcher.last_batch_size)  # requests advanced by this call
    occupancy[refill] = (batcher.calls, active)
    print(f"{refill:>10}: {batcher.calls} network calls for {int(req_steps.sum())} Euler steps")
fig, ax = plt.subplots(figsize=(6, 2.5))
for refill, (calls, active) in occupancy.items():
    ax.step(range(len(active)), active, where="post", label=f"{refill} ({calls} calls)")
ax.set_xlabel("network call")
ax.set_ylabel("requests in the call")
ax.legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# The serving benchmark (`python benchmarks/streamflow.py`) times the four ways of serving
# (sequential, naive batching, stream batch with and without ahead-of-time compilation) under
# Poisson arrivals; `docs/streamflow.md` has the measured table and the reading.
