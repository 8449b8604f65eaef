"""Treatment-effect metrics over K arms: sqrt(PEHE) and ATE error averaged over all arm pairs.

For two arms they are the usual IHDP metrics (Hill 2011; Shalit et al., ICML 2017):
``sqrt(PEHE) = sqrt(mean_i ((mu1 - mu0) - (mu1_hat - mu0_hat))^2)`` and
``|ATE - ATE_hat|``. For ``K`` arms we average over the ``K(K-1)/2`` pairs ``k < l``, as in
multi-treatment benchmarks (Schwab et al. 2018, "Perfect Match"): ``sqrt(PEHE)`` is
``sqrt(mean_pairs PEHE_kl)`` and the ATE error is ``mean_pairs |ATE_kl - ATE_hat_kl|``.
"""

from __future__ import annotations

import numpy as np

from fidia_jax.errors import DataError

__all__ = ["ate_error", "sqrt_pehe"]


def _check(mu_NxK, mu_hat_NxK, name) -> tuple[np.ndarray, np.ndarray]:
    mu = np.asarray(mu_NxK, dtype=np.float64)
    mu_hat = np.asarray(mu_hat_NxK, dtype=np.float64)
    if mu.ndim != 2 or mu.shape != mu_hat.shape:
        raise DataError(
            f"{name}: true and predicted potential outcomes must both be (N, K), got "
            f"{mu.shape} and {mu_hat.shape}"
        )
    if mu.shape[0] < 1 or mu.shape[1] < 2:
        raise DataError(f"{name}: need N >= 1 units and K >= 2 arms, got shape {mu.shape}")
    if not (np.all(np.isfinite(mu)) and np.all(np.isfinite(mu_hat))):
        raise DataError(f"{name}: potential outcomes hold NaN or inf")
    return mu, mu_hat


def _pair_effects(mu):
    k = mu.shape[1]
    rows, cols = np.triu_indices(k, 1)
    return mu[:, cols] - mu[:, rows]  # (N, P): effect of arm l against arm k, k < l


def sqrt_pehe(mu_NxK, mu_hat_NxK) -> float:
    """``sqrt`` of the precision in estimating heterogeneous effects, averaged over arm pairs.

    Args:
      mu_NxK: ``(N, K)`` true potential outcomes (noiseless means, or outcomes).
      mu_hat_NxK: ``(N, K)`` predicted potential outcomes.

    Returns:
      ``sqrt(mean_{k<l} mean_i ((mu_il - mu_ik) - (mu_hat_il - mu_hat_ik))^2)``, a float.

    Raises:
      DataError: shapes that differ or are not ``(N, K)`` with ``K >= 2``; NaN or inf values.
    """
    mu, mu_hat = _check(mu_NxK, mu_hat_NxK, "sqrt_pehe")
    err = _pair_effects(mu) - _pair_effects(mu_hat)
    return float(np.sqrt(np.mean(err**2)))


def ate_error(mu_NxK, mu_hat_NxK) -> float:
    """Absolute error of the average treatment effect, averaged over arm pairs.

    Returns:
      ``mean_{k<l} |mean_i (mu_il - mu_ik) - mean_i (mu_hat_il - mu_hat_ik)|``, a float.

    Raises:
      DataError: as :func:`sqrt_pehe`.
    """
    mu, mu_hat = _check(mu_NxK, mu_hat_NxK, "ate_error")
    err = _pair_effects(mu).mean(0) - _pair_effects(mu_hat).mean(0)
    return float(np.mean(np.abs(err)))
