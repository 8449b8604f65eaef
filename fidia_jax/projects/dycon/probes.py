"""Held-out linear-probe R² per layer, with a shuffled-label control (DyCon's probe analysis).

References:
  Tu et al., "DyCon: dynamic reasoning control via evolving difficulty modeling", ICML 2026,
  arXiv:2606.07108 (held-out probe R² about 0.8 for the log-normalised remaining length).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from fidia_jax.metrics import RidgeFit, r2_score, ridge_fit, ridge_predict

__all__ = ["LayerProbes", "layer_probe_r2"]


class LayerProbes(NamedTuple):
    """Output of :func:`layer_probe_r2`.

    Attributes:
      r2: ``(K,)`` float64 held-out R² of the probe fitted at each layer.
      r2_shuffled: ``(K,)`` float64 held-out R² (against the true targets) of the probe fitted
        on shuffled training targets: what a probe reads from nothing (about 0 or below).
      fits: the ``K`` :class:`fidia_jax.metrics.RidgeFit` on the true targets.
      best_layer: ``argmax(r2)``.
    """

    r2: np.ndarray
    r2_shuffled: np.ndarray
    fits: tuple[RidgeFit, ...]
    best_layer: int


def _r2(y, pred):
    return float(r2_score(y, pred))


def layer_probe_r2(features, targets, train, *, alpha: float = 1.0, seed: int = 0) -> LayerProbes:
    """Fits a ridge probe per layer on the ``train`` rows and scores R² on the others.

    Args:
      features: ``(N, K, C)`` hidden states (``K`` layers), any real dtype (float64 inside).
      targets: ``(N,)`` regression targets.
      train: ``(N,)`` bool, True for the fitting rows (split by example, not by row, when rows of
        one example are correlated).
      alpha: ridge penalty ``>= 0``.
      seed: permutation of the training targets for the shuffled control.

    Returns:
      :class:`LayerProbes`.

    Raises:
      ValueError: shapes that disagree; fewer than 2 training rows (a probe fitted on one
        example says nothing) or fewer than 2 held-out rows; non-finite values.
    """
    x = np.asarray(features, np.float64)
    y = np.asarray(targets, np.float64)
    train = np.asarray(train, bool)
    if x.ndim != 3 or y.shape != (x.shape[0],) or train.shape != (x.shape[0],):
        raise ValueError(
            f"layer_probe_r2: features must be (N, K, C) with targets and train (N,), got "
            f"{x.shape}, {y.shape}, {train.shape}"
        )
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("layer_probe_r2: features and targets must be finite")
    n_fit, n_test = int(train.sum()), int((~train).sum())
    if n_fit < 2 or n_test < 2:
        raise ValueError(
            f"layer_probe_r2: need at least 2 training and 2 held-out rows, got {n_fit} and {n_test}"
        )
    y_fit, y_test = y[train], y[~train]
    y_shuf = np.random.default_rng(seed).permutation(y_fit)
    r2, r2_shuf, fits = [], [], []
    for k in range(x.shape[1]):
        fit = ridge_fit(x[train, k], y_fit, alpha=alpha)
        shuf = ridge_fit(x[train, k], y_shuf, alpha=alpha)
        r2.append(_r2(y_test, ridge_predict(fit, x[~train, k])))
        r2_shuf.append(_r2(y_test, ridge_predict(shuf, x[~train, k])))
        fits.append(fit)
    r2 = np.asarray(r2)
    return LayerProbes(r2, np.asarray(r2_shuf), tuple(fits), int(np.argmax(r2)))
