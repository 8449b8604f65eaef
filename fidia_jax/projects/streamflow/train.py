"""Train a small rectified flow on digits, reflow it once, and sample it through the stream batch.

1. Data: scikit-learn's bundled digits resized to ``image_size`` (:func:`fidia_jax.data.
   load_digit_images`), scaled to ``[-1, 1]``; ``holdout`` of them (a seeded permutation) never
   seen in training.
2. Training: Adam (cosine-decayed step size) on :func:`fidia_jax.losses.rectified_flow_loss`
   with fresh Gaussian noise and ``t ~ Uniform(0, 1)`` per image; the step is
   :func:`fidia_jax.train.make_train_step`, the loop :func:`fidia_jax.train.fit` (progress,
   ``metrics.jsonl``, checkpoints, resume of an interrupted run).
3. Reflow (optional, one round; Liu et al. 2023): ``reflow_pairs`` noises are sampled to images
   with ``reflow_sample_steps`` Euler steps, and the model is fine-tuned on those (noise, image)
   pairs with the same loss, which straightens the flow for few-step sampling.
4. Evaluation: ``eval_samples`` images per step count in ``eval_steps``, all submitted together
   (interleaved) to one :class:`~fidia_jax.projects.streamflow.serving.StreamBatcher`, so every
   call mixes requests at different timesteps; the first ``exact_check`` of each step count are
   re-sampled one at a time by :func:`~fidia_jax.projects.streamflow.serving.sample_euler` (max
   |delta| reported); the AlexNet Fréchet
   distance (:func:`fidia_jax.metrics.alexnet_frechet_distance`, a **proxy, not FID**) between
   samples and held-out digits (both nearest-upsampled to at least 32 px, gray replicated to RGB),
   with the same proxy between training and held-out digits as the floor.

Several devices or processes (:mod:`fidia_jax.parallel`): the gradient steps of both fits run
data-parallel (``config.num_devices``, ``config.param_sharding``: each batch split along
``"data"``, the same seeded batches as on one device); under a multi-host launcher every process
runs them (and draws the same reflow pairs, an input of the reflow fit) and process 0 writes the
files. Evaluation -- the stream batch, the sequential check, the Fréchet proxy -- has nothing to
split: it runs on one device of process 0 only, never twice (the other processes return without
``eval``).
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

from fidia_jax import _checks, data, losses, metrics, models, parallel, train
from fidia_jax.config import write_summary
from fidia_jax.projects.streamflow import perflow
from fidia_jax.projects.streamflow.configs import StreamFlowConfig
from fidia_jax.projects.streamflow.model import StreamFlowUNet
from fidia_jax.projects.streamflow.serving import (
    StreamBatcher,
    linear_timesteps,
    sample_euler,
    velocity_apply,
)

__all__ = [
    "SUMMARY_FILE",
    "digit_split",
    "fd_proxy",
    "init_flow",
    "save_sample_grid",
    "stream_generate",
    "streamflow_draw",
    "train_and_evaluate",
    "train_flow",
]

SUMMARY_FILE = "streamflow_summary.json"
#: Config fields that only place the run on devices: left out of a fit's resume fingerprint.
_LAYOUT_KEYS = ("num_devices", "param_sharding")
#: Smallest side the AlexNet proxy accepts (:func:`fidia_jax.metrics.alexnet_frechet_distance`).
_PROXY_MIN_SIDE = 32


def digit_split(config: StreamFlowConfig) -> tuple[np.ndarray, np.ndarray]:
    """``(train, holdout)`` digits as ``(N, S, S, 1)`` float32 in ``[-1, 1]`` (seeded split)."""
    images, _ = data.load_digit_images(size=config.image_size)
    perm = np.random.default_rng(config.seed).permutation(images.shape[0])
    scaled = (2.0 * images - 1.0)[..., None].astype(np.float32)
    return scaled[perm[config.holdout :]], scaled[perm[: config.holdout]]


def streamflow_draw(names: tuple[str, ...], shape: tuple[int, ...], rng: np.random.Generator):
    """The U-Net's initialisation rule for :func:`fidia_jax.models.init_without_compile`.

    ``kernel``: LeCun normal truncated at 2 sigma (flax's default initialiser, variance
    ``1 / fan_in``; out-of-range draws are redrawn, then rescaled by the std of the truncated
    normal); ``bias`` 0; ``GroupNorm`` ``scale`` 1.

    Raises:
      ValueError: a leaf whose name has no rule here.
    """
    name = names[-1]
    if name == "kernel":
        fan_in = int(np.prod(shape[:-1]))
        z = rng.standard_normal(shape)
        while np.any(bad := np.abs(z) > 2.0):  # truncate at 2 sigma by redrawing
            z[bad] = rng.standard_normal(int(bad.sum()))
        # 0.8796 = std of the 2-sigma-truncated standard normal (flax's correction)
        return z / 0.87962566103423978 / np.sqrt(fan_in)
    if name in ("bias", "scale"):
        return np.full(shape, 1.0 if name == "scale" else 0.0)
    raise ValueError(f"streamflow_draw: no rule for the leaf {name!r} ({names})")


def init_flow(config: StreamFlowConfig):
    """A fresh :class:`~fidia_jax.projects.streamflow.model.StreamFlowUNet` as
    ``(apply_fn, params)``.

    With ``config.parameterisation == "perflow_eps"`` the network's output is read as an eps
    and ``apply_fn`` returns PeRFlow's window velocity (:func:`perflow.perflow_apply`).

    The weights are drawn by numpy (``default_rng(seed)``) into the abstract model
    (:func:`fidia_jax.models.init_without_compile` with :func:`streamflow_draw`): same
    distribution as ``nnx.Rngs`` initialisation, but no per-shape XLA compilation.
    """
    model = models.init_without_compile(
        lambda: StreamFlowUNet(
            1, config.features, time_dim=config.time_dim, groups=config.groups, rngs=nnx.Rngs(0)
        ),
        streamflow_draw,
        seed=config.seed,
    )
    apply_fn, params = velocity_apply(model)
    if config.parameterisation == "perflow_eps":
        return perflow.perflow_apply(
            apply_fn, perflow.PerflowWindows(config.perflow_windows)
        ), params
    return apply_fn, params


def _lr_table(learning_rate: float, num_steps: int) -> jax.Array:
    """Cosine decay to 0 (no warm-up), step ``k``'s value computed in float64, then float32."""
    return jnp.asarray(
        [0.5 * learning_rate * (1.0 + math.cos(math.pi * k / num_steps)) for k in range(num_steps)],
        jnp.float32,
    )


