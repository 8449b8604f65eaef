"""Residual-update geometry: eRank, subspace projectors, ΔS, ΔD, RID, TME and MixIG (float64 numpy).

A transformer block writes an additive update ``ΔX`` into the residual stream ``X`` (``N`` tokens
by ``C`` features). Xi et al. (ICML 2026) ask *what* an update changes: its spectrum (how many
directions the residual uses), its subspace (whether it writes into directions the residual did
not span), and how much it moves information between tokens. The functions here measure that on
any ``(X, ΔX)`` pair, so they apply unchanged to a real model's captured activations.

Which formula comes from where (only the abstract and the issue's summary of the method could be
read; the paper's equations were not available):

* ``erank`` (paper: "information complexity (eRank)"): Roy–Vetterli effective rank
  ``exp(H(σ / Σσ))``, reusing :func:`fidia_jax.metrics.effective_rank` in float64.
* ``subspace_projector`` (paper: "subspace support"; the numerical-rank rule is ours, a
  **reconstruction**): ``P = V_r V_rᵀ`` from the top ``r`` right singular vectors of ``X``, ``r``
  given directly (``rank``) or as the count of singular values ``> rtol · σ_1``.
* ``spectral_change`` ΔS (**reconstruction**): ``log eRank(X + ΔX) − log eRank(X)`` (nats).
* ``subspace_innovation`` ΔD (**reconstruction**): ``||ΔX (I − P_X)||²_F / ||ΔX||²_F`` in
  ``[0, 1]``, the share of the update's energy outside the residual's row subspace.
* ``residual_information_dynamics`` RID (issue: "spectral change + subspace innovation";
  the sum of ``|ΔS|`` and ΔD is our **reconstruction** of the combination).
* ``token_mixing_entropy`` TME (**reconstruction**): mean Shannon entropy of the rows of a
  row-stochastic token-mixing matrix (attention weights), normalised by ``log`` of the number of
  keys each query may read.
* ``mixing_information_gain`` MixIG (**reconstruction**): the Gaussian information (nats) that
  the mixed context ``W X̂`` adds, on held-out tokens, to a linear prediction of the update from
  the token's own state ``X̂``: ``½ log(SSE_self / SSE_self+mix)``.

A second set, ``note_residual_information_dynamics``, ``similarity_mixing_entropy`` and
``similarity_mixing_gain``, implements the formulas a **third-party** note on the paper gives
(papernotes.org, 2026-05-08; read in place of the paper, whose §3 could not be read here):
ΔS ``= |eRank(X') − eRank(X)| / min(S, H)``, ΔD from the column and row subspaces of ``X``
applied to ``X' = X + ΔX`` (norms not squared), RID their sum, TME the entropy of a
cosine-similarity mixing distribution of the tokens and MixIG ``TME(X') − TME(X)``. The
project's tables use the reconstruction unless they say otherwise (``docs/residual_geometry.md``
compares the two).

RID depends on ``X`` and ``ΔX`` only through the set of their rows (any joint token permutation
leaves it unchanged); TME depends on which token reads which (a causal mixing matrix recomputed on
reordered tokens changes it), and MixIG on whether the update is a function of other tokens.

References:
  Xi, Tian, Yang, Yi, Lin, Hao, Wang, Wang, "Large vision-language models get lost in attention",
  ICML 2026, arXiv:2605.05668, https://arxiv.org/abs/2605.05668.
  Roy, Vetterli, "The effective rank: a measure of effective dimensionality", EUSIPCO 2007.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from fidia_jax.metrics import effective_rank, ridge_fit, ridge_predict

__all__ = [
    "erank",
    "mixing_information_gain",
    "note_residual_information_dynamics",
    "numerical_rank",
    "residual_information_dynamics",
    "similarity_mixing_entropy",
    "similarity_mixing_gain",
    "spectral_change",
    "subspace_innovation",
    "subspace_projector",
    "token_mixing_entropy",
]


def _matrix(x: Any, name: str, where: str) -> np.ndarray:
    a = np.asarray(x, np.float64)
    if a.ndim != 2 or min(a.shape) < 1:
        raise ValueError(
            f"{where}: {name} must be a non-empty 2-D (N, C) matrix, got shape {a.shape}"
        )
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{where}: {name} has non-finite values")
    return a


def _pair(x: Any, dx: Any, where: str) -> tuple[np.ndarray, np.ndarray]:
    x = _matrix(x, "x", where)
    dx = _matrix(dx, "dx", where)
    if x.shape != dx.shape:
        raise ValueError(
            f"{where}: x {x.shape} and its update dx {dx.shape} must have the same shape"
        )
    return x, dx


def erank(x: Any) -> float:
    """Effective rank ``exp(H(σ / Σσ))`` of an ``(N, C)`` matrix, in float64.

    :func:`fidia_jax.metrics.effective_rank` evaluated in float64 (inside ``jax.enable_x64``).

    Returns:
      float in ``[1, min(N, C)]`` (``0`` for the zero matrix).

    Raises:
      ValueError: not a non-empty 2-D finite matrix.
    """
    a = _matrix(x, "x", "erank")
    with jax.enable_x64(True):
        e = float(np.asarray(effective_rank(a)))
    if e == 0.0 and np.any(a != 0.0):
        # a non-zero matrix read as rank 0: jax's SVD returned non-finite singular values (no
        # convergence); numpy's LAPACK SVD instead (it raises LinAlgError if it fails too)
        s = np.linalg.svd(a, compute_uv=False)
        p = s[s > 0] / np.sum(s)
        e = float(np.exp(-np.sum(p * np.log(p))))
    return e


def numerical_rank(x: Any, *, rank: int | None = None, rtol: float | None = 1e-2) -> int:
    """The number ``r`` of directions kept by :func:`subspace_projector` (the rank parameter).

    Args:
      x: ``(N, C)`` matrix.
      rank: use exactly this many directions, ``1 <= rank <= min(N, C)`` (overrides ``rtol``).
      rtol: else count the singular values ``> rtol · σ_max``, ``0 < rtol < 1``.

    Returns:
      int ``r`` (``0`` only for the zero matrix under ``rtol``).

    Raises:
      ValueError: ``rank`` outside ``[1, min(N, C)]``, ``rtol`` outside ``(0, 1)``, or neither given.
    """
    a = _matrix(x, "x", "numerical_rank")
    return _rank_from_svals(np.linalg.svd(a, compute_uv=False), rank, rtol)


def _rank_from_svals(s: np.ndarray, rank, rtol) -> int:
    where = "numerical_rank"
    kmax = s.shape[0]
    if rank is not None:
        if (
            isinstance(rank, bool)
            or not isinstance(rank, (int, np.integer))
            or not 1 <= rank <= kmax
        ):
            raise ValueError(
                f"{where}: rank must be an int in [1, min(N, C) = {kmax}], got {rank!r}"
            )
        return int(rank)
    if rtol is None or not 0.0 < float(rtol) < 1.0:
        raise ValueError(f"{where}: give rank=int or rtol in (0, 1), got rank=None, rtol={rtol!r}")
    return int(np.sum(s > float(rtol) * s[0])) if s[0] > 0 else 0


def subspace_projector(x: Any, *, rank: int | None = None, rtol: float | None = 1e-2) -> np.ndarray:
    """Orthogonal projector ``V_r V_rᵀ`` onto the residual's top-``r`` row (feature) subspace.

    Args:
      x: ``(N, C)`` residual (tokens × features).
      rank, rtol: the numerical rank rule (see :func:`numerical_rank`).

    Returns:
      ``(C, C)`` float64 symmetric idempotent matrix of trace ``r``.

    Raises:
      ValueError: as :func:`numerical_rank`.
    """
    a = _matrix(x, "x", "subspace_projector")
    _, s, vt = np.linalg.svd(a, full_matrices=False)
    v = vt[: _rank_from_svals(s, rank, rtol)].T
    return v @ v.T


def _innovation(x: np.ndarray, dx: np.ndarray, rank, rtol) -> tuple[float, int]:
    """(ΔD, r) with one SVD of ``x``; the update is projected on the top-``r`` row basis."""
    _, s, vt = np.linalg.svd(x, full_matrices=False)
    r = _rank_from_svals(s, rank, rtol)
    total = float(np.sum(dx * dx))
    if total == 0.0:
        return 0.0, r
    inside = dx @ vt[:r].T
    return float(np.clip(1.0 - np.sum(inside * inside) / total, 0.0, 1.0)), r


def spectral_change(x: Any, dx: Any) -> float:
    """ΔS = ``log eRank(X + ΔX) − log eRank(X)`` in nats (signed; **reconstruction**).

    Raises:
      ValueError: shapes that differ, non-2-D or non-finite input, or ``X`` or ``X + ΔX`` equal
        to zero (no spectrum to compare).
    """
    where = "spectral_change"
    x, dx = _pair(x, dx, where)
    e0, e1 = erank(x), erank(x + dx)
    if e0 <= 0 or e1 <= 0:
        raise ValueError(f"{where}: x and x + dx must be non-zero (eRank {e0:g} -> {e1:g})")
    return float(np.log(e1) - np.log(e0))


def subspace_innovation(
    x: Any, dx: Any, *, rank: int | None = None, rtol: float | None = 1e-2
) -> float:
    """ΔD = ``||ΔX (I − P_X)||²_F / ||ΔX||²_F``: the update's energy outside ``X``'s row subspace.

    ``0`` when every row of the update lies in the span of the residual's top-``r`` right singular
    vectors, ``1`` when the update is orthogonal to it (**reconstruction**).

    Returns:
      float in ``[0, 1]`` (``0`` for a zero update).

    Raises:
      ValueError: as :func:`subspace_projector`; shapes that differ.
    """
    x, dx = _pair(x, dx, "subspace_innovation")
    return _innovation(x, dx, rank, rtol)[0]


def residual_information_dynamics(
    x: Any, dx: Any, *, rank: int | None = None, rtol: float | None = 1e-2
) -> dict[str, float]:
    """RID = ``|ΔS| + ΔD`` of one update (**reconstruction** of the combination).

    Args:
      x: ``(N, C)`` residual entering the module (the rows are tokens).
      dx: ``(N, C)`` the module's update (``X + ΔX`` leaves the module).
      rank, rtol: numerical rank of the subspace (see :func:`numerical_rank`).

    Returns:
      ``{"erank_before", "erank_after", "delta_s", "delta_d", "rid", "rank"}`` (floats; ``rank``
      the ``r`` used).

    Raises:
      ValueError: as :func:`spectral_change` and :func:`subspace_innovation`.
    """
    where = "residual_information_dynamics"
    x, dx = _pair(x, dx, where)
    dd, r = _innovation(x, dx, rank, rtol)
    e0, e1 = erank(x), erank(x + dx)
    if e0 <= 0 or e1 <= 0:
        raise ValueError(f"{where}: x and x + dx must be non-zero (eRank {e0:g} -> {e1:g})")
    ds = float(np.log(e1) - np.log(e0))
    return {
        "erank_before": e0,
        "erank_after": e1,
        "delta_s": ds,
        "delta_d": dd,
        "rid": abs(ds) + dd,
        "rank": float(r),
    }


def token_mixing_entropy(weights: Any, *, mask: Any = None, normalize: bool = True) -> float:
    """TME: mean entropy of the rows of a row-stochastic token-mixing matrix (**reconstruction**).

    Args:
      weights: ``(..., T, S)`` non-negative mixing weights whose rows sum to 1 over the keys a query
        may read (attention probabilities ``(L, B, H, T, S)`` work as they are).
      mask: ``(T, S)`` or broadcastable bool, the keys each query may read; default (``S >= T``):
        the causal mask ``s <= t + (S - T)`` (what a causal decoder allows).
      normalize: divide each row's entropy by ``log n_t`` (``n_t`` readable keys), so TME is in
        ``[0, 1]`` (1 = uniform mixing, 0 = one-hot); rows with ``n_t < 2`` are skipped.

    Returns:
      float: mean over every row of every leading index (nats when ``normalize=False``).

    Raises:
      ValueError: fewer than 2 dims, negative or non-finite weights, rows that do not sum to 1
        over the mask (tolerance 1e-4), or no row with at least 2 readable keys.
    """
    where = "token_mixing_entropy"
    w = np.asarray(weights, np.float64)
    if w.ndim < 2:
        raise ValueError(f"{where}: weights must be (..., T, S), got shape {w.shape}")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError(f"{where}: weights must be finite and non-negative")
    t, s = w.shape[-2:]
    if mask is None:
        if s < t:
            raise ValueError(
                f"{where}: give a mask when there are fewer keys ({s}) than queries ({t})"
            )
        mask = np.arange(s)[None, :] <= np.arange(t)[:, None] + (s - t)
    mask = np.broadcast_to(np.asarray(mask, bool), w.shape)
    if np.any(w[~mask] > 1e-6):
        raise ValueError(f"{where}: weights put mass on keys outside the mask")
    sums = np.sum(np.where(mask, w, 0.0), axis=-1)
    if np.max(np.abs(sums - 1.0)) > 1e-4:
        raise ValueError(
            f"{where}: each row must sum to 1 over its keys (row-stochastic), got sums in "
            f"[{sums.min():.4g}, {sums.max():.4g}]"
        )
    n = np.sum(mask, axis=-1)
    plogp = np.where(mask & (w > 0), w * np.log(np.where(w > 0, w, 1.0)), 0.0)
    h = -np.sum(plogp, axis=-1)
    keep = n >= 2
    if not np.any(keep):
        raise ValueError(f"{where}: no query row reads at least 2 keys")
    if normalize:
        h = h / np.log(np.where(keep, n, 2))
    return float(np.mean(h[keep]))


def mixing_information_gain(
    x: Any,
    dx: Any,
    weights: Any,
    *,
    alpha: float = 1e-2,
    train_fraction: float = 0.5,
    seed: int = 0,
) -> dict[str, float]:
    """MixIG: how much the mixed context ``W X̂`` adds to predicting the update (**reconstruction**).

    Pools the tokens of many sequences. ``X̂`` is ``X`` with each token scaled to unit RMS (the
    input a pre-norm block reads). Two ridge regressions (:func:`fidia_jax.metrics.ridge_fit`,
    float64) predict ``ΔX`` per token: from the token's own state ``x̂_t`` ("self"), and from
    ``[x̂_t, (W_h X̂)_t for every mixing head h]`` ("self+mix"). Fitted on a random
    ``train_fraction`` of the sequences, scored on the others:
    ``MixIG = ½ log(SSE_self / SSE_self+mix)`` (nats, Gaussian information gain; can be slightly
    negative when the mixed context only adds variance). An attention update ``Σ_h W_h X̂ A_h``
    is exactly linear in the mixed features (MixIG large); a token-wise update (FFN) gains little;
    noise is predicted by neither (MixIG ≈ 0).

    Args:
      x: ``(B, T, C)`` residuals entering the module.
      dx: ``(B, T, C)`` its updates.
      weights: ``(B, H, T, T)`` (or ``(B, T, T)``) row-stochastic token-mixing weights (the layer's
        attention probabilities).
      alpha: ridge penalty per fitted token (the penalty is ``alpha · n_fit_tokens``; the
        features have unit scale, so directions of feature variance below ``alpha`` are shrunk).
      train_fraction: share of the ``B`` sequences used to fit (the rest score), in ``(0, 1)``.
      seed: the split.

    Returns:
      ``{"mixig", "r2_self", "r2_mix"}`` (held-out R² of each regression, and the gain in nats).

    Raises:
      ValueError: shapes that disagree; fewer than 2 sequences on either side of the split.
    """
    where = "mixing_information_gain"
    x = np.asarray(x, np.float64)
    dx = np.asarray(dx, np.float64)
    w = np.asarray(weights, np.float64)
    if x.ndim != 3 or dx.shape != x.shape:
        raise ValueError(f"{where}: x and dx must both be (B, T, C), got {x.shape} and {dx.shape}")
    if w.ndim == 3:
        w = w[:, None]
    b, t, c = x.shape
    if w.ndim != 4 or w.shape[0] != b or w.shape[2:] != (t, t):
        raise ValueError(
            f"{where}: weights must be (B, H, T, T) = ({b}, H, {t}, {t}), got {w.shape}"
        )
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(f"{where}: train_fraction must be in (0, 1), got {train_fraction}")
    n_fit = int(round(train_fraction * b))
    if n_fit < 2 or b - n_fit < 2:
        raise ValueError(f"{where}: need >= 2 sequences to fit and >= 2 to score, got B = {b}")
    for name, a in (("x", x), ("dx", dx), ("weights", w)):
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{where}: {name} has non-finite values")
    token_mixing_entropy(w)  # the same row-stochastic, causal check (raises naming the problem)
    xh = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-12)
    mixed = np.einsum("bhts,bsc->bthc", w, xh).reshape(b, t, -1)
    perm = np.random.default_rng(seed).permutation(b)
    fit, score = perm[:n_fit], perm[n_fit:]

    def held_out_sse(feats):
        xf = feats[fit].reshape(-1, feats.shape[-1])
        f = ridge_fit(xf, dx[fit].reshape(-1, c), alpha=alpha * xf.shape[0])
        pred = np.asarray(ridge_predict(f, feats[score].reshape(-1, feats.shape[-1])))
        return float(np.sum((dx[score].reshape(-1, c) - pred) ** 2))

    y = dx[score].reshape(-1, c)
    sst = float(np.sum((y - y.mean(axis=0)) ** 2))
    floor = 1e-12 * max(sst, 1e-300)
    sse_self = max(held_out_sse(xh), floor)
    sse_mix = max(held_out_sse(np.concatenate([xh, mixed], axis=-1)), floor)
    return {
        "mixig": 0.5 * float(np.log(sse_self / sse_mix)),
        "r2_self": 1.0 - sse_self / sst if sst > 0 else 0.0,
        "r2_mix": 1.0 - sse_mix / sst if sst > 0 else 0.0,
    }


# --- The third-party note's forms (papernotes.org note on arXiv:2605.05668, not the paper) -------


def note_residual_information_dynamics(
    x: Any, dx: Any, *, rank: int | None = None, rtol: float | None = 1e-2
) -> dict[str, float]:
    """RID in the form a third-party note gives (**not checked against the paper**).

    With ``X' = X + ΔX`` (``S`` tokens × ``H`` features) and ``P_C``, ``P_R`` the orthogonal
    projectors onto the top-``r`` left (column, token) and right (row, feature) singular
    subspaces of ``X``:

    * ``ΔS = |eRank(X') − eRank(X)| / min(S, H)`` in ``[0, 1)`` (eRank with ``p_i = σ_i / Σσ``);
    * ``ΔD = (||(I − P_C) X'||_F + ||X' (I − P_R)||_F) / (2 ||X'||_F)`` in ``[0, 1]``
      (the whole new residual, not the update, against both subspaces of the old; norms not
      squared);
    * ``RID = ΔS + ΔD`` in ``[0, 2)``.

    The note does not say how ``r`` is chosen; we use the same rule as the reconstruction
    (:func:`numerical_rank`: ``rank`` or the singular values ``> rtol · σ_1``), so the two forms
    differ only in their formulas. With a full-rank ``X`` and ``S <= H`` (``r = S``),
    ``P_C = I`` and the column term is 0.

    Args:
      x: ``(S, H)`` residual entering the module.
      dx: ``(S, H)`` its update.
      rank, rtol: the numerical rank ``r`` (see :func:`numerical_rank`).

    Returns:
      ``{"erank_before", "erank_after", "delta_s", "delta_d", "rid", "rank"}`` (floats).

    Raises:
      ValueError: shapes that differ, non-2-D or non-finite input, ``X`` or ``X'`` equal to
        zero, or a bad ``rank`` / ``rtol``.

    Source: the papernotes.org note "Large Vision-Language Models Get Lost in Attention"
    (2026-05-08), summarising Xi et al., ICML 2026, arXiv:2605.05668, §3.
    """
    where = "note_residual_information_dynamics"
    x, dx = _pair(x, dx, where)
    xn = x + dx
    e0, e1 = erank(x), erank(xn)
    norm = float(np.linalg.norm(xn))
    if e0 <= 0 or norm == 0.0:
        raise ValueError(f"{where}: x and x + dx must be non-zero (eRank {e0:g} -> {e1:g})")
    u, s, vt = np.linalg.svd(x, full_matrices=False)
    r = _rank_from_svals(s, rank, rtol)
    ur, vr = u[:, :r], vt[:r].T
    col = xn - ur @ (ur.T @ xn)  # (I - P_C) X'
    row = xn - (xn @ vr) @ vr.T  # X' (I - P_R)
    ds = abs(e1 - e0) / min(x.shape)
    dd = (float(np.linalg.norm(col)) + float(np.linalg.norm(row))) / (2.0 * norm)
    dd = float(np.clip(dd, 0.0, 1.0))
    return {
        "erank_before": e0,
        "erank_after": e1,
        "delta_s": float(ds),
        "delta_d": dd,
        "rid": float(ds) + dd,
        "rank": float(r),
    }


def similarity_mixing_entropy(x: Any, *, normalize: bool = False) -> float:
    """TME in the form a third-party note gives: entropy of a cosine-similarity mixing matrix.

    Each token (row of ``X``) is scaled to unit norm, ``x̃_t``; the mixing distribution of token
    ``t`` is ``P_tj ∝ (x̃_t · x̃_j + 1) / 2`` over all ``S`` tokens ``j`` (itself included; no
    causal mask, the note names none), and TME is the mean over ``t`` of the Shannon entropy of
    ``P_t`` (nats). Closed forms: identical rows give ``log S``; orthonormal rows give
    ``log(S + 1) − 2 log 2 / (S + 1)``; two opposite rows give ``0``. It reads ``X`` alone (no
    attention weights), so it applies to an FFN's output as well. **Not checked against the
    paper.**

    Args:
      x: ``(S, H)`` residual, ``S >= 2``.
      normalize: divide by ``log S`` (then TME is in ``[0, 1]``).

    Returns:
      float, nats (or a fraction of ``log S``).

    Raises:
      ValueError: not a finite 2-D matrix, fewer than 2 tokens, or a zero row (no direction).
    """
    where = "similarity_mixing_entropy"
    a = _matrix(x, "x", where)
    s = a.shape[0]
    if s < 2:
        raise ValueError(f"{where}: need at least 2 tokens (rows), got {s}")
    norms = np.linalg.norm(a, axis=1, keepdims=True)
    if np.any(norms == 0.0):
        raise ValueError(f"{where}: x has an all-zero row (token) with no direction")
    xt = a / norms
    k = np.clip((xt @ xt.T + 1.0) / 2.0, 0.0, None)  # >= 0; the diagonal is 1
    p = k / np.sum(k, axis=1, keepdims=True)
    h = -np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0), axis=1)
    out = float(np.mean(h))
    return out / float(np.log(s)) if normalize else out


def similarity_mixing_gain(x: Any, dx: Any, *, normalize: bool = False) -> float:
    """MixIG in the form a third-party note gives: ``TME(X + ΔX) − TME(X)``.

    TME is :func:`similarity_mixing_entropy`; positive when the update makes the tokens' mixing
    distributions more uniform (tokens more alike). **Not checked against the paper.**

    Args:
      x: ``(S, H)`` residual entering the module; dx: ``(S, H)`` its update.
      normalize: passed to :func:`similarity_mixing_entropy`.

    Returns:
      float (nats, or a fraction of ``log S``), in ``(−log S, log S]``.

    Raises:
      ValueError: as :func:`similarity_mixing_entropy`; shapes that differ.
    """
    x, dx = _pair(x, dx, "similarity_mixing_gain")
    return similarity_mixing_entropy(x + dx, normalize=normalize) - similarity_mixing_entropy(
        x, normalize=normalize
    )
