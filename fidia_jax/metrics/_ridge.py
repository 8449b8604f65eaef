"""Closed-form ridge regression in float64: the linear probe of representation analyses.

It lives in :mod:`fidia_jax.metrics` with :func:`effective_rank` and the clustering utilities:
like them it is a deterministic, closed-form function of arrays that *measures* what a
representation encodes (probe R² per layer, probe directions), not a network trained by gradient
descent; it is computed on the host in numpy float64 so that the result does not depend on
``jax_enable_x64`` (the probes are small: ``N`` tokens by ``C`` features).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["RidgeFit", "ridge_fit", "ridge_predict"]


class RidgeFit(NamedTuple):
    """A fitted ridge probe.

    Attributes:
      coef: ``(D,)`` float64 weights (``(D, K)`` for ``K`` targets).
      intercept: ``()`` float64 (``(K,)``); ``0`` when fitted without an intercept.
      alpha: the penalty used.
    """

    coef: np.ndarray
    intercept: np.ndarray
    alpha: float


def _as_2d(x, where):
    x = np.asarray(x, np.float64)
    if x.ndim != 2:
        raise ValueError(f"{where}: x must be 2-D (N, D), got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{where}: x has non-finite entries")
    return x


def ridge_fit(x, y, *, alpha: float = 1.0, fit_intercept: bool = True) -> RidgeFit:
    """Minimises ``||y - x w - b||² + alpha ||w||²`` exactly (the intercept is not penalised).

    Solved through the SVD of the centred design, ``w = V diag(s / (s² + alpha)) Uᵀ y_c``, which
    is stable for ``D > N`` and for collinear features; ``alpha = 0`` gives the minimum-norm
    least-squares solution. The objective of scikit-learn's ``Ridge(alpha, fit_intercept)``.

    Args:
      x: ``(N, D)`` features (e.g. hidden states), any real dtype, cast to float64.
      y: ``(N,)`` or ``(N, K)`` targets.
      alpha: penalty ``>= 0``.
      fit_intercept: centre ``x`` and ``y`` and fit an unpenalised intercept.

    Returns:
      :class:`RidgeFit` in float64.

    Raises:
      ValueError: ``x`` not 2-D or ``y`` not ``(N,)``/``(N, K)``; fewer than 2 examples (a probe
        fitted on one example says nothing); non-finite values; ``alpha < 0``.
    """
    where = "ridge_fit"
    x = _as_2d(x, where)
    y = np.asarray(y, np.float64)
    n = x.shape[0]
    if y.ndim not in (1, 2) or y.shape[0] != n:
        raise ValueError(
            f"{where}: y must be ({n},) or ({n}, K) to match x {x.shape}, got {y.shape}"
        )
    if n < 2:
        raise ValueError(f"{where}: a probe needs at least 2 examples, got {n}")
    if not np.all(np.isfinite(y)):
        raise ValueError(f"{where}: y has non-finite entries")
    if not (np.isfinite(alpha) and alpha >= 0):
        raise ValueError(f"{where}: alpha must be a finite number >= 0, got {alpha}")
    if fit_intercept:
        x_mean, y_mean = x.mean(0), y.mean(0)
        xc, yc = x - x_mean, y - y_mean
    else:
        xc, yc = x, y
    u, s, vt = np.linalg.svd(xc, full_matrices=False)
    tiny = s.max(initial=0.0) * max(x.shape) * np.finfo(np.float64).eps
    keep = s > tiny
    d = np.where(keep, s / np.where(keep, s * s + alpha, 1.0), 0.0)
    uty = u.T @ yc
    coef = vt.T @ (d[:, None] * uty if uty.ndim == 2 else d * uty)
    intercept = (y_mean - x_mean @ coef) if fit_intercept else np.zeros(y.shape[1:], np.float64)
    return RidgeFit(coef, np.asarray(intercept, np.float64), float(alpha))


def ridge_predict(fit: RidgeFit, x) -> np.ndarray:
    """``x @ coef + intercept`` in float64: ``(N,)`` (or ``(N, K)``).

    Raises:
      ValueError: ``x`` not ``(N, D)`` with the fitted ``D``.
    """
    x = _as_2d(x, "ridge_predict")
    if x.shape[1] != fit.coef.shape[0]:
        raise ValueError(
            f"ridge_predict: x has {x.shape[1]} features, the probe was fitted on {fit.coef.shape[0]}"
        )
    return x @ fit.coef + fit.intercept
