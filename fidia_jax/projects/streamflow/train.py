"""Train a small rectified flow on digits, reflow it once, and sample it through the stream batch.

1. Data: scikit-learn's bundled digits resized to ``image_size`` (:func:`fidia_jax.data.
   load_digit_images`), scaled to ``[-1, 1]``; ``holdout`` of them (a seeded permutation) never
   seen in training.
2. Training: Adam (cosine-decayed step size) on :func:`fidia_jax.losses.rectified_flow_loss`
   with fresh Gaussian noise and ``t ~ Uniform(0, 1)`` per image.
3. Reflow (optional, one round; Liu et al. 2023): ``reflow_pairs`` noises are sampled to images
   with ``reflow_sample_steps`` Euler steps, and the model is fine-tuned on those (noise, image)
   pairs with the same loss, which straightens the flow for few-step sampling.
4. Evaluation: ``eval_samples`` images per step count in ``eval_steps``, all submitted together
   (interleaved) to one :class:`fidia_jax.models.StreamBatcher`, so every call mixes requests at
   different timesteps; the first ``exact_check`` of each step count are re-sampled one at a
   time by :func:`fidia_jax.models.sample_euler` (max |delta| reported); the AlexNet Fréchet
   distance (:func:`fidia_jax.metrics.alexnet_frechet_distance`, a **proxy, not FID**) between
   samples and held-out digits (both nearest-upsampled to at least 32 px, gray replicated to RGB),
   with the same proxy between training and held-out digits as the floor.
"""

from __future__ import annotations

import math
import pathlib
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from fidia_jax import data, losses, metrics, models
from fidia_jax.config import write_summary
from fidia_jax.projects.streamflow.configs import StreamFlowConfig

__all__ = [
    "SUMMARY_FILE",
    "digit_split",
    "fd_proxy",
    "init_flow",
    "save_sample_grid",
    "stream_generate",
    "train_and_evaluate",
    "train_flow",
]

SUMMARY_FILE = "streamflow_summary.json"
#: Smallest side the AlexNet proxy accepts (:func:`fidia_jax.metrics.alexnet_frechet_distance`).
_PROXY_MIN_SIDE = 32


def digit_split(config: StreamFlowConfig) -> tuple[np.ndarray, np.ndarray]:
    """``(train, holdout)`` digits as ``(N, S, S, 1)`` float32 in ``[-1, 1]`` (seeded split)."""
    images, _ = data.load_digit_images(size=config.image_size)
    perm = np.random.default_rng(config.seed).permutation(images.shape[0])
    scaled = (2.0 * images - 1.0)[..., None].astype(np.float32)
    return scaled[perm[config.holdout :]], scaled[perm[: config.holdout]]


def init_flow(config: StreamFlowConfig):
    """A fresh :class:`fidia_jax.models.StreamFlowUNet` as ``(apply_fn, params)``.

    The weights are drawn by numpy (``default_rng(seed)``) into the abstract model
    (``nnx.eval_shape``): kernels LeCun-normal truncated at 2 sigma (flax's default
    initialiser, variance ``1 / fan_in``), biases 0, ``GroupNorm`` scales 1. Same distribution
    as ``nnx.Rngs`` initialisation, but no per-shape XLA compilation (seconds on a CPU).
    """
    abstract = nnx.eval_shape(
        lambda: models.StreamFlowUNet(
            1, config.features, time_dim=config.time_dim, groups=config.groups, rngs=nnx.Rngs(0)
        )
    )
    graphdef, state = nnx.split(abstract)
    rng = np.random.default_rng(config.seed)

    def draw(path, leaf):
        # the path ends (..., DictKey('kernel'), GetAttrKey('value')): take the last dict key
        name = [k.key for k in path if isinstance(k, jax.tree_util.DictKey)][-1]
        if name == "kernel":
            fan_in = int(np.prod(leaf.shape[:-1]))
            z = rng.standard_normal(leaf.shape)
            while np.any(bad := np.abs(z) > 2.0):  # truncate at 2 sigma by redrawing
                z[bad] = rng.standard_normal(int(bad.sum()))
            # 0.8796 = std of the 2-sigma-truncated standard normal (flax's correction)
            return jnp.asarray(z / 0.87962566103423978 / np.sqrt(fan_in), leaf.dtype)
        fill = 1.0 if name == "scale" else 0.0
        return jnp.full(leaf.shape, fill, leaf.dtype)

    params = jax.tree_util.tree_map_with_path(draw, state)
    return models.velocity_apply(nnx.merge(graphdef, params))


def _make_train_step(apply_fn):
    """One jitted Adam step on the rectified-flow loss; the step size is an argument, so the
    reflow round reuses the same compiled function."""
    adam = optax.scale_by_adam()

    def loss_fn(params, x, z, t):
        return losses.rectified_flow_loss(lambda xt, tt: apply_fn(params, xt, tt), x, z, t)

    @jax.jit
    def step(params, opt_state, x, z, t, lr):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, z, t)
        updates, opt_state = adam.update(grads, opt_state, params)
        params = jax.tree.map(lambda p, u: p - lr * u, params, updates)
        return params, opt_state, loss

    return adam, step


