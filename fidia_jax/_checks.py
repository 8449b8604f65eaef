"""Argument checks shared by the library: rank, dtype, shape, choice (as rlax's ``base.py``).

Every helper raises :class:`ValueError` (the value checks :func:`assert_finite` and
:func:`assert_value_range` its subclass :class:`~fidia_jax.errors.DataError`) whose message names the argument and, when ``where`` is
given, the public function that was called, e.g.
``max_at_k: rewards_n must have rank 1 (one stream of n samples; vmap to batch), got shape (2, 3)``.
They read only static information (shapes, dtypes, Python values), so they work unchanged on
traced arrays inside ``jit`` / ``vmap`` and cost nothing at run time.

This module is private and a leaf: any package may import it (``from fidia_jax import _checks``).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from fidia_jax.errors import DataError

# ``jax.core.Tracer`` is the documented base class of traced values (jit, vmap, grad, scan).
_TRACER = getattr(jax.core, "Tracer", None)
if _TRACER is None:  # pragma: no cover - later jax versions may move it
    from jax._src.core import Tracer as _TRACER

__all__ = [
    "assert_attention_dims",
    "assert_finite",
    "assert_floating",
    "assert_in",
    "assert_value_range",
    "assert_lengths",
    "assert_min_length",
    "assert_rank",
    "assert_shape",
    "assert_type",
    "is_concrete",
]


def _shape(x: Any) -> tuple[int, ...]:
    """Shape of an array, tracer, scalar or nested list (read, never converted)."""
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def _prefix(where: str) -> str:
    return f"{where}: " if where else ""


def _suffix(detail: str) -> str:
    return f" ({detail})" if detail else ""


def assert_rank(
    x: Any, rank: int | Collection[int], name: str, *, where: str = "", detail: str = ""
) -> None:
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
            f"{_prefix(where)}{name} must have rank {want}{_suffix(detail)}, got shape {_shape(x)}."
        )


def _dtype_name(kind: Any) -> str:
    if kind in (bool, jnp.bool_, np.bool_):
        return "bool"
    return getattr(kind, "__name__", str(kind))


def assert_type(
    x: Any, kinds: Sequence[Any], name: str, *, where: str = "", detail: str = ""
) -> None:
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


def assert_min_length(
    x: Any, minimum: int, name: str, *, where: str = "", what: str = "entries"
) -> None:
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


def assert_lengths(lengths: Any, batch: int, maximum: int, name: str, *, where: str = "") -> None:
    """Checks per-row lengths: shape ``(batch,)``, integer dtype, values in ``[0, maximum]``.

    Shape and dtype are always checked. The values are checked only when ``lengths`` is concrete
    (a NumPy/JAX array or list, not a tracer inside ``jit``/``vmap``); a traced value passes.

    Raises:
      ValueError: ``{where}: {name} must ...``, naming the first offending row and value.
    """
    assert_shape(lengths, (batch,), name, where=where)
    if not is_concrete(lengths):
        assert_type(lengths, (jnp.integer,), name, where=where)
        return
    arr = np.asarray(lengths)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{_prefix(where)}{name} must be integer, got dtype {arr.dtype}.")
    bad = np.flatnonzero((arr < 0) | (arr > maximum))
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"{_prefix(where)}{name} must lie in [0, {maximum}] (the number of keys), "
            f"got {int(arr[i])} in row {i}."
        )


def assert_finite(x: Any, name: str, *, where: str = "") -> None:
    """Raises :class:`~fidia_jax.errors.DataError` if a concrete ``x`` holds NaN or inf.

    A host-side check for the input boundary of a method (drivers, data classes, fit / predict
    functions); a traced ``x`` (inside ``jit``) passes unchecked, so call it before tracing.

    Raises:
      DataError: ``{where}: {name} holds {count} NaN/inf value(s), first at index {index}``.
    """
    if not is_concrete(x):
        return
    arr = np.asarray(x)
    if not np.issubdtype(arr.dtype, np.inexact):
        return
    bad = ~np.isfinite(arr)
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        raise DataError(
            f"{_prefix(where)}{name} holds {int(bad.sum())} NaN/inf value(s), first at index "
            f"{first if len(first) != 1 else first[0]}."
        )


def assert_value_range(
    x: Any, lo: float, hi: float, name: str, *, where: str = "", detail: str = ""
) -> None:
    """Raises :class:`~fidia_jax.errors.DataError` unless every value of a concrete ``x`` lies in
    ``[lo, hi]`` (NaN is out of range). A traced ``x`` passes unchecked (as :func:`assert_finite`).

    Raises:
      DataError: ``{where}: {name} must lie in [lo, hi] ({detail}), got values in [min, max]``.
    """
    if not is_concrete(x):
        return
    arr = np.asarray(x)
    if arr.size == 0:
        return
    ok = (arr >= lo) & (arr <= hi)
    if not ok.all():
        vals = arr.astype(np.float64)
        finite = vals[~np.isnan(vals)]
        shown = f"values in [{finite.min():g}, {finite.max():g}]" if finite.size else "only NaN"
        if finite.size and finite.size < vals.size:
            shown += " and NaN"
        raise DataError(
            f"{_prefix(where)}{name} must lie in [{lo:g}, {hi:g}]{_suffix(detail)}, got {shown}."
        )


def is_concrete(*xs: Any) -> bool:
    """Whether every argument holds concrete values (no ``jit`` / ``vmap`` / ``grad`` tracer).

    Value checks (non-finite, non-binary, reducible chains) can raise only on concrete inputs;
    under a transformation the library falls back to a documented traced behaviour (a NaN
    result or the exclusion of a sample), since a traced value cannot be inspected.
    """
    return not any(isinstance(x, _TRACER) for x in jax.tree.leaves(xs))


def assert_attention_dims(
    q: Any, k: Any, *, heads_axis: int, where: str = "", equal_heads: bool = False, hint: str = ""
) -> None:
    """Checks that attention queries ``q`` and keys ``k`` agree, naming what differs.

    Batch is axis 0 and the head dim the last axis of both; the head axis is ``heads_axis`` of
    ``q`` and ``-2`` of ``k``.

    Args:
      heads_axis: the query head axis of ``q``.
      equal_heads: require ``Hq == Hkv`` (heads already repeated); otherwise ``Hq % Hkv == 0``.
      hint: appended to the head-count message.

    Raises:
      ValueError: ``{where}: batch sizes differ: ...``, ``head dims differ: ...``,
        ``query heads Hq != kv heads Hkv ...`` or ``query heads Hq must be a multiple of kv
        heads Hkv ...``.
    """
    qs, ks = _shape(q), _shape(k)
    if qs[0] != ks[0]:
        raise ValueError(
            f"{_prefix(where)}batch sizes differ: q {qs} has {qs[0]}, k {ks} has {ks[0]}."
        )
    if qs[-1] != ks[-1]:
        raise ValueError(
            f"{_prefix(where)}head dims differ: q {qs} has {qs[-1]}, k {ks} has {ks[-1]}."
        )
    hq, hkv = qs[heads_axis], ks[-2]
    if equal_heads and hq != hkv:
        raise ValueError(
            f"{_prefix(where)}query heads {hq} != kv heads {hkv} (q {qs}, k {ks})"
            f"{'; ' + hint if hint else ''}."
        )
    if hkv < 1 or hq % hkv:
        raise ValueError(
            f"{_prefix(where)}query heads {hq} must be a multiple of kv heads {hkv} "
            f"(q {qs}, k {ks})."
        )


def note_grid_edge(where: str, name: str, grid: Sequence[float], chosen: float) -> bool:
    """Says (a WARNING of the ``fidia_jax`` logger) when a value chosen by a search over
    ``grid`` is at the grid's smallest or largest value, where the best value may lie beyond
    the searched range; returns whether it is. A one-point grid is never "at the edge".

    Example:
      >>> note_grid_edge("ridge", "alpha", [0.1, 1.0, 10.0], 1.0)
      False
    """
    values = sorted({float(g) for g in grid})
    if len(values) < 2 or float(chosen) not in (values[0], values[-1]):
        return False
    import logging

    logging.getLogger("fidia_jax").warning(
        "%s: the selected %s = %g is at the edge of the searched grid [%g, %g]; the best "
        "value may lie beyond it (widen the grid)",
        where,
        name,
        float(chosen),
        values[0],
        values[-1],
    )
    return True
