"""Treatment-effect data: IHDP (binary, real covariates) and a K-arm semi-synthetic generator.

* :func:`load_ihdp`: one of the 10 IHDP replications of ``<data_dir>/ihdp/ihdp_npci_<r>.csv``
  (CEVAE's copy: 747 units, columns ``t, y_factual, y_cfactual, mu0, mu1, x1..x25``; Hill 2011,
  "Bayesian nonparametric modeling for causal inference", JCGS; response surface B).
* :func:`acic2016_covariates`: the 58 covariates of the ACIC 2016 challenge (Dorie et al. 2019),
  4802 units, one-hot encoded and standardised, from the ``causallib`` package (no download).
* :func:`make_multiarm`: K arms on real covariates with known potential outcomes and a tunable
  imbalance (our generator, described in its docstring).

Every dataset is a :class:`CausalData`; its constructor checks shapes, NaN and the arms.
"""

from __future__ import annotations

import dataclasses
import pathlib

import numpy as np

from fidia_jax._io import resolve_data_dir
from fidia_jax.errors import DataError

__all__ = [
    "CausalData",
    "acic2016_covariates",
    "check_arms",
    "load_ihdp",
    "make_multiarm",
    "split_causal",
    "split_rows",
]

IHDP_REPLICATIONS = 10


def check_arms(t_N, num_arms: int, *, where: str = "data") -> None:
    """Raises :class:`DataError` unless ``t`` holds ints in ``[0, K)`` and every arm has a unit.

    Arm 0 is the control arm. ``K = 1`` (no contrast to estimate), an arm with no units, or no
    control unit each give an error naming the problem (a fitted model would otherwise return
    effects for an arm it never saw).
    """
    t = np.asarray(t_N)
    if num_arms < 2:
        raise DataError(
            f"{where}: only {num_arms} treatment arm; effects need K >= 2 arms (a control and "
            "at least one treatment)"
        )
    if t.ndim != 1:
        raise DataError(f"{where}: treatments must be 1-D (N,), got shape {t.shape}")
    if not np.issubdtype(t.dtype, np.integer):
        if not np.all(np.isfinite(t)) or np.any(t != np.round(t)):
            raise DataError(f"{where}: treatments must be integer arm indices")
        t = t.astype(np.int64)
    if t.size and (t.min() < 0 or t.max() >= num_arms):
        raise DataError(
            f"{where}: treatments must be in [0, {num_arms}), got [{t.min()}, {t.max()}]"
        )
    counts = np.bincount(t, minlength=num_arms)
    if counts[0] == 0:
        raise DataError(f"{where}: no control arm (no unit has treatment 0)")
    empty = np.flatnonzero(counts == 0)
    if empty.size:
        raise DataError(f"{where}: treatment arm(s) {empty.tolist()} have no units")


@dataclasses.dataclass(frozen=True)
class CausalData:
    """Units with covariates, an observed arm and outcome, and (when known) all potential outcomes.

    Attributes:
      x: ``(N, D)`` float32 covariates.
      t: ``(N,)`` int32 arm index in ``[0, K)`` (0 = control).
      y: ``(N,)`` float32 observed (factual) outcome.
      mu: ``(N, K)`` float32 noiseless potential outcomes, or ``None`` when unknown.
      num_arms: ``K``.
      name: where the data came from.

    Raises:
      DataError: shapes that disagree, NaN/inf in ``x``, ``y`` or ``mu``, bad arms
        (:func:`check_arms`).
    """

    x: np.ndarray
    t: np.ndarray
    y: np.ndarray
    mu: np.ndarray | None
    num_arms: int
    name: str = "data"

    def __post_init__(self):
        x = np.asarray(self.x, np.float32)
        y = np.asarray(self.y, np.float32)
        if x.ndim != 2:
            raise DataError(f"{self.name}: covariates must be (N, D), got shape {x.shape}")
        n = x.shape[0]
        if y.shape != (n,):
            raise DataError(
                f"{self.name}: outcomes must be ({n},) like the covariates, got {y.shape}"
            )
        if np.asarray(self.t).shape != (n,):
            raise DataError(
                f"{self.name}: treatments must be ({n},), got {np.asarray(self.t).shape}"
            )
        if not np.all(np.isfinite(x)):
            raise DataError(f"{self.name}: covariates hold NaN or inf")
        if not np.all(np.isfinite(y)):
            bad = np.flatnonzero(~np.isfinite(y))[:5].tolist()
            raise DataError(f"{self.name}: outcomes hold NaN or inf (first units {bad})")
        check_arms(self.t, self.num_arms, where=self.name)
        object.__setattr__(self, "x", x)
        object.__setattr__(self, "y", y)
        object.__setattr__(self, "t", np.asarray(self.t).astype(np.int32))
        if self.mu is not None:
            mu = np.asarray(self.mu, np.float32)
            if mu.shape != (n, self.num_arms):
                raise DataError(
                    f"{self.name}: potential outcomes must be ({n}, {self.num_arms}), got {mu.shape}"
                )
            if not np.all(np.isfinite(mu)):
                raise DataError(f"{self.name}: potential outcomes hold NaN or inf")
            object.__setattr__(self, "mu", mu)

    def __len__(self) -> int:
        return self.x.shape[0]

    def subset(self, idx) -> CausalData:
        """The units ``idx`` (checked again: every arm must still have a unit)."""
        mu = None if self.mu is None else self.mu[idx]
        return CausalData(self.x[idx], self.t[idx], self.y[idx], mu, self.num_arms, self.name)