def train_flow(
    apply_fn,
    params,
    images,
    num_steps: int,
    config: StreamFlowConfig,
    *,
    noise_pairs: np.ndarray | None = None,
    seed: int = 0,
    step_fn=None,
):
    """Adam on the rectified-flow loss for ``num_steps`` batches of ``config.batch_size``.

    Args:
      apply_fn, params: the velocity model (:func:`fidia_jax.models.velocity_apply`).
      images: ``(N, S, S, 1)`` training images (or reflow targets).
      num_steps: optimiser steps.
      noise_pairs: for reflow, the noise each image was sampled from (rows paired with
        ``images``); ``None`` draws fresh noise per batch.
      seed: batches, noise and ``t`` come from ``numpy.random.default_rng(seed)``.
      step_fn: a ``(adam, step)`` pair from a previous call, to reuse its compilation.

    Returns:
      ``(params, losses_per_step, step_fn)``.
    """
    adam, step = step_fn or _make_train_step(apply_fn)
    opt_state = adam.init(params)
    rng = np.random.default_rng(seed)
    b = min(config.batch_size, images.shape[0])
    history = []
    for k in range(num_steps):
        lr = 0.5 * config.learning_rate * (1.0 + math.cos(math.pi * k / num_steps))
        rows = rng.choice(images.shape[0], size=b, replace=False)
        x = images[rows]
        z = (
            noise_pairs[rows]
            if noise_pairs is not None
            else rng.standard_normal(x.shape).astype(np.float32)
        )
        t = rng.uniform(size=(b,)).astype(np.float32)
        params, opt_state, loss = step(params, opt_state, x, z, t, jnp.float32(lr))
        history.append(loss)
    return params, [float(v) for v in jax.device_get(history)], (adam, step)


def stream_generate(apply_fn, params, noise, schedules, buckets) -> tuple[np.ndarray, dict]:
    """Samples every ``noise[i]`` with ``schedules[i]`` as one request of a stream batch.

    Returns:
      ``(images (N, S, S, 1) float32 in [-1, 1]-ish, stats)`` with the batcher's ``calls``,
      ``bucket_calls`` and ``compile_seconds``.
    """
    batcher = models.StreamBatcher(apply_fn, params, noise.shape[1:], buckets=buckets)
    for i, ts in enumerate(schedules):
        batcher.submit(noise[i], ts, request_id=i)
    out = batcher.drain()
    stats = {
        "calls": batcher.calls,
        "bucket_calls": {str(k): v for k, v in batcher.bucket_calls.items()},
        "compile_seconds": batcher.compile_seconds,
    }
    return np.stack([out[i] for i in range(len(schedules))]), stats


