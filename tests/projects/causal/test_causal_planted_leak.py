"""Planted leak (issue 41): the causal baselines are fitted on the training units only.

A covariate that is 0 on every training unit and equals the true effect (x 10) on the held-out
units carries the answer, but only where nothing may be fitted. The T-learner with ridge
(its ``StandardScaler`` and ``RidgeCV`` fitted on the training units; a column constant there
gets weight 0) and the reference predictors (:func:`~.baselines.fit_reference`) score the same
on the held-out units with and without it (tolerance 1e-9: float64 solves of the same
problem). The same T-learner fitted on all units (the leak, rebuilt here) moves by far more,
so the test can fail. CFR / TARNet standardise the outcome on the units they are fitted on
(:func:`~._fit._cfr_problem`, called with the training part), as the driver's split shows.
"""

import numpy as np
import pytest

from fidia_jax import metrics
from fidia_jax.projects.causal import baselines, data

pytest.importorskip("sklearn")

TOL = 1e-9


def _data():
    rng = np.random.default_rng(0)
    return data.make_multiarm(rng.normal(size=(200, 5)), 2, seed=1, noise=0.5)


def _planted(d, test_idx):
    col = np.zeros(len(d))
    col[test_idx] = 10.0 * (d.mu[test_idx, 1] - d.mu[test_idx, 0])
    return data.CausalData(np.c_[d.x, col], d.t, d.y, d.mu, d.num_arms, d.name)


def _scores(train, test, fit):
    predict, _ = fit(train)
    mu_hat = predict(test.x)
    return np.array([metrics.sqrt_pehe(test.mu, mu_hat), metrics.ate_error(test.mu, mu_hat)])


FITS = {
    "t_ridge": lambda tr: baselines.fit_meta_learner(tr, "t", "ridge", 0),
    "constant_effect": lambda tr: baselines.fit_reference(tr, "constant_effect"),
    "mean_outcome": lambda tr: baselines.fit_reference(tr, "mean_outcome"),
}


@pytest.mark.parametrize("name", sorted(FITS))
def test_a_covariate_planted_in_the_held_out_units_does_not_move_the_score(name):
    d = _data()
    tr, te = data.split_rows(d, 0.3, seed=0)
    p = _planted(d, te)
    clean = _scores(d.subset(tr), d.subset(te), FITS[name])
    planted = _scores(p.subset(tr), p.subset(te), FITS[name])
    np.testing.assert_allclose(planted, clean, atol=TOL)


def test_the_same_learner_fitted_on_all_units_would_move():
    d = _data()
    tr, te = data.split_rows(d, 0.3, seed=0)
    p = _planted(d, te)
    clean = _scores(d, d.subset(te), FITS["t_ridge"])
    leaky = _scores(p, p.subset(te), FITS["t_ridge"])
    assert np.max(np.abs(leaky - clean)) > 1e5 * TOL
