"""k-means (k-means++ initialisation), normalised spectral clustering, and how a clustering agrees
with true labels (purity, NMI, ARI) and follows itself along sequences (transition matrix).

Used to group token activations and to meta-cluster a cluster transition graph (AlgoTrace,
issue 14); all are plain functions of arrays. k-means runs in JAX (jit, any size, the input's
float dtype); spectral clustering takes an ``(N, N)`` affinity and does its eigendecomposition on
the host in float64, then k-means on the spectral embedding.

References:
  Arthur, Vassilvitskii, "k-means++: the advantages of careful seeding", SODA 2007 (the greedy
  variant with ``2 + log k`` local trials is scikit-learn's).
  Ng, Jordan, Weiss, "On spectral clustering: analysis and an algorithm", NeurIPS 2001.
  Hubert, Arabie, "Comparing partitions", Journal of Classification 1985 (ARI); Strehl, Ghosh,
  "Cluster ensembles", JMLR 2002 (NMI); both computed by scikit-learn.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fidia_jax.errors import needs_extra

__all__ = [
    "KMeansResult",
    "cluster_agreement",
    "cluster_purity",
    "cluster_transition_matrix",
    "kmeans",
    "kmeans_plus_plus",
    "knn_affinity",
    "spectral_clustering",
]


class KMeansResult(NamedTuple):
    """Output of :func:`kmeans`.

    Attributes:
      centers: ``(k, D)`` cluster centres.
      labels: ``(N,)`` int32 index of each point's nearest centre.
      inertia: ``()`` sum of squared distances of the points to their centres.
      n_iter: ``()`` int32 Lloyd iterations run (of the best restart).
    """

    centers: jax.Array
    labels: jax.Array
    inertia: jax.Array
    n_iter: jax.Array


def _sq_dists(x_NxD, c_KxD):
    d = (
        jnp.sum(x_NxD * x_NxD, axis=1)[:, None]
        - 2.0 * x_NxD @ c_KxD.T
        + jnp.sum(c_KxD * c_KxD, axis=1)[None, :]
    )
    return jnp.maximum(d, 0.0)


def _check(x, k, where):
    x = jnp.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"{where}: x must be 2-D (N, D), got shape {x.shape}")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= x.shape[0]:
        raise ValueError(f"{where}: k must be an int in [1, N={x.shape[0]}], got {k!r}")
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.float32)
    return x


def _kpp(x, rng, k, n_local_trials):
    """Greedy k-means++ on the host (float64 distances; no compilation per shape)."""
    n = x.shape[0]
    centers = np.empty((k, x.shape[1]), np.float64)
    first = int(rng.integers(n))
    centers[0] = x[first]
    closest = np.sum((x - x[first]) ** 2, axis=1)
    for c in range(1, k):
        total = closest.sum()
        p = closest / total if total > 0 else np.full(n, 1.0 / n)  # all on centres: uniform
        cand = rng.choice(n, size=n_local_trials, p=p)
        d_TxN = np.minimum(closest[None], np.sum((x[cand][:, None, :] - x[None]) ** 2, axis=-1))
        best = int(np.argmin(d_TxN.sum(1)))
        centers[c] = x[cand[best]]
        closest = d_TxN[best]
    return centers


def kmeans_plus_plus(x, k: int, *, key: jax.Array, n_local_trials: int | None = None) -> jax.Array:
    """Greedy k-means++ seeding: ``(k, D)`` initial centres chosen among the points.

    The first centre is uniform; each next one is the best (lowest resulting inertia) of
    ``n_local_trials`` candidates drawn with probability proportional to the squared distance to
    the nearest chosen centre (default ``2 + floor(ln k)``; ``1`` is the original k-means++).
    Runs on the host in float64 (``O(N k trials)``, seconds for ``N = 1e5, k = 50``), with a
    numpy generator seeded by the key's data, so it compiles nothing.

    Raises:
      ValueError: ``x`` not 2-D; ``k`` not in ``[1, N]``; ``n_local_trials < 1``.
    """
    x = _check(x, k, "kmeans_plus_plus")
    t = 2 + int(math.log(k)) if n_local_trials is None else int(n_local_trials)
    if t < 1:
        raise ValueError(f"kmeans_plus_plus: n_local_trials must be >= 1, got {t}")
    seed = np.asarray(jax.random.key_data(key)).ravel().tolist()
    centers = _kpp(np.asarray(x, np.float64), np.random.default_rng(seed), k, t)
    return jnp.asarray(centers, x.dtype)


@functools.partial(jax.jit, static_argnames=("max_iter",))
def _lloyd(x, centers, tol, max_iter):
    k = centers.shape[0]

    def step(carry):
        c, _, it = carry
        labels = jnp.argmin(_sq_dists(x, c), axis=1)
        onehot = jax.nn.one_hot(labels, k, dtype=x.dtype)
        counts = jnp.sum(onehot, axis=0)
        sums = onehot.T @ x
        new = jnp.where(counts[:, None] > 0, sums / jnp.maximum(counts, 1.0)[:, None], c)
        return new, jnp.sum((new - c) ** 2), it + 1

    def cond(carry):
        _, shift, it = carry
        return (it < max_iter) & (shift > tol)

    c, _, it = jax.lax.while_loop(
        cond, step, (centers, jnp.asarray(jnp.inf, x.dtype), jnp.int32(0))
    )
    d = _sq_dists(x, c)
    labels = jnp.argmin(d, axis=1).astype(jnp.int32)
    inertia = jnp.sum(jnp.take_along_axis(d, labels[:, None], axis=1))
    return KMeansResult(c, labels, inertia, it)


def kmeans(
    x, k: int, *, key: jax.Array, n_init: int = 1, max_iter: int = 300, tol: float = 1e-4
) -> KMeansResult:
    """Lloyd's k-means from k-means++ seeds; the best of ``n_init`` restarts (lowest inertia).

    Iterates until the squared centre shift is at most ``tol * mean(var(x, axis=0))`` (the
    scikit-learn convention) or ``max_iter`` iterations. A cluster that empties keeps its
    previous centre. Computed in ``x``'s float dtype (float32 unless x64 is enabled).

    Args:
      x: ``(N, D)`` points.
      k: number of clusters, ``1 <= k <= N``.
      key: PRNG key (restart ``r`` seeds with ``fold_in(key, r)``).
      n_init: restarts, ``>= 1``.
      max_iter: Lloyd iterations per restart, ``>= 1``.
      tol: relative tolerance, ``>= 0``.

    Returns:
      :class:`KMeansResult`.

    Raises:
      ValueError: ``x`` not 2-D or non-finite; ``k`` not in ``[1, N]``; ``n_init``,
        ``max_iter`` below 1; ``tol < 0``.
    """
    where = "kmeans"
    x = _check(x, k, where)
    if not bool(jnp.all(jnp.isfinite(x))):
        raise ValueError(f"{where}: x has non-finite entries")
    if int(n_init) < 1 or int(max_iter) < 1 or not tol >= 0:
        raise ValueError(
            f"{where}: need n_init >= 1, max_iter >= 1, tol >= 0; got {n_init}, {max_iter}, {tol}"
        )
    tol_abs = jnp.asarray(tol, x.dtype) * jnp.mean(jnp.var(x, axis=0))
    best = None
    for r in range(int(n_init)):
        res = _lloyd(
            x, kmeans_plus_plus(x, k, key=jax.random.fold_in(key, r)), tol_abs, int(max_iter)
        )
        if best is None or float(res.inertia) < float(best.inertia):
            best = res
    return best


def knn_affinity(x, n_neighbors: int) -> np.ndarray:
    """Symmetric k-nearest-neighbour connectivity ``(N, N)`` float64: ``(C + Cᵀ) / 2``.

    ``C[i, j] = 1`` when ``j`` is one of the ``n_neighbors`` nearest points of ``i`` (itself
    included, as scikit-learn's ``affinity="nearest_neighbors"``), so entries are 0, 0.5 or 1.

    Raises:
      ValueError: ``x`` not 2-D; ``n_neighbors`` not in ``[1, N]``.
    """
    x = np.asarray(x, np.float64)
    if x.ndim != 2:
        raise ValueError(f"knn_affinity: x must be 2-D (N, D), got shape {x.shape}")
    n = x.shape[0]
    if not 1 <= int(n_neighbors) <= n:
        raise ValueError(f"knn_affinity: n_neighbors must be in [1, N={n}], got {n_neighbors}")
    d = np.sum((x[:, None, :] - x[None, :, :]) ** 2, axis=-1)
    idx = np.argsort(d, axis=1, kind="stable")[:, : int(n_neighbors)]
    c = np.zeros((n, n))
    np.put_along_axis(c, idx, 1.0, axis=1)
    return 0.5 * (c + c.T)


def spectral_clustering(affinity, k: int, *, key: jax.Array, n_init: int = 10) -> np.ndarray:
    """Normalised spectral clustering (Ng-Jordan-Weiss) of a graph given by its affinity.

    ``A`` is symmetrised as ``(A + Aᵀ) / 2`` (a transition-count matrix can be passed as is);
    the ``k`` leading eigenvectors of ``D^-1/2 A D^-1/2`` (float64, ``numpy.linalg.eigh``) form
    an ``(N, k)`` embedding whose rows are scaled to unit norm and clustered by :func:`kmeans`.
    An isolated node (zero degree) gets a zero row (it joins whichever cluster is nearest the
    origin). ``k`` disconnected blocks are recovered exactly.

    Args:
      affinity: ``(N, N)`` non-negative, finite.
      k: number of clusters, ``1 <= k <= N``.
      key: PRNG key of the k-means step.
      n_init: k-means restarts.

    Returns:
      ``(N,)`` int64 labels in ``[0, k)``.

    Raises:
      ValueError: not square, negative or non-finite entries; ``k`` out of range.
    """
    a = np.asarray(affinity, np.float64)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"spectral_clustering: affinity must be square (N, N), got {a.shape}")
    if not np.all(np.isfinite(a)) or np.any(a < 0):
        raise ValueError("spectral_clustering: affinity must be finite and non-negative")
    a = 0.5 * (a + a.T)
    deg = a.sum(1)
    inv = np.where(deg > 0, 1.0 / np.sqrt(np.where(deg > 0, deg, 1.0)), 0.0)
    m = inv[:, None] * a * inv[None, :]
    _, vecs = np.linalg.eigh(m)
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= a.shape[0]:
        raise ValueError(f"spectral_clustering: k must be an int in [1, N={a.shape[0]}], got {k!r}")
    emb = vecs[:, -k:]
    norm = np.linalg.norm(emb, axis=1, keepdims=True)
    emb = np.where(norm > 0, emb / np.where(norm > 0, norm, 1.0), 0.0)
    res = kmeans(jnp.asarray(emb, jnp.float32), k, key=key, n_init=n_init)
    return np.asarray(res.labels, np.int64)


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
    with needs_extra("lm", "cluster_agreement"):
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
