"""The language-model training runs of the SCALE and PASO experiments.

One byte-level :class:`fidia_jax.models.Llama` on Shakespeare (:func:`make_task`), any optax
optimiser (:func:`make_optimizer` builds the four compared ones by name), and every gradient
step is the package's (:func:`fidia_jax.train.make_train_step`; its batch sampled on the
devices by :func:`fidia_jax.train.make_lm_batch_fn`, both timed):

* :func:`train_and_evaluate` (``fidia-jax optimizers train|demo``) trains ``config.optimizer``
  with :func:`fidia_jax.train.fit` under the run name of the optimiser: progress, ``metrics.jsonl``,
  orbax checkpoints (every ``config.checkpoint_every`` steps and at the end), resume after a kill
  (bit-identical on one device), ``curves.png``. Several optimisers trained into one workdir
  (``--set optimizer.name=...``) share its files: ``curves.png`` overlays their loss curves and
  ``summary.json`` / ``optimizers.png`` / the console table compare them.
* :func:`train_interleaved` (the benchmarks, the notebook) trains several optimisers side by
  side in one process: at every step it runs each optimiser's step once (round-robin, the order
  rotated every step), waits for it (``jax.block_until_ready``) and records its wall time. Each
  optimiser sees the same initialisation and the same batch at step ``t``, and machine noise
  (other jobs, thermal or frequency changes) falls on all of them alike, so per-step time ratios
  are paired measurements -- the reason this loop is its own and not :func:`fidia_jax.train.fit`.

Data parallel (:mod:`fidia_jax.parallel`): the batch is split over a mesh of every visible
device, the parameters and optimiser state are replicated, and under a multi-host launcher
(:func:`fidia_jax.parallel.initialize_distributed`) every process runs the same loop and process
0 writes the files. On one device the numbers are those of an unsharded run, bit for bit.
"""

from __future__ import annotations

import dataclasses
import json
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

from fidia_jax import _checks, optim, parallel, train
from fidia_jax._io import atomic_write_text, json_text
from fidia_jax.config import config_to_dict
from fidia_jax.data import load_shakespeare, sample_windows
from fidia_jax.errors import ConfigError, TrainingError
from fidia_jax.models import LlamaConfig, check_token_ids
from fidia_jax.projects.optimizers.configs import LmConfig
from fidia_jax.train import LmTask, lm_data_mesh, make_lm_batch_fn, make_lm_task, place_lm_batch

