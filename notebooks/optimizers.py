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
# # SCALE vs AdamW on a tiny LLaMA, and TD(0) with exponential step sizes
#
# Two of the companion methods:
#
# 1. **SCALE** (`optim.scale`): SGD with column-normalised updates for every matrix and
#    momentum only on the output layer, against `optax.adamw`, on a byte-level LLaMA trained
#    by the language-model driver of the benchmarks (`fidia_jax.projects.optimizers`).
# 2. **TD(0)** with linear features on a random Markov reward process, comparing the
#    exponential horizon schedule `optim.exponential_horizon_schedule` with a constant and a
#    `1/t` step size.
#
# Text: the Shakespeare corpus from `$FIDIA_DATA_DIR` when that is set (see
# `../shared/data/README.md`), else a small built-in text (the package's docstrings), so the
# notebook runs without any data. `FIDIA_NOTEBOOK_TINY=1` shrinks everything to a few steps.

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

    needs_install = bool(missing_extras("optimizers"))
if needs_install:
    fidia_source = os.environ.get("FIDIA_JAX_SOURCE") or sys.exit(
        "set FIDIA_JAX_SOURCE to a fidia_jax clone's folder or its git URL: no PyPI release yet")
    req = f"fidia_jax[plot] @ {fidia_source}" if "://" in fidia_source else f"{fidia_source}[plot]"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", req], check=True)

# %%
import functools
import os

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import optax

import fidia_jax
from fidia_jax import data, models, optim, rl
from fidia_jax.projects import optimizers as lm
from fidia_jax.projects import td as td_driver

TINY = os.environ.get("FIDIA_NOTEBOOK_TINY", "0") == "1"
DATA_DIR = os.environ.get("FIDIA_DATA_DIR")
LM_STEPS = 3 if TINY else 200
BATCH, SEQ_LEN = (2, 16) if TINY else (16, 64)

# %% [markdown]
# ## Text as byte tokens

# %%
if DATA_DIR and os.path.isdir(DATA_DIR):
    splits = data.load_shakespeare(DATA_DIR, max_files=1 if TINY else None)
    train_tokens, val_tokens = splits.train, splits.val
    source = f"Shakespeare ({len(splits.files)} files)"
else:
    mods = (fidia_jax, fidia_jax.kernels, fidia_jax.optim, fidia_jax.rl, fidia_jax.protein,
            optim.scale, optim.paso, rl.max_at_k, td_driver.run_linear_td0, models.sample)
    ids = data.encode_bytes("\n\n".join(m.__doc__ for m in mods))
    cut = int(0.9 * len(ids))
    train_tokens, val_tokens = ids[:cut], ids[cut:]
    source = "built-in docstrings"
train_tokens, val_tokens = jnp.asarray(train_tokens), jnp.asarray(val_tokens)
print(f"{source}: {len(train_tokens)} train / {len(val_tokens)} validation bytes")
print(repr(data.decode_bytes(np.asarray(train_tokens[:80]))))

# %% [markdown]
# ## The model and two optimisers
#
# The `optimizers` driver (`fidia_jax.projects.optimizers`, the one the benchmarks use) builds
# a byte-level `models.Llama` (RMSNorm, RoPE, SwiGLU, grouped-query attention, untied `lm_head`)
# from a typed config, splits it into a graph definition and a parameter state (so the training
# step is a pure function of the parameters), and trains several optimisers with their steps
# interleaved: at every step each optimiser's jitted step runs once, on the same batch (a
# function of the step index), and is timed. `optim.scale` finds the output layer by its path
# (`lm_head`) and gives the 1-D parameters (norm scales) AdamW.

# %%
config = lm.get_config(
    "default",
    steps=LM_STEPS,
    model={"dim": 32, "n_layers": 1 if TINY else 2, "hidden_dim": 64},
    data={"batch_size": BATCH, "seq_len": SEQ_LEN, "data_seed": 1, "val_windows": 4 * BATCH,
          "val_seed": 2},
    optimizer={"learning_rate": 3e-3, "end_fraction": 0.0},
)
task = lm.make_task(config, tokens=(train_tokens, val_tokens))
n_params = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(task.params))
labels = jax.tree.leaves(optim.scale_param_labels(task.params))
print(f"{n_params} parameters; SCALE groups:", {g: labels.count(g) for g in sorted(set(labels))})

