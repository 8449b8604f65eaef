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
hyper-parameter was tuned on the test units. scikit-learn and LightGBM are optional dependencies
(``fidia_jax[sciml]``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from fidia_jax import train as train_lib
from fidia_jax.errors import DataError
from fidia_jax.projects.causal.data import CausalData

__all__ = ["BASE_LEARNERS", "META_LEARNERS", "fit_meta_learner"]

#: Base regressors a meta-learner can use.
BASE_LEARNERS = ("ridge", "gbm", "lgbm")
#: Meta-learners: ``t`` (one model per arm), ``s`` (one model, arm as a feature), ``x``.
META_LEARNERS = ("t", "s", "x")


def _regressor(base: str, seed: int):
    try:
        if base == "ridge":
            from sklearn.linear_model import RidgeCV
            from sklearn.pipeline import make_pipeline
            from sklearn.preprocessing import StandardScaler

            return make_pipeline(StandardScaler(), RidgeCV(alphas=np.logspace(-3, 3, 13)))
        if base == "gbm":
            from sklearn.ensemble import GradientBoostingRegressor

            return GradientBoostingRegressor(random_state=seed)
        if base == "lgbm":
            from lightgbm import LGBMRegressor

            return LGBMRegressor(min_child_samples=10, random_state=seed, n_jobs=1, verbose=-1)
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise DataError(
            f"the {base} meta-learner baselines need scikit-learn / lightgbm "
            f"(pip install 'fidia_jax[sciml]'): {e}"
        ) from None
    raise DataError(f"unknown base learner {base!r}; expected one of {BASE_LEARNERS}")


def _fit(base, x, y, seed):
    model = _regressor(base, seed)
    with train_lib.limit_threads():  # the run's cores, not every core of a shared machine
        model.fit(np.asarray(x, np.float64), np.asarray(y, np.float64))
    return model


def _predict(model, x):
    return np.asarray(model.predict(np.asarray(x, np.float64)), np.float64)


def fit_meta_learner(
    train: CausalData, meta: str, base: str, seed: int = 0
) -> tuple[Callable[[np.ndarray], np.ndarray], dict]:
    """Fits a T-, S- or X-learner with a base regressor on ``train``.

    Args:
      train: training units (:class:`~.data.CausalData`, every arm present).
      meta: one of :data:`META_LEARNERS` (``"t"``, ``"s"``, ``"x"``).
      base: one of :data:`BASE_LEARNERS` (``"ridge"``, ``"gbm"``, ``"lgbm"``).
      seed: the base learners' ``random_state``.

    Returns:
      ``(predict, info)``: ``predict(x_MxD) -> (M, K)`` float64 potential outcomes (in the
      outcome's units); ``info`` ``{"wall_s"}``.

    Raises:
      DataError: unknown ``meta`` / ``base``, a missing optional package, or an arm with fewer
        than 2 units (a per-arm regressor cannot be fitted).
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
        model = _fit(base, np.concatenate([x, np.eye(k)[t]], 1), y, seed)

        def predict(x_new):
            x_new = np.asarray(x_new, np.float64)
            cols = [
                _predict(model, np.concatenate([x_new, np.tile(np.eye(k)[j], (len(x_new), 1))], 1))
                for j in range(k)
            ]
            return np.stack(cols, 1)

        return predict, {"wall_s": time.perf_counter() - t0}
    arms = [_fit(base, x[t == j], y[t == j], seed) for j in range(k)]
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
        tau1 = _fit(base, x[arm], d1, seed)
        tau0 = _fit(base, x[control], d0, seed)
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