__all__ = [
    "RunResult",
    "evaluate",
    "llama_config",
    "make_optimizer",
    "make_schedule",
    "make_task",
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
      :class:`fidia_jax.train.LmTask`.

    Raises:
      DataError: the Shakespeare directory is missing (when ``tokens`` is not given).
      ValueError: a stream is not longer than ``data.seq_len``; a given stream that is not 1-D
        integer ids in ``[0, vocab_size)`` (the message names ``tokens[0]`` / ``tokens[1]``).
    """
    d = config.data
    if tokens is None:
        splits = load_shakespeare(d.data_dir, max_files=d.max_files or None)
        tokens = (splits.train, splits.val)
    else:
        vocab = llama_config(config).vocab_size
        for i, stream in enumerate(tokens):
            name = f"tokens[{i}]"
            _checks.assert_rank(stream, 1, name, where="make_task", detail="a byte stream")
            _checks.assert_type(np.asarray(stream), (np.integer,), name, where="make_task")
            check_token_ids(np.asarray(stream), vocab, name=name, where="make_task")
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
    * ``scale``: :func:`fidia_jax.optim.scale` (1-D parameters: AdamW at
      ``peak_adam_learning_rate``, default 2e-2 as in the authors' script, on the same schedule
      shape, i.e. ``adam_lr / max_lr * lr(t)`` as in the authors' optimiser);
    * ``muon``: ``optax.contrib.muon`` (non-matrices: Adam at ``adam_learning_rate``);
    * ``sgd``: ``optax.sgd(lr, momentum)``.

    Raises:
      ConfigError: unknown optimiser name.
    """
    o = config.optimizer
    lr = make_schedule(o.peak_learning_rate, config.steps, config)
    adam_lr = make_schedule(o.peak_adam_learning_rate, config.steps, config)
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


def _initial_state(task: LmTask, tx: optax.GradientTransformation, mesh) -> train.TrainState:
    """A train state from a copy of ``task.params`` (the steps donate it; the task stays valid)."""
    return train.init_train_state(jax.tree.map(jnp.copy, task.params), tx, mesh=mesh)


def train_interleaved(
    task: LmTask,
    optimizers: Mapping[str, optax.GradientTransformation],
    num_steps: int,
    *,
    mesh: jax.sharding.Mesh | None = None,
    on_step: Callable[[int, dict[str, float]], None] | None = None,
) -> dict[str, RunResult]:
    """Trains every optimiser for ``num_steps`` steps, their steps interleaved in one process.

    Step ``t`` runs each optimiser's :func:`fidia_jax.train.make_train_step` step once, in the
    order of ``optimizers`` rotated by ``t`` (so none is always first after the others), each
    timed from the call until its outputs are ready. All start from ``task.params`` and see
    ``task.batch_fn(t)`` at step ``t``: the results equal separate runs. A step's time covers
    sampling its batch on the devices and the jitted update.

    Args:
      task: from :func:`make_task`.
      optimizers: name -> optax transformation (at least one).
      num_steps: ``T >= 1``.
      mesh: the ``data`` mesh the batch is split over, parameters and optimiser states
        replicated (``None``: :func:`fidia_jax.train.lm_data_mesh`, the most visible devices
        that divide the batch).
      on_step: called after each step with ``(t, {name: loss})``.

    Returns:
      name -> :class:`RunResult`, in the order of ``optimizers`` (parameters and optimiser
      states placed on ``mesh``).

    Raises:
      ConfigError: no optimiser or ``num_steps < 1``.
      TrainingError: a non-finite loss or update (the package's policy: the step is skipped and
        the run stops there, naming the optimiser and the step).
    """
    names = list(optimizers)
    if not names or num_steps < 1:
        raise ConfigError(f"need >= 1 optimizer and num_steps >= 1, got {names}, {num_steps}")
    mesh = lm_data_mesh(task) if mesh is None else mesh
    batch = make_lm_batch_fn(task, mesh)
    steps = {n: train.make_train_step(task.loss_fn, tx, mesh=mesh) for n, tx in optimizers.items()}
    state = {n: _initial_state(task, tx, mesh) for n, tx in optimizers.items()}
    state_bytes = {n: tree_bytes(s.opt_state) for n, s in state.items()}
    losses = {n: np.zeros(num_steps, np.float32) for n in names}
    times = {n: np.zeros(num_steps, np.float64) for n in names}
    for t in range(num_steps):
        k = t % len(names)
        t_arr = jnp.int32(t)
        for n in names[k:] + names[:k]:
            t0 = time.perf_counter()
            state[n], metrics = jax.block_until_ready(steps[n](state[n], batch(t_arr)))
            times[n][t] = time.perf_counter() - t0
            losses[n][t] = float(parallel.to_host(metrics["loss"]))
            if int(parallel.to_host(metrics["nonfinite"])):
                raise TrainingError(
                    f"{n}: the loss or update at step {t + 1} is not finite (loss "
                    f"{losses[n][t]}); the step was skipped and training stopped"
                )
        if on_step is not None:
            on_step(t, {n: float(losses[n][t]) for n in names})
    return {
        n: RunResult(state[n].params, state[n].opt_state, losses[n], times[n], state_bytes[n])
        for n in names
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
    (:func:`fidia_jax.train.place_lm_batch`).
    """
    tokens = place_lm_batch(task.val_tokens, mesh)
    return float(parallel.to_host(jax.jit(task.loss_fn)(params, tokens)))


def _without_optimizer(config: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in config.items() if k != "optimizer"}


def _without_location(config: dict[str, Any]) -> dict[str, Any]:
    """The config without ``data.data_dir``: where the shared data lie is not the experiment."""
    data = {k: v for k, v in config.get("data", {}).items() if k != "data_dir"}
    return {**config, "data": data}


def _differing_keys(a: dict[str, Any], b: dict[str, Any], prefix: str = "") -> list[str]:
    keys = []
    for k in sorted(set(a) | set(b)):
        va, vb = a.get(k), b.get(k)
        if isinstance(va, dict) and isinstance(vb, dict):
            keys += _differing_keys(va, vb, f"{prefix}{k}.")
        elif va != vb:
            keys.append(f"{prefix}{k}")
    return keys


def _claim_workdir(workdir: pathlib.Path, config: LmConfig) -> None:
    """Checks that ``workdir`` may hold this run, then records its config.

    A workdir holds the runs of one experiment, one per optimiser name (``configs/<name>.json``):
    the same config apart from the ``optimizer`` group, and a run's own config when it resumes
    (a checkpoint of another config must never be continued).

    Raises:
      ConfigError: the workdir holds a run of another experiment, or this optimiser's run with
        other settings.
    """
    mine = config_to_dict(config)
    name = config.optimizer.name
    for path in sorted((workdir / "configs").glob("*.json")):
        other = json.loads(path.read_text(encoding="utf-8"))
        same_run = path.stem == name
        a, b = _without_location(other), _without_location(mine)
        if not same_run:
            a, b = _without_optimizer(a), _without_optimizer(b)
        if a != b:
            what = f"the {name} run" if same_run else f"a run ({path.stem}) of another experiment"
            raise ConfigError(
                f"{workdir} holds {what} with a different config ({path}; differs in "
                f"{', '.join(_differing_keys(a, b))}); use a new workdir"
            )
    train.write_json(workdir / "configs" / f"{name}.json", mine)


def _report(workdir: pathlib.Path, config: LmConfig, metrics: Mapping[str, Any]) -> None:
    """``summary.json`` (this run's headline numbers and every optimiser of the workdir),
    ``optimizers.png`` (their table as bars, from two optimisers on) and the console table."""
    name = config.optimizer.name
    losses = metrics["train_losses"]
    row = {
        "final_train_loss": losses[-1],
        "val_loss": metrics["val_loss"],
        "step_time_s": metrics["step_time_s"],
        "state_bytes": metrics["state_bytes"],
    }
    path = workdir / "summary.json"
    earlier = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    rows = {**earlier.get("optimizers", {}), name: row}  # compatible runs (_claim_workdir)
    summary = {"optimizer": name, "steps": config.steps, "n_params": metrics["n_params"], **row}
    train.write_summary(workdir, {**summary, "optimizers": rows}, config=config)
    table = [
        {
            "optimizer": n,
            "val_loss": r["val_loss"],
            "step_time_ms": None if r["step_time_s"] is None else 1e3 * r["step_time_s"],
            "state_kib": r["state_bytes"] / 1024,
            **r,
        }
        for n, r in rows.items()
    ]
    if len(table) > 1 and parallel.is_primary():  # one optimiser: curves.png says it all
        train.plot_bars(
            table,
            workdir / "optimizers.png",
            label="optimizer",
            values=["val_loss", "step_time_ms", "state_kib"],
            title=f"byte-level LLaMA on Shakespeare, {config.steps} steps",
        )
    train.print_table(
        f"optimisers trained in {workdir} ({config.steps} steps, {metrics['n_params']} parameters)",
        [
            "optimizer",
            "final train loss (nats/byte)",
            "val loss (nats/byte)",
            "step time (ms)",
            "optimizer state (KiB)",
        ],
        [
            [
                r["optimizer"],
                r["final_train_loss"],
                r["val_loss"],
                "-" if r["step_time_ms"] is None else f"{r['step_time_ms']:.1f}",
                f"{r['state_kib']:.1f}",
            ]
            for r in table
        ],
    )


def train_and_evaluate(
    config: LmConfig,
    workdir: str | os.PathLike,
    *,
    tokens: tuple[Any, Any] | None = None,
) -> dict[str, Any]:
    """Trains ``config.optimizer`` on the byte-level LLaMA and writes its files in ``workdir``.

    The run (named after the optimiser) goes through :func:`fidia_jax.train.fit`: a progress
    display, ``metrics.jsonl`` (loss, gradient norm and step time of every step), orbax
    checkpoints under ``checkpoints/<optimizer>/`` every ``config.checkpoint_every`` steps and
    at the end, and ``curves.png``; a rerun resumes from the newest checkpoint (bit-identical
    to an uninterrupted run on one device; a finished run is not trained again). Then it
    writes ``metrics.json`` (atomically), ``summary.json`` (this run's numbers and those of
    every optimiser trained in ``workdir``), ``optimizers.png`` (their table as bars, once
    there are two) and prints their table.

    Data parallel over every visible device (the most that divide ``data.batch_size``,
    :func:`fidia_jax.parallel.data_mesh`); under a multi-host launcher every process calls this
    and process 0 writes the files.

    Args:
      config: the run configuration.
      workdir: output directory (created).
      tokens: optional ``(train, val)`` byte streams replacing Shakespeare (see
        :func:`make_task`).

    Returns:
      the metrics written (``config``, ``n_params``, ``train_losses`` (T floats), ``val_loss``
      (nats/byte), ``state_bytes``, ``weights_bytes``, ``step_time_s`` (median of steps
      ``2..T``, ``None`` for one step)) plus ``params``, the trained ``nnx.State``.

    Raises:
      DataError: the Shakespeare directory is missing.
      ConfigError: inconsistent configuration, or ``workdir`` holds a run of another config
        (use a new workdir).
      TrainingError: a non-finite loss or update (the step is named).
    """
    parallel.initialize_distributed()  # before any array exists; no-op without a launcher
    workdir = pathlib.Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    mesh = parallel.data_mesh(config.data.batch_size)
    name = config.optimizer.name
    with train.stage("loading Shakespeare and building the model"):
        task = make_task(config, tokens=tokens)
    _claim_workdir(workdir, config)  # after the data loaded: a failed start records nothing
    tx = make_optimizer(config)
    step, batch = train.make_train_step(task.loss_fn, tx, mesh=mesh), make_lm_batch_fn(task, mesh)
    state = _initial_state(task, tx, mesh)
    state_bytes = tree_bytes(state.opt_state)

    def timed_step(state, t):  # the batch is sampled on the devices inside the timed span
        t0 = time.perf_counter()
        state, metrics = jax.block_until_ready(step(state, batch(t)))
        return state, {**metrics, "step_time_s": time.perf_counter() - t0}

    result = train.fit(
        state,
        timed_step,
        jnp.int32,
        num_steps=config.steps,
        workdir=workdir,
        run=name,
        checkpoint_every=config.checkpoint_every,
        log_every=1,
        fingerprint=train.config_fingerprint(config),
    )
    records = [r for r in result.history if "loss" in r]
    times = [r["step_time_s"] for r in records[1:]]  # step 1 includes compilation
    with train.stage("validation loss"):
        val_loss = evaluate(task, result.state.params, mesh)
    metrics = {
        "config": config_to_dict(config),
        "n_params": int(sum(x.size for x in jax.tree.leaves(task.params))),
        "train_losses": [r["loss"] for r in records],
        "val_loss": val_loss,
        "state_bytes": state_bytes,
        "weights_bytes": tree_bytes(task.params),
        "step_time_s": float(statistics.median(times)) if times else None,
    }
    if parallel.is_primary():
        atomic_write_text(workdir / "metrics.json", json_text(metrics, indent=2))
    _report(workdir, config, metrics)
    return {**metrics, "params": result.state.params}


def with_optimizer(config: LmConfig, name: str, **changes: Any) -> LmConfig:
    """``config`` with ``optimizer.name = name`` (and other ``optimizer`` fields changed)."""
    return dataclasses.replace(
        config, optimizer=dataclasses.replace(config.optimizer, name=name, **changes)
    )
