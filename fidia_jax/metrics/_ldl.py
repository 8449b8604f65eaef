"""The six standard label-distribution-learning metrics and the divisiveness error.

Each metric compares target rows ``u`` with predicted rows ``v`` (``(N, c)`` label
distributions) and returns the mean over rows (``per_sample=True``: the ``(N,)`` values):

========================  =================================================  ==========
metric                    per row                                            better
========================  =================================================  ==========
:func:`chebyshev`         ``max_j |u_j - v_j|``                              lower
:func:`clark`             ``sqrt(sum_j (u_j - v_j)^2 / (u_j + v_j)^2)``       lower
:func:`canberra`          ``sum_j |u_j - v_j| / (u_j + v_j)``                 lower
:func:`ldl_kl_divergence` ``sum_j u_j log(u_j / v_j)``                        lower
:func:`cosine`            ``u . v / (|u| |v|)``                              higher
:func:`intersection`      ``sum_j min(u_j, v_j)``                            higher
:func:`divisiveness_error` ``|min(u . pos, u . neg) - min(v . pos, v . neg)|`` lower
========================  =================================================  ==========

Zeros: Clark, Canberra and KL clip both rows to ``[eps, 1]`` first (``eps`` the float64 machine
epsilon, as PyLDL does), so a ``0/0`` term of Clark/Canberra counts ``0`` and a ``0 log 0`` KL
term counts ``0``; a target mass on a label the prediction gives exactly ``0`` (KL undefined,
``+inf``) counts ``u_j log(u_j / eps)`` (finite, about ``36 u_j``), PyLDL's convention. Pass
``eps=0`` for the textbook conventions (``0/0 -> 0``, ``0 log 0 -> 0``, ``u log(u/0) -> inf``).

Inputs are checked when concrete: a row that is all zero (cosine and the divisiveness
are undefined, no distribution), a NaN or infinity, a negative entry, or a row whose sum is
more than ``ROW_SUM_ATOL = 1e-3`` from 1 (no silent renormalisation) raises ``ValueError``
naming the first offending row. Under ``jit`` they cannot be inspected; results then follow the
formulas (NaN propagates).

Source: the definitions of Geng, "Label Distribution Learning", IEEE TKDE 2016, as implemented
in ``pyldl.metrics`` (``python-ldl`` 0.1.2, MIT), which these functions match to 1e-6
(``tests/metrics/test_ldl_metrics.py``); the divisiveness error is that of Lu, Wu, Li, Jia,
"Divisiveness-consistent label distribution learning", ICML 2026 (authors' code,
``pyldl.metrics.divisiveness_error``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from fidia_jax import _checks

__all__ = [
    "LDL_METRICS",
    "LDL_METRICS_HIGHER_BETTER",
    "canberra",
    "chebyshev",
    "clark",
    "cosine",
    "divisiveness_error",
    "intersection",
    "ldl_kl_divergence",
    "ldl_metrics",
]

#: Clipping floor of Clark, Canberra and KL (PyLDL's ``EPS``, float64 machine epsilon).
_EPS = float(np.finfo(np.float64).eps)
#: How far from 1 a row of a label distribution may sum (float32 rounding passes, 1.5 fails).
ROW_SUM_ATOL = 1e-3
#: The six standard metrics, in the usual table order.
LDL_METRICS = ("chebyshev", "clark", "canberra", "kl_divergence", "cosine", "intersection")
#: The metrics where larger is better (the rest: smaller is better).
LDL_METRICS_HIGHER_BETTER = ("cosine", "intersection")


def _pair(u, v, where: str) -> tuple[jax.Array, jax.Array]:
    u = jnp.asarray(u)
    v = jnp.asarray(v)
    if u.ndim == 1:
        u = u[None, :]
    if v.ndim == 1:
        v = v[None, :]
    _checks.assert_rank(u, 2, "d_true", where=where, detail="(N, c) label distributions")
    if u.shape != v.shape:
        raise ValueError(f"{where}: d_true shape {u.shape} != d_pred shape {v.shape}")
    if u.shape[0] < 1 or u.shape[1] < 1:
        raise ValueError(f"{where}: need at least one row and one label, got shape {u.shape}")
    dtype = jnp.result_type(u.dtype, v.dtype, jnp.float32)
    u, v = u.astype(dtype), v.astype(dtype)
    if _checks.is_concrete(u, v):
        for arr, name in ((u, "d_true"), (v, "d_pred")):
            a = np.asarray(arr)
            bad = ~np.all(np.isfinite(a), axis=1)
            if bad.any():
                raise ValueError(
                    f"{where}: {name} has NaN or infinite values "
                    f"(first in row {int(np.argmax(bad))})"
                )
            neg = np.any(a < 0, axis=1)
            if neg.any():
                raise ValueError(
                    f"{where}: {name} has negative entries (first in row {int(np.argmax(neg))})"
                )
            zero = np.all(a == 0, axis=1)
            if zero.any():
                raise ValueError(
                    f"{where}: {name} row {int(np.argmax(zero))} is all zero: "
                    "not a label distribution (the metric is undefined there)"
                )
            sums = a.sum(axis=1, dtype=np.float64)
            off = np.abs(sums - 1.0) > ROW_SUM_ATOL
            if off.any():
                i = int(np.argmax(off))
                raise ValueError(
                    f"{where}: {name} row {i} sums to {sums[i]:.6g}, not 1 (|sum - 1| > "
                    f"{ROW_SUM_ATOL:g}): not a label distribution; normalise the rows first"
                )
    return u, v


@jax.jit
def _chebyshev(u, v):
    return jnp.max(jnp.abs(u - v), axis=1)


@jax.jit
def _clark(u, v, eps):
    u, v = jnp.clip(u, eps, 1.0), jnp.clip(v, eps, 1.0)
    s = u + v
    ratio = jnp.where(s > 0, jnp.square(u - v) / jnp.where(s > 0, jnp.square(s), 1.0), 0.0)
    return jnp.sqrt(jnp.sum(ratio, axis=1))


@jax.jit
def _canberra(u, v, eps):
    u, v = jnp.clip(u, eps, 1.0), jnp.clip(v, eps, 1.0)
    s = u + v
    ratio = jnp.where(s > 0, jnp.abs(u - v) / jnp.where(s > 0, s, 1.0), 0.0)
    return jnp.sum(ratio, axis=1)


@jax.jit
def _kl(u, v, eps):
    u, v = jnp.clip(u, eps, 1.0), jnp.clip(v, eps, 1.0)
    safe_u = jnp.where(u > 0, u, 1.0)
    term = jnp.where(u > 0, u * (jnp.log(safe_u) - jnp.log(v)), 0.0)
    return jnp.sum(term, axis=1)


@jax.jit
def _cosine(u, v):
    return jnp.sum(u * v, axis=1) / (jnp.linalg.norm(u, axis=1) * jnp.linalg.norm(v, axis=1))


@jax.jit
def _intersection(u, v):
    return jnp.sum(jnp.minimum(u, v), axis=1)


def _reduce(x, per_sample: bool):
    return x if per_sample else jnp.mean(x)


def chebyshev(d_true, d_pred, *, per_sample: bool = False) -> jax.Array:
    """Chebyshev distance ``max_j |u_j - v_j|`` (lower is better).

    Args:
      d_true, d_pred: ``(N, c)`` (or ``(c,)``) label distributions.
      per_sample: return the ``(N,)`` values instead of their mean.

    Raises:
      ValueError: shapes differ, a NaN/inf, a negative entry or an all-zero row.
    """
    u, v = _pair(d_true, d_pred, "chebyshev")
    return _reduce(_chebyshev(u, v), per_sample)


def clark(d_true, d_pred, *, per_sample: bool = False, eps: float = _EPS) -> jax.Array:
    """Clark distance ``sqrt(sum_j (u_j - v_j)^2 / (u_j + v_j)^2)`` (lower is better).

    Both rows are clipped to ``[eps, 1]`` (a ``0/0`` term counts 0); ``eps=0`` uses
    ``0/0 -> 0`` exactly.

    Raises:
      ValueError: as :func:`chebyshev`.
    """
    u, v = _pair(d_true, d_pred, "clark")
    return _reduce(_clark(u, v, eps), per_sample)


def canberra(d_true, d_pred, *, per_sample: bool = False, eps: float = _EPS) -> jax.Array:
    """Canberra distance ``sum_j |u_j - v_j| / (u_j + v_j)`` (lower is better).

    Zeros as :func:`clark`.

    Raises:
      ValueError: as :func:`chebyshev`.
    """
    u, v = _pair(d_true, d_pred, "canberra")
    return _reduce(_canberra(u, v, eps), per_sample)


def ldl_kl_divergence(d_true, d_pred, *, per_sample: bool = False, eps: float = _EPS) -> jax.Array:
    """Kullback-Leibler divergence ``sum_j u_j log(u_j / v_j)`` of target from prediction.

    Both rows clipped to ``[eps, 1]`` (PyLDL's convention); with ``eps=0``: ``0 log 0 = 0``
    and ``u_j > 0 = v_j`` gives ``+inf``.

    Raises:
      ValueError: as :func:`chebyshev`.
    """
    u, v = _pair(d_true, d_pred, "ldl_kl_divergence")
    return _reduce(_kl(u, v, eps), per_sample)


def cosine(d_true, d_pred, *, per_sample: bool = False) -> jax.Array:
    """Cosine similarity ``u . v / (|u| |v|)`` (higher is better).

    Raises:
      ValueError: as :func:`chebyshev` (an all-zero row has no direction).
    """
    u, v = _pair(d_true, d_pred, "cosine")
    return _reduce(_cosine(u, v), per_sample)


def intersection(d_true, d_pred, *, per_sample: bool = False) -> jax.Array:
    """Intersection similarity ``sum_j min(u_j, v_j)`` (higher is better).

    Equals PyLDL's ``1 - 0.5 sum_j |u_j - v_j|`` when both rows sum to 1 (its form differs for
    rows that do not).

    Raises:
      ValueError: as :func:`chebyshev`.
    """
    u, v = _pair(d_true, d_pred, "intersection")
    return _reduce(_intersection(u, v), per_sample)


def divisiveness_error(d_true, d_pred, pos, neg, *, per_sample: bool = False) -> jax.Array:
    """Divisiveness error ``|psi(u) - psi(v)|``, ``psi(d) = min(d . pos, d . neg)`` (lower is
    better).

    Args:
      d_true, d_pred: ``(N, c)`` label distributions.
      pos, neg: ``(c,)`` polarity weights of the dataset
        (for example the presets :data:`fidia_jax.projects.ldl.data.LDL_POLARITY`).
      per_sample: return the ``(N,)`` values.

    Raises:
      ValueError: as :func:`chebyshev`, or ``pos`` / ``neg`` not of shape ``(c,)``.

    Source: authors' code, ``pyldl.metrics.divisiveness_error``.
    """
    u, v = _pair(d_true, d_pred, "divisiveness_error")
    c = u.shape[1]
    pos = jnp.asarray(pos, u.dtype)
    neg = jnp.asarray(neg, u.dtype)
    for arr, name in ((pos, "pos"), (neg, "neg")):
        if arr.shape != (c,):
            raise ValueError(f"divisiveness_error: {name} must have shape ({c},), got {arr.shape}")
    psi_u = jnp.minimum(u @ pos, u @ neg)
    psi_v = jnp.minimum(v @ pos, v @ neg)
    return _reduce(jnp.abs(psi_u - psi_v), per_sample)


def ldl_metrics(d_true, d_pred, pos=None, neg=None) -> dict[str, float]:
    """All six standard metrics (keys :data:`LDL_METRICS`), plus ``"divisiveness_error"`` when
    ``pos`` and ``neg`` are given, as Python floats (means over rows).

    Raises:
      ValueError: as the metrics do.
    """
    out = {
        "chebyshev": chebyshev(d_true, d_pred),
        "clark": clark(d_true, d_pred),
        "canberra": canberra(d_true, d_pred),
        "kl_divergence": ldl_kl_divergence(d_true, d_pred),
        "cosine": cosine(d_true, d_pred),
        "intersection": intersection(d_true, d_pred),
    }
    if (pos is None) != (neg is None):
        raise ValueError("ldl_metrics: give both pos and neg, or neither")
    if pos is not None:
        out["divisiveness_error"] = divisiveness_error(d_true, d_pred, pos, neg)
    return {name: float(value) for name, value in out.items()}
