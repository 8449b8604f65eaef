"""The language-model training loop shared by the SCALE and PASO experiments.

One byte-level :class:`fidia_jax.models.Llama` on Shakespeare (:func:`make_task`), any optax
optimiser (:func:`make_optimizer` builds the four compared ones by name), and ONE loop,
:func:`train_interleaved`, that trains several optimisers side by side: at every step it runs
each optimiser's jitted step once (round-robin, the order rotated every step), waits for it
(``jax.block_until_ready``) and records its wall time. Each optimiser sees the same
initialisation and the same batch at step ``t``, and machine noise (other jobs, thermal or
frequency changes) falls on all of them alike, so per-step time ratios are paired
measurements. :func:`train_and_evaluate` is the one-optimiser driver the command line runs.

The step is ``jax.jit`` of loss + gradient + optimiser update + ``optax.apply_updates`` with the
parameters and optimiser state donated (updated in place); its batch is sampled on the devices
by a second jitted function of ``t`` (both timed). Data parallel (:mod:`fidia_jax.parallel`): the
batch is split over a mesh of every visible device, the parameters and optimiser state are
replicated (:func:`fidia_jax.models.make_lm_train_step`), and under a multi-host launcher
(:func:`fidia_jax.parallel.initialize_distributed`) every process runs the same loop and process
0 writes the files. On one device the numbers are those of an unsharded run, bit for bit.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import statistics
import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from fidia_jax import optim, parallel
from fidia_jax._io import atomic_write_text, json_text
from fidia_jax.config import config_to_dict
from fidia_jax.data import load_shakespeare, sample_windows
from fidia_jax.errors import ConfigError
from fidia_jax.models import (
    LlamaConfig,
    LmTask,
    init_lm_state,
    lm_data_mesh,
    make_lm_batch_fn,
    make_lm_task,
    make_lm_train_step,
    place_lm_batch,
)
from fidia_jax.projects.optimizers.configs import LmConfig

__all__ = [
    "LmTask",
    "RunResult",
    "evaluate",
    "llama_config",
    "make_optimizer",
    "make_schedule",
    "make_task",
    "make_train_step",
    "step_time_ratios",
    "train_and_evaluate",
    "train_interleaved",
    "tree_bytes",
    "with_optimizer",
]


class RunResult(NamedTuple):
    """One optimiser's run in :func:`train_interleaved`.

    Attributes:
      params: parameters after the last step.
      opt_state: optimiser state after the last step.
      losses: ``(T,)`` float32 training loss of every step (before its update).
      step_times_s: ``(T,)`` float64 wall seconds of every step; entry 0 includes compilation.
      state_bytes: bytes of the initial optimiser state.
    """

    params: Any
    opt_state: Any
    losses: np.ndarray
    step_times_s: np.ndarray
    state_bytes: int


def tree_bytes(tree: Any) -> int:
    """Sum of ``nbytes`` over the array leaves of ``tree``."""
    return int(sum(x.nbytes for x in jax.tree.leaves(tree) if hasattr(x, "nbytes")))


def llama_config(config: LmConfig) -> LlamaConfig:
    """The :class:`fidia_jax.models.LlamaConfig` of ``config.model`` (context = ``seq_len``)."""
    return config.model.llama_config(config.data.seq_len)


def make_task(config: LmConfig, *, tokens: tuple[Any, Any] | None = None) -> LmTask:
    """Builds the model (``nnx.Rngs(config.seed)``) and the data functions of ``config``.

    Args:
      config: the run configuration.
      tokens: ``(train (N,), val (M,))`` int byte streams to use instead of Shakespeare from
        ``config.data.data_dir`` (e.g. a notebook without the shared data).

    Returns:
      :class:`LmTask`.

    Raises:
      DataError: the Shakespeare directory is missing (when ``tokens`` is not given).
      ValueError: a stream is not longer than ``data.seq_len``.
    """
    d = config.data
    if tokens is None:
        splits = load_shakespeare(d.data_dir, max_files=d.max_files or None)
        tokens = (splits.train, splits.val)
    data_key = jax.random.key(config.seed + 1000 if d.data_seed is None else d.data_seed)
    val_tokens = sample_windows(
        jax.random.key(d.val_seed), jnp.asarray(tokens[1]), d.val_windows, d.seq_len
    )
    return make_lm_task(
        llama_config(config),
        tokens[0],
        val_tokens,
        seed=config.seed,
        batch_size=d.batch_size,
        data_key=data_key,
    )


def make_schedule(peak: float, steps: int, config: LmConfig) -> optax.Schedule:
    """Linear warm-up from 0 to ``peak``, cosine decay to ``end_fraction * peak`` at ``steps``."""
    o = config.optimizer
    warmup = max(1, steps // 10) if o.warmup_steps is None else o.warmup_steps
    return optax.warmup_cosine_decay_schedule(
        0.0, peak, warmup, steps, end_value=o.end_fraction * peak
    )


def make_optimizer(config: LmConfig) -> optax.GradientTransformation:
    """``config.optimizer.name`` with its schedule over ``config.steps`` steps.

    * ``adamw``: ``optax.adamw(lr, weight_decay=wd)``;
    * ``scale``: :func:`fidia_jax.optim.scale` (1-D parameters: AdamW at ``adam_learning_rate``);
    * ``muon``: ``optax.contrib.muon`` (non-matrices: Adam at ``adam_learning_rate``);
    * ``sgd``: ``optax.sgd(lr, momentum)``.

    Raises:
      ConfigError: unknown optimiser name.
    """
    o = config.optimizer
    lr = make_schedule(o.peak_learning_rate, config.steps, config)
    adam_lr = make_schedule(o.adam_learning_rate, config.steps, config)
    if o.name == "adamw":
        return optax.adamw(lr, weight_decay=o.weight_decay)
    if o.name == "scale":
        return optim.scale(
            lr, momentum=o.momentum, weight_decay=o.weight_decay, adam_learning_rate=adam_lr
        )
    if o.name == "muon":
        return optax.contrib.muon(
            lr,
            weight_decay=o.weight_decay,
            adam_weight_decay=o.weight_decay,
            adam_learning_rate=adam_lr,
        )
    if o.name == "sgd":
        return optax.sgd(lr, momentum=o.momentum)
    raise ConfigError(f"unknown optimizer {o.name!r}")


def make_train_step(
    task: LmTask, tx: optax.GradientTransformation, mesh: jax.sharding.Mesh | None = None
) -> Callable:
    """``step(params, opt_state, tokens) -> (params, opt_state, loss)``, jitted, inputs donated.

    ``tokens`` is the batch of a step (``make_lm_batch_fn(task, mesh)(t)``); with ``mesh`` the
    step expects it split over ``"data"`` and the state replicated. ``params`` and ``opt_state``
    are donated: do not reuse them after the call (pass copies of arrays you still need).
    (:func:`fidia_jax.models.make_lm_train_step`.)
    """
    return make_lm_train_step(task, tx, mesh)


def train_interleaved(
    task: LmTask,
    optimizers: Mapping[str, optax.GradientTransformation],
    num_steps: int,
    *,
    mesh: jax.sharding.Mesh | None = None,
    on_step: Callable[[int, dict[str, float]], None] | None = None,
) -> dict[str, RunResult]:
    """Trains every optimiser for ``num_steps`` steps, their steps interleaved in one process.

    Step ``t`` runs each optimiser's step once, in the order of ``optimizers`` rotated by
    ``t`` (so none is always first after the others), each timed from the call until its
    outputs are ready. All start from ``task.params`` and see ``task.batch_fn(t)`` at step
    ``t``: the results equal separate runs. A step's time covers sampling its batch on the
    devices and the jitted update.

    Args:
      task: from :func:`make_task`.
      optimizers: name -> optax transformation (at least one).
      num_steps: ``T >= 1``.
      mesh: the ``data`` mesh the batch is split over, parameters and optimiser states
        replicated (``None``: :func:`fidia_jax.models.lm_data_mesh`, the most visible devices
        that divide the batch).
      on_step: called after each step with ``(t, {name: loss})``.

    Returns:
      name -> :class:`RunResult`, in the order of ``optimizers`` (parameters and optimiser
      states placed on ``mesh``).

    Raises:
      ConfigError: no optimiser or ``num_steps < 1``.
    """
    names = list(optimizers)
    if not names or num_steps < 1:
        raise ConfigError(f"need >= 1 optimizer and num_steps >= 1, got {names}, {num_steps}")
    mesh = lm_data_mesh(task) if mesh is None else mesh
    batch = make_lm_batch_fn(task, mesh)
    steps = {n: make_train_step(task, tx, mesh) for n, tx in optimizers.items()}
    state, state_bytes = {}, {}
    for n, tx in optimizers.items():
        state[n] = init_lm_state(task, tx, mesh)  # copies of task.params: donated below
        state_bytes[n] = tree_bytes(state[n][1])
    losses = {n: np.zeros(num_steps, np.float32) for n in names}
    times = {n: np.zeros(num_steps, np.float64) for n in names}
    for t in range(num_steps):
        k = t % len(names)
        t_arr = jnp.int32(t)
        for n in names[k:] + names[:k]:
            t0 = time.perf_counter()
            params, opt_state, loss = jax.block_until_ready(steps[n](*state[n], batch(t_arr)))
            times[n][t] = time.perf_counter() - t0
            state[n] = (params, opt_state)
            losses[n][t] = float(parallel.to_host(loss))
        if on_step is not None:
            on_step(t, {n: float(losses[n][t]) for n in names})
    return {
        n: RunResult(state[n][0], state[n][1], losses[n], times[n], state_bytes[n]) for n in names
    }


def step_time_ratios(results: Mapping[str, RunResult], reference: str) -> dict[str, float]:
    """Median over steps ``1..T-1`` of ``time(name, t) / time(reference, t)`` per optimiser.

    A paired statistic: both times of a step were measured back to back, so slow spells of
    the machine cancel. Step 0 (compilation) is left out.

    Raises:
      ConfigError: ``reference`` is not a key of ``results``, or fewer than 2 steps.
    """
    if reference not in results:
        raise ConfigError(f"reference {reference!r} not among {list(results)}")
    ref = results[reference].step_times_s[1:]
    if ref.size == 0:
        raise ConfigError("step time ratios need at least 2 steps (step 0 compiles)")
    return {n: float(np.median(r.step_times_s[1:] / ref)) for n, r in results.items()}


def evaluate(task: LmTask, params: Any, mesh: jax.sharding.Mesh | None = None) -> float:
    """Mean next-byte cross-entropy (nats) of ``params`` on ``task.val_tokens``.

    With ``mesh`` (``params`` placed on it), the windows are split over its ``data`` axis when
    their number is a multiple of its size, else replicated
    (:func:`fidia_jax.models.place_lm_batch`).
    """
    tokens = place_lm_batch(task.val_tokens, mesh)
    return float(parallel.to_host(jax.jit(task.loss_fn)(params, tokens)))


def train_and_evaluate(
    config: LmConfig,
    workdir: str | os.PathLike,
    *,
    tokens: tuple[Any, Any] | None = None,
) -> dict[str, Any]:
    """Trains ``config.optimizer`` on the byte-level LLaMA and writes ``workdir/metrics.json``.

    Data parallel over every visible device (the most that divide ``data.batch_size``,
    :func:`fidia_jax.parallel.data_mesh`); under a multi-host launcher every process calls this
    and process 0 writes the file.

    Args:
      config: the run configuration.
      workdir: output directory (created); ``metrics.json`` is written atomically.
      tokens: optional ``(train, val)`` byte streams replacing Shakespeare (see
        :func:`make_task`).

    Returns:
      the metrics written (``config``, ``n_params``, ``train_losses`` (T floats), ``val_loss``
      (nats/byte), ``state_bytes``, ``weights_bytes``, ``step_time_s`` (median of steps
      ``1..T-1``, ``None`` for one step)) plus ``params``, the trained ``nnx.State``.

    Raises:
      DataError: the Shakespeare directory is missing.
      ConfigError: inconsistent configuration.
    """
    parallel.initialize_distributed()  # before any array exists; no-op without a launcher
    mesh = parallel.data_mesh(config.data.batch_size)
    task = make_task(config, tokens=tokens)
    name = config.optimizer.name
    run = train_interleaved(task, {name: make_optimizer(config)}, config.steps, mesh=mesh)[name]
    metrics = {
        "config": config_to_dict(config),
        "n_params": int(sum(x.size for x in jax.tree.leaves(task.params))),
        "train_losses": [float(x) for x in run.losses],
        "val_loss": evaluate(task, run.params, mesh),
        "state_bytes": run.state_bytes,
        "weights_bytes": tree_bytes(task.params),
        "step_time_s": float(statistics.median(run.step_times_s[1:])) if config.steps > 1 else None,
    }
    if parallel.is_primary():
        atomic_write_text(pathlib.Path(workdir) / "metrics.json", json_text(metrics, indent=2))
    return {**metrics, "params": run.params}


def with_optimizer(config: LmConfig, name: str, **changes: Any) -> LmConfig:
    """``config`` with ``optimizer.name = name`` (and other ``optimizer`` fields changed)."""
    return dataclasses.replace(
        config, optimizer=dataclasses.replace(config.optimizer, name=name, **changes)
    )
