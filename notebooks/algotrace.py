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
# # AlgoTrace: algorithmic primitives in a tiny model's reasoning traces
#
# Lippl et al. (ICML 2026, arXiv 2510.15987) cluster the token activations of a language model
# writing reasoning traces (k-means, k = 50), annotate clusters as *algorithmic primitives*
# (distance computation, comparison, nearest neighbour, verification, path generation), study
# how clusters follow one another (a transition graph, meta-clustered spectrally), and build
# one *primitive vector* per primitive in the style of function vectors: mean attention-head
# outputs at the primitive's tokens, summed over the heads with the largest causal indirect
# effect. Injecting a vector into the residual stream should raise its primitive's rate; sums
# of vectors should compose; vectors should transfer across tasks.
#
# Here a small grouped-query LLaMA (4 query heads over 2 key/value heads) is trained on
# synthetic traces of two tasks that share those primitives: a 4-city travelling-salesperson
# problem (nearest-neighbour heuristic) and greedy graph navigation, each written by four
# strategies, with the **true primitive of every token known**. No data files are needed (the
# traces are generated; `FIDIA_DATA_DIR` is not read). `FIDIA_NOTEBOOK_TINY=1` shrinks the run
# to a few training steps: the numbers then mean nothing.

# %% [markdown]
# ## Install
#
# In a fresh Colab or Jupyter kernel the next cell installs fidia_jax with this notebook's extra
# (`lm`). The package has no PyPI release yet: set `FIDIA_JAX_SOURCE` to a
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

    needs_install = bool(missing_extras("algotrace"))
if needs_install:
    fidia_source = os.environ.get("FIDIA_JAX_SOURCE") or sys.exit(
        "set FIDIA_JAX_SOURCE to a fidia_jax clone's folder or its git URL: no PyPI release yet")
    req = f"fidia_jax[lm] @ {fidia_source}" if "://" in fidia_source else f"{fidia_source}[lm]"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", req], check=True)

# %%
import os
import tempfile

import matplotlib.pyplot as plt
import numpy as np

from fidia_jax.projects import algotrace
from fidia_jax.projects.algotrace import traces

TINY = os.environ.get("FIDIA_NOTEBOOK_TINY", "0") == "1"
PRIMS = traces.ALGOTRACE_PRIMITIVES
COLORS = dict(zip(PRIMS, ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"], strict=True))

# %% [markdown]
# ## The traces
# Each token after the `|` separator carries its primitive (`D` distance, `C` compare, `N`
# nearest, `V` verify, `P` path). Lower-case letters are cities / nodes.

# %%
sample = traces.make_algotrace_data(4, seed=0)
for row, lab, n in zip(sample.tokens, sample.labels, sample.length, strict=True):
    print(traces.decode_algotrace(row[:n]))
    print("   labels:", "".join("." if v < 0 else "dcnvp"[v] for v in lab[:n]))

# %% [markdown]
# ## Train, cluster, build vectors, inject
# The `demo` preset (a few minutes on a laptop CPU; `default` is the documented run).

# %%
config = algotrace.get_config("tiny" if TINY else "demo")
with tempfile.TemporaryDirectory() as workdir:
    res = algotrace.train_and_evaluate(config, workdir)

# %% [markdown]
# ## Do activation clusters match the true primitives?
# k-means of the residual stream at every layer, against two controls: random clusters of the
# same sizes, and the partition by token identity (how far the token alone goes).

# %%
cl = res["clustering"]
fig, axes = plt.subplots(1, 2, figsize=(10, 3.2))
for ax, m in zip(axes, ("purity", "nmi"), strict=True):
    layers = np.arange(len(cl["per_layer"]))
    ax.bar(layers, [d[m] for d in cl["per_layer"]], color="tab:blue", label="k-means, per layer")
    ax.axhline(cl["random"][m], color="k", ls="--", label="random clusters")
    ax.axhline(cl["token_identity"][m], color="tab:red", ls=":", label="token identity")
    ax.axhline(cl["meta"][m], color="tab:green", ls="-.", label="meta-clusters")
    ax.set(xlabel="layer (resid_post)", ylabel=m, xticks=layers)
axes[0].legend(fontsize=7)
fig.tight_layout()

# %% [markdown]
# ## The cluster transition graph
# Nodes are the k-means clusters, coloured by their majority primitive and grouped by spectral
# meta-cluster around the circle; an edge is drawn for every transition with probability
# above 0.15 (width and opacity by probability). Right: the true primitive-to-primitive
# transition frequencies.

# %%
trans = np.asarray(cl["transition"])
k = trans.shape[0]
order = np.lexsort((np.asarray(cl["cluster_majority"]), np.asarray(cl["meta_of_cluster"])))
angle = np.empty(k)
angle[order] = np.linspace(0, 2 * np.pi, k, endpoint=False)
xy = np.stack([np.cos(angle), np.sin(angle)], axis=1)
fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 5))
for a in range(k):
    for b in range(k):
        if a != b and trans[a, b] > 0.15:
            ax.annotate("", xy=xy[b], xytext=xy[a], arrowprops=dict(
                arrowstyle="->", lw=3 * trans[a, b], alpha=min(1.0, trans[a, b] + 0.1),
                color="gray", shrinkA=6, shrinkB=6))
