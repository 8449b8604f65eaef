"""Divisiveness of label distributions and the divisiveness-consistent LDL loss (LDL-DVS).

Notation: a label distribution ``d`` has ``c`` labels (``d_j >= 0``, ``sum_j d_j = 1``); a
polarity pair ``pos, neg`` (``(c,)`` weights, one preset per dataset, see
:data:`~.data.LDL_POLARITY`) says how much each label counts as "positive" and as
"negative". With ``a = d . pos`` and ``b = d . neg``:

* divisiveness ``psi(d) = min(a, b)``: large when the mass is split between the two poles
  (authors' code, ``pyldl.metrics.divisiveness_error``);
* its smooth surrogate, the softmin with sharpness ``k``:
  ``psi_k(d) = (a e^{-k a} + b e^{-k b}) / (e^{-k a} + e^{-k b})``, which tends to ``psi`` as
  ``k -> inf`` (authors' code, ``LDL_DVS._psi``); computed here in the equal, overflow-free form
  ``a + (b - a) sigmoid(k (a - b))``;
* the Charbonnier penalty ``rho(x) = sqrt(x^2 + eps^2)`` with ``eps`` the float32 machine epsilon
  (authors' code, ``LDL_DVS.dvs``);
* the divisiveness loss, in three modes (:func:`divisiveness_loss`): ``"full"`` (whole masks on
  both sides), ``"ovo"`` (the authors' default: the TARGET uses the whole masks, the PREDICTION
  one label pair ``(i, j)``, ``i != j``, at a time, with masks ``pos_i e_i`` and ``neg_j e_j``), and
  ``"ovo_symmetric"`` (both sides per label pair: our variant, the one a reader of the formula
  "pairwise divisiveness consistency" would expect);
* the LDL-DVS objective ``KL(D || P) + alpha * L_dvs`` (authors' code, ``LDL_DVS._loss``), the KL
  term with Keras's clipping of both arguments to ``[1e-7, 1]``.

The paper's text was not available to us (only the authors' code in ``python-ldl`` 0.1.2, MIT):
which of the two ovo variants the paper states could not be checked; the code's ``"ovo"`` is the
default here because it is what the authors ran.

References:
  Lu, Wu, Li, Jia, "Divisiveness-consistent label distribution learning", ICML 2026.
  Authors' code: ``pyldl.algorithms.LDL_DVS`` in ``python-ldl`` (github SpriteMisaka/PyLDL).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from fidia_jax import _checks
from fidia_jax.projects.ldl.data import check_label_distributions

__all__ = [
    "CHARBONNIER_EPS",
    "DIVISIVENESS_MODES",
    "KERAS_KL_EPS",
    "divisiveness",
    "divisiveness_loss",
    "ldl_dvs_loss",
    "ldl_kl_loss",
    "soft_divisiveness",
]

#: ``eps`` of the Charbonnier penalty (float32 machine epsilon, as the authors' code).
CHARBONNIER_EPS = float(np.finfo(np.float32).eps)
#: Keras's ``epsilon()``: the KL loss clips both distributions to ``[KERAS_KL_EPS, 1]``.
KERAS_KL_EPS = 1e-7
#: Modes of :func:`divisiveness_loss`.
DIVISIVENESS_MODES = ("ovo", "ovo_symmetric", "full")


def _dist(d, name: str, where: str) -> jax.Array:
    d = jnp.asarray(d)
    _checks.assert_rank(d, 2, name, where=where)
    if not jnp.issubdtype(d.dtype, jnp.floating):
        d = d.astype(jnp.float32)
    return d


def _poles(pos, neg, c: int, where: str) -> tuple[jax.Array, jax.Array]:
    pos = jnp.asarray(pos, jnp.float32)
    neg = jnp.asarray(neg, jnp.float32)
    for arr, name in ((pos, "pos"), (neg, "neg")):
        if arr.shape != (c,):
            raise ValueError(
                f"{where}: {name} must have shape ({c},) (one weight per label), got {arr.shape}"
            )
    return pos, neg


def _softmin(a, b, k):
    # (a e^{-ka} + b e^{-kb}) / (e^{-ka} + e^{-kb}) = a + (b - a) * sigmoid(k (a - b)).
    return a + (b - a) * jax.nn.sigmoid(k * (a - b))


def divisiveness(d, pos, neg) -> jax.Array:
    """Divisiveness ``psi(d) = min(d . pos, d . neg)`` of each row.

    Args:
      d: ``(N, c)`` label distributions.
      pos, neg: ``(c,)`` polarity weights of the dataset.

    Returns:
      ``(N,)`` float array.

    Raises:
      ValueError: ``d`` is not 2-D, or ``pos`` / ``neg`` do not have shape ``(c,)``.

    Source: authors' code (``pyldl.metrics.divisiveness_error``).
    """
    d = _dist(d, "d", "divisiveness")
    pos, neg = _poles(pos, neg, d.shape[1], "divisiveness")
    return jnp.minimum(d @ pos, d @ neg)


def soft_divisiveness(d, pos, neg, k: float = 10.0) -> jax.Array:
    """Smooth divisiveness ``psi_k(d)``, the softmin of ``a = d . pos`` and ``b = d . neg``.

    ``psi_k = (a e^{-k a} + b e^{-k b}) / (e^{-k a} + e^{-k b})``; ``psi_k >= psi`` and
    ``psi_k - psi <= |a - b| / (1 + e^{k |a - b|})``.

    Args:
      d: ``(N, c)`` label distributions.
      pos, neg: ``(c,)`` polarity weights.
      k: sharpness (``> 0``; the authors' default 10).

    Returns:
      ``(N,)`` float array.

    Raises:
      ValueError: bad shapes (see :func:`divisiveness`).

    Source: authors' code (``LDL_DVS._psi``).
    """
    d = _dist(d, "d", "soft_divisiveness")
    pos, neg = _poles(pos, neg, d.shape[1], "soft_divisiveness")
    return _softmin(d @ pos, d @ neg, k)


def _wmean(x, w):
    """Mean over axis 0, weighted by ``w`` ``(N,)`` when given."""
    if w is None:
        return jnp.mean(x, axis=0)
    w = jnp.asarray(w, x.dtype)
    if w.shape != x.shape[:1]:
        raise ValueError(f"sample_weight must have shape {x.shape[:1]}, got {w.shape}")
    w = w.reshape(w.shape + (1,) * (x.ndim - 1))
    return jnp.sum(w * x, axis=0) / jnp.sum(w)


def _charbonnier(x, eps):
    return jnp.sqrt(x * x + eps * eps)


def divisiveness_loss(
    d_true,
    d_pred,
    pos,
    neg,
    *,
    k: float = 10.0,
    mode: str = "ovo",
    eps: float = CHARBONNIER_EPS,
    sample_weight=None,
) -> jax.Array:
    """Divisiveness-consistency loss between target and predicted label distributions.

    With ``rho(x) = sqrt(x^2 + eps^2)`` and ``psi_k(d; p, n)`` the softmin of ``d . p`` and
    ``d . n`` (:func:`soft_divisiveness`):

    * ``"full"``: ``mean_n rho(psi_k(D_n; pos, neg) - psi_k(P_n; pos, neg))``;
    * ``"ovo"`` (authors' default): ``1/(c(c-1)) sum_{i != j} mean_n rho(psi_k(D_n; pos, neg)
      - psi_k(P_n; pos_i e_i, neg_j e_j))``: the target keeps the full masks, the prediction is
      taken one ordered label pair at a time (``a = P_ni pos_i``, ``b = P_nj neg_j``);
    * ``"ovo_symmetric"``: as ``"ovo"`` but the target per pair too,
      ``psi_k(D_n; pos_i e_i, neg_j e_j)``.

    Args:
      d_true: ``(N, c)`` target distributions.
      d_pred: ``(N, c)`` predicted distributions (e.g. a softmax output).
      pos, neg: ``(c,)`` polarity weights.
      k: softmin sharpness.
      mode: one of :data:`DIVISIVENESS_MODES`.
      eps: Charbonnier constant.
      sample_weight: optional ``(N,)`` nonnegative row weights; every ``mean_n`` becomes
        ``sum_n w_n (.) / sum_n w_n`` (a 0/1 mask trains on a subset of rows under ``vmap``).

    Returns:
      Scalar (float32 for float32 inputs). Differentiable in ``d_pred``.

    Raises:
      ValueError: shapes differ or are not 2-D, ``c < 2`` in an ovo mode, bad ``pos`` / ``neg``
        shape, unknown ``mode``.
      DataError: (concrete ``d_true``) a row that is not a label distribution, e.g. one summing
        to 1.5 (:func:`~fidia_jax.projects.ldl.data.check_label_distributions`; nothing is
        renormalised).

    Source: authors' code (``LDL_DVS.dvs`` / ``LDL_DVS._ovo_dvs``); ``"ovo_symmetric"`` is ours.
    """
    where = "divisiveness_loss"
    _checks.assert_in(mode, DIVISIVENESS_MODES, "mode", where=where)
    d_true = _dist(d_true, "d_true", where)
    d_pred = _dist(d_pred, "d_pred", where)
    if d_true.shape != d_pred.shape:
        raise ValueError(f"{where}: d_true shape {d_true.shape} != d_pred shape {d_pred.shape}")
    c = d_true.shape[1]
    pos, neg = _poles(pos, neg, c, where)
    if mode != "full" and c < 2:
        raise ValueError(f"{where}: mode {mode!r} needs at least 2 labels, got c={c}")
    if _checks.is_concrete(d_true):
        check_label_distributions(d_true, f"{where}: d_true")
    return _divisiveness_loss(d_true, d_pred, pos, neg, sample_weight, k, eps, mode=mode)


@functools.partial(jax.jit, static_argnames=("mode",))
def _divisiveness_loss(d_true, d_pred, pos, neg, sample_weight, k, eps, *, mode):
    if mode == "full":
        diff = _softmin(d_true @ pos, d_true @ neg, k) - _softmin(d_pred @ pos, d_pred @ neg, k)
        return _wmean(_charbonnier(diff, eps), sample_weight)
    c = d_true.shape[1]
    pos_1xc, neg_1xc = pos[None, :], neg[None, :]

    def pairwise(d_nxc):  # psi_k per ordered pair: a = d_i pos_i, b = d_j neg_j -> (N, c, c)
        a = (d_nxc * pos_1xc)[:, :, None]
        b = (d_nxc * neg_1xc)[:, None, :]
        return _softmin(a, b, k)

    psi_pred_nxcxc = pairwise(d_pred)
    if mode == "ovo":
        psi_true = _softmin(d_true @ pos, d_true @ neg, k)[:, None, None]
    else:
        psi_true = pairwise(d_true)
    off_diag_cxc = 1.0 - jnp.eye(c, dtype=psi_pred_nxcxc.dtype)
    pen = _charbonnier(psi_true - psi_pred_nxcxc, eps) * off_diag_cxc[None, :, :]
    return jnp.sum(_wmean(pen, sample_weight)) / (c * (c - 1))


def ldl_kl_loss(d_true, d_pred, *, eps: float = KERAS_KL_EPS, sample_weight=None) -> jax.Array:
    """Mean KL divergence ``mean_n sum_j t_nj log(t_nj / p_nj)`` with ``t = clip(d_true, eps, 1)``
    and ``p = clip(d_pred, eps, 1)`` (Keras's ``kl_divergence``, what LDL-DVS trains with).

    Args:
      d_true, d_pred: ``(N, c)`` distributions of one shape.
      eps: clipping floor (Keras's ``1e-7``); keeps zeros finite on both sides.
      sample_weight: optional ``(N,)`` row weights (weighted mean over rows).

    Returns:
      Scalar.

    Raises:
      ValueError: shapes differ or are not 2-D.
      DataError: (concrete ``d_true``) a row that is not a label distribution, e.g. one summing
        to 1.5 (nothing is renormalised).
    """
    d_true = _dist(d_true, "d_true", "ldl_kl_loss")
    d_pred = _dist(d_pred, "d_pred", "ldl_kl_loss")
    if d_true.shape != d_pred.shape:
        raise ValueError(f"ldl_kl_loss: d_true shape {d_true.shape} != d_pred shape {d_pred.shape}")
    if _checks.is_concrete(d_true):
        check_label_distributions(d_true, "ldl_kl_loss: d_true")
    return _kl_loss(d_true, d_pred, eps, sample_weight)


@jax.jit
def _kl_loss(d_true, d_pred, eps, sample_weight):
    t = jnp.clip(d_true, eps, 1.0)
    p = jnp.clip(d_pred, eps, 1.0)
    return _wmean(jnp.sum(t * jnp.log(t / p), axis=1), sample_weight)


def ldl_dvs_loss(
    d_true,
    d_pred,
    pos,
    neg,
    *,
    alpha: float | jax.Array = 0.1,
    k: float = 10.0,
    mode: str = "ovo",
    sample_weight=None,
) -> jax.Array:
    """The LDL-DVS objective ``ldl_kl_loss(d_true, d_pred) + alpha * divisiveness_loss(...)``.

    ``alpha = 0`` is plain KL training (the baseline); the authors' default is ``alpha = 0.1``,
    ``k = 10``, ``mode = "ovo"``. ``alpha`` may be a traced array (vmap over a grid of weights).

    Returns:
      Scalar.

    Raises:
      ValueError: see :func:`divisiveness_loss`.

    Source: authors' code (``LDL_DVS._loss``).
    """
    kl = ldl_kl_loss(d_true, d_pred, sample_weight=sample_weight)
    dvs = divisiveness_loss(d_true, d_pred, pos, neg, k=k, mode=mode, sample_weight=sample_weight)
    return kl + alpha * dvs
