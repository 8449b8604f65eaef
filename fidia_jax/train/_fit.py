"""The outer training loop: progress, ``metrics.jsonl``, orbax checkpoints, resume, curves.

:func:`fit` runs a step from :func:`fidia_jax.train.make_train_step` (or any function with its
``step(state, batch) -> (state, metrics)`` contract) for ``num_steps`` steps. A driver whose
method needs its own outer loop (alternating updates, several models, per-section epochs) calls
:func:`fit` once per phase with a different ``run`` name; the files and the display are the same.
"""

from __future__ import annotations

import itertools
import math
import os
import pathlib
import shutil
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding

from fidia_jax import parallel
from fidia_jax._io import atomic_write_text, json_text
from fidia_jax.errors import CheckpointError, TrainingError
from fidia_jax.train._checkpoint import Checkpointer
from fidia_jax.train._progress import FitProgress
from fidia_jax.train._report import append_metrics, plot_curves, read_metrics, truncate_metrics
from fidia_jax.train._step import _BATCH_SPEC, TrainState, _is_spec_leaf, _state_shardings

__all__ = ["FitResult", "fit"]


class FitResult(NamedTuple):
    """What :func:`fit` returns.

    Attributes:
      state: the state after the last step (for a skipped non-finite step, the last finite one).
      history: one dict per step of this run, ``{"step": s, <scalar metrics>}`` (steps of a
        resumed run's earlier part are read back from ``metrics.jsonl``), plus evaluation
        records ``{"step": s, "eval/<name>": v}``.
      start_step: the step the run resumed from (``0``: a fresh start).
    """

    state: Any
    history: list[dict[str, Any]]
    start_step: int


def _scalars(metrics: Mapping[str, Any]) -> dict[str, list[float]]:
    """Host values of the scalar entries of a list-of-steps metrics dict (one fetch)."""
    host = jax.device_get(dict(metrics))
    return {k: np.asarray(v) for k, v in host.items() if np.ndim(v) <= 1}


