"""Trusted-information-subset losses for multi-fidelity regression (no paired samples needed).

Paper (abstract only): "Credible Information Subset Decomposition: an end-to-end multi-fidelity
learning model by modeling label information", ICML 2026. The abstract splits supervision into
three trusted subsets: (1) the absolute values of high-fidelity labels; (2) the reliability of
high/medium-fidelity label *intervals* under adaptive constraints; (3) the *ordering* of labels
within one fidelity. It gives no formula. **Every formula below is our reconstruction** from that
sentence; none is taken from the paper or from authors' code (we had neither).

Notation: one network ``f`` predicts the high-fidelity value at every training input (``pred_N``);
row ``n`` carries one label ``y_n`` of fidelity ``k(n)``; ``m_nk`` is the membership mask
(``True`` where row ``n`` belongs to fidelity ``k``; ``k = 0`` is the high fidelity).

* absolute term (reconstruction): ``L_abs = mean_{n: m_n0} (f_n - y_n)^2``.
* interval term for a lower fidelity ``k >= 1`` (reconstruction): a learnable affine calibration
  ``g_n = a_k f_n + b_k`` maps the high-fidelity prediction to fidelity ``k``'s scale, and a label
  is trusted only up to a radius ``r_k``: ``L_int,k = mean_{n: m_nk} relu(|g_n - y_n| - r_k)^2``,
  i.e. the prediction must lie in the interval ``[y_n - r_k, y_n + r_k]`` on the calibrated scale.
  The radius is adaptive, either learnable (``r_k = softplus(rho_k)`` with a penalty
  ``lambda_r r_k`` so that it cannot grow without bound) or the ``q``-quantile of the current
  absolute residuals of fidelity ``k`` (``stop_gradient``: the ``(1 - q)`` least credible labels
  are pulled in, the others are trusted as they are).
* ranking term within each fidelity ``k`` (reconstruction), over ordered pairs ``(i, j)`` of rows
  of fidelity ``k`` with ``y_i > y_j``, in one of two forms (:data:`RANKING_FORMS`):

  - ``"hinge"`` (default): a squared hinge on the **calibrated** prediction ``g_n = a_k f_n + b_k``
    (``g = f`` for the high fidelity; ``a_k, b_k`` under ``stop_gradient``, they belong to the
    interval term), ``L_rank,k = mean relu(gamma (y_i - y_j) - (g_i - g_j))^2``. It
    **saturates**: a pair ordered with that margin costs exactly 0. With the default
    ``gamma = 0`` it penalises misordered pairs only and never asks for gaps at all, so it
    cannot inflate the prediction's scale. A margin ``gamma > 0`` asks ``f`` for gaps of
    ``gamma (y_i - y_j) / a_k``: when ``a_k`` is small (a poorly identified calibration) that
    inflates ``f``, which shrinks the fitted ``a_k`` further (measured: Forrester, ``demo``
    run 2, ``gamma = 0.5``: ``a_LF`` 0.04, RMSE 49; docs/multifidelity.md).
  - ``"logistic"`` (the first reconstruction, kept as an ablation):
    ``L_rank,k = mean softplus(-(f_i - f_j) / tau)`` on the **uncalibrated** ``f`` (pairwise
    logistic, RankNet-style). It never reaches 0: its gradient always widens every ordered gap,
    which the few absolute HF labels cannot hold where they are absent.

Total: ``w_abs L_abs + w_int sum_k L_int,k + w_rank sum_k L_rank,k (+ lambda_r sum_k r_k)``.
A weight of 0 switches a term off (it is then not computed at all).

Masked slots are never read: every label and prediction outside its mask is replaced by 0 with
``jnp.where`` before any arithmetic, so a NaN there changes neither the loss nor its gradient.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fidia_jax import _checks

__all__ = [
    "RADIUS_MODES",
    "RANKING_FORMS",
    "TrustedSubsetCalibration",
    "TrustedSubsetWeights",
    "absolute_label_loss",
    "init_trusted_subset_calibration",
    "interval_trust_loss",
    "masked_quantile",
    "pairwise_hinge_ranking_loss",
    "pairwise_ranking_loss",
    "trusted_subset_loss",
]

#: How the trust radius of the interval term adapts.
RADIUS_MODES = ("learnable", "quantile")
#: Forms of the ranking term: saturating squared hinge on calibrated predictions, or pairwise
#: logistic on the uncalibrated prediction (the ablation).
RANKING_FORMS = ("hinge", "logistic")


def _check_vectors(where: str, pred_N, y_N, mask_N) -> None:
    _checks.assert_rank(pred_N, 1, "pred_N", where=where)
    _checks.assert_rank(y_N, 1, "y_N", where=where)
    _checks.assert_rank(mask_N, 1, "mask_N", where=where)
    if not (pred_N.shape == y_N.shape == mask_N.shape):
        raise ValueError(
            f"{where}: pred_N, y_N, mask_N must have one shape (N,), got {pred_N.shape}, "
            f"{y_N.shape}, {mask_N.shape}"
        )
    if jnp.asarray(mask_N).dtype != jnp.bool_:
        raise ValueError(f"{where}: mask_N must be bool, got {jnp.asarray(mask_N).dtype}")
    if _checks.is_concrete(y_N) and _checks.is_concrete(mask_N):
        bad = np.isnan(np.asarray(y_N)) & np.asarray(mask_N)
        if bad.any():
            raise ValueError(
                f"{where}: y_N has {int(bad.sum())} NaN label(s) inside the mask "
                f"(first at row {int(np.flatnonzero(bad)[0])})"
            )


def _masked_mean(v, mask):
    count = jnp.sum(mask)
    return jnp.sum(jnp.where(mask, v, 0.0)) / jnp.maximum(count, 1)


def absolute_label_loss(pred_N: jax.Array, y_N: jax.Array, mask_N: jax.Array) -> jax.Array:
    """Mean squared error over the rows in ``mask_N`` (the high-fidelity rows).

    Reconstruction of the "absolute values of high-fidelity labels" subset (abstract only).

    Args:
      pred_N: ``(N,)`` float predictions.
      y_N: ``(N,)`` float labels (values outside the mask are never read; NaN allowed there).
      mask_N: ``(N,)`` bool.

    Returns:
      float scalar; ``0`` when the mask is empty (under ``jit``).

    Raises:
      ValueError: ranks or shapes differ, ``mask_N`` not bool, a NaN label inside the mask
        (concrete inputs).
    """
    _check_vectors("absolute_label_loss", pred_N, y_N, mask_N)
    diff = jnp.where(mask_N, pred_N, 0.0) - jnp.where(mask_N, y_N, 0.0)
    return _masked_mean(jnp.square(diff), mask_N)


def masked_quantile(values_N: jax.Array, mask_N: jax.Array, q: float | jax.Array) -> jax.Array:
    """The ``q``-quantile of ``values_N[mask_N]`` with linear interpolation (``numpy.quantile``'s
    default), computed under ``jit`` without boolean indexing.

    Args:
      values_N: ``(N,)`` float.
      mask_N: ``(N,)`` bool.
      q: in ``[0, 1]``.

    Returns:
      float scalar; ``0`` when the mask is empty.
    """
    n = jnp.sum(mask_N)
    sorted_N = jnp.sort(jnp.where(mask_N, values_N, jnp.inf))
    pos = jnp.asarray(q, sorted_N.dtype) * jnp.maximum(n - 1, 0).astype(sorted_N.dtype)
    lo = jnp.floor(pos).astype(jnp.int32)
    hi = jnp.minimum(lo + 1, jnp.maximum(n - 1, 0))
    frac = pos - lo.astype(sorted_N.dtype)
    v_lo, v_hi = sorted_N[lo], sorted_N[hi]
    out = v_lo + frac * (v_hi - v_lo)
    return jnp.where(n > 0, jnp.where(frac > 0, out, v_lo), 0.0)


def interval_trust_loss(
    pred_N: jax.Array,
    y_N: jax.Array,
    mask_N: jax.Array,
    scale: jax.Array,
    shift: jax.Array,
    radius: jax.Array,
) -> jax.Array:
    """``mean_{mask} relu(|scale * pred + shift - y| - radius)^2`` (reconstruction).

    The interval subset: a lower-fidelity label ``y`` is trusted to within ``radius`` of the
    calibrated high-fidelity prediction ``scale * pred + shift``; only the part of the residual
    outside that interval is penalised.

    Args:
      pred_N: ``(N,)`` high-fidelity predictions.
      y_N: ``(N,)`` labels (read only inside the mask).
      mask_N: ``(N,)`` bool, the rows of one lower fidelity.
      scale, shift: scalars, the affine calibration ``(a_k, b_k)``.
      radius: scalar ``>= 0``.

    Returns:
      float scalar (``0`` for an empty mask under ``jit``).

    Raises:
      ValueError: as :func:`absolute_label_loss`; ``scale``/``shift``/``radius`` not scalars.
    """
    _check_vectors("interval_trust_loss", pred_N, y_N, mask_N)
    for name, v in (("scale", scale), ("shift", shift), ("radius", radius)):
        _checks.assert_rank(v, 0, name, where="interval_trust_loss")
    res = scale * jnp.where(mask_N, pred_N, 0.0) + shift - jnp.where(mask_N, y_N, 0.0)
    return _masked_mean(jnp.square(jax.nn.relu(jnp.abs(res) - radius)), mask_N)


def pairwise_ranking_loss(
    pred_N: jax.Array, y_N: jax.Array, mask_N: jax.Array, *, temperature: float = 1.0
) -> jax.Array:
    """Pairwise logistic ranking loss within one fidelity (reconstruction).

    ``mean over (i, j) with mask_i, mask_j, y_i > y_j of softplus(-(pred_i - pred_j) / temperature)``;
    ties in ``y`` give no pair. ``O(N^2)`` memory.

    Args:
      pred_N: ``(N,)`` predictions.
      y_N: ``(N,)`` labels of one fidelity (read only inside the mask).
      mask_N: ``(N,)`` bool.
      temperature: ``tau > 0`` (in the units of ``pred``).

    Returns:
      float scalar (``0`` when there is no ordered pair).

    Raises:
      ValueError: as :func:`absolute_label_loss`; ``temperature <= 0``.
    """
    _check_vectors("pairwise_ranking_loss", pred_N, y_N, mask_N)
    if isinstance(temperature, (int, float)) and temperature <= 0:
        raise ValueError(f"pairwise_ranking_loss: temperature must be > 0, got {temperature}")
    p = jnp.where(mask_N, pred_N, 0.0)
    y = jnp.where(mask_N, y_N, 0.0)
    pair_NxN = mask_N[:, None] & mask_N[None, :] & (y[:, None] > y[None, :])
    loss_NxN = jax.nn.softplus(-(p[:, None] - p[None, :]) / temperature)
    return _masked_mean(loss_NxN, pair_NxN)


def pairwise_hinge_ranking_loss(
    pred_N: jax.Array, y_N: jax.Array, mask_N: jax.Array, *, margin_scale: float = 0.0
) -> jax.Array:
    """Saturating pairwise ranking loss within one fidelity (reconstruction).

    ``mean over (i, j) with mask_i, mask_j, y_i > y_j of relu(gamma (y_i - y_j) - (pred_i -
    pred_j))^2`` with ``gamma = margin_scale``: a squared hinge whose margin is the label gap
    scaled by ``gamma`` (``gamma = 0``: misordered pairs only). A pair whose predictions are
    ordered with at least that margin costs exactly 0 (the loss saturates: it never asks for
    gaps wider than ``gamma`` times the labels'). ``pred`` should be on the labels' scale (for a
    lower fidelity, the calibrated ``a_k f + b_k``); ties in ``y`` give no pair. ``O(N^2)``
    memory.

    Args:
      pred_N: ``(N,)`` predictions on the scale of ``y_N``.
      y_N: ``(N,)`` labels of one fidelity (read only inside the mask).
      mask_N: ``(N,)`` bool.
      margin_scale: ``gamma`` in ``[0, 1]``.

    Returns:
      float scalar (``0`` when there is no ordered pair), in squared label units.

    Raises:
      ValueError: as :func:`absolute_label_loss`; ``margin_scale`` outside ``[0, 1]``.
    """
    _check_vectors("pairwise_hinge_ranking_loss", pred_N, y_N, mask_N)
    if isinstance(margin_scale, (int, float)) and not 0.0 <= margin_scale <= 1.0:
        raise ValueError(
            f"pairwise_hinge_ranking_loss: margin_scale must be in [0, 1], got {margin_scale}"
        )
    p = jnp.where(mask_N, pred_N, 0.0)
    y = jnp.where(mask_N, y_N, 0.0)
    gap_NxN = y[:, None] - y[None, :]
    pair_NxN = mask_N[:, None] & mask_N[None, :] & (gap_NxN > 0)
    loss_NxN = jnp.square(jax.nn.relu(margin_scale * gap_NxN - (p[:, None] - p[None, :])))
    return _masked_mean(loss_NxN, pair_NxN)


class TrustedSubsetCalibration(NamedTuple):
    """Learnable per-fidelity parameters of the interval term (entry 0, the high fidelity, is
    never used).

    Attributes:
      scale_K: ``(K,)`` float, ``a_k``.
      shift_K: ``(K,)`` float, ``b_k``.
      radius_raw_K: ``(K,)`` float, ``rho_k``; the learnable radius is ``softplus(rho_k)``.
    """

    scale_K: jax.Array
    shift_K: jax.Array
    radius_raw_K: jax.Array


def init_trusted_subset_calibration(
    num_fidelities: int, *, radius: float = 0.5
) -> TrustedSubsetCalibration:
    """Identity calibration (``a = 1``, ``b = 0``) and ``softplus(rho) = radius`` (float32)."""
    if num_fidelities < 1:
        raise ValueError(f"num_fidelities must be >= 1, got {num_fidelities}")
    if radius <= 0:
        raise ValueError(f"radius must be > 0, got {radius}")
    rho = float(np.log(np.expm1(radius)))
    k = num_fidelities
    return TrustedSubsetCalibration(
        jnp.ones((k,), jnp.float32), jnp.zeros((k,), jnp.float32), jnp.full((k,), rho, jnp.float32)
    )


@dataclasses.dataclass(frozen=True)
class TrustedSubsetWeights:
    """Weights and switches of :func:`trusted_subset_loss` (static: a weight of 0 removes a term).

    Attributes:
      absolute: ``w_abs``.
      interval: ``w_int``.
      ranking: ``w_rank``.
      radius_mode: ``"learnable"`` or ``"quantile"`` (:data:`RADIUS_MODES`).
      radius_quantile: ``q`` of the quantile mode, in ``[0, 1]``.
      radius_penalty: ``lambda_r`` of the learnable mode, ``>= 0``.
      temperature: ``tau`` of the logistic ranking form, ``> 0``.
      rank_high_fidelity: also rank within the high fidelity (``k = 0``).
      ranking_form: ``"hinge"`` (saturating, calibrated predictions) or ``"logistic"``
        (:data:`RANKING_FORMS`).
      margin_scale: ``gamma`` of the hinge form, in ``[0, 1]`` (``0``: order only).
    """

    absolute: float = 1.0
    interval: float = 1.0
    ranking: float = 0.1
    radius_mode: str = "quantile"
    radius_quantile: float = 0.8
    radius_penalty: float = 0.1
    temperature: float = 0.1
    rank_high_fidelity: bool = True
    ranking_form: str = "hinge"
    margin_scale: float = 0.0

    def __post_init__(self) -> None:
        for name in ("absolute", "interval", "ranking", "radius_penalty"):
            if getattr(self, name) < 0:
                raise ValueError(
                    f"TrustedSubsetWeights.{name} must be >= 0, got {getattr(self, name)}"
                )
        if self.radius_mode not in RADIUS_MODES:
            raise ValueError(
                f"TrustedSubsetWeights.radius_mode must be one of {RADIUS_MODES}, got {self.radius_mode!r}"
            )
        if not 0.0 <= self.radius_quantile <= 1.0:
            raise ValueError(
                f"TrustedSubsetWeights.radius_quantile must be in [0, 1], got {self.radius_quantile}"
            )
        if self.ranking_form not in RANKING_FORMS:
            raise ValueError(
                f"TrustedSubsetWeights.ranking_form must be one of {RANKING_FORMS}, got {self.ranking_form!r}"
            )
        if not 0.0 <= self.margin_scale <= 1.0:
            raise ValueError(
                f"TrustedSubsetWeights.margin_scale must be in [0, 1], got {self.margin_scale}"
            )
        if self.temperature <= 0:
            raise ValueError(
                f"TrustedSubsetWeights.temperature must be > 0, got {self.temperature}"
            )
        if self.absolute == self.interval == self.ranking == 0:
            raise ValueError("TrustedSubsetWeights: every term is switched off")


def trusted_subset_loss(
    pred_N: jax.Array,
    y_N: jax.Array,
    member_NxK: jax.Array,
    calibration: TrustedSubsetCalibration,
    weights: TrustedSubsetWeights = TrustedSubsetWeights(),
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """The three-subset multi-fidelity loss (reconstruction; see the module docstring).

    Args:
      pred_N: ``(N,)`` float, the network's high-fidelity prediction at every training row.
      y_N: ``(N,)`` float labels, each in its row's fidelity (standardised units advised).
      member_NxK: ``(N, K)`` bool fidelity membership; column 0 is the high fidelity. A row
        may belong to no column (padding): it is never read.
      calibration: :class:`TrustedSubsetCalibration` with ``(K,)`` leaves.
      weights: :class:`TrustedSubsetWeights`.

    Returns:
      ``(total, terms)``: float scalar and a dict with ``"absolute"``, ``"interval"`` (summed over
      ``k >= 1``), ``"ranking"`` (summed over fidelities), ``"radius_K"`` (``(K,)``, the radii
      used; entry 0 is 0) -- each term unweighted, 0 when switched off.

    Raises:
      ValueError: ranks/shapes, ``member_NxK`` not bool, calibration leaves not ``(K,)``, a NaN
        label inside a fidelity's mask, or (concrete masks) a fidelity with no rows while a term
        that reads it is on -- including the high fidelity with the absolute term on.
    """
    where = "trusted_subset_loss"
    _checks.assert_rank(member_NxK, 2, "member_NxK", where=where)
    n, k = member_NxK.shape
    if jnp.asarray(member_NxK).dtype != jnp.bool_:
        raise ValueError(f"{where}: member_NxK must be bool, got {jnp.asarray(member_NxK).dtype}")
    if pred_N.shape != (n,) or y_N.shape != (n,):
        raise ValueError(f"{where}: pred_N and y_N must be ({n},) to match member_NxK {member_NxK.shape}, "
                         f"got {pred_N.shape}, {y_N.shape}")  # fmt: skip
    for name, leaf in calibration._asdict().items():
        if jnp.shape(leaf) != (k,):
            raise ValueError(f"{where}: calibration.{name} must be ({k},), got {jnp.shape(leaf)}")
    if _checks.is_concrete(member_NxK):
        counts = np.asarray(member_NxK).sum(axis=0)
        needs = [weights.absolute > 0 or (weights.ranking > 0 and weights.rank_high_fidelity)]
        needs += [weights.interval > 0 or weights.ranking > 0] * (k - 1)
        for i in range(k):
            if needs[i] and counts[i] == 0:
                raise ValueError(
                    f"{where}: fidelity {i} has no samples (column {i} of member_NxK is empty)"
                )
    if _checks.is_concrete(member_NxK, y_N):
        bad = np.isnan(np.asarray(y_N)) & np.asarray(member_NxK).any(axis=1)
        if bad.any():
            raise ValueError(f"{where}: y_N has {int(bad.sum())} NaN label(s) inside the fidelity masks "
                             f"(first at row {int(np.flatnonzero(bad)[0])})")  # fmt: skip
    zero = jnp.zeros((), pred_N.dtype)
    terms = {"absolute": zero, "interval": zero, "ranking": zero}
    radii = [zero]
    total = zero
    if weights.absolute > 0:
        terms["absolute"] = absolute_label_loss(pred_N, y_N, member_NxK[:, 0])
        total = total + weights.absolute * terms["absolute"]
    for i in range(1, k):
        mask = member_NxK[:, i]
        a, b = calibration.scale_K[i], calibration.shift_K[i]
        if weights.radius_mode == "learnable":
            r = jax.nn.softplus(calibration.radius_raw_K[i])
        else:
            res = a * jnp.where(mask, pred_N, 0.0) + b - jnp.where(mask, y_N, 0.0)
            r = jax.lax.stop_gradient(masked_quantile(jnp.abs(res), mask, weights.radius_quantile))
        radii.append(r)
        if weights.interval > 0:
            term = interval_trust_loss(pred_N, y_N, mask, a, b, r)
            terms["interval"] = terms["interval"] + term
            total = total + weights.interval * term
            if weights.radius_mode == "learnable":
                total = total + weights.radius_penalty * r
    if weights.ranking > 0:
        for i in range(0 if weights.rank_high_fidelity else 1, k):
            mask = member_NxK[:, i]
            if weights.ranking_form == "logistic":
                term = pairwise_ranking_loss(pred_N, y_N, mask, temperature=weights.temperature)
            else:
                g_N = pred_N
                if i > 0:
                    # the calibration is the interval term's: the ranking term trains f only
                    # (through a_k, a pair's penalty would shrink or grow a_k instead)
                    a, b = jax.lax.stop_gradient((calibration.scale_K[i], calibration.shift_K[i]))
                    g_N = a * jnp.where(mask, pred_N, 0.0) + b
                term = pairwise_hinge_ranking_loss(
                    g_N, y_N, mask, margin_scale=weights.margin_scale
                )
            terms["ranking"] = terms["ranking"] + term
            total = total + weights.ranking * term
    terms["radius_K"] = jnp.stack(radii)
    return total, terms
