"""Held-out metrics of a design policy under Best-of-N.

Per backbone, from ``n`` samples with scalar rewards and a pass/fail verdict under the proxy
thresholds (the real success criteria -- scRMSD, motif RMSD, pLDDT -- need a structure predictor
that is not available offline):

* ``max@N`` for each requested ``N <= n``: the unbiased estimator
  :func:`fidia_jax.rl.max_at_k` of ``E[max of N rewards]``.
* ``success@N``: probability that the Best-of-N pick passes every threshold, estimated without
  bias over all size-``N`` subsets of the ``n`` samples: with samples sorted by reward
  (ascending), ``sum_i C(i-1, N-1)/C(n, N) * pass_(i)`` (the pick of a subset is its best member).
  The reported *success rate* is its mean over backbones.
* ``precision``: share of samples that pass (unbiased for the share among ``N`` samples).
* diversity: mean pairwise identity over designed positions and the share of unique sequences.
* native recovery (mean identity to the native over designed positions) and motif preservation
  (share of fixed motif positions that keep the native residue).
"""

from __future__ import annotations

from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np

from fidia_jax import _checks, rl
from fidia_jax.errors import DataError

__all__ = [
    "backbone_metrics",
    "max_at_n",
    "mean_pairwise_identity",
    "success_at_n",
    "summarise",
]


def max_at_n(rewards_n: np.ndarray, n_bon: int) -> float:
    """Unbiased ``E[max of n_bon]`` from ``n >= n_bon`` rewards (:func:`fidia_jax.rl.max_at_k`)."""
    return float(rl.max_at_k(jnp.asarray(np.asarray(rewards_n, np.float32)), int(n_bon)))


def success_at_n(rewards_n: np.ndarray, passes_n: np.ndarray, n_bon: int) -> float:
    """Unbiased probability that the Best-of-``n_bon`` pick passes (ties: stable order).

    Args:
      rewards_n: ``(n,)`` float rewards.
      passes_n: ``(n,)`` bool verdicts.
      n_bon: Best-of-N size, ``1 <= n_bon <= n``.

    Returns:
      Float in ``[0, 1]``; ``nan`` when fewer than ``n_bon`` rewards are finite. A non-finite
      reward is a missing sample (the rule of :mod:`fidia_jax.rl`): the estimate comes from the
      finite samples alone, never from ranking a NaN as the best.

    Raises:
      ValueError: ``rewards_n`` not 1-D, or ``passes_n`` not of its shape.
      DataError: ``passes_n`` holds a value other than 0/1 (or False/True), e.g. NaN.
    """
    _checks.assert_rank(rewards_n, 1, "rewards_n", where="success_at_n")
    _checks.assert_shape(passes_n, np.shape(rewards_n), "passes_n", where="success_at_n")
    if np.isin(np.asarray(passes_n, np.float64), (0.0, 1.0), invert=True).any():
        raise DataError(
            "success_at_n: passes_n must hold only 0/1 or False/True verdicts, got values "
            f"{np.unique(np.asarray(passes_n, np.float64))[:5].tolist()}"
        )
    rewards_n = np.asarray(rewards_n, np.float64)
    finite = np.isfinite(rewards_n)
    rewards_m = rewards_n[finite]
    passes_m = np.asarray(passes_n, np.float64)[finite]
    if rewards_m.shape[0] < int(n_bon):
        return float("nan")
    order = np.argsort(rewards_m, kind="stable")
    w = rl.max_at_k_weights(int(rewards_m.shape[0]), int(n_bon))
    return float(np.sum(w * passes_m[order]))


def mean_pairwise_identity(sequences_NxL: np.ndarray, positions_L: np.ndarray) -> float:
    """Mean identity over ``positions_L`` of all ``N(N-1)/2`` pairs (``nan`` if ``N < 2``).

    Args:
      sequences_NxL: ``(N, L)`` int tokens.
      positions_L: ``(L,)`` bool, positions compared.

    Raises:
      ValueError: ``sequences_NxL`` not 2-D, or ``positions_L`` not ``(L,)``.
    """
    _checks.assert_rank(sequences_NxL, 2, "sequences_NxL", where="mean_pairwise_identity")
    _checks.assert_shape(
        positions_L, np.shape(sequences_NxL)[1:], "positions_L", where="mean_pairwise_identity"
    )
    seqs = np.asarray(sequences_NxL)[:, np.asarray(positions_L, bool)]
    n = seqs.shape[0]
    if n < 2 or seqs.shape[1] == 0:
        return float("nan")
    same = (seqs[:, None, :] == seqs[None, :, :]).mean(-1)
    iu = np.triu_indices(n, 1)
    return float(same[iu].mean())


def backbone_metrics(
    rewards_n: np.ndarray,
    passes_n: np.ndarray,
    sequences_NxL: np.ndarray,
    native_L: np.ndarray,
    designed_L: np.ndarray,
    fixed_L: np.ndarray,
    *,
    ns: Sequence[int],
    bon_n: int,
) -> dict[str, float]:
    """All metrics of one backbone from its ``n`` samples.

    Args:
      rewards_n: ``(n,)`` float rewards.
      passes_n: ``(n,)`` bool, sample passes every proxy threshold.
      sequences_NxL: ``(n, L)`` int tokens.
      native_L: ``(L,)`` native tokens.
      designed_L: ``(L,)`` bool, designed positions.
      fixed_L: ``(L,)`` bool, fixed motif positions.
      ns: the ``N`` of ``max@N`` (each ``<= n``).
      bon_n: the Best-of-N size deciding success.

    Returns:
      Dict with ``max@N`` per N, ``success@{bon_n}``, ``success`` (same), ``precision``,
      ``identity`` (mean pairwise), ``unique``, ``recovery``, ``motif``, ``reward_mean``.
    """
    rewards_n = np.asarray(rewards_n, np.float32)
    passes_n = np.asarray(passes_n, bool)
    seqs = np.asarray(sequences_NxL)
    designed = np.asarray(designed_L, bool)
    fixed = np.asarray(fixed_L, bool)
    n = rewards_n.shape[0]
    out: dict[str, float] = {}
    for k in ns:
        if k > n:
            raise ValueError(f"max@{k} needs at least {k} samples, got {n}")
        out[f"max@{k}"] = max_at_n(rewards_n, k)
    out["success"] = success_at_n(rewards_n, passes_n, bon_n)
    out[f"success@{bon_n}"] = out["success"]
    out["precision"] = float(passes_n.mean())
    out["identity"] = mean_pairwise_identity(seqs, designed)
    out["unique"] = float(len({s.tobytes() for s in seqs}) / n)
    native = np.asarray(native_L)
    out["recovery"] = (
        float((seqs[:, designed] == native[designed]).mean()) if designed.any() else float("nan")
    )
    out["motif"] = float((seqs[:, fixed] == native[fixed]).mean()) if fixed.any() else 1.0
    out["reward_mean"] = float(rewards_n.mean())
    return out


def summarise(per_backbone: Sequence[dict[str, float]]) -> dict[str, float]:
    """Mean over backbones of every numeric metric (``nan`` entries ignored)."""
    if not per_backbone:
        return {}
    keys = [k for k, v in per_backbone[0].items() if isinstance(v, (int, float))]
    out = {}
    for key in keys:
        vals = np.array([float(m[key]) for m in per_backbone], np.float64)
        out[key] = float(np.nanmean(vals)) if np.isfinite(vals).any() else float("nan")
    return out