def split_causal(
    data: CausalData, test_fraction: float, seed: int
) -> tuple[CausalData, CausalData]:
    """A random train/test split, stratified by arm (every arm keeps units on both sides).

    Raises:
      DataError: ``test_fraction`` not in ``(0, 1)``, or an arm too small to split (< 2 units).
    """
    train, test = split_rows(data, test_fraction, seed)
    return data.subset(train), data.subset(test)


def split_rows(data: CausalData, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The row indices of :func:`split_causal`'s two parts (sorted int arrays), same errors."""
    if not 0.0 < test_fraction < 1.0:
        raise DataError(f"test_fraction must be in (0, 1), got {test_fraction}")
    rng = np.random.default_rng(seed)
    train, test = [], []
    for k in range(data.num_arms):
        idx = rng.permutation(np.flatnonzero(data.t == k))
        if len(idx) < 2:
            raise DataError(f"{data.name}: arm {k} has {len(idx)} unit(s); cannot split it")
        n_test = min(max(1, int(round(test_fraction * len(idx)))), len(idx) - 1)
        test.append(idx[:n_test])
        train.append(idx[n_test:])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(test))


def load_ihdp(replication: int = 1, data_dir: str | pathlib.Path | None = None) -> CausalData:
    """One IHDP replication (binary treatment, ``mu = [mu0, mu1]``, ``y = y_factual``).

    Args:
      replication: 1..10.
      data_dir: the shared data directory (holding ``ihdp/``), else ``$FIDIA_DATA_DIR``.

    Raises:
      DataError: no data directory, a missing file, a replication outside 1..10, or a file
        without 30 numeric columns.
    """
    if not 1 <= replication <= IHDP_REPLICATIONS:
        raise DataError(f"IHDP replication must be in 1..{IHDP_REPLICATIONS}, got {replication}")
    path = resolve_data_dir(data_dir) / "ihdp" / f"ihdp_npci_{replication}.csv"
    if not path.is_file():
        raise DataError(f"IHDP file not found: {path}")
    try:
        table = np.loadtxt(path, delimiter=",", dtype=np.float64, ndmin=2)
    except ValueError as e:
        raise DataError(f"{path}: not a numeric CSV ({e})") from None
    if table.shape[1] != 30:
        raise DataError(
            f"{path}: expected 30 columns (t, yf, ycf, mu0, mu1, x1..x25), got {table.shape[1]}"
        )
    return CausalData(
        x=table[:, 5:],
        t=table[:, 0].astype(np.int32),
        y=table[:, 1],
        mu=table[:, 3:5],
        num_arms=2,
        name=f"ihdp_{replication}",
    )


