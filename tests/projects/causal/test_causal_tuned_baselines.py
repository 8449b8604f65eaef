"""``t_<base>@val`` rows (issue 41 follow-up): the boosted T-learners get CFR's validation budget.

With ``validation_fraction > 0`` the driver adds ``t_gbm@val`` (and ``t_lgbm@val``) for each
boosted T-learner of ``methods``: the learning rate chosen from three values by factual MSE on
the validation units of ``cfr_pairwise@val``'s split (``seed + VAL_SEED_OFFSET``), fitted on the
rest of the training units. The network rows are stubbed (their own tests cover them): only the
baselines' rows are under test, checked against a brute-force choice made from the training
units alone.
"""

import numpy as np
import pytest

from fidia_jax import metrics
from fidia_jax.projects import causal
from fidia_jax.projects.causal import baselines, data
from fidia_jax.projects.causal import train as causal_train
from fidia_jax.projects.causal._fit import VAL_SEED_OFFSET

pytest.importorskip("sklearn")


def _stub_networks(monkeypatch):
    def fake_val(config, train, test, seed, workdir, prefix):
        k = int(train.t.max()) + 1
        return 1.0, (lambda x: np.zeros((len(x), k))), {"wall_s": 0.0}, {}

    monkeypatch.setattr(causal_train, "_validation_alpha", fake_val)


def _config(**kw):
    kw = {"methods": ("t_ridge", "t_gbm"), "alpha": 1.0, "alpha_grid": (0.1, 1.0), **kw}
    return causal.get_config("tiny", **kw)


def test_tuned_row_is_the_brute_force_choice_on_the_networks_validation_split(monkeypatch):
    _stub_networks(monkeypatch)
    config = _config(validation_fraction=0.25)
    rows = {r["method"]: r for r in causal.run_experiment(config)["runs"]}
    assert set(rows) == {"t_ridge", "t_gbm", "cfr_pairwise@val", "t_gbm@val"}
    row = rows["t_gbm@val"]
    # brute force from the training units only: the networks' validation split, every value
    _, _, d = next(iter(causal.instances(config)))
    seed = config.seed + 0
    train, test = data.split_causal(d, config.test_fraction, seed)
    fit_part, val = data.split_causal(train, 0.25, seed + VAL_SEED_OFFSET)
    mse, fits = {}, {}
    for v in baselines.TUNING_GRIDS["gbm"]["learning_rate"]:
        p, _ = baselines.fit_meta_learner(fit_part, "t", "gbm", seed, params={"learning_rate": v})
        f = p(val.x)[np.arange(len(val)), val.t]
        mse[str(v)] = float(np.mean((f - val.y.astype(np.float64)) ** 2))
        fits[str(v)] = p
    assert len(set(mse.values())) == len(mse)  # the learning rate matters on this data
    assert row["grid"] == pytest.approx(mse, abs=1e-12)
    best = min(mse, key=mse.get)
    assert row["chosen"] == {"learning_rate": float(best)}
    assert row["sqrt_pehe"] == pytest.approx(
        metrics.sqrt_pehe(test.mu, fits[best](test.x)), rel=1e-12
    )
    # the untuned row is still the library default fitted on all the training units
    p, _ = baselines.fit_meta_learner(train, "t", "gbm", seed)
    assert rows["t_gbm"]["sqrt_pehe"] == pytest.approx(
        metrics.sqrt_pehe(test.mu, p(test.x)), rel=1e-12
    )


def test_no_tuned_rows_without_validation_or_off_process_zero(monkeypatch):
    _stub_networks(monkeypatch)
    rows = {r["method"] for r in causal.run_experiment(_config(alpha_grid=()))["runs"]}
    assert rows == {"t_ridge", "t_gbm"}  # validation_fraction == 0: the row names as before
    monkeypatch.setattr(causal_train.parallel, "is_primary", lambda: False)
    rows = {r["method"] for r in causal.run_experiment(_config(validation_fraction=0.25))["runs"]}
    assert rows == {"cfr_pairwise@val"}  # the host-side baselines run on process 0 only
