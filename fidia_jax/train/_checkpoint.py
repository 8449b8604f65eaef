"""Orbax checkpoints of a training run: save, find the newest complete one, restore.

A run's checkpoints live in ``<directory>/<step>/`` (orbax ``CheckpointManager``, synchronous
``StandardSave``), so a process killed at any point leaves the earlier checkpoints intact. A
step folder without orbax's ``_CHECKPOINT_METADATA`` marker and its item's ``default/_METADATA``
(a save killed before it finished) is *incomplete*: :meth:`Checkpointer.latest_step` skips it
with a warning naming it, and removes it when asked (a run about to save that step again).
"""

from __future__ import annotations

import os
import pathlib
import shutil
import warnings
from typing import Any

import jax

__all__ = ["Checkpointer", "is_complete"]


def is_complete(step_dir: str | os.PathLike) -> bool:
    """Whether ``step_dir`` (``<directory>/<step>``) holds a finished orbax checkpoint."""
    step_dir = pathlib.Path(step_dir)
    return (step_dir / "_CHECKPOINT_METADATA").is_file() and (
        step_dir / "default" / "_METADATA"
    ).is_file()


class Checkpointer:
    """The orbax checkpoints of one run in ``directory`` (created on the first save).

    Args:
      directory: where the step folders go (for example ``<workdir>/checkpoints``).
      max_to_keep: how many of the newest checkpoints to keep (``None``: all).

    Example:
      >>> import tempfile, jax.numpy as jnp
      >>> from fidia_jax.train import Checkpointer
      >>> ckpt = Checkpointer(tempfile.mkdtemp())
      >>> ckpt.save(3, {"w": jnp.arange(3.0)})
      >>> ckpt.latest_step(), ckpt.restore(3, {"w": jnp.zeros(3)})["w"].tolist()
      (3, [0.0, 1.0, 2.0])
    """

    def __init__(self, directory: str | os.PathLike, *, max_to_keep: int | None = 2):
        import orbax.checkpoint as ocp

        self.directory = pathlib.Path(directory).absolute()
        options = ocp.CheckpointManagerOptions(
            max_to_keep=max_to_keep, create=True, enable_async_checkpointing=False
        )
        self.manager = ocp.CheckpointManager(self.directory, options=options)

    def all_steps(self) -> list[int]:
        """Every step folder orbax knows of, oldest first (complete or not)."""
        return sorted(self.manager.all_steps())

    def latest_step(self, *, remove_incomplete: bool = False) -> int | None:
        """The newest *complete* checkpoint step (``None``: none).

        Incomplete step folders newer than it are skipped with one ``UserWarning`` naming them
        and the step used; with ``remove_incomplete`` (a run resuming, process 0) they are also
        deleted, so that the run can save those steps again.
        """
        skipped, step = [], None
        for s in sorted(self.manager.all_steps(), reverse=True):
            if is_complete(self.directory / str(s)):
                step = s
                break
            skipped.append(self.directory / str(s))
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
                self.manager.reload()
        return step

    def save(self, step: int, tree: Any) -> None:
        """Saves ``tree`` (a pytree of arrays) as checkpoint ``step`` and waits until it is on
        disk. ``None`` leaves are not stored (restore fills them from ``like``)."""
        import orbax.checkpoint as ocp

        self.manager.save(int(step), args=ocp.args.StandardSave(tree), force=True)
        self.manager.wait_until_finished()

    def restore(self, step: int, like: Any) -> Any:
        """Checkpoint ``step`` with the structure, shapes, dtypes and shardings of ``like``."""
        import orbax.checkpoint as ocp

        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, like)
        return self.manager.restore(int(step), args=ocp.args.StandardRestore(abstract))

    def close(self) -> None:
        """Waits for pending writes and releases orbax's resources."""
        self.manager.close()
