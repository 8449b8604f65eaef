"""Regression and correlation metrics shared by the methods (pure ``jnp``, jit/vmap-safe)."""

from __future__ import annotations

import jax.numpy as jnp

__all__ = ["pearson_r", "r2_score", "rmse"]


def _pair(y_true, y_pred, name: str):
    y_true = jnp.asarray(y_true)
    y_pred = jnp.asarray(y_pred)
    if y_true.shape != y_pred.shape:
        raise ValueError(f"{name}: y_true shape {y_true.shape} != y_pred shape {y_pred.shape}")
    if y_true.ndim == 0 or y_true.shape[0] < 1:
        raise ValueError(f"{name}: need at least one sample along axis 0, got shape {y_true.shape}")
    dtype = jnp.result_type(y_true.dtype, y_pred.dtype, jnp.float32)
    return y_true.astype(dtype), y_pred.astype(dtype)


def rmse(y_true, y_pred, axis: int | None = None):
    """Root-mean-square error ``sqrt(mean((y_pred - y_true)^2))``.

    Args:
      y_true, y_pred: arrays of one shape (any rank >= 1), any real dtype.
      axis: reduce over this axis only (e.g. ``0`` gives one RMSE per output column); ``None``
        reduces over every element.

    Returns:
      float32 (or float64 for float64 input) scalar, or an array without ``axis``. A ``nan`` in
      either input gives ``nan`` (it is never skipped).

    Raises:
      ValueError: shapes differ, or there is no sample.
    """
    y_true, y_pred = _pair(y_true, y_pred, "rmse")
    return jnp.sqrt(jnp.mean(jnp.square(y_pred - y_true), axis=axis))


def pearson_r(x, y, axis: int | None = None):
    """Pearson correlation coefficient ``cov(x, y) / (std(x) std(y))``.

    ``axis=None`` pools every element into one pair of samples (HiST's "pooled PCC" over
    spots x genes); ``axis=0`` on ``(N, G)`` arrays gives one coefficient per column (HEST's
    per-gene PCC).

    Args:
      x, y: arrays of one shape, real dtype.
      axis: the sample axis, or ``None`` to pool all elements.

    Returns:
      The coefficient(s) in ``[-1, 1]``; ``nan`` where either input is constant along the axis
      (a correlation is undefined there; the caller decides whether to drop or report it).

    Raises:
      ValueError: shapes differ, or there is no sample.
    """
    x, y = _pair(x, y, "pearson_r")
    xc = x - jnp.mean(x, axis=axis, keepdims=True)
    yc = y - jnp.mean(y, axis=axis, keepdims=True)
    num = jnp.sum(xc * yc, axis=axis)
    den = jnp.sqrt(jnp.sum(xc * xc, axis=axis) * jnp.sum(yc * yc, axis=axis))
    return jnp.where(den > 0, num / jnp.where(den > 0, den, 1.0), jnp.nan)


def r2_score(y_true, y_pred, axis: int | None = None):
    """Coefficient of determination ``1 - SS_res / SS_tot`` (scikit-learn's ``r2_score``).

    ``axis=None`` pools every element (one mean over all of ``y_true``); ``axis=0`` gives one
    R² per column (scikit-learn's ``multioutput="raw_values"``).

    Returns:
      ``<= 1``; ``nan`` where ``y_true`` is constant along the axis (scikit-learn returns 0 or 1
      there by convention; we do not guess).

    Raises:
      ValueError: shapes differ, or there is no sample.
    """
    y_true, y_pred = _pair(y_true, y_pred, "r2_score")
    ss_res = jnp.sum(jnp.square(y_true - y_pred), axis=axis)
    ss_tot = jnp.sum(jnp.square(y_true - jnp.mean(y_true, axis=axis, keepdims=True)), axis=axis)
    return jnp.where(ss_tot > 0, 1.0 - ss_res / jnp.where(ss_tot > 0, ss_tot, 1.0), jnp.nan)