def _batches(images, batch: int, noise_pairs, seed: int):
    """The seeded stream of ``(x, z, t)`` batches (rows without replacement, noise, times)."""
    rng = np.random.default_rng(seed)
    while True:
        rows = rng.choice(images.shape[0], size=batch, replace=False)
        x = images[rows]
        z = (
            noise_pairs[rows]
            if noise_pairs is not None
            else rng.standard_normal(x.shape).astype(np.float32)
        )
        yield x, z, rng.uniform(size=(batch,)).astype(np.float32)


def train_flow(
    apply_fn,
    params,
    images,
    num_steps: int,
    config: StreamFlowConfig,
    *,
    noise_pairs: np.ndarray | None = None,
    seed: int = 0,
    workdir: str | pathlib.Path | None = None,
    run: str = "flow",
    quiet: bool = False,
):
    """Adam on the rectified-flow loss for ``num_steps`` batches of ``config.batch_size``.

    The step is :func:`fidia_jax.train.make_train_step` (``scale_by_adam`` then the
    cosine-decayed step size, a float32 table); the loop is :func:`fidia_jax.train.fit`
    (progress, and with ``workdir`` ``metrics.jsonl``, checkpoints every
    ``config.checkpoint_every`` steps and at the end, and resume). With more than one device
    (``config.num_devices``, the most that divide the batch) the step is data-parallel: each
    batch split along ``"data"`` (:func:`fidia_jax.parallel.shard_batch`), parameters and Adam
    state placed as ``config.param_sharding``; the losses equal one device's up to the
    summation order of the cross-device reductions.

    Args:
      apply_fn, params: the velocity model (:func:`velocity_apply`); ``params`` is not
        modified (the fit starts from a copy).
      images: ``(N, S, S, 1)`` training images (or reflow targets).
      num_steps: optimiser steps.
      noise_pairs: for reflow, the noise each image was sampled from (rows paired with
        ``images``); ``None`` draws fresh noise per batch.
      seed: batches, noise and ``t`` come from ``numpy.random.default_rng(seed)``.
      workdir: where the fit's files go (``None``: none, no resume).
      run: the fit's name in the files.
      quiet: no progress display.

    Returns:
      ``(params, losses_per_step)``; ``params`` on the mesh (see
      :func:`fidia_jax.parallel.to_host` for host copies).

    Raises:
      TrainingError: a non-finite loss or gradient (the library's policy).
    """
    lr_table = _lr_table(config.learning_rate, num_steps)
    tx = optax.chain(
        optax.scale_by_adam(), optax.scale_by_learning_rate(lambda count: lr_table[count])
    )

    def loss_fn(p, batch):
        x, z, t = batch
        return losses.rectified_flow_loss(lambda xt, tt: apply_fn(p, xt, tt), x, z, t)

    b = min(config.batch_size, images.shape[0])
    mesh = parallel.data_mesh(b, num_devices=config.num_devices)
    if mesh.size == 1 and jax.process_count() == 1:
        mesh = None  # one device: the plain program
    place = {"mesh": mesh, "param_sharding": config.param_sharding}
    state = train.init_train_state(jax.tree.map(jnp.copy, params), tx, **place)
    batches = _batches(images, b, noise_pairs, seed)
    if mesh is not None:
        batches = (parallel.shard_batch(batch, mesh) for batch in batches)
    fingerprint = {k: v for k, v in train.config_fingerprint(config).items()
                   if k not in _LAYOUT_KEYS}  # fmt: skip
    res = train.fit(
        state,
        train.make_train_step(loss_fn, tx, **place),
        batches,
        num_steps=num_steps,
        workdir=workdir,
        run=run,
        checkpoint_every=config.checkpoint_every,
        log_every=1,  # every step's loss is reported (first, last, mean of the last 100)
        quiet=quiet,
        fingerprint={**fingerprint, "seed": seed},
    )
    return res.state.params, [r["loss"] for r in res.history if "loss" in r]