def fit(
    state: Any,
    step_fn: Callable[[Any, Any], tuple[Any, Mapping[str, Any]]],
    batches: Callable[[int], Any] | Iterable[Any],
    *,
    num_steps: int,
    workdir: str | os.PathLike | None = None,
    run: str = "train",
    checkpoint_every: int = 0,
    keep_checkpoints: int = 2,
    eval_fn: Callable[[Any], Mapping[str, float]] | None = None,
    eval_every: int = 0,
    log_every: int | None = None,
    max_nonfinite: int = 0,
    resume: bool = True,
    quiet: bool = False,
    show: tuple[str, ...] = ("loss",),
    fingerprint: Mapping[str, Any] | None = None,
    mesh: Mesh | None = None,
    param_sharding: str = "replicated",
    batch_spec: Any = _BATCH_SPEC,
) -> FitResult:
    """Runs ``num_steps`` steps of ``step_fn`` with progress, files and resume.

    Args:
      state: the initial state (a pytree, typically :class:`fidia_jax.train.TrainState`). It
        is donated to the first step when the step donates.
      step_fn: ``step(state, batch) -> (state, metrics)``; ``metrics`` a dict of scalars
        (``loss`` and ``nonfinite`` are read when present).
      batches: ``batches(step)`` for step ``0 .. num_steps - 1`` (a pure function of the step:
        the best choice, resume computes only what it needs), or an iterable yielding the
        batches in order (a resumed run draws and drops the first ``start_step``, so a seeded
        stream resumes bit for bit).
      num_steps: the run's total number of steps (``>= 0``).
      workdir: where ``metrics.jsonl``, ``curves.png`` and ``checkpoints/<run>/`` go; ``None``:
        no files, no resume (a helper fit inside a bigger run).
      run: the run's name in the files and the display (several fits can share a workdir).
      checkpoint_every: save every so many steps (``0``: only at the end); with ``workdir``,
        the final state is always saved.
      keep_checkpoints: how many checkpoints to keep.
      eval_fn: ``eval_fn(state) -> {name: float}`` called every ``eval_every`` steps and at the
        end; its values go to ``metrics.jsonl`` as ``eval/<name>``.
      eval_every: evaluation period in steps (``0``: only at the end).
      log_every: fetch the metrics from the device every so many steps (``None``: about 100
        fetches over the run); every step is recorded either way. Non-finite steps are detected
        when the metrics are fetched.
      max_nonfinite: how many skipped non-finite steps to tolerate before stopping (``0``: stop
        at the first; see :mod:`fidia_jax.train._step`).
      resume: restore the newest complete checkpoint of ``run`` in ``workdir`` and go on from it
        (bit-identical to an uninterrupted run on one device); ``False``: start afresh.
      quiet: no display (also when ``$FIDIA_QUIET`` is set).
      show: the metrics shown beside the progress bar.
      fingerprint: what the run's checkpoints depend on besides ``num_steps`` (typically the
        config as a dict, its step count left out; JSON-able values). Saved beside the
        checkpoints of a fresh run; a resume whose fingerprint differs from the saved one is
        refused, naming the keys that differ.
      mesh: run data-parallel on this :func:`fidia_jax.parallel.data_mesh` (axis ``"data"``):
        the state is placed on it (a :class:`~fidia_jax.train.TrainState` as
        :func:`~fidia_jax.train.init_train_state` places it, any other pytree by
        ``param_sharding``; leaves already placed so stay where they are), every batch is put on
        it by ``batch_spec`` (by default split along its leading axis over ``"data"``, as
        :func:`fidia_jax.parallel.shard_batch`; a batch already placed so is not copied), and a
        resume restores the checkpoint onto the state's shardings. ``step_fn`` must accept such
        state and batch (e.g.
        ``make_train_step(..., mesh=mesh)``). The results equal one device's up to the
        summation order of the cross-device reductions (float32: relative ``~1e-6`` per step).
        ``None`` (default): nothing is placed, the state and batches go to ``step_fn`` as given.
      param_sharding: with ``mesh``, ``"replicated"`` or ``"fsdp"``
        (:data:`fidia_jax.parallel.PARAM_SHARDING_MODES`); use the step's own value.
      batch_spec: with ``mesh``, the batch's layout, as in
        :func:`~fidia_jax.train.make_train_step` (use the step's own value): a
        :class:`~jax.sharding.PartitionSpec` or a pytree prefix of the batch with one per
        subtree; default ``P("data")`` (every leaf split along its leading axis). A ``None``
        there leaves that part of the batch as it comes (a Python value that ``step_fn``
        reads outside its jitted part, such as the step index).

    Resuming against another config: ``num_steps`` above the newest checkpoint continues from
    it; equal returns the saved state (nothing trained); below it returns the kept checkpoint
    at ``num_steps`` when there is one and refuses otherwise. ``metrics.jsonl`` is never cut
    below the newest checkpoint, and a resumed run never retrains from scratch.

    Several processes (see ``docs/distributed.md``): when the driver joined the distributed
    runtime (:func:`fidia_jax.parallel.initialize_distributed`), every process runs the loop on
    the global mesh of its ``step_fn`` and only process 0 writes files and shows progress. When
    a launcher started several processes but the driver did not join, the driver cannot share
    the work: process 0 runs it alone and every other process leaves here at once
    (``SystemExit(0)`` after a one-line status), so the run is never done twice.

    Returns:
      A :class:`FitResult`.

    Raises:
      TrainingError: more than ``max_nonfinite`` non-finite steps (the first such step and its
        loss are named; the error's ``state`` attribute holds the state reached, whose
        parameters are the last finite ones); the files written so far stay consistent.
      ValueError: ``num_steps < 0`` or a negative period; with ``mesh``, a batch leaf that
        ``batch_spec`` splits but that is a scalar or whose size along a split axis is not a
        multiple of the mesh's size there (the leaf's path and shape are named).
      ConfigError: with ``mesh``, an unknown ``param_sharding``.
      SystemExit: (code 0) on a launcher's process other than 0 when the driver did not join
        the distributed runtime (see above).
      CheckpointError: resuming a run whose saved ``fingerprint`` differs, whose newest
        checkpoint lies beyond ``num_steps`` with none kept at ``num_steps``, or whose saved
        tree does not fit ``state`` (another model size: the differing leaves are named).
    """
    if num_steps < 0 or checkpoint_every < 0 or eval_every < 0 or max_nonfinite < 0:
        raise ValueError(
            f"fit: num_steps, checkpoint_every, eval_every and max_nonfinite must be >= 0, got "
            f"{num_steps}, {checkpoint_every}, {eval_every}, {max_nonfinite}"
        )
    parallel.exit_if_secondary(run)
    if mesh is not None:
        state = _place_state(state, mesh, param_sharding)
    log_every = max(1, num_steps // 100) if log_every is None else max(1, int(log_every))
    workdir = None if workdir is None else pathlib.Path(workdir)
    metrics_path = None if workdir is None else workdir / "metrics.jsonl"
    ckpt = None
    start = 0
    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)
        ckpt_dir = workdir / "checkpoints" / run
        if not resume and parallel.is_primary():
            shutil.rmtree(ckpt_dir, ignore_errors=True)
        ckpt = Checkpointer(ckpt_dir, max_to_keep=keep_checkpoints)
        latest = ckpt.latest_step(remove_incomplete=parallel.is_primary()) if resume else None
        if latest is not None:
            _check_fingerprint(ckpt_dir / FINGERPRINT_FILE, fingerprint, run)
            latest = _resume_step(ckpt, latest, num_steps, run)
            state = ckpt.restore(latest, state)
            start = int(latest)
        elif fingerprint is not None and parallel.is_primary():
            atomic_write_text(ckpt_dir / FINGERPRINT_FILE, json_text(_jsonable(fingerprint)))
        if not resume or ckpt.latest_step() is None or ckpt.latest_step() <= start:
            truncate_metrics(metrics_path, run, start if resume else -1)
    history = read_metrics(metrics_path, run) if start and metrics_path else []
    history = [r for r in history if r.get("step", 0) <= start]
    for r in history:
        r.pop("run", None)

    if callable(batches):
        get_batch = batches
    else:
        iterator = iter(batches)
        for _ in itertools.islice(iterator, start):
            pass
        get_batch = lambda _step: next(iterator)  # noqa: E731
    if mesh is not None:
        unsharded = get_batch
        get_batch = lambda t: _place_batch(unsharded(t), mesh, batch_spec, run, t)  # noqa: E731

    progress = FitProgress(run, num_steps, start, show=show, quiet=quiet)
    pending: list[tuple[int, Mapping[str, Any]]] = []
    nonfinite_seen = 0

    def flush() -> None:
        nonlocal nonfinite_seen
        if not pending:
            return
        host = jax.device_get([m for _, m in pending])
        records = []
        for (s, _), m in zip(pending, host, strict=True):
            rec = {"step": s}
            rec.update(
                {k: v.item() for k, v in ((k, np.asarray(v)) for k, v in m.items()) if v.ndim == 0}
            )
            records.append(rec)
        pending.clear()
        for rec in records:
            if rec.get("nonfinite", 0):
                nonfinite_seen += 1
                if nonfinite_seen > max_nonfinite:
                    _write(records[: records.index(rec) + 1])
                    err = TrainingError(
                        f"{run}: the loss or update at step {rec['step']} is not finite "
                        f"(loss {rec.get('loss')}); the step was skipped and training stopped "
                        f"({nonfinite_seen} non-finite step(s), at most {max_nonfinite} allowed)"
                    )
                    err.state = state  # skipped steps leave the last finite parameters
                    raise err
        _write(records)
        progress.update(records[-1]["step"], records[-1])

    def _write(records):
        history.extend(records)
        if metrics_path is not None:
            append_metrics(metrics_path, [{"run": run, **r} for r in records])

    def evaluate(step: int) -> None:
        if eval_fn is None:
            return
        rec = {"step": step, **{f"eval/{k}": float(v) for k, v in eval_fn(state).items()}}
        _write([rec])

    try:
        for t in range(start, num_steps):
            state, metrics = step_fn(state, get_batch(t))
            done = t + 1
            pending.append((done, metrics))
            if t == start:
                jax.block_until_ready(metrics)
                progress.compiled()
            if done % log_every == 0 or done == num_steps:
                flush()
            if eval_every and done % eval_every == 0 and done != num_steps:
                flush()
                evaluate(done)
            if ckpt is not None and checkpoint_every and done % checkpoint_every == 0:
                flush()
                ckpt.save(done, state)
        flush()
        if start < num_steps or not any(k.startswith("eval/") for r in history for k in r):
            evaluate(num_steps)
        if ckpt is not None and start < num_steps and ckpt.latest_step() != num_steps:
            ckpt.save(num_steps, state)
    finally:
        losses = [r["loss"] for r in history if "loss" in r]
        last = f"final loss {losses[-1]:.4g}" if losses and math.isfinite(losses[-1]) else None
        progress.close(last if start < num_steps else f"already trained ({num_steps} steps)")
        if ckpt is not None:
            ckpt.close()
    if metrics_path is not None and start < num_steps:
        plot_curves(metrics_path, metrics_path.parent / "curves.png", keys=show)
    return FitResult(state, history, start)


