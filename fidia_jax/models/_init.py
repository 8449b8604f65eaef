"""Building an NNX module with host-drawn weights, and counting its parameters.

On a CPU, flax's initialisers compile one XLA program per parameter shape (seconds per layer for
a small network); drawing the values with NumPy into the module's abstract structure
(``nnx.eval_shape``) takes milliseconds. Each method keeps its own distribution rules (its
``draw`` function); the traversal, the RNG stream and the assembly are here, once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

__all__ = ["abstract_module", "count_params", "init_without_compile"]

M = TypeVar("M", bound=nnx.Module)

#: ``draw(names, shape, rng) -> array``: the value of the leaf at ``names`` (the attribute path,
#: e.g. ``("blocks", "0", "attn", "kernel")``; ``names[-1]`` is the variable's name).
Draw = Callable[[tuple[str, ...], tuple[int, ...], np.random.Generator], Any]


def _names(path) -> tuple[str, ...]:
    names = (str(getattr(k, "key", getattr(k, "name", k))) for k in path)
    return tuple(n for n in names if n != "value")


def init_without_compile(ctor: Callable[[], M], draw: Draw, *, seed: int) -> M:
    """Builds ``ctor()`` with every leaf drawn on the host by ``draw``: no XLA compilation.

    The module is traced with ``nnx.eval_shape`` (shapes only); the leaves are then visited in
    the pytree order of its state (sorted attribute paths), each filled with
    ``draw(names, shape, rng)`` cast to the leaf's dtype, where ``rng`` is one
    ``numpy.random.default_rng(seed)`` shared by all leaves (so the values depend on the order).

    Args:
      ctor: ``() -> module`` (e.g. ``lambda: MLP(4, (8,), 1, rngs=nnx.Rngs(0))``).
      draw: the value of one leaf (see :data:`Draw`); raise ``ValueError`` for a leaf it has no
        rule for.
      seed: the NumPy seed.

    Returns:
      The module.

    Raises:
      ValueError: from ``draw``; or a value whose shape is not the leaf's.

    Example:
      >>> from flax import nnx
      >>> m = init_without_compile(lambda: nnx.Linear(3, 2, rngs=nnx.Rngs(0)),
      ...                          lambda names, shape, rng: np.full(shape, len(names[-1])), seed=0)
      >>> m.kernel[...].tolist(), m.bias[...].tolist()
      ([[6.0, 6.0], [6.0, 6.0], [6.0, 6.0]], [4.0, 4.0])
    """
    graphdef, state = nnx.split(nnx.eval_shape(ctor))
    rng = np.random.default_rng(seed)

    def fill(path, leaf):
        names = _names(path)
        value = np.asarray(draw(names, tuple(leaf.shape), rng))
        if value.shape != tuple(leaf.shape):
            raise ValueError(
                f"init_without_compile: the value drawn for {'.'.join(names)} has shape "
                f"{value.shape}, the leaf has {tuple(leaf.shape)}"
            )
        return jnp.asarray(value, leaf.dtype)

    return nnx.merge(graphdef, jax.tree_util.tree_map_with_path(fill, state))


class _ShapeOnlyRngs:
    """Stand-in for ``nnx.Rngs`` under ``nnx.eval_shape``: every stream (``rngs.params()``,
    ``rngs()``) returns the same key and keeps no state."""

    def __call__(self):
        return jax.random.key(0)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self


def abstract_module(ctor: Callable[[Any], M]) -> M:
    """The abstract module ``nnx.eval_shape(lambda: ctor(rngs))``: shapes and dtypes, no values.

    For loaders that then copy every value from a checkpoint. ``rngs`` is a stateless stand-in
    for ``nnx.Rngs`` whose streams all return one key: ``nnx.Rngs`` updates a traced counter
    per parameter, which costs about 1.4 s for ProteinMPNN's 118 parameters on this CPU (the
    abstract build then takes 0.2 s). A module that keeps its ``rngs`` (dropout) or a Flax that
    wants a real ``nnx.Rngs`` (``TypeError`` / ``AttributeError``) is built with
    ``nnx.Rngs(0)`` instead, so the result is the same either way.

    Args:
      ctor: ``rngs -> module``.

    Returns:
      The module, its variables ``jax.ShapeDtypeStruct``.
    """
    try:
        module = nnx.eval_shape(lambda: ctor(_ShapeOnlyRngs()))
    except (TypeError, AttributeError):
        return nnx.eval_shape(lambda: ctor(nnx.Rngs(0)))
    kept = any(
        isinstance(v, _ShapeOnlyRngs)
        for node in (n for _, n in nnx.iter_graph(module) if isinstance(n, nnx.Module))
        for v in vars(node).values()
    )
    return nnx.eval_shape(lambda: ctor(nnx.Rngs(0))) if kept else module


def count_params(module: nnx.Module) -> int:
    """Number of trainable parameters (elements of ``nnx.Param`` leaves) of a module."""
    return int(sum(np.prod(p.shape) for p in jax.tree.leaves(nnx.state(module, nnx.Param))))