sizes = np.asarray(cl["cluster_sizes"], float)
ax.scatter(xy[:, 0], xy[:, 1], s=30 + 400 * sizes / sizes.max(), zorder=3,
           c=[COLORS[PRIMS[m]] for m in cl["cluster_majority"]], edgecolors="k")
for p, c in COLORS.items():
    ax.scatter([], [], c=c, label=p)
ax.legend(fontsize=7, loc="upper right")
ax.set(aspect="equal", xticks=[], yticks=[], title=f"{k} clusters (layer {cl['layer']})")
im = ax2.imshow(np.asarray(cl["primitive_transition"]), cmap="Blues", vmin=0, vmax=1)
ax2.set(xticks=range(5), yticks=range(5), xticklabels=PRIMS, yticklabels=PRIMS,
        xlabel="next primitive", title="true primitive transitions")
plt.setp(ax2.get_xticklabels(), rotation=45)
fig.colorbar(im, ax=ax2, fraction=0.046)
fig.tight_layout()

# %% [markdown]
# ## The injection table (cf. the paper's Table 1)
# Change of each primitive's rate in sampled traces when a vector is added to the residual
# stream at every generated position (rows), against the run without injection with the same
# sampling key. A working primitive vector puts a positive entry on the diagonal.

# %%
table = res["injection"]["table"]
rows = list(table)
mat = np.asarray([table[r] for r in rows])
lim = max(np.abs(mat).max(), 1e-3)
fig, ax = plt.subplots(figsize=(6, 4))
im = ax.imshow(mat, cmap="RdBu_r", vmin=-lim, vmax=lim)
for i in range(mat.shape[0]):
    for j in range(mat.shape[1]):
        ax.text(j, i, f"{mat[i, j]:+.2f}", ha="center", va="center", fontsize=8)
ax.set(xticks=range(5), xticklabels=PRIMS, yticks=range(len(rows)), yticklabels=rows,
       xlabel="rate of primitive", ylabel="injected vector")
plt.setp(ax.get_xticklabels(), rotation=45)
fig.colorbar(im, ax=ax, fraction=0.046)
fig.tight_layout()

# %% [markdown]
# ## Composition and transfer
# Left: for each pair, the change of each primitive's rate with one vector, the other, and
# their sum. Right: a primitive's rate change on one task when its vector is built on the other
# task (transfer) vs on the same task.

# %%
comp = res["injection"]["composition"]
tr = res["injection"]["transfer"]
fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 3.5))
labels, vals_a, vals_b = [], [], []
for pair, c in comp.items():
    a, b = pair.split("+")
    for cond in (a, b, pair):
        labels.append(f"{pair}\n[{cond}]")
        vals_a.append(c["delta_a"][cond])
        vals_b.append(c["delta_b"][cond])
x = np.arange(len(labels))
ax.bar(x - 0.2, vals_a, 0.4, label="rate of a")
ax.bar(x + 0.2, vals_b, 0.4, label="rate of b")
ax.axhline(0, color="k", lw=0.5)
ax.set_xticks(x, labels, fontsize=6)
ax.legend(fontsize=7)
x = np.arange(len(PRIMS))
for off, key, name in ((-0.3, "tsp->nav", "TSP vector on NAV"), (-0.1, "nav->nav", "NAV vector on NAV"),
                       (0.1, "nav->tsp", "NAV vector on TSP"), (0.3, "tsp->tsp", "TSP vector on TSP")):
    ax2.bar(x + off, [tr[p][key] for p in PRIMS], 0.2, label=name)
ax2.axhline(0, color="k", lw=0.5)
ax2.set_xticks(x, PRIMS)
ax2.set(ylabel="rate change of the primitive")
ax2.legend(fontsize=7)
fig.tight_layout()

# %%
print(algotrace.format_tables(res))
