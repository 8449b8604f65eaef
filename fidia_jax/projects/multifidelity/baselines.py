"""Gaussian-process baselines of the multi-fidelity comparison (scikit-learn).

The simple models a statistician fits first on a few high-fidelity (HF) points, measured by
:func:`~fidia_jax.projects.multifidelity.train.run_methods` on the same runs as the networks:

* :func:`gp_hf_only`: a GP on the HF training labels alone.
* :func:`gp_two_stage`: the two-stage (Δ / "discrepancy") GP, applied down the fidelity ladder:
  a GP on the lowest fidelity; then, for each higher fidelity ``k``, an affine map of the level
  below's posterior mean fitted by least squares on fidelity ``k``'s rows, plus a GP on the
  residual, ``m_k(x) = rho_k m_{k+1}(x) + c_k + delta_k(x)``. It is the plug-in (posterior mean)
  form of the autoregressive model of Kennedy & O'Hagan, Biometrika 87 (2000), fitted level by
  level as in Le Gratiet & Garnier, "Recursive co-kriging model for design of computer
  experiments with multiple levels of fidelity", IJUQ 4 (2014). It needs no paired samples.

Every GP: :class:`sklearn.gaussian_process.GaussianProcessRegressor` with kernel
``ConstantKernel * RBF + WhiteKernel`` (an ARD length scale per input when there are at most
:data:`ARD_MAX_DIM` inputs, else one shared length scale), ``normalize_y=True``, and
``restarts`` extra random restarts of the L-BFGS marginal-likelihood fit. Inputs are
standardised with the mean and standard deviation of every training input (all fidelities; no
label is used). scikit-learn is an optional dependency (``fidia_jax[sciml]``).
"""

from __future__ import annotations

import warnings

import numpy as np

from fidia_jax.errors import DataError

__all__ = ["ARD_MAX_DIM", "AFFINE_MAX_CONDITION", "gp_hf_only", "gp_two_stage"]

#: Up to this many input dimensions the RBF kernel has one length scale per input (ARD).
ARD_MAX_DIM = 20

#: :func:`gp_two_stage` warns when the affine map's least-squares design ``[m(x), 1]`` has a
#: larger condition number: the level below's mean is (nearly) constant on the rows it is fitted
#: on, so ``rho`` is not identified and can take any size.
AFFINE_MAX_CONDITION = 1e8


def _gp(d: int, restarts: int, seed: int):
    try:
        from sklearn.gaussian_process import GaussianProcessRegressor
        from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise DataError(
            "the GP baselines need scikit-learn (pip install 'fidia_jax[sciml]')"
        ) from e
    scale = np.ones(d) if d <= ARD_MAX_DIM else 1.0
    kernel = ConstantKernel(1.0, (1e-3, 1e3)) * RBF(scale, (1e-2, 1e3)) + WhiteKernel(
        1e-4, (1e-10, 1e0)
    )
    return GaussianProcessRegressor(
        kernel, normalize_y=True, n_restarts_optimizer=restarts, random_state=seed
    )


def _fit(x, y, restarts, seed):
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    gp = _gp(x.shape[1], restarts, seed)
    with warnings.catch_warnings():
        # a length scale or the noise at its bound is a fact of the data, not an error
        warnings.simplefilter("ignore", ConvergenceWarning)
        gp.fit(x, y)
    return gp


def _standardise(x_train, *others):
    mu, sd = x_train.mean(0), x_train.std(0)
    sd = np.where(sd > 0, sd, 1.0)
    return [(np.asarray(a, np.float64) - mu) / sd for a in (x_train, *others)]


def _check(x_train, y_train, fidelity_train, x_test, where):
    x_train, x_test = np.asarray(x_train, np.float64), np.asarray(x_test, np.float64)
    y_train, fid = np.asarray(y_train, np.float64), np.asarray(fidelity_train)
    if x_train.ndim != 2 or x_test.ndim != 2 or x_test.shape[1] != x_train.shape[1]:
        raise DataError(
            f"{where}: x_train (N, D) and x_test (M, D) expected, got {x_train.shape}, {x_test.shape}"
        )
    if y_train.shape != (len(x_train),) or fid.shape != (len(x_train),):
        raise DataError(
            f"{where}: y_train and fidelity_train must be ({len(x_train)},), got {y_train.shape}, {fid.shape}"
        )
    if not np.all(np.isfinite(y_train)) or not np.all(np.isfinite(x_train)):
        raise DataError(f"{where}: non-finite training inputs or labels")
    if not np.any(fid == 0):
        raise DataError(f"{where}: no high-fidelity (fidelity 0) training row")
    return x_train, y_train, fid, x_test


