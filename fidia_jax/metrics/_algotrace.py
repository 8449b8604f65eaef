"""Cluster-vs-label agreement, cluster transition matrices and primitive rates (AlgoTrace).

Deterministic numpy measurements for the AlgoTrace analysis (Lippl et al., ICML 2026,
arXiv:2510.15987): how well token-activation clusters match true primitive labels (purity, and
scikit-learn's NMI / ARI), how clusters follow one another inside a trace (the transition matrix
that the paper meta-clusters spectrally), and how often each primitive occurs in generated text
(the quantity whose change the paper's injection table reports).
"""

from __future__ import annotations

import numpy as np

__all__ = ["cluster_agreement", "cluster_purity", "cluster_transition_matrix", "primitive_rates"]


def _int_labels(x, name: str, where: str) -> np.ndarray:
    a = np.asarray(x)
    if a.ndim != 1 or a.size == 0 or not np.issubdtype(a.dtype, np.integer):
        raise ValueError(
            f"{where}: {name} must be a non-empty 1-D integer array, got {a.shape} {a.dtype}"
        )
    return a.astype(np.int64)


def cluster_purity(labels_true, labels_pred) -> float:
    """Purity: the fraction of points whose cluster's majority true label is their own.

    ``purity = (1/N) sum_c max_l |{i : pred_i = c, true_i = l}|``; 1 for a refinement of the true
    partition (so it rises with the number of clusters: compare at equal ``k`` or against random
    clusters of the same sizes).

    Args:
      labels_true: ``(N,)`` int true labels.
      labels_pred: ``(N,)`` int cluster ids.

    Returns:
      float in ``(0, 1]``.

    Raises:
      ValueError: empty, not 1-D integers, or different lengths.
    """
    t = _int_labels(labels_true, "labels_true", "cluster_purity")
    p = _int_labels(labels_pred, "labels_pred", "cluster_purity")
    if t.shape != p.shape:
        raise ValueError(f"cluster_purity: lengths differ, {t.shape} vs {p.shape}")
    _, ti = np.unique(t, return_inverse=True)
    _, pi = np.unique(p, return_inverse=True)
    counts = np.zeros((pi.max() + 1, ti.max() + 1), np.int64)
    np.add.at(counts, (pi, ti), 1)
    return float(counts.max(axis=1).sum() / t.size)


def cluster_agreement(labels_true, labels_pred) -> dict[str, float]:
    """Purity, normalised mutual information and adjusted Rand index of a clustering.

    NMI (arithmetic normalisation) and ARI are scikit-learn's ``normalized_mutual_info_score``
    and ``adjusted_rand_score`` (imported here; scikit-learn is in the ``sciml`` extra).

    Returns:
      ``{"purity", "nmi", "ari"}`` floats.

    Raises:
      ValueError: as :func:`cluster_purity`.
    """
    from sklearn import metrics as skm

    purity = cluster_purity(labels_true, labels_pred)
    t, p = np.asarray(labels_true), np.asarray(labels_pred)
    return {
        "purity": purity,
        "nmi": float(skm.normalized_mutual_info_score(t, p)),
        "ari": float(skm.adjusted_rand_score(t, p)),
    }


def cluster_transition_matrix(
    labels, sequence_ids, k: int, *, normalize: bool = True
) -> np.ndarray:
    """Counts (or frequencies) of cluster ``a`` followed by cluster ``b`` within a sequence.

    Consecutive entries ``i, i + 1`` with the same ``sequence_ids`` form one transition
    ``labels[i] -> labels[i + 1]`` (the input is in reading order; a change of sequence id
    breaks the chain). ``normalize=True`` divides every row by its total (rows with no outgoing
    transition stay 0), so ``M[a, b] = P(next cluster = b | cluster = a)``.

    Args:
      labels: ``(N,)`` int cluster ids in ``[0, k)``.
      sequence_ids: ``(N,)`` int sequence of each entry.
      k: number of clusters.
      normalize: row-normalise.

    Returns:
      ``(k, k)`` float64.

    Raises:
      ValueError: shapes that differ, ``k < 1``, or a label outside ``[0, k)``.
    """
    lab = _int_labels(labels, "labels", "cluster_transition_matrix")
    seq = _int_labels(sequence_ids, "sequence_ids", "cluster_transition_matrix")
    if lab.shape != seq.shape:
        raise ValueError(f"cluster_transition_matrix: lengths differ, {lab.shape} vs {seq.shape}")
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise ValueError(f"cluster_transition_matrix: k must be an int >= 1, got {k!r}")
    if lab.min() < 0 or lab.max() >= k:
        raise ValueError(
            f"cluster_transition_matrix: labels must be in [0, {k}), got [{lab.min()}, {lab.max()}]"
        )
    same = seq[1:] == seq[:-1]
    m = np.zeros((k, k), np.float64)
    np.add.at(m, (lab[:-1][same], lab[1:][same]), 1.0)
    if normalize:
        row = m.sum(axis=1, keepdims=True)
        m = np.where(row > 0, m / np.where(row > 0, row, 1.0), 0.0)
    return m


def primitive_rates(labels, n_primitives: int) -> np.ndarray:
    """Fraction of labelled tokens that belong to each primitive.

    Entries outside ``[0, n_primitives)`` (e.g. ``-1`` for prompt, EOS, padding) are ignored;
    ``rate[p] = #{label = p} / #{0 <= label < n_primitives}``, all zeros when nothing is labelled.

    Args:
      labels: int array of any shape.
      n_primitives: number of primitives, ``>= 1``.

    Returns:
      ``(n_primitives,)`` float64 summing to 1 (or 0).

    Raises:
      ValueError: non-integer labels or ``n_primitives < 1``.
    """
    lab = np.asarray(labels)
    if not np.issubdtype(lab.dtype, np.integer):
        raise ValueError(f"primitive_rates: labels must be integers, got {lab.dtype}")
    if int(n_primitives) < 1:
        raise ValueError(f"primitive_rates: n_primitives must be >= 1, got {n_primitives}")
    lab = lab[(lab >= 0) & (lab < n_primitives)]
    counts = np.bincount(lab.astype(np.int64), minlength=int(n_primitives)).astype(np.float64)
    return counts / counts.sum() if counts.sum() > 0 else counts
