"""Argument checks shared by the library: rank, dtype, shape, choice (as rlax's ``base.py``).

Every helper raises :class:`ValueError` whose message names the argument and, when ``where`` is
given, the public function that was called, e.g.
``max_at_k: rewards_n must have rank 1 (one stream of n samples; vmap to batch), got shape (2, 3)``.
They read only static information (shapes, dtypes, Python values), so they work unchanged on
traced arrays inside ``jit`` / ``vmap`` and cost nothing at run time.

This module is private and a leaf: any package may import it (``from fidia_jax import _checks``).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np

__all__ = [
    "assert_floating",
    "assert_in",
    "assert_min_length",
    "assert_rank",
    "assert_shape",
    "assert_type",
]


def _shape(x: Any) -> tuple[int, ...]:
    """Shape of an array, tracer, scalar or nested list (read, never converted)."""
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def _prefix(where: str) -> str:
    return f"{where}: " if where else ""


def _suffix(detail: str) -> str:
    return f" ({detail})" if detail else ""


def assert_rank(x: Any, rank: int | Collection[int], name: str, *, where: str = "",
                detail: str = "") -> None:
    """Raises ``ValueError`` unless ``x`` (array, scalar or nested list) has rank ``rank``.

    Args:
      x: the value checked (only its shape is read).
      rank: the allowed rank, or a collection of allowed ranks.
      name: the argument's name, as the caller spells it.
      where: the public function checking it (message prefix).
      detail: a hint appended in parentheses after the expected rank.

    Raises:
      ValueError: ``{where}: {name} must have rank {rank} ({detail}), got shape {shape}``.
    """
    allowed = (rank,) if isinstance(rank, int) else tuple(rank)
    if len(_shape(x)) not in allowed:
        want = " or ".join(str(r) for r in allowed)
        raise ValueError(
            f"{_prefix(where)}{name} must have rank {want}{_suffix(detail)}, "
            f"got shape {_shape(x)}."
        )


def _dtype_name(kind: Any) -> str:
    if kind in (bool, jnp.bool_, np.bool_):
        return "bool"
    return getattr(kind, "__name__", str(kind))


def assert_type(x: Any, kinds: Sequence[Any], name: str, *, where: str = "",
                detail: str = "") -> None:
    """Raises ``ValueError`` unless ``x.dtype`` is a sub-dtype of one of ``kinds``.

    Args:
      x: an array (``jnp.result_type`` gives Python scalars their default dtype).
      kinds: dtypes or abstract kinds (``jnp.floating``, ``jnp.integer``, ``jnp.bool_``, ...).
      name, where, detail: as in :func:`assert_rank`.

    Raises:
      ValueError: ``{where}: {name} must be {kind} or {kind} ({detail}), got dtype {dtype}``.
    """
    dtype = x.dtype if hasattr(x, "dtype") else jnp.result_type(x)
    if not any(jnp.issubdtype(dtype, kind) for kind in kinds):
        want = " or ".join(_dtype_name(k) for k in kinds)
        raise ValueError(
            f"{_prefix(where)}{name} must be {want}{_suffix(detail)}, got dtype {dtype}."
        )


def assert_floating(x: Any, name: str, *, where: str = "") -> None:
    """:func:`assert_type` with ``kinds=(jnp.floating,)`` ("must be floating, got dtype int32")."""
    assert_type(x, (jnp.floating,), name, where=where)


def assert_shape(x: Any, shape: Sequence[int], name: str, *, where: str = "") -> None:
    """Raises ``ValueError`` unless ``jnp.shape(x) == tuple(shape)``.

    Raises:
      ValueError: ``{where}: {name} must have shape {shape}, got {actual}``.
    """
    shape = tuple(shape)
    if _shape(x) != shape:
        raise ValueError(f"{_prefix(where)}{name} must have shape {shape}, got {_shape(x)}.")


def assert_min_length(x: Any, minimum: int, name: str, *, where: str = "",
                      what: str = "entries") -> None:
    """Raises ``ValueError`` unless ``x`` has at least ``minimum`` entries along axis 0.

    Raises:
      ValueError: ``{where}: {name} needs n >= {minimum} {what}, got shape {shape}``.
    """
    shape = _shape(x)
    if not shape or shape[0] < minimum:
        raise ValueError(f"{_prefix(where)}{name} needs n >= {minimum} {what}, got shape {shape}.")


def assert_in(value: Any, options: Collection[Any], name: str, *, where: str = "") -> None:
    """Raises ``ValueError`` unless ``value in options`` (a static, Python-level choice).

    Raises:
      ValueError: ``{where}: {name} must be one of {options}, got {value!r}``.
    """
    if value not in options:
        raise ValueError(f"{_prefix(where)}{name} must be one of {tuple(options)}, got {value!r}.")