def _place_state(state: Any, mesh: Mesh, param_sharding: str) -> Any:
    """``state`` on ``mesh``: a TrainState as init_train_state places it, else by mode."""
    if isinstance(state, TrainState):
        shardings = _state_shardings(state, mesh, param_sharding)
    else:
        shardings = parallel.param_shardings(state, mesh, param_sharding)
    return parallel.put(state, shardings)


def _place_batch(batch: Any, mesh: Mesh, batch_spec: Any, run: str, step: int) -> Any:
    """``batch`` placed on ``mesh`` by ``batch_spec``, or a ValueError naming a leaf the mesh
    cannot split."""

    def place(spec_path, spec, sub):
        if spec is None:
            return sub
        for path, leaf in jax.tree_util.tree_leaves_with_path(sub):
            shape = np.shape(leaf)
            for dim, names in enumerate(spec):
                if names is None:
                    continue
                size = math.prod(mesh.shape[n] for n in ((names,) if isinstance(names, str)
                                                         else names))  # fmt: skip
                if dim >= len(shape) or shape[dim] % size:
                    name = jax.tree_util.keystr((*spec_path, *path)) or "(the batch)"
                    raise ValueError(
                        f"{run}: batch of step {step}: leaf {name} of shape {shape} cannot be "
                        f"split over the mesh's {size} devices along axis {dim} (its size there "
                        f"must be a multiple of {size}); choose a batch size that the device "
                        "count divides, or build the mesh with parallel.data_mesh(batch_size)"
                    )
        return parallel.put(sub, NamedSharding(mesh, spec))

    return jax.tree_util.tree_map_with_path(place, batch_spec, batch, is_leaf=_is_spec_leaf)


