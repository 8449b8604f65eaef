"""sqrt(PEHE) and ATE error over all arm pairs, against the two-arm formula and brute force."""

import itertools

import numpy as np
import pytest

from fidia_jax import metrics
from fidia_jax.errors import DataError


def test_two_arms_is_the_ihdp_formula():
    rng = np.random.default_rng(0)
    mu, mu_hat = rng.normal(size=(50, 2)), rng.normal(size=(50, 2))
    tau, tau_hat = mu[:, 1] - mu[:, 0], mu_hat[:, 1] - mu_hat[:, 0]
    np.testing.assert_allclose(
        metrics.sqrt_pehe(mu, mu_hat), np.sqrt(np.mean((tau - tau_hat) ** 2))
    )
    np.testing.assert_allclose(metrics.ate_error(mu, mu_hat), abs(tau.mean() - tau_hat.mean()))


def test_k_arms_brute_force():
    rng = np.random.default_rng(1)
    mu, mu_hat = rng.normal(size=(30, 4)), rng.normal(size=(30, 4))
    pehe, ate = [], []
    for k, l in itertools.combinations(range(4), 2):
        d = (mu[:, l] - mu[:, k]) - (mu_hat[:, l] - mu_hat[:, k])
        pehe.append(np.mean(d**2))
        ate.append(abs(d.mean()))
    np.testing.assert_allclose(metrics.sqrt_pehe(mu, mu_hat), np.sqrt(np.mean(pehe)))
    np.testing.assert_allclose(metrics.ate_error(mu, mu_hat), np.mean(ate))
    # An arm-independent shift of the predictions changes no effect.
    np.testing.assert_allclose(metrics.sqrt_pehe(mu, mu + 3.0), 0.0, atol=1e-12)


def test_bad_inputs():
    with pytest.raises(DataError, match="K >= 2"):
        metrics.sqrt_pehe(np.zeros((5, 1)), np.zeros((5, 1)))
    with pytest.raises(DataError, match=r"\(N, K\)"):
        metrics.ate_error(np.zeros((5, 2)), np.zeros((4, 2)))
    with pytest.raises(DataError, match="NaN"):
        metrics.sqrt_pehe(np.zeros((5, 2)), np.full((5, 2), np.nan))