def _on_host_device(params):
    """Trained parameters as arrays of this process's default device (host copies first):
    the stream batcher and the sequential sampler compile for one device."""
    return jax.tree.map(jnp.asarray, parallel.to_host(params))


def stream_generate(apply_fn, params, noise, schedules, buckets) -> tuple[np.ndarray, dict]:
    """Samples every ``noise[i]`` with ``schedules[i]`` as one request of a stream batch.

    Returns:
      ``(images (N, S, S, 1) float32 in [-1, 1]-ish, stats)`` with the batcher's ``calls``,
      ``bucket_calls`` and ``compile_seconds``.
    """
    batcher = StreamBatcher(apply_fn, params, noise.shape[1:], buckets=buckets)
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


def fd_proxy(images_a: np.ndarray, images_b: np.ndarray, *, clip_a: bool = False) -> float:
    """AlexNet Fréchet distance (**proxy, not FID**) of two ``(N, S, S, 1)`` sets in ``[-1, 1]``,
    on equal set sizes (the first ``min(N, M)`` of each).

    Args:
      images_a, images_b: ``(N, S, S, 1)`` / ``(M, S, S, 1)`` finite gray images in ``[-1, 1]``.
      clip_a: clip ``images_a`` into ``[-1, 1]`` first instead of checking it (for generated
        samples, which overshoot the data range a little; the driver passes ``True`` for them,
        as pixel quantisation would). ``images_b`` is always checked.

    Raises:
      ValueError: a set not ``(N, S, S, 1)``, or the two sets' image shapes differ.
      DataError: a NaN/inf, or a value outside ``[-1, 1]`` (of ``images_a`` unless ``clip_a``),
        naming the argument.
    """
    where = "fd_proxy"
    for name, x in (("images_a", images_a), ("images_b", images_b)):
        _checks.assert_rank(x, 4, name, where=where, detail="(N, S, S, 1) gray images")
        if np.shape(x)[-1] != 1:
            raise ValueError(f"{where}: {name} must have 1 channel, got shape {np.shape(x)}")
        _checks.assert_finite(x, name, where=where)
    if np.shape(images_a)[1:] != np.shape(images_b)[1:]:
        raise ValueError(
            f"{where}: images_a {np.shape(images_a)} and images_b {np.shape(images_b)} differ in "
            "image shape"
        )
    if clip_a:
        images_a = np.clip(images_a, -1.0, 1.0)
    _checks.assert_value_range(images_a, -1.0, 1.0, "images_a", where=where)
    _checks.assert_value_range(images_b, -1.0, 1.0, "images_b", where=where)
    n = min(images_a.shape[0], images_b.shape[0])
    return float(
        metrics.alexnet_frechet_distance(_to_proxy_rgb(images_a[:n]), _to_proxy_rgb(images_b[:n]))
    )