#: The file beside a run's checkpoints that holds its ``fingerprint``.
FINGERPRINT_FILE = "fingerprint.json"

#: Config keys that a resumed run may change: the step counts (a run can be extended), the
#: bookkeeping periods, which do not change the trajectory, and the device count of the mesh
#: (``num_devices``: it changes only the summation order of cross-device reductions).
RESUMABLE_KEYS = ("num_steps", "steps", "iterations", "checkpoint_every", "eval_every",
                  "log_every", "keep_checkpoints", "rank_every", "num_devices")  # fmt: skip


def config_fingerprint(config: Any, *, ignore: Iterable[str] = RESUMABLE_KEYS) -> dict[str, Any]:
    """A config (a dataclass, nested dataclasses allowed) as the ``fingerprint`` of :func:`fit`:
    every field but those named in ``ignore`` (at any depth; default :data:`RESUMABLE_KEYS`).

    Example:
      >>> import dataclasses
      >>> @dataclasses.dataclass(frozen=True)
      ... class Run:
      ...     seed: int = 0
      ...     steps: int = 100
      >>> config_fingerprint(Run())
      {'seed': 0}
    """
    from fidia_jax.config import config_to_dict

    skip = set(ignore)

    def keep(d: Any) -> Any:
        if isinstance(d, dict):
            return {k: keep(v) for k, v in d.items() if k not in skip}
        return d

    return keep(config_to_dict(config))


def _jsonable(value: Any) -> Any:
    """``value`` as plain JSON types (tuples as lists, numpy scalars as numbers)."""
    import json

    return json.loads(json_text(value))


def _check_fingerprint(path: pathlib.Path, fingerprint: Mapping[str, Any] | None, run: str) -> None:
    """Refuses a resume whose fingerprint differs from the one saved at ``path``."""
    if fingerprint is None or not path.is_file():
        return
    import json

    saved, now = json.loads(path.read_text()), _jsonable(fingerprint)

    def flat(d: Any, prefix: str = "") -> dict[str, Any]:
        if isinstance(d, dict):
            out: dict[str, Any] = {}
            for k, v in d.items():
                out.update(flat(v, f"{prefix}{k}."))
            return out
        return {prefix[:-1]: d}

    a, b = flat(saved), flat(now)
    diff = [
        f"{k}: saved {a.get(k, '(absent)')!r}, now {b.get(k, '(absent)')!r}"
        for k in sorted(a.keys() | b.keys())
        if a.get(k, "(absent)") != b.get(k, "(absent)")
    ]
    if diff:
        shown = "; ".join(diff[:8]) + (f"; and {len(diff) - 8} more" if len(diff) > 8 else "")
        raise CheckpointError(
            f"{run}: {path.parent} holds checkpoints of another configuration ({shown}); "
            "resume with the same configuration, or use another workdir or start afresh"
        )


def _resume_step(ckpt: Checkpointer, latest: int, num_steps: int, run: str) -> int:
    """The checkpoint a resume starts from: the newest, or the one kept at ``num_steps`` when
    the newest lies beyond it."""
    if latest <= num_steps:
        return latest
    if num_steps in ckpt.all_steps():
        return num_steps
    raise CheckpointError(
        f"{run}: the newest checkpoint in {ckpt.directory} is step {latest}, beyond this run's "
        f"{num_steps} steps, and none is kept at step {num_steps} (kept: {ckpt.all_steps()}); "
        f"ask for num_steps >= {latest}, or use another workdir or start afresh"
    )