# Both optimisers: warm-up over 10 % of the steps, cosine decay to 0, peak 3e-3.
optimizers = {
    "AdamW": lm.make_optimizer(lm.with_optimizer(config, "adamw")),
    "SCALE": lm.make_optimizer(lm.with_optimizer(config, "scale")),
}
results = lm.train_interleaved(task, optimizers, LM_STEPS)
runs = {name: (r.losses, lm.evaluate(task, r.params)) for name, r in results.items()}
for name, (losses, val) in runs.items():
    print(f"{name:6s} first loss {losses[0]:.3f}  last loss {losses[-1]:.3f}  val loss {val:.3f}")
ratio = lm.step_time_ratios(results, "AdamW")["SCALE"]
print(f"SCALE / AdamW step time (median of paired per-step ratios): {ratio:.2f}")

# %%
fig, ax = plt.subplots(figsize=(5, 3.5))
for name, (losses, _) in runs.items():
    ax.plot(losses, label=name)
ax.set_xlabel("step")
ax.set_ylabel("train loss (nats / byte)")
ax.legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# ## TD(0) with an exponential step-size schedule
#
# `td_driver.random_linear_mrp` (the TD driver, `fidia_jax.projects.td`) draws a Markov
# reward process (Dirichlet transitions, uniform rewards, unit-norm features).
# `rl.td_fixed_point` solves for the TD fixed point `theta*`, and `td_driver.run_linear_td0` runs `T` TD(0) updates in a `lax.scan` with any optax
# schedule. The error is `||Phi (theta_T - theta*)||_D^2`. The exponential schedule
# `eta_t = eta_0 T^(-t/T)` needs only the horizon `T`; the `1/t` schedule's theory needs the
# smallest eigenvalue of the feature covariance.

# %%
HORIZONS = (50,) if TINY else (500, 2000, 8000)
NUM_SEEDS = 4 if TINY else 32
mrp = td_driver.random_linear_mrp(jax.random.key(0), n_states=20, n_features=5, discount=0.9)
theta_star = rl.td_fixed_point(mrp)
keys = jax.random.split(jax.random.key(1), NUM_SEEDS)
ETA0 = 0.5


schedules = {
    "constant": lambda T: optax.constant_schedule(ETA0),
    "1/t": lambda T: optim.inverse_time_schedule(ETA0, offset=10.0),
    "exponential": lambda T: optim.exponential_horizon_schedule(ETA0, T),
}


def final_errors(schedule, horizon, keys):
    """``(seeds,)`` errors of the last iterate of ``horizon`` TD(0) updates."""
    thetas_SxD = jax.vmap(lambda k: td_driver.run_linear_td0(k, mrp, schedule, horizon))(keys)
    return jax.vmap(lambda th: rl.td_param_error(mrp, th, theta_star))(thetas_SxD)


@functools.partial(jax.jit, static_argnums=0)
def td_errors(horizon, keys):
    """Mean error over the seeds for every schedule (one compilation per horizon)."""
    return jnp.stack([jnp.mean(final_errors(make(horizon), horizon, keys))
                      for make in schedules.values()])


errs_HxS = np.stack([np.asarray(td_errors(T, keys)) for T in HORIZONS])
td = {name: errs_HxS[:, i].tolist() for i, name in enumerate(schedules)}
print("mean ||Phi (theta_T - theta*)||_D^2 over", NUM_SEEDS, "seeds")
print(f"{'T':>6} " + " ".join(f"{name:>12}" for name in td))
for i, T in enumerate(HORIZONS):
    print(f"{T:>6} " + " ".join(f"{td[name][i]:12.2e}" for name in td))

# %%
fig, ax = plt.subplots(figsize=(5, 3.5))
for name, errs in td.items():
    ax.plot(HORIZONS, errs, marker="o", label=name)
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("horizon T (updates)")
ax.set_ylabel("value error at T")
ax.legend()
fig.tight_layout()
plt.show()
