"""Hierarchical Gaussian mixtures (classes = leaves of a tree) and class-incremental task splits.

:func:`hierarchical_gaussian_mixture` tests the HypCL claim that hyperbolic geometry helps more
as the class tree deepens: the means of a complete ``branching``-ary tree of depth ``depth`` are
drawn top-down (``mu_child = mu_parent + decay^level * N(0, I_D)``), so siblings deep in the tree
are close and cousins far; samples are ``mu_leaf + noise * N(0, I_D)``. Our construction (the
paper's abstract names no synthetic task).

:func:`class_incremental_split` cuts a label order into tasks of ``classes_per_task`` classes.
"""

from __future__ import annotations

import numpy as np

from fidia_jax.errors import DataError

__all__ = ["class_incremental_split", "hierarchical_gaussian_mixture"]


def hierarchical_gaussian_mixture(
    seed: int,
    depth: int,
    *,
    branching: int = 2,
    dim: int = 16,
    n_per_class: int = 50,
    decay: float = 0.5,
    noise: float = 0.3,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Samples a Gaussian mixture whose class means are the leaves of a random tree.

    Args:
      seed: numpy ``default_rng`` seed.
      depth: tree depth ``>= 1``; there are ``branching**depth`` classes.
      branching: children per node ``>= 2``.
      dim: feature dimension ``D >= 1``.
      n_per_class: samples per class ``>= 1``.
      decay: scale of level ``l``'s offsets is ``decay**l`` (level 0: root's children), ``> 0``.
      noise: within-class standard deviation ``>= 0``.

    Returns:
      ``(x, y, ancestors)``: ``x`` ``(K * n_per_class, D)`` float32, ``y`` ``(K * n,)`` int32
      leaf labels ``0..K-1`` (grouped by class), ``ancestors`` ``(K, depth)`` int32, the node
      index at each level of every leaf's path (level ``depth - 1`` is the leaf itself).

    Raises:
      DataError: a parameter out of range.
    """
    if depth < 1 or branching < 2 or dim < 1 or n_per_class < 1 or decay <= 0 or noise < 0:
        raise DataError(
            "hierarchical_gaussian_mixture: need depth >= 1, branching >= 2, dim >= 1, "
            f"n_per_class >= 1, decay > 0, noise >= 0; got depth={depth}, branching={branching}, "
            f"dim={dim}, n_per_class={n_per_class}, decay={decay}, noise={noise}"
        )
    rng = np.random.default_rng(seed)
    means = np.zeros((1, dim))
    for level in range(depth):
        offsets = rng.standard_normal((means.shape[0], branching, dim)) * decay**level
        means = (means[:, None, :] + offsets).reshape(-1, dim)
    k = means.shape[0]
    y = np.repeat(np.arange(k), n_per_class)
    x = means[y] + noise * rng.standard_normal((y.size, dim))
    leaves = np.arange(k)
    ancestors = np.stack(
        [leaves // branching ** (depth - 1 - lv) for lv in range(depth)], axis=1
    ).astype(np.int32)
    return x.astype(np.float32), y.astype(np.int32), ancestors


def class_incremental_split(order, classes_per_task: int) -> list[tuple[int, ...]]:
    """``[(c0, c1), (c2, c3), ...]``: consecutive groups of ``classes_per_task`` labels.

    Raises:
      DataError: repeated labels, or ``len(order)`` not a multiple of ``classes_per_task``.
    """
    order = [int(c) for c in order]
    if len(set(order)) != len(order):
        raise DataError(f"class order repeats a label: {order}")
    if classes_per_task < 1 or len(order) % classes_per_task:
        raise DataError(
            f"{len(order)} classes cannot be cut into tasks of {classes_per_task} classes"
        )
    return [tuple(order[i : i + classes_per_task]) for i in range(0, len(order), classes_per_task)]
