"""Orbax checkpoints of a training run, and the trained policy of a run directory.

A checkpoint ``<workdir>/checkpoints/<step>/`` holds ``{"params", "opt_state"}`` (orbax
``StandardSave``; the step is the directory name). Writes are synchronous, so a process killed
at any point leaves the previous checkpoints intact.

A step folder without orbax's ``_CHECKPOINT_METADATA`` marker and the ``default/_METADATA`` of
its item (for instance an empty ``checkpoints/<step>/`` left by a save killed before it wrote)
is *incomplete*: :func:`latest_step` skips it with a warning naming it, so ``train`` resumes
from, and ``design`` / ``evaluate`` load, the newest complete checkpoint.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import warnings

import jax
import jax.numpy as jnp
from flax import nnx

from fidia_jax import models
from fidia_jax.errors import CheckpointError
from fidia_jax.projects.fidia._step import TrainState, make_optimizer
from fidia_jax.projects.fidia.configs import FidiaConfig, config_from_dict

__all__ = ["is_complete", "latest_step", "load_policy", "manager", "restore", "save"]


def manager(workdir: pathlib.Path, config: FidiaConfig):
    """The ``orbax.checkpoint.CheckpointManager`` of ``workdir/checkpoints`` (created)."""
    import orbax.checkpoint as ocp

    options = ocp.CheckpointManagerOptions(
        max_to_keep=config.train.keep_checkpoints, create=True, enable_async_checkpointing=False
    )
    return ocp.CheckpointManager(
        (pathlib.Path(workdir) / "checkpoints").absolute(), options=options
    )


def is_complete(step_dir: str | os.PathLike) -> bool:
    """Whether ``step_dir`` (``checkpoints/<step>``) holds a finished orbax checkpoint."""
    step_dir = pathlib.Path(step_dir)
    return (step_dir / "_CHECKPOINT_METADATA").is_file() and (
        step_dir / "default" / "_METADATA"
    ).is_file()


def latest_step(mgr, *, remove_incomplete: bool = False) -> int | None:
    """The newest *complete* checkpoint step of ``mgr`` (``None``: none).

    Step folders newer than it that are incomplete are skipped with one ``UserWarning`` naming
    them and the step used; with ``remove_incomplete`` (``train`` resuming, process 0) they are
    also deleted, so that the run can save those steps again.
    """
    root = pathlib.Path(str(mgr.directory))
    skipped, step = [], None
    for s in sorted(mgr.all_steps(), reverse=True):
        if is_complete(root / str(s)):
            step = s
            break
        skipped.append(root / str(s))
    if skipped:
        names = ", ".join(str(d) for d in skipped)
        using = "no complete checkpoint left" if step is None else f"using step {step}"
        action = "removed" if remove_incomplete else "skipped"
        warnings.warn(
            f"incomplete checkpoint {names} (a save that did not finish) {action}; {using}",
            stacklevel=2,
        )
        if remove_incomplete:
            for d in skipped:
                shutil.rmtree(d, ignore_errors=True)
            mgr.reload()
    return step


def save(mgr, state: TrainState) -> None:
    """Saves ``state`` as checkpoint ``state.step`` and waits until it is on disk."""
    import orbax.checkpoint as ocp

    mgr.save(
        state.step,
        args=ocp.args.StandardSave({"params": state.params, "opt_state": state.opt_state}),
    )
    mgr.wait_until_finished()


def restore(mgr, step: int, like: TrainState) -> TrainState:
    """Checkpoint ``step`` with the structure, shapes and dtypes of ``like``."""
    import orbax.checkpoint as ocp

    target = {"params": like.params, "opt_state": like.opt_state}
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, target)
    tree = mgr.restore(step, args=ocp.args.StandardRestore(abstract))
    return TrainState(step=int(step), params=tree["params"], opt_state=tree["opt_state"])


def load_policy(checkpoint: str | os.PathLike, *, step: int | None = None):
    """The policy of a training run directory (latest or given step), or a ProteinMPNN name.

    Args:
      checkpoint: a ``train`` workdir (with ``config.json`` and ``checkpoints/``), one of its
        ``checkpoints/<step>`` directories, or a ProteinMPNN weight name such as ``v_48_020``
        (the untrained reference).
      step: checkpoint step (``None``: the newest complete one, see :func:`latest_step`).

    Returns:
      ``(model, config_or_None, step_or_None)``.

    Raises:
      CheckpointError: the directory holds no complete checkpoint, the step asked for is
        incomplete, or the checkpoint does not match the architecture.

    Warns:
      UserWarning: newer incomplete checkpoints were skipped.
    """
    path = pathlib.Path(checkpoint)
    if not path.exists():
        if len(path.parts) > 1 or not re.fullmatch(r"v_\d+_\d{3}", str(checkpoint)):
            raise CheckpointError(
                f"{checkpoint}: no such training run directory (and not a "
                "ProteinMPNN weights name such as 'v_48_020')"
            )
        return models.ProteinMPNN.from_checkpoint(str(checkpoint)), None, None
    if path.name.isdigit() and path.parent.name == "checkpoints":
        step = int(path.name) if step is None else step
        path = path.parent.parent
    cfg_path = path / "config.json"
    if not cfg_path.is_file():
        raise CheckpointError(f"{path}: not a training run directory (no config.json)")
    config = config_from_dict(json.loads(cfg_path.read_text()))
    model = models.ProteinMPNN.from_checkpoint(
        config.model.checkpoint, variant=config.model.variant
    )
    graphdef, state = nnx.split(model)
    params = jax.tree.map(jnp.asarray, nnx.to_pure_dict(state))
    mgr = manager(path, config)
    if step is None:
        step = latest_step(mgr)
        if step is None:
            raise CheckpointError(f"{path}: no complete checkpoint saved yet")
    elif not is_complete(path / "checkpoints" / str(step)):
        raise CheckpointError(f"{path}: checkpoint step {step} is missing or incomplete")
    like = TrainState(step=step, params=params, opt_state=make_optimizer(config).init(params))
    try:
        restored = restore(mgr, step, like)
    except (FileNotFoundError, ValueError, KeyError) as exc:
        raise CheckpointError(f"{path}: cannot restore step {step}: {exc}") from exc
    return nnx.merge(graphdef, restored.params), config, step