def save_sample_grid(path: str | pathlib.Path, rows: dict[str, np.ndarray], ncols: int = 10):
    """A PNG grid (matplotlib): one row of ``ncols`` samples per entry of ``rows``."""
    from fidia_jax._io import atomic_path

    plt = train.pyplot()
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
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=80, format="png")
    plt.close(fig)


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
    schedules = [linear_timesteps(kinds[k]) for k, _ in order]
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
            ref = sample_euler(apply_fn, params, noise[k, i : i + 1], linear_timesteps(n))
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
            row["alexnet_fd_proxy"] = fd_proxy(samples[k], holdout, clip_a=True)
        result["steps"][str(n)] = row
    result["samples"] = samples
    return result


def _report(results: dict[str, Any], config: StreamFlowConfig, workdir: pathlib.Path) -> None:
    """The console tables, ``summary.json`` and (with the proxy) ``fd_proxy.png``."""
    quality, stream, bars = [], [], []
    for stage, ev in results["eval"].items():
        for n, row in ev["steps"].items():
            fd = row.get("alexnet_fd_proxy")
            quality.append([stage, int(n), "n/a" if fd is None else f"{fd:.2f}", row["finite"]])
            bars.append({"samples": f"{stage}, {n} steps", "AlexNet FD proxy": fd})
        st = ev["stream"]
        stream.append([stage, st["requests"], st["calls"], st["exact_checked"],
                       f"{st['max_abs_diff_vs_sequential']:.1e}"])  # fmt: skip
    floor = results.get("fd_proxy_floor")
    train.print_table(
        "StreamFlow: samples through the stream batch (AlexNet FD is a proxy, not FID; lower is"
        f" better; floor, training vs held-out digits: {'n/a' if floor is None else f'{floor:.2f}'})",
        ["model", "Euler steps", "AlexNet FD proxy", "all finite"],
        quality,
    )
    train.print_table(
        "StreamFlow: stream batch vs the sequential sampler",
        [
            "model",
            "requests",
            "network calls",
            "re-sampled one by one",
            "max |stream - sequential|",
        ],
        stream,
    )
    summary = {
        "train_loss_first": results["train"]["loss_first"],
        "train_loss_last": results["train"]["loss_last"],
        "reflow_loss_last": results.get("reflow", {}).get("loss_last"),
        "final_params": results["final_params"],
        "fd_proxy": {
            stage: {n: row.get("alexnet_fd_proxy") for n, row in ev["steps"].items()}
            for stage, ev in results["eval"].items()
        },
        "fd_proxy_floor": floor,
        "stream_calls": {stage: ev["stream"]["calls"] for stage, ev in results["eval"].items()},
        "max_abs_diff_vs_sequential": max(
            ev["stream"]["max_abs_diff_vs_sequential"] for ev in results["eval"].values()
        ),
        "wall_s": results["wall_s"],
    }
    train.write_summary(workdir, summary)
    if config.fd_proxy:
        bars.append({"samples": "floor: training digits", "AlexNet FD proxy": floor})
        train.plot_bars(
            bars,
            workdir / "fd_proxy.png",
            label="samples",
            values=["AlexNet FD proxy"],
            title="StreamFlow samples vs held-out\ndigits (AlexNet FD, a proxy)",
        )


