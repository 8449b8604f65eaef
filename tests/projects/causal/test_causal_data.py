"""IHDP loader, K-arm generator, and the arm checks (the issue's edge cases)."""

import numpy as np
import pytest

from fidia_jax.errors import DataError
from fidia_jax.projects.causal import data


def test_ihdp_replication_1(shared_data_dir):
    d = data.load_ihdp(1, shared_data_dir)
    assert d.x.shape == (747, 25) and d.mu.shape == (747, 2) and d.num_arms == 2
    # First row of ihdp_npci_1.csv: t=1, y_factual=5.59991628549083, mu0=3.26825638455712.
    assert d.t[0] == 1
    np.testing.assert_allclose(
        [d.y[0], d.mu[0, 0]], [5.59991628549083, 3.26825638455712], rtol=1e-6
    )
    train, test = data.split_causal(d, 0.3, seed=0)
    assert len(train) + len(test) == 747 and abs(len(test) - 224) <= 2
    with pytest.raises(DataError, match="1..10"):
        data.load_ihdp(11, shared_data_dir)


def test_multiarm_generator_knows_its_potential_outcomes():
    x = np.random.default_rng(0).normal(size=(400, 6))
    d = data.make_multiarm(x, 4, imbalance=0.0, noise=0.0, seed=1)
    assert d.mu.shape == (400, 4) and np.bincount(d.t, minlength=4).min() > 60  # ~randomised
    np.testing.assert_allclose(d.y, d.mu[np.arange(400), d.t], rtol=1e-5, atol=1e-5)
    # Imbalance sends high-score units to high doses: arm means of the score drift apart.
    strong = data.make_multiarm(x, 4, imbalance=4.0, seed=1)
    weak = data.make_multiarm(x, 4, imbalance=0.0, seed=1)
    score = lambda d: [d.mu[d.t == k, 3].mean() - d.mu[d.t == k, 0].mean() for k in range(4)]  # noqa: E731
    assert np.ptp(score(strong)) > np.ptp(score(weak))
    d16 = data.make_multiarm(x[:20], 16, imbalance=8.0, seed=0)
    assert np.bincount(d16.t, minlength=16).min() >= 1  # every arm forced non-empty


@pytest.mark.parametrize(
    ("t", "k", "match"),
    [
        (np.array([0, 0, 1, 1]), 3, r"arm\(s\) \[2\] have no units"),
        (np.array([1, 1, 2, 2]), 3, "no control arm"),
        (np.array([0, 0, 0, 0]), 1, "only 1 treatment arm"),
        (np.array([0, 1, 5, 1]), 3, r"in \[0, 3\)"),
    ],
)
def test_arm_edge_cases_raise(t, k, match):
    with pytest.raises(DataError, match=match):
        data.CausalData(np.zeros((4, 2)), t, np.zeros(4), None, k)


def test_nan_outcomes_and_wrong_shapes_raise():
    x, t = np.zeros((4, 2)), np.array([0, 1, 0, 1])
    with pytest.raises(DataError, match=r"NaN or inf \(first units \[2\]\)"):
        data.CausalData(x, t, np.array([0.0, 1.0, np.nan, 2.0]), None, 2)
    with pytest.raises(DataError, match=r"outcomes must be \(4,\)"):
        data.CausalData(x, t, np.zeros(3), None, 2)
    with pytest.raises(DataError, match=r"covariates must be \(N, D\)"):
        data.CausalData(np.zeros(4), t, np.zeros(4), None, 2)
    with pytest.raises(DataError, match=r"potential outcomes must be \(4, 2\)"):
        data.CausalData(x, t, np.zeros(4), np.zeros((4, 3)), 2)
    with pytest.raises(DataError, match="only 1"):
        data.make_multiarm(np.zeros((10, 2)), 1)