def gp_hf_only(
    x_train, y_train, fidelity_train, x_test, *, restarts: int = 3, seed: int = 0
) -> np.ndarray:
    """GP regression on the high-fidelity rows only; the HF posterior mean at ``x_test``.

    Args:
      x_train: ``(N, D)`` inputs of every fidelity (all are used to standardise the inputs).
      y_train: ``(N,)`` labels; fidelity_train: ``(N,)`` int, ``0`` = high fidelity.
      x_test: ``(M, D)``.
      restarts: extra random restarts of the hyper-parameter fit; seed: their seed.

    Returns:
      ``(M,)`` float64, in the labels' units.

    Raises:
      DataError: shapes, non-finite values, no HF row, scikit-learn missing.
    """
    x_train, y_train, fid, x_test = _check(x_train, y_train, fidelity_train, x_test, "gp_hf_only")
    xs, xt = _standardise(x_train, x_test)
    hf = fid == 0
    return _fit(xs[hf], y_train[hf], restarts, seed).predict(xt)


def gp_two_stage(
    x_train, y_train, fidelity_train, x_test, *, restarts: int = 3, seed: int = 0
) -> np.ndarray:
    """Two-stage (Δ) GP down the fidelity ladder (see the module docstring).

    Args:
      As :func:`gp_hf_only`; fidelities ``0 .. K-1`` (``K - 1`` the lowest), each with a row.

    Returns:
      ``(M,)`` float64 HF posterior mean, in the HF labels' units.

    Raises:
      DataError: as :func:`gp_hf_only`, or a fidelity between 0 and the lowest with no row.

    Warns:
      RuntimeWarning: an affine map whose design has a condition number of at least
        :data:`AFFINE_MAX_CONDITION` (the level below's mean is nearly constant on the rows it
        is fitted on, so ``rho`` is not identified); the prediction is returned as computed.
        Seen on FreeSolv (docs/multifidelity.md): one split's map got ``rho`` of about 4.5e9.
    """
    x_train, y_train, fid, x_test = _check(x_train, y_train, fidelity_train, x_test, "gp_two_stage")
    k = int(fid.max()) + 1
    missing = [i for i in range(k) if not np.any(fid == i)]
    if missing:
        raise DataError(f"gp_two_stage: fidelities {missing} have no training row")
    xs, xt = _standardise(x_train, x_test)
    low = fid == k - 1
    gp = _fit(xs[low], y_train[low], restarts, seed)
    # mean of the current level at every training input and at the test inputs
    mean_train, mean_test = gp.predict(xs), gp.predict(xt)
    for level in range(k - 2, -1, -1):
        rows = fid == level
        design = np.stack([mean_train[rows], np.ones(int(rows.sum()))], axis=1)
        (rho, c), *_ = np.linalg.lstsq(design, y_train[rows], rcond=None)
        cond = float(np.linalg.cond(design))
        if not cond < AFFINE_MAX_CONDITION:
            warnings.warn(
                f"gp_two_stage: the affine map onto fidelity {level} is not identified (the level "
                f"below's posterior mean is nearly constant on its rows; condition number "
                f"{cond:.2g} > {AFFINE_MAX_CONDITION:g}); rho = {rho:.3g}, so the prediction "
                "is not to be trusted (the GP on that level likely fitted a length scale too "
                "short for its inputs)",
                RuntimeWarning,
                stacklevel=2,
            )
        resid = y_train[rows] - (rho * mean_train[rows] + c)
        delta = _fit(xs[rows], resid, restarts, seed)
        mean_train = rho * mean_train + c + delta.predict(xs)
        mean_test = rho * mean_test + c + delta.predict(xt)
    return mean_test