def train_and_evaluate(config: StreamFlowConfig, workdir: str | pathlib.Path) -> dict[str, Any]:
    """Trains, optionally reflows, evaluates; writes ``workdir/streamflow_summary.json``.

    The summary (also returned, with the ``config`` added in the file) holds ``train`` (first and
    last loss, seconds), ``reflow`` (same, if run), ``eval`` (per stage ``base`` / ``reflow``: per
    step count the Fréchet proxy; the stream statistics and ``max_abs_diff_vs_sequential``),
    ``fd_proxy_floor`` (training vs held-out digits) and ``wall_s``. The work directory also
    gets ``summary.json`` (the headline numbers), ``metrics.jsonl`` and ``curves.png`` (the
    training fits ``flow`` and ``reflow``, checkpointed under ``checkpoints/``: a rerun resumes
    them), ``samples.png`` when ``sample_grid`` and ``fd_proxy.png`` when ``fd_proxy``. Returns
    the same dict plus ``params`` and ``apply_fn`` (not written).

    Raises:
      TrainingError: a non-finite loss or gradient during training.
    """
    parallel.initialize_distributed()  # before any array exists; no-op without a launcher
    workdir = pathlib.Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    with train.stage(f"loading the digits at {config.image_size}x{config.image_size}"):
        digits, holdout = digit_split(config)
        apply_fn, params = init_flow(config)
    n_params = int(sum(x.size for x in jax.tree.leaves(params)))
    t0 = time.perf_counter()
    params, hist = train_flow(
        apply_fn,
        params,
        digits,
        config.train_steps,
        config,
        seed=config.seed + 1,
        workdir=workdir,
        run="flow",
    )
    params = _on_host_device(params)
    results: dict[str, Any] = {
        "data": {
            "train": int(digits.shape[0]),
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
        with train.stage(
            f"reflow: sampling {config.reflow_pairs} (noise, image) pairs with "
            f"{config.reflow_sample_steps} Euler steps"
        ):
            z = (
                np.random.default_rng(config.seed + 3)
                .standard_normal((config.reflow_pairs, config.image_size, config.image_size, 1))
                .astype(np.float32)
            )
            x, _ = stream_generate(
                apply_fn,
                params,
                z,
                [linear_timesteps(config.reflow_sample_steps)] * len(z),
                config.buckets,
            )
        reflowed, rhist = train_flow(
            apply_fn,
            params,
            x,
            config.reflow_train_steps,
            config,
            noise_pairs=z,
            seed=config.seed + 4,
            workdir=workdir,
            run="reflow",
        )
        reflowed = _on_host_device(reflowed)
        results["reflow"] = {
            "pairs": int(len(z)),
            "sample_steps": config.reflow_sample_steps,
            "loss_first": rhist[0],
            "loss_last": rhist[-1],
            "seconds": time.perf_counter() - t0,
        }
        stages["reflow"] = reflowed
    results["final_params"] = "reflow" if config.reflow_rounds else "base"
    out = {"params": stages[results["final_params"]], "apply_fn": apply_fn}
    if not parallel.is_primary():  # evaluation has nothing to split: process 0 only
        return {**results, "wall_s": time.perf_counter() - t_start, **out}
    grid = {}
    for stage, p in stages.items():
        with train.stage(
            f"evaluating {stage}: {config.eval_samples} samples at each of "
            f"{list(config.eval_steps)} Euler steps through one stream batch"
        ):
            ev = _evaluate(apply_fn, p, config, holdout)
        samples = ev.pop("samples")
        results["eval"][stage] = ev
        for k, n in enumerate(config.eval_steps):
            grid[f"{stage}, {n} steps"] = samples[k]
    if config.fd_proxy:
        with train.stage("AlexNet FD proxy floor (training vs held-out digits)"):
            results["fd_proxy_floor"] = fd_proxy(digits[: config.eval_samples], holdout)
        results["fd_proxy_note"] = (
            "AlexNet conv5 Fréchet distance, a proxy (not FID); floor = "
            "training digits vs held-out digits, equal set sizes"
        )
    if config.sample_grid:
        grid["held-out digits"] = holdout
        save_sample_grid(workdir / "samples.png", grid)
    results["wall_s"] = time.perf_counter() - t_start
    write_summary(workdir / SUMMARY_FILE, results, config)
    _report(results, config, workdir)
    return {**results, **out}
