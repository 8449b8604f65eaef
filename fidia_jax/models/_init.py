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

__all__ = ["count_params", "init_without_compile"]

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


def count_params(module: nnx.Module) -> int:
    """Number of trainable parameters (elements of ``nnx.Param`` leaves) of a module."""
    return int(sum(np.prod(p.shape) for p in jax.tree.leaves(nnx.state(module, nnx.Param))))
