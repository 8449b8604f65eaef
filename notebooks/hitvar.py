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
# # HIT-VAR: next-scale VAR super-resolution whose token prefixes decode at x1 ... x4
#
# HIT-VAR (ICML 2026, arXiv 2605.14891; earlier version arXiv 2506.04990; what is
# reconstructed is marked in `docs/hitvar.md`) tokenises the HR image with a multi-scale
# residual quantiser whose decoder reads the tokens only, predicts the tokens scale by scale with
# a block-causal transformer conditioned on the LR image as in VARSR (start tokens plus a
# per-scale LR term), and trains the tokenizer so that every **prefix** of the token sequence
# decodes to an image at its own scale. A DPO term then prefers the HR crop's tokens over the LR
# crop's tokens under the same LR condition. Before any DPO the run checks that decoding the
# true HR tokens beats decoding generated ones and bicubic (else nothing the VAR learns shows).
#
# Data: crops of the photographs bundled inside the scikit-learn and scikit-image wheels
# (`data.bundled_photos`, no download, no shared data needed), degraded by blur, bicubic
# downsampling, noise and JPEG. Three photos are held out for evaluation.
# `FIDIA_NOTEBOOK_TINY=1` runs the `tiny` preset (32x32 crops, x2, a few steps: the numbers are
# meaningless, the code path is the real one); otherwise the `demo` preset (minutes on 2 cores).

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

    needs_install = bool(missing_extras("hitvar"))
if needs_install:
    fidia_source = os.environ.get("FIDIA_JAX_SOURCE") or sys.exit(
        "set FIDIA_JAX_SOURCE to a fidia_jax clone's folder or its git URL: no PyPI release yet")
    req = f"fidia_jax[vision] @ {fidia_source}" if "://" in fidia_source else f"{fidia_source}[vision]"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", req], check=True)

# %%
import os
import tempfile

import matplotlib.pyplot as plt

from fidia_jax import data
from fidia_jax.projects import hitvar

TINY = os.environ.get("FIDIA_NOTEBOOK_TINY", "0") == "1"
# (tiny: no preference phase, to keep the CI run short)
CONFIG = hitvar.get_config("tiny", dpo_steps=0) if TINY else hitvar.get_config("demo")

# %% [markdown]
# ## The degradation pipeline
#
# `hitvar.degrade`: Gaussian blur, bicubic down by the scale factor (Pillow), Gaussian noise and
# a JPEG round trip (Pillow), each with its parameter in `hitvar.Degradation`.

# %%
photo = data.bundled_photos()["astronaut"][96:224, 160:288]
deg = hitvar.Degradation(scale=4)
lr = hitvar.degrade(photo, deg, seed=0)
fig, axes = plt.subplots(1, 2, figsize=(5, 2.6))
axes[0].imshow(photo)
axes[0].set_title(f"HR {photo.shape[0]}x{photo.shape[1]}")
axes[1].imshow(lr, interpolation="nearest")
axes[1].set_title(f"LR {lr.shape[0]}x{lr.shape[1]} (blur, x4 down, noise, JPEG q75)")
for ax in axes:
    ax.axis("off")
plt.show()

# %% [markdown]
# ## Which prefix decodes to which scale
#
# `hitvar.hierarchical_scale_schedule` (reconstruction): scale `xm` reads the token grids no
# finer than `latent_side * m / M`. Attention is block-causal over scales.

# %%
sch = hitvar.hierarchical_scale_schedule(16, 4, (1, 2, 4, 8, 16), latent_size=16)
for m in sch.scales:
    print(
        f"x{m}: {sch.output_size(m)} px from the first {sch.prefix_length(m)} token scales "
        f"{sch.grids[: sch.prefix_length(m)]}"
    )
plt.figure(figsize=(3, 3))
plt.imshow(sch.mask(), cmap="gray_r")
plt.title(f"block-causal mask ({sch.num_tokens} tokens)")
plt.show()

# %% [markdown]
# ## Train and evaluate every method in one run

# %%
workdir = tempfile.mkdtemp(prefix="hitvar_nb_")
res = hitvar.train_and_evaluate(CONFIG, workdir)

# %%
names = list(res["metrics"])
scales = list(res["metrics"][names[0]])
fig, axes = plt.subplots(1, 2, figsize=(10, 3.2))
for name in names:
    axes[0].plot(scales, [res["metrics"][name][s]["psnr"] for s in scales], "o-", label=name)
axes[0].set_ylabel("PSNR (dB), held-out crops")
axes[0].legend(fontsize=7)
top = scales[-1]
vals = [res["metrics"][n][top]["lpips"] for n in names]
axes[1].barh(names, vals)
axes[1].set_xlabel(f"LPIPS-AlexNet at {top} (lower is better)")
plt.tight_layout()
plt.show()
print("goal met" if res["goals"]["met"] else "goal NOT met", res["goals"])
print(hitvar.format_token_check(res["token_check"]))
for name, t in res["paired_tests"].items():
    print(f"{name}: LPIPS {t['mean_a']:.4f} vs {t['mean_b']:.4f}, Wilcoxon p = {t['p']:.2g}")

# %%
for curve in ("hit_tokenizer", "hit_var", "hit_dpo", "plain_var", "conv_sr"):
    if curve in res["curves"]:
        plt.plot(res["curves"][curve], label=curve)
plt.yscale("log")
plt.xlabel("step")
plt.legend()
plt.show()

# %% [markdown]
# ## Samples (x4 with the oracle's true tokens, and HIT-VAR's prefixes at x1 ... x4)

# %%
png = os.path.join(workdir, "hitvar_samples.png")
if os.path.exists(png):
    plt.figure(figsize=(8, 7))
    plt.imshow(plt.imread(png))
    plt.axis("off")
    plt.show()
else:
    print("the tiny preset writes no figure (png=False)")