def _to_proxy_rgb(images_NxSxSx1: np.ndarray) -> np.ndarray:
    """``[-1, 1]`` gray -> ``[0, 1]`` RGB, nearest-upsampled to at least 32 px per side."""
    x = np.clip((images_NxSxSx1 + 1.0) / 2.0, 0.0, 1.0)
    factor = -(-_PROXY_MIN_SIDE // x.shape[1])
    x = np.repeat(np.repeat(x, factor, axis=1), factor, axis=2)
    return np.repeat(x, 3, axis=-1)


def fd_proxy(images_a: np.ndarray, images_b: np.ndarray) -> float:
    """AlexNet Fréchet distance (**proxy, not FID**) of two ``(N, S, S, 1)`` sets in ``[-1, 1]``,
    on equal set sizes (the first ``min(N, M)`` of each)."""
    n = min(images_a.shape[0], images_b.shape[0])
    return float(
        metrics.alexnet_frechet_distance(_to_proxy_rgb(images_a[:n]), _to_proxy_rgb(images_b[:n]))
    )


def save_sample_grid(path: str | pathlib.Path, rows: dict[str, np.ndarray], ncols: int = 10):
    """A PNG grid (matplotlib): one row of ``ncols`` samples per entry of ``rows``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        len(rows), ncols, figsize=(ncols * 0.7, len(rows) * 0.8), squeeze=False
    )
    for r, (label, imgs) in enumerate(rows.items()):
        for c in range(ncols):
            ax = axes[r][c]
            ax.axis("off")
            if c < imgs.shape[0]:
                ax.imshow(np.clip((imgs[c, ..., 0] + 1) / 2, 0, 1), cmap="gray", vmin=0, vmax=1)
        axes[r][0].set_title(label, fontsize=7, loc="left")
    fig.tight_layout()
    path = pathlib.Path(path)
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=80)
    plt.close(fig)
    tmp.replace(path)


def _evaluate(apply_fn, params, config: StreamFlowConfig, holdout: np.ndarray) -> dict[str, Any]:
    """Samples per step count through one stream batch, exactness check, Fréchet proxy."""
    s = config.image_size
    kinds = list(config.eval_steps)
    noise = (
        np.random.default_rng(config.seed + 2)
        .standard_normal((len(kinds), config.eval_samples, s, s, 1))
        .astype(np.float32)
    )
    # interleave the step counts so that every stream call mixes timesteps
    order = [(k, i) for i in range(config.eval_samples) for k in range(len(kinds))]
    schedules = [models.linear_timesteps(kinds[k]) for k, _ in order]
    t0 = time.perf_counter()
    flat, stats = stream_generate(
        apply_fn, params, np.stack([noise[k, i] for k, i in order]), schedules, config.buckets
    )
    stats["sampling_seconds"] = time.perf_counter() - t0
    samples = np.zeros_like(noise)
    for j, (k, i) in enumerate(order):
        samples[k, i] = flat[j]
    max_diff = 0.0
    for k, n in enumerate(kinds):
        for i in range(config.exact_check):
            ref = models.sample_euler(
                apply_fn, params, noise[k, i : i + 1], models.linear_timesteps(n)
            )
            max_diff = max(max_diff, float(np.abs(ref[0] - samples[k, i]).max()))
    result: dict[str, Any] = {
        "stream": {
            **stats,
            "requests": len(order),
            "exact_checked": config.exact_check * len(kinds),
            "max_abs_diff_vs_sequential": max_diff,
        },
        "steps": {},
    }
    for k, n in enumerate(kinds):
        row: dict[str, Any] = {
            "mean": float(samples[k].mean()),
            "finite": bool(np.all(np.isfinite(samples[k]))),
        }
        if config.fd_proxy:
            row["alexnet_fd_proxy"] = fd_proxy(samples[k], holdout)
        result["steps"][str(n)] = row
    result["samples"] = samples
    return result


def train_and_evaluate(config: StreamFlowConfig, workdir: str | pathlib.Path) -> dict[str, Any]:
    """Trains, optionally reflows, evaluates; writes ``workdir/streamflow_summary.json``.

    The summary (also returned, with the ``config`` added in the file) holds ``train`` (first and
    last loss, seconds), ``reflow`` (same, if run), ``eval`` (per stage ``base`` / ``reflow``: per
    step count the Fréchet proxy; the stream statistics and ``max_abs_diff_vs_sequential``),
    ``fd_proxy_floor`` (training vs held-out digits) and ``wall_s``; ``samples.png`` when
    ``sample_grid``. Returns the same dict plus ``params`` and ``apply_fn`` (not written).
    """
    workdir = pathlib.Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    train, holdout = digit_split(config)
    apply_fn, params = init_flow(config)
    n_params = int(sum(x.size for x in jax.tree.leaves(params)))
    t0 = time.perf_counter()
    params, hist, step_fn = train_flow(
        apply_fn, params, train, config.train_steps, config, seed=config.seed + 1
    )
    results: dict[str, Any] = {
        "data": {
            "train": int(train.shape[0]),
            "holdout": int(holdout.shape[0]),
            "image_size": config.image_size,
            "source": "sklearn digits (bundled)",
        },
        "model": {"params": n_params},
        "train": {
            "loss_first": hist[0],
            "loss_last": hist[-1],
            "loss_last_100_mean": float(np.mean(hist[-100:])),
            "seconds": time.perf_counter() - t0,
        },
        "eval": {},
    }
    stages = {"base": params}
    if config.reflow_rounds:
        t0 = time.perf_counter()
        z = (
            np.random.default_rng(config.seed + 3)
            .standard_normal((config.reflow_pairs, config.image_size, config.image_size, 1))
            .astype(np.float32)
        )
        x, _ = stream_generate(
            apply_fn,
            params,
            z,
            [models.linear_timesteps(config.reflow_sample_steps)] * len(z),
            config.buckets,
        )
        reflowed, rhist, _ = train_flow(
            apply_fn,
            params,
            x,
            config.reflow_train_steps,
            config,
            noise_pairs=z,
            seed=config.seed + 4,
            step_fn=step_fn,
        )
        results["reflow"] = {
            "pairs": int(len(z)),
            "sample_steps": config.reflow_sample_steps,
            "loss_first": rhist[0],
            "loss_last": rhist[-1],
            "seconds": time.perf_counter() - t0,
        }
        stages["reflow"] = reflowed
    grid = {}
    for stage, p in stages.items():
        ev = _evaluate(apply_fn, p, config, holdout)
        samples = ev.pop("samples")
        results["eval"][stage] = ev
        for k, n in enumerate(config.eval_steps):
            grid[f"{stage}, {n} steps"] = samples[k]
    if config.fd_proxy:
        results["fd_proxy_floor"] = fd_proxy(train[: config.eval_samples], holdout)
        results["fd_proxy_note"] = (
            "AlexNet conv5 Fréchet distance, a proxy (not FID); floor = "
            "training digits vs held-out digits, equal set sizes"
        )
    if config.sample_grid:
        grid["held-out digits"] = holdout
        save_sample_grid(workdir / "samples.png", grid)
    results["final_params"] = "reflow" if config.reflow_rounds else "base"
    results["wall_s"] = time.perf_counter() - t_start
    write_summary(workdir / SUMMARY_FILE, results, config)
    return {**results, "params": stages[results["final_params"]], "apply_fn": apply_fn}
