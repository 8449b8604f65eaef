"""Orbax checkpoints of a training run: save, find the newest complete one, restore.

A run's checkpoints live in ``<directory>/<step>/`` (orbax ``CheckpointManager``, synchronous
``StandardSave``), so a process killed at any point leaves the earlier checkpoints intact. A
step folder without orbax's ``_CHECKPOINT_METADATA`` marker and its item's ``default/_METADATA``
(a save killed before it finished) is *incomplete*: :meth:`Checkpointer.latest_step` skips it
with a warning naming it, and removes it when asked (a run about to save that step again).

Restoring never casts silently: every leaf of the template must have the shape and dtype that
were saved (int32 ``16777217`` through a float32 template, or float32 ``1 + 2**-10`` through a
bfloat16 one, would come back changed). A difference raises
:class:`~fidia_jax.errors.CheckpointError` naming the leaf; ``restore(..., allow_cast=True)``
asks for the cast explicitly (shapes must still agree).
"""

from __future__ import annotations

import os
import pathlib
import shutil
import warnings
from typing import Any

import jax
import numpy as np

from fidia_jax.errors import CheckpointError

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

    def restore(self, step: int, like: Any, *, allow_cast: bool = False) -> Any:
        """Checkpoint ``step`` with the structure, shapes, dtypes and shardings of ``like``.

        Args:
          step: the checkpoint step.
          like: a template pytree (arrays or ``jax.ShapeDtypeStruct``); ``None`` leaves are
            filled from it.
          allow_cast: cast saved leaves whose dtype differs from the template's to the
            template's dtype (for example float32 weights into a bfloat16 model). Off by
            default: a dtype that differs is then an error.

        Returns:
          The restored pytree.

        Raises:
          CheckpointError: the saved tree has leaves the template lacks or the reverse (a
            model with more or fewer layers; the message lists the differing leaf paths), a
            leaf's saved shape differs from the template's, or (without ``allow_cast``) its
            saved dtype does; the message names the leaf path (``a/b/0``), the saved dtype and
            shape and the template's.
        """
        import orbax.checkpoint as ocp

        self._check_template(int(step), like, allow_cast=allow_cast)
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, like)
        return self.manager.restore(int(step), args=ocp.args.StandardRestore(abstract))

    def _saved_tree(self, step: int) -> Any:
        """The saved tree's metadata (leaves with ``shape`` and ``dtype``), or ``None``."""
        import orbax.checkpoint as ocp

        try:
            meta = self.manager.item_metadata(step)
            if meta is None:  # a manager that has not saved this item yet knows no handler
                meta = ocp.StandardCheckpointer().metadata(self.directory / str(step) / "default")
                meta = getattr(meta, "item_metadata", meta)
        except Exception:  # noqa: BLE001 - unreadable metadata: orbax's own restore decides
            return None
        meta = getattr(meta, "tree", meta)
        return meta if meta else None

    def _check_template(self, step: int, like: Any, *, allow_cast: bool) -> None:
        """Compares ``like`` leaf by leaf with the saved metadata (leaves matched by path)."""
        meta = self._saved_tree(step)
        if meta is None:
            return  # no metadata to compare: orbax's own restore decides
        saved_leaves = jax.tree_util.tree_flatten_with_path(meta)[0]
        saved = {
            _path_key(p): leaf
            for p, leaf in saved_leaves
            if hasattr(leaf, "shape") and hasattr(leaf, "dtype")
        }
        template = jax.tree_util.tree_flatten_with_path(like)[0]
        only_saved = sorted(
            {_path_key(p) for p, _ in saved_leaves} - {_path_key(p) for p, _ in template}
        )
        only_template = sorted(
            {_path_key(p) for p, _ in template} - {_path_key(p) for p, _ in saved_leaves}
        )
        if only_saved or only_template:  # another model size or layout: named, leaf by leaf

            def some(keys: list[tuple[str, ...]]) -> str:
                shown = ", ".join("'" + "/".join(k) + "'" for k in keys[:6])
                return shown + (f" and {len(keys) - 6} more" if len(keys) > 6 else "")

            parts = []
            if only_template:
                parts.append(
                    f"{len(only_template)} leaves only in the template ({some(only_template)})"
                )
            if only_saved:
                parts.append(f"{len(only_saved)} only in the checkpoint ({some(only_saved)})")
            raise CheckpointError(
                f"{self.directory / str(step)}: the saved tree does not match the template: "
                + "; ".join(parts)
                + " (a model of another size or layout? use another workdir or start afresh)"
            )
        for path, leaf in template:
            key = _path_key(path)
            if key not in saved:
                continue
            m = saved[key]
            shape = tuple(np.shape(leaf)) if not hasattr(leaf, "shape") else tuple(leaf.shape)
            dtype = np.dtype(leaf.dtype) if hasattr(leaf, "dtype") else np.asarray(leaf).dtype
            s_shape, s_dtype = tuple(m.shape), np.dtype(m.dtype)
            what = None
            if shape != s_shape:
                what = "shape"
            elif dtype != s_dtype and not allow_cast:
                what = "dtype"
            if what is not None:
                hint = (
                    "; pass allow_cast=True to cast it to the template's dtype"
                    if what == "dtype"
                    else ""
                )
                raise CheckpointError(
                    f"{self.directory / str(step)}: leaf '{'/'.join(key)}' was saved as "
                    f"{s_dtype}{list(s_shape)} but the template has {dtype}{list(shape)} "
                    f"(a {what} mismatch{hint})"
                )

    def close(self) -> None:
        """Waits for pending writes and releases orbax's resources."""
        self.manager.close()


def _path_key(path) -> tuple[str, ...]:
    """A pytree key path as strings (dict keys, sequence indices, attribute names alike), so
    that a NamedTuple field and the dict entry orbax saved for it match."""
    out = []
    for k in path:
        for attr in ("key", "idx", "name"):
            if hasattr(k, attr):
                out.append(str(getattr(k, attr)))
                break
        else:
            out.append(str(k))
    return tuple(out)
