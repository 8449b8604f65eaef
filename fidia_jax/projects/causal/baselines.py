"""Meta-learner baselines of the treatment-effect comparison (scikit-learn, LightGBM).

The estimators a statistician fits first, measured by :func:`~.train.run_experiment` on the same
splits as the networks. Each returns ``predict(x) -> (N, K)`` potential outcomes, so they are
scored with the same :func:`fidia_jax.metrics.sqrt_pehe` / :func:`fidia_jax.metrics.ate_error`
over all arm pairs. For ``K`` arms (arm 0 the control):

* **T-learner**: one regressor per arm on that arm's units, ``mu_k(x) = f_k(x)``.
* **S-learner**: one regressor on ``[x, one_hot(t)]``, ``mu_k(x) = f([x, e_k])`` (with a linear
  base learner the effects are constant in ``x``, as they should be for an S-learner).
* **X-learner** (Kuenzel, Sekhon, Bickel, Yu, "Metalearners for estimating heterogeneous
  treatment effects using machine learning", PNAS 2019), each treated arm ``k`` against the
  control: T-learner outcome models ``f_0, f_k``; imputed effects ``D_i = y_i - f_0(x_i)`` on
  arm ``k`` and ``D_i = f_k(x_i) - y_i`` on arm 0; effect models ``tau_k1`` (fitted on arm
  ``k``'s ``D``) and ``tau_k0`` (on arm 0's), combined as
  ``tau_k = g_k tau_k0 + (1 - g_k) tau_k1`` with ``g_k(x) = P(t = k | x, t in {0, k})`` from a
  logistic regression (clipped to ``[0.01, 0.99]``); ``mu_0 = f_0``, ``mu_k = f_0 + tau_k``.
  The multi-arm form (one X-learner per treated arm against the control) is the usual one.

Base learners (:data:`BASE_LEARNERS`): ``ridge`` (standardised inputs,
:class:`sklearn.linear_model.RidgeCV` over ``10^-3 .. 10^3``, leave-one-out), ``gbm``
(:class:`sklearn.ensemble.GradientBoostingRegressor`, library defaults: 100 depth-3 trees,
learning rate 0.1; single-threaded, which on a shared 2-core machine is ~100x faster than the
OpenMP histogram variant) and ``lgbm``
(:class:`lightgbm.LGBMRegressor`, library defaults, ``min_child_samples`` 10). No
hyper-parameter was tuned on the test units. :func:`tune_meta_learner` chooses the ``gbm`` /
``lgbm`` learning rate on the networks' validation split with the networks' budget (three
values, lowest validation factual MSE), as the ``cfr_pairwise@val`` row chooses alpha. scikit-learn and LightGBM are optional dependencies
(``fidia_jax[sciml]``).

Reference predictors (:data:`REFERENCE_PREDICTORS`, :func:`fit_reference`; issue 41: a table of
effect estimators should show what no model of ``x`` achieves), fitted on the training units only:

* ``constant_effect``: ``mu_k(x) = m_0 + (m_k - m_0)`` with ``m_k`` the mean observed outcome of
  arm ``k``'s training units: every unit gets the same effects, the unadjusted
  difference in arm means (``ate_source="factual"``, the default, the only one a user can
  compute). ``ate_source="potential_outcomes"`` uses the training units' known ``mu`` instead
  (the best constant effect for the training units: an oracle, for simulations only).
  Its ``sqrt(PEHE)`` is the spread of the true effects around that constant.
* ``mean_outcome``: ``mu_k(x) = mean(y_train)`` for every arm: zero effects; ``sqrt(PEHE)``
  is the root mean square of the true effects, ``ATE error`` ``|ATE|``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from fidia_jax import train as train_lib
from fidia_jax.errors import DataError
from fidia_jax.projects.causal.data import CausalData

__all__ = [
    "BASE_LEARNERS",
    "META_LEARNERS",
    "REFERENCE_PREDICTORS",
    "fit_meta_learner",
    "fit_reference",
    "tune_meta_learner",
]

#: Base regressors a meta-learner can use.
BASE_LEARNERS = ("ridge", "gbm", "lgbm")
#: Meta-learners: ``t`` (one model per arm), ``s`` (one model, arm as a feature), ``x``.
META_LEARNERS = ("t", "s", "x")
#: Predictors that ignore ``x`` (:func:`fit_reference`).
REFERENCE_PREDICTORS = ("constant_effect", "mean_outcome")
ATE_SOURCES = ("factual", "potential_outcomes")
#: :func:`tune_meta_learner`'s default grids: one regressor setting, three values (the size of
#: the CFR alpha grid the networks are chosen from). ``ridge`` tunes its penalty itself.
TUNING_GRIDS = {
    "gbm": {"learning_rate": (0.03, 0.1, 0.3)},
    "lgbm": {"learning_rate": (0.03, 0.1, 0.3)},
}


def _regressor(base: str, seed: int, params: dict | None = None):
    try:
        if base == "ridge":
            from sklearn.linear_model import RidgeCV
            from sklearn.pipeline import make_pipeline
            from sklearn.preprocessing import StandardScaler

            if params:
                raise DataError(f"the ridge base learner takes no parameters, got {params}")
            return make_pipeline(StandardScaler(), RidgeCV(alphas=np.logspace(-3, 3, 13)))
        if base == "gbm":
            from sklearn.ensemble import GradientBoostingRegressor

            return GradientBoostingRegressor(random_state=seed, **(params or {}))
        if base == "lgbm":
            from lightgbm import LGBMRegressor

            kw = {"min_child_samples": 10, **(params or {})}
            return LGBMRegressor(random_state=seed, n_jobs=1, verbose=-1, **kw)
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise DataError(
            f"the {base} meta-learner baselines need scikit-learn / lightgbm "
            f"(pip install 'fidia_jax[sciml]'): {e}"
        ) from None
    raise DataError(f"unknown base learner {base!r}; expected one of {BASE_LEARNERS}")


def _fit(base, x, y, seed, params=None):
    model = _regressor(base, seed, params)
    with train_lib.limit_threads():  # the run's cores, not every core of a shared machine
        model.fit(np.asarray(x, np.float64), np.asarray(y, np.float64))
    return model


def _predict(model, x):
    return np.asarray(model.predict(np.asarray(x, np.float64)), np.float64)


def fit_meta_learner(
    train: CausalData, meta: str, base: str, seed: int = 0, *, params: dict | None = None
) -> tuple[Callable[[np.ndarray], np.ndarray], dict]:
    """Fits a T-, S- or X-learner with a base regressor on ``train``.

    Args:
      train: training units (:class:`~.data.CausalData`, every arm present).
      meta: one of :data:`META_LEARNERS` (``"t"``, ``"s"``, ``"x"``).
      base: one of :data:`BASE_LEARNERS` (``"ridge"``, ``"gbm"``, ``"lgbm"``).
      seed: the base learners' ``random_state``.
      params: keyword arguments of the ``gbm`` / ``lgbm`` regressor (``None``: the defaults
        above; :func:`tune_meta_learner` chooses them); ``ridge`` takes none.

    Returns:
      ``(predict, info)``: ``predict(x_MxD) -> (M, K)`` float64 potential outcomes (in the
      outcome's units); ``info`` ``{"wall_s"}``.

    Raises:
      DataError: unknown ``meta`` / ``base``, a missing optional package, an arm with fewer
        than 2 units (a per-arm regressor cannot be fitted), or ``params`` for ``ridge``.
    """
    import time

    if meta not in META_LEARNERS:
        raise DataError(f"unknown meta-learner {meta!r}; expected one of {META_LEARNERS}")
    if base not in BASE_LEARNERS:
        raise DataError(f"unknown base learner {base!r}; expected one of {BASE_LEARNERS}")
    k = train.num_arms
    x, t, y = train.x, train.t, train.y
    counts = np.bincount(t, minlength=k)
    if meta != "s" and counts.min() < 2:
        raise DataError(
            f"{meta}-learner: arm {int(np.argmin(counts))} has {int(counts.min())} training "
            "unit(s); a per-arm regressor needs at least 2"
        )
    t0 = time.perf_counter()
    if meta == "s":
        model = _fit(base, np.concatenate([x, np.eye(k)[t]], 1), y, seed, params)

        def predict(x_new):
            x_new = np.asarray(x_new, np.float64)
            cols = [
                _predict(model, np.concatenate([x_new, np.tile(np.eye(k)[j], (len(x_new), 1))], 1))
                for j in range(k)
            ]
            return np.stack(cols, 1)

        return predict, {"wall_s": time.perf_counter() - t0}
    arms = [_fit(base, x[t == j], y[t == j], seed, params) for j in range(k)]
    if meta == "t":

        def predict(x_new):
            return np.stack([_predict(m, x_new) for m in arms], 1)

        return predict, {"wall_s": time.perf_counter() - t0}
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    control = t == 0
    effects = []
    for j in range(1, k):
        arm = t == j
        d1 = y[arm] - _predict(arms[0], x[arm])
        d0 = _predict(arms[j], x[control]) - y[control]
        tau1 = _fit(base, x[arm], d1, seed, params)
        tau0 = _fit(base, x[control], d0, seed, params)
        pair = control | arm
        prop = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
        with train_lib.limit_threads():
            prop.fit(np.asarray(x[pair], np.float64), arm[pair].astype(int))
        effects.append((tau0, tau1, prop))

    def predict(x_new):
        x_new = np.asarray(x_new, np.float64)
        mu0 = _predict(arms[0], x_new)
        cols = [mu0]
        for tau0, tau1, prop in effects:
            g = np.clip(prop.predict_proba(x_new)[:, 1], 0.01, 0.99)
            cols.append(mu0 + g * _predict(tau0, x_new) + (1.0 - g) * _predict(tau1, x_new))
        return np.stack(cols, 1)

    return predict, {"wall_s": time.perf_counter() - t0}


def fit_reference(
    train: CausalData, name: str, *, ate_source: str = "factual"
) -> tuple[Callable[[np.ndarray], np.ndarray], dict]:
    """Fits a predictor that ignores the covariates on ``train`` (see the module docstring).

    Args:
      train: training units (:class:`~.data.CausalData`, every arm present).
      name: one of :data:`REFERENCE_PREDICTORS` (``"constant_effect"``, ``"mean_outcome"``).
      ate_source: ``constant_effect`` only: ``"factual"`` (arm means of the observed ``y``,
        default) or ``"potential_outcomes"`` (column means of the training units' ``mu``;
        an oracle that needs known potential outcomes).

    Returns:
      ``(predict, info)``: ``predict(x_MxD) -> (M, K)`` float64, the same row for every unit;
      ``info`` ``{"wall_s": 0.0, "effects": [m_k - m_0 for k in 0..K-1]}``.

    Raises:
      DataError: unknown ``name`` / ``ate_source``, or ``"potential_outcomes"`` on data
        without ``mu``.
    """
    if name not in REFERENCE_PREDICTORS:
        raise DataError(f"unknown reference predictor {name!r}; expected one of "
                        f"{REFERENCE_PREDICTORS}")  # fmt: skip
    if ate_source not in ATE_SOURCES:
        raise DataError(f"ate_source must be one of {ATE_SOURCES}, got {ate_source!r}")
    k = train.num_arms
    y = np.asarray(train.y, np.float64)
    if name == "mean_outcome":
        row = np.full(k, y.mean())
    elif ate_source == "potential_outcomes":
        if train.mu is None:
            raise DataError(
                f"{train.name}: ate_source='potential_outcomes' needs known potential outcomes"
            )
        row = np.asarray(train.mu, np.float64).mean(0)
    else:
        row = np.array([y[train.t == j].mean() for j in range(k)])

    def predict(x_new):
        x_new = np.asarray(x_new)
        if x_new.ndim != 2:
            raise DataError(f"{name}: covariates must be (M, D), got shape {x_new.shape}")
        return np.tile(row, (x_new.shape[0], 1))

    return predict, {"wall_s": 0.0, "effects": (row - row[0]).tolist()}


def tune_meta_learner(
    train: CausalData,
    meta: str,
    base: str,
    seed: int = 0,
    *,
    validation_fraction: float = 0.2,
    grid: dict[str, tuple] | None = None,
    split_seed: int | None = None,
) -> tuple[Callable[[np.ndarray], np.ndarray], dict]:
    """A meta-learner whose base-learner setting is chosen on a validation split (issue 41).

    The same protocol and budget as the networks' ``cfr_pairwise@val`` row
    (:func:`~.train.run_experiment`): ``train`` is split by :func:`~.data.split_causal` with
    ``validation_fraction`` and ``split_seed`` (default ``seed + VAL_SEED_OFFSET``, the
    networks' validation split); :func:`fit_meta_learner` is fitted on the rest at each value of
    ``grid`` (one setting; default :data:`TUNING_GRIDS`, three values); the value whose fit has
    the lowest factual MSE on the validation units is chosen and that fit is returned (as the
    networks' row, it is not refitted on all of ``train``). The held-out test units are never
    seen.

    Args:
      train: training units; meta, base, seed: as :func:`fit_meta_learner`.
      validation_fraction: in ``(0, 1)``.
      grid: ``{name: values}`` with exactly one name (``None``: ``TUNING_GRIDS[base]``).
      split_seed: seed of the validation split.

    Returns:
      ``(predict, info)``; ``info``: ``wall_s`` (every grid fit), ``chosen`` (``{name: value}``)
      and ``grid`` (``{str(value): validation factual MSE}``).

    Raises:
      DataError: ``ridge`` (its penalty is chosen by leave-one-out already) or a grid without
        exactly one setting or with no value; :func:`fit_meta_learner`'s errors.
    """
    import time

    from fidia_jax.projects.causal.data import split_causal

    if base == "ridge":
        raise DataError("tune_meta_learner: ridge chooses its penalty by leave-one-out itself")
    grid = TUNING_GRIDS.get(base) if grid is None else grid
    if not grid or len(grid) != 1 or not next(iter(grid.values())):
        raise DataError(f"tune_meta_learner: grid must name one setting with values, got {grid}")
    if split_seed is None:
        from fidia_jax.projects.causal._fit import VAL_SEED_OFFSET

        split_seed = seed + VAL_SEED_OFFSET
    ((name, values),) = grid.items()
    fit_part, val = split_causal(train, validation_fraction, split_seed)
    t0 = time.perf_counter()
    scores, fits = {}, {}
    for v in values:
        predict, _ = fit_meta_learner(fit_part, meta, base, seed, params={name: v})
        factual = predict(val.x)[np.arange(len(val)), val.t]
        scores[str(v)] = float(np.mean((factual - np.asarray(val.y, np.float64)) ** 2))
        fits[str(v)] = (v, predict)
    best = min(scores, key=scores.get)
    value, predict = fits[best]
    return predict, {
        "wall_s": time.perf_counter() - t0, "chosen": {name: value}, "grid": scores,
    }  # fmt: skip