def acic2016_covariates() -> np.ndarray:
    """The ACIC 2016 covariates (4802 units) from ``causallib``, one-hot, standardised, float32.

    Raises:
      DataError: ``causallib`` is not installed (it is in the ``sciml`` extra).
    """
    try:
        from causallib.datasets import load_acic16
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise DataError(f"ACIC 2016 covariates need the causallib package ({e})") from None
    import pandas as pd

    frame = load_acic16(instance=1)["X"]
    frame = pd.get_dummies(frame, drop_first=True).astype(np.float64)
    x = frame.to_numpy()
    sd = x.std(0)
    x = (x[:, sd > 0] - x[:, sd > 0].mean(0)) / sd[sd > 0]
    return x.astype(np.float32)


def make_multiarm(
    x_NxD,
    num_arms: int,
    *,
    imbalance: float = 1.0,
    noise: float = 1.0,
    seed: int = 0,
    name: str = "multiarm",
) -> CausalData:
    """K-arm semi-synthetic data on real covariates, with known potential outcomes (ours).

    The arms sit at doses ``s_k = k / (K - 1)`` on ``[0, 1]`` (arm 0 = control, ``s = 0``), so
    the treatment space has a geometry: near doses have near effects. With ``x`` standardised
    and random unit directions ``u, b, g`` (drawn from ``seed``):

    * assignment score ``c_i = x_i . u`` (standardised), propensity
      ``P(t = k | x) = softmax_k(-imbalance * (c_i - q_k)^2)`` with ``q_k = 3 (s_k - 1/2)``:
      ``imbalance = 0`` is a randomised trial; larger values send high-score units to high doses.
      A unit is then forced into each arm in turn (the first ``K`` units of a random order) so
      that no arm is empty.
    * outcomes ``mu_k(x) = x . b + 0.5 sin(2 x . b) + s_k (2 + x . g) + sin(pi s_k) (x . u)``,
      ``y = mu_t(x) + noise * N(0, 1)``: heterogeneous, non-linear in the dose, confounded
      through ``x . u``.

    Args:
      x_NxD: ``(N, D)`` real covariates (standardised inside); num_arms: ``K >= 2``.
      imbalance: ``>= 0``; noise: outcome noise sd; seed: randomness of directions, arms, noise.

    Returns:
      A :class:`CausalData` with ``mu`` ``(N, K)``.

    Raises:
      DataError: ``K < 2``, ``N < K``, NaN covariates, ``imbalance < 0``.
    """
    x = np.asarray(x_NxD, np.float64)
    if x.ndim != 2:
        raise DataError(f"make_multiarm: covariates must be (N, D), got shape {x.shape}")
    if num_arms < 2:
        raise DataError(f"make_multiarm: only {num_arms} treatment arm; effects need K >= 2")
    if x.shape[0] < num_arms:
        raise DataError(f"make_multiarm: {x.shape[0]} units cannot fill {num_arms} arms")
    if not np.all(np.isfinite(x)):
        raise DataError("make_multiarm: covariates hold NaN or inf")
    if imbalance < 0:
        raise DataError(f"make_multiarm: imbalance must be >= 0, got {imbalance}")
    rng = np.random.default_rng(seed)
    sd = x.std(0)
    x = (x - x.mean(0)) / np.where(sd > 0, sd, 1.0)
    d = x.shape[1]

    def direction():
        v = rng.normal(size=d)
        return v / np.linalg.norm(v)

    u, b, g = direction(), direction(), direction()
    c = x @ u
    c = (c - c.mean()) / (c.std() + 1e-12)
    s = np.arange(num_arms) / (num_arms - 1)
    logits = -imbalance * (c[:, None] - 3.0 * (s[None, :] - 0.5)) ** 2
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    t = np.array([rng.choice(num_arms, p=row) for row in p], dtype=np.int32)
    t[rng.permutation(len(t))[:num_arms]] = np.arange(num_arms)
    xb, xg = x @ b, x @ g
    mu = (
        (xb + 0.5 * np.sin(2 * xb))[:, None]
        + s[None, :] * (2.0 + xg[:, None])
        + np.sin(np.pi * s)[None, :] * c[:, None]
    )
    y = mu[np.arange(len(t)), t] + noise * rng.normal(size=len(t))
    return CausalData(x=x, t=t, y=y, mu=mu, num_arms=num_arms, name=f"{name}_K{num_arms}")
