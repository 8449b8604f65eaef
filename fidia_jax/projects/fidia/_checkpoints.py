"""Checkpoints of a training run (:class:`fidia_jax.train.Checkpointer`), and the trained policy
of a run directory.

A checkpoint ``<workdir>/checkpoints/<step>/`` holds ``{"params", "opt_state"}`` (orbax
``StandardSave``; the step is the directory name). Writes are synchronous, so a process killed
at any point leaves the previous checkpoints intact.

A step folder without orbax's ``_CHECKPOINT_METADATA`` marker and the ``default/_METADATA`` of
its item (for instance an empty ``checkpoints/<step>/`` left by a save killed before it wrote)
is *incomplete*: :meth:`fidia_jax.train.Checkpointer.latest_step` skips it with a warning naming
it, so ``train`` resumes from, and ``design`` / ``evaluate`` load, the newest complete checkpoint.
"""

from __future__ import annotations

import json
import os
import pathlib
import re

import jax
import jax.numpy as jnp
from flax import nnx

from fidia_jax import models, train
from fidia_jax.errors import CheckpointError
from fidia_jax.projects.fidia._step import TrainState, make_optimizer
from fidia_jax.projects.fidia.configs import FidiaConfig, config_from_dict

__all__ = ["checkpointer", "load_policy", "restore", "save"]


def checkpointer(workdir: str | os.PathLike, config: FidiaConfig) -> train.Checkpointer:
    """The checkpoints of ``workdir/checkpoints`` (created), keeping
    ``config.train.keep_checkpoints`` of them."""
    return train.Checkpointer(
        pathlib.Path(workdir) / "checkpoints", max_to_keep=config.train.keep_checkpoints
    )


def save(ckpt: train.Checkpointer, state: TrainState) -> None:
    """Saves ``state`` as checkpoint ``state.step`` and waits until it is on disk."""
    ckpt.save(state.step, {"params": state.params, "opt_state": state.opt_state})


def restore(ckpt: train.Checkpointer, step: int, like: TrainState) -> TrainState:
    """Checkpoint ``step`` with the structure, shapes and dtypes of ``like``."""
    tree = ckpt.restore(step, {"params": like.params, "opt_state": like.opt_state})
    return TrainState(step=int(step), params=tree["params"], opt_state=tree["opt_state"])


def load_policy(checkpoint: str | os.PathLike, *, step: int | None = None):
    """The policy of a training run directory (latest or given step), or a ProteinMPNN name.

    Args:
      checkpoint: a ``train`` workdir (with ``config.json`` and ``checkpoints/``), one of its
        ``checkpoints/<step>`` directories, or a ProteinMPNN weight name such as ``v_48_020``
        (the untrained reference).
      step: checkpoint step (``None``: the newest complete one, see
        :meth:`fidia_jax.train.Checkpointer.latest_step`).

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
    ckpt = checkpointer(path, config)
    try:
        if step is None:
            step = ckpt.latest_step()
            if step is None:
                raise CheckpointError(f"{path}: no complete checkpoint saved yet")
        elif not train.is_complete(path / "checkpoints" / str(step)):
            raise CheckpointError(f"{path}: checkpoint step {step} is missing or incomplete")
        like = TrainState(step=step, params=params, opt_state=make_optimizer(config).init(params))
        try:
            restored = restore(ckpt, step, like)
        except (FileNotFoundError, ValueError, KeyError) as exc:
            raise CheckpointError(f"{path}: cannot restore step {step}: {exc}") from exc
    finally:
        ckpt.close()
    return nnx.merge(graphdef, restored.params), config, step
