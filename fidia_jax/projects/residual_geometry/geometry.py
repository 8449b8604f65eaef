"""Residual-update geometry: eRank, subspace projectors, ΔS, ΔD, RID, TME and MixIG (float64 numpy).

A transformer block writes an additive update ``ΔX`` into the residual stream ``X`` (``N`` tokens
by ``C`` features). Xi et al. (ICML 2026) ask *what* an update changes: its spectrum (how many
directions the residual uses), its subspace (whether it writes into directions the residual did
not span), and how much it moves information between tokens. The functions here measure that on
any ``(X, ΔX)`` pair, so they apply unchanged to a real model's captured activations.

Which formula comes from where. The authors' code (https://github.com/Lrbomchz/vlms_lost_in_attn
@ ``2ca01fdd2ddf4047dc47f6ce4a116d22c1142f3d``, ``utils/interp_utils.py``) defines eRank, ΔD
("novelty") and TME; those are the **defaults** here, checked against a fixture made from that
code (``tools/residual_geometry_make_fixture.py``, ``tests/data/residual_geometry/``). ΔS, RID and
MixIG are not in the released code: they stay **reconstructions** from the paper's abstract.

* ``erank`` (authors' ``effective_rank_matrix``): Roy–Vetterli effective rank
  ``exp(H(σ / Σσ))``, reusing :func:`fidia_jax.metrics.effective_rank` in float64.
* ``numerical_rank`` / ``subspace_projector``: ``r`` = the count of singular values
  ``> max(N, C) · eps(dtype) · σ_1`` (authors' default cutoff in ``novelty_from_hiddens_96``,
  ``tol=None``; ``eps`` of the input's dtype), or ``> rtol · σ_1``, or a given ``rank``.
* ``subspace_innovation`` ΔD, ``form="authors"`` (``novelty_from_hiddens_96``, ``combine="l2"``):
  with ``X' = X + ΔX`` and ``P_C = U_r U_rᵀ``, ``P_R = V_r V_rᵀ`` from the SVD of ``X``,
  ``ΔD = sqrt(‖(I − P_C) X'‖²_F + ‖X' (I − P_R)‖²_F) / ‖X'‖_F`` in ``[0, √2]``;
  ``form="page"`` (ours, a **reconstruction**): ``‖ΔX (I − P_R)‖²_F / ‖ΔX‖²_F`` in ``[0, 1]``.
* ``spectral_change`` ΔS (**reconstruction**): ``log eRank(X + ΔX) − log eRank(X)`` (nats).
* ``residual_information_dynamics`` RID = ``|ΔS| + ΔD`` (the sum is a **reconstruction**; ΔD in
  the chosen form).
* ``cosine_mixing_entropy`` TME (authors' ``tme_hidden`` with its defaults): the last token's
  distribution ``p_j ∝ ((1 + cos(x_S, x_j)) / 2)^8`` over the ``S`` tokens, its entropy over
  ``log S``. The authors apply it to each module's update ``ΔX`` (``tme_delta_2xnlayer``), the
  FFN's included. ``token_mixing_entropy`` is ours (a **reconstruction**, the alternative): the
  mean normalised entropy of the attention weights' rows.
* ``mixing_information_gain`` MixIG (**reconstruction**): the Gaussian information (nats) that
  the mixed context ``W X̂`` adds, on held-out tokens, to a linear prediction of the update from
  the token's own state ``X̂``: ``½ log(SSE_self / SSE_self+mix)``.

A third set, ``note_residual_information_dynamics``, ``similarity_mixing_entropy`` and
``similarity_mixing_gain``, implements the formulas a **third-party** note on the paper gives
(papernotes.org, 2026-05-08): ΔS ``= |eRank(X') − eRank(X)| / min(S, H)``, ΔD ``= (‖(I − P_C)
X'‖_F + ‖X' (I − P_R)‖_F) / (2 ‖X'‖_F)`` (half the authors' ``combine="sum"``), RID their sum,
TME the mean over all tokens of the unsharpened cosine entropy (``cosine_mixing_entropy`` with
``agg="mean"``, ``alpha=1``) and MixIG ``TME(X') − TME(X)``.

Every rank rule and entropy here is invariant to the scale of the data (the cutoff is relative to
``σ_1`` and to the dtype's ``eps``; tokens are normalised before cosines); the authors' absolute
``1e-12`` guards are left out by default (``subspace_innovation(..., eps=1e-12)`` restores them).

RID depends on ``X`` and ``ΔX`` only through the set of their rows (any joint token permutation
leaves it unchanged); TME depends on which token reads which, and MixIG on whether the update is
a function of other tokens.

References:
  Xi, Tian, Yang, Yi, Lin, Hao, Wang, Wang, "Large vision-language models get lost in attention",
  ICML 2026, arXiv:2605.05668, https://arxiv.org/abs/2605.05668; code
  https://github.com/Lrbomchz/vlms_lost_in_attn (commit 2ca01fdd, ``utils/interp_utils.py``).
  Roy, Vetterli, "The effective rank: a measure of effective dimensionality", EUSIPCO 2007.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from fidia_jax.metrics import effective_rank, ridge_fit, ridge_predict

__all__ = [
    "DELTA_D_FORMS",
    "cosine_mixing_entropy",
    "erank",
    "mixing_information_gain",
    "note_residual_information_dynamics",
    "numerical_rank",
    "rank_cutoff_eps",
    "residual_information_dynamics",
    "similarity_mixing_entropy",
    "similarity_mixing_gain",
    "spectral_change",
    "subspace_innovation",
    "subspace_projector",
    "token_mixing_entropy",
]

#: The forms of ΔD: ``"authors"`` (the default: ``novelty_from_hiddens_96`` of the authors' code)
#: and ``"page"`` (this project's earlier reconstruction, the update's energy outside the row
#: subspace).
DELTA_D_FORMS = ("authors", "page")


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


def rank_cutoff_eps(x: Any) -> float:
    """The machine epsilon of ``x``'s dtype, the unit of the default numerical-rank cutoff.

    ``x``'s own floating dtype (numpy, jax, bfloat16 and float16 included); ``float64``'s
    epsilon for anything else (Python lists, integers), since those are computed in float64.
    The authors' ``novelty_from_hiddens_96`` takes ``torch.finfo(X.dtype).eps`` the same way.
    """
    dtype = getattr(x, "dtype", None)
    if dtype is not None and jax.numpy.issubdtype(dtype, jax.numpy.floating):
        return float(jax.numpy.finfo(dtype).eps)
    return float(np.finfo(np.float64).eps)


def erank(x: Any) -> float:
    """Effective rank ``exp(H(σ / Σσ))`` of an ``(N, C)`` matrix, in float64.

    :func:`fidia_jax.metrics.effective_rank` evaluated in float64 (inside ``jax.enable_x64``).
    The authors' ``effective_rank_matrix`` (``utils/interp_utils.py``) computes the same
    quantity in the input's dtype with ``log(p + 1e-12)``; the fixture test bounds the difference
    by the dtype's rounding (``tests/projects/residual_geometry/test_residual_geometry_authors_fixture.py``).
    Scale-invariant: ``erank(c · x) == erank(x)`` for any ``c != 0``.

    Returns:
      float in ``[1, min(N, C)]`` (``0`` for the zero matrix, as the authors').

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


def numerical_rank(x: Any, *, rank: int | None = None, rtol: float | None = None) -> int:
    """The number ``r`` of directions kept by :func:`subspace_projector` (the rank parameter).

    Args:
      x: ``(N, C)`` matrix, any real dtype (its dtype sets the default cutoff).
      rank: use exactly this many directions, ``1 <= rank <= min(N, C)`` (overrides ``rtol``).
      rtol: else count the singular values ``> rtol · σ_max``, ``0 < rtol < 1``.
        Default (``rank`` and ``rtol`` both ``None``): the authors' cutoff, the singular values
        ``> max(N, C) · eps · σ_max`` with ``eps`` the machine epsilon of ``x``'s dtype
        (:func:`rank_cutoff_eps`; ``novelty_from_hiddens_96(tol=None)`` in the authors'
        ``utils/interp_utils.py``, the rule of ``torch.linalg.matrix_rank``). Relative to
        ``σ_max``, so the rank does not change with the scale of ``x``. The authors cast hidden
        states to float32 first; do the same with bfloat16 / float16 activations (their
        ``eps`` times ``max(N, C)`` can exceed 1, leaving ``r = 0``).

    Returns:
      int ``r`` (``0`` only for the zero matrix).

    Raises:
      ValueError: ``rank`` outside ``[1, min(N, C)]`` or ``rtol`` outside ``(0, 1)``.
    """
    a = _matrix(x, "x", "numerical_rank")
    return _rank_from_svals(np.linalg.svd(a, compute_uv=False), rank, rtol, a.shape, x)


def _rank_from_svals(s: np.ndarray, rank, rtol, shape, x) -> int:
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
    if rtol is None:
        cutoff = max(shape) * rank_cutoff_eps(x) * s[0]
    elif isinstance(rtol, bool) or not 0.0 < float(rtol) < 1.0:
        raise ValueError(f"{where}: rtol must be in (0, 1) or None, got rtol={rtol!r}")
    else:
        cutoff = float(rtol) * s[0]
    return int(np.sum(s > cutoff)) if s[0] > 0 else 0


def subspace_projector(x: Any, *, rank: int | None = None, rtol: float | None = None) -> np.ndarray:
    """Orthogonal projector ``V_r V_rᵀ`` onto the residual's top-``r`` row (feature) subspace.

    Args:
      x: ``(N, C)`` residual (tokens × features).
      rank, rtol: the numerical rank rule (see :func:`numerical_rank`; default the authors').

    Returns:
      ``(C, C)`` float64 symmetric idempotent matrix of trace ``r``.

    Raises:
      ValueError: as :func:`numerical_rank`.
    """
    a = _matrix(x, "x", "subspace_projector")
    _, s, vt = np.linalg.svd(a, full_matrices=False)
    v = vt[: _rank_from_svals(s, rank, rtol, a.shape, x)].T
    return v @ v.T


def _innovation_page(dx: np.ndarray, vt: np.ndarray, r: int) -> float:
    """Our reconstruction: the update's energy share outside the top-``r`` row basis."""
    total = float(np.sum(dx * dx))
    if total == 0.0:
        return 0.0
    inside = dx @ vt[:r].T
    return float(np.clip(1.0 - np.sum(inside * inside) / total, 0.0, 1.0))


def _innovation_authors(xn, u, vt, r, combine, eps, where) -> float:
    """The authors' novelty of ``X'`` against ``X``'s column and row subspaces (rank ``r``)."""
    fro2 = float(np.sum(xn * xn))
    if fro2 == 0.0:
        raise ValueError(f"{where}: x + dx is the zero matrix (no direction to compare)")
    ur, vr = u[:, :r], vt[:r].T
    # the residuals themselves (not ||X'||² − ||projection||², which cancels to noise)
    col = xn - ur @ (ur.T @ xn)  # (I − P_C) X'
    row = xn - (xn @ vr) @ vr.T  # X' (I − P_R)
    fro = np.sqrt(fro2 + eps)
    r_col = np.sqrt(float(np.sum(col * col)) + eps) / (fro + eps)
    r_row = np.sqrt(float(np.sum(row * row)) + eps) / (fro + eps)
    if combine == "l2":
        return float(np.sqrt(r_col * r_col + r_row * r_row + eps))
    return float(r_col + r_row)


def _check_form(form, combine, eps, where) -> None:
    if form not in DELTA_D_FORMS:
        raise ValueError(f"{where}: form must be one of {DELTA_D_FORMS}, got {form!r}")
    if combine not in ("l2", "sum"):
        raise ValueError(f"{where}: combine must be 'l2' or 'sum', got {combine!r}")
    if isinstance(eps, bool) or not (np.isfinite(eps) and eps >= 0.0):
        raise ValueError(f"{where}: eps must be a finite float >= 0, got {eps!r}")


def _innovation(x, dx, x_dtype_source, form, rank, rtol, combine, eps, where):
    """(ΔD, r) with one SVD of ``x``."""
    u, s, vt = np.linalg.svd(x, full_matrices=False)
    r = _rank_from_svals(s, rank, rtol, x.shape, x_dtype_source)
    if form == "page":
        return _innovation_page(dx, vt, r), r
    return _innovation_authors(x + dx, u, vt, r, combine, float(eps), where), r


def spectral_change(x: Any, dx: Any) -> float:
    """ΔS = ``log eRank(X + ΔX) − log eRank(X)`` in nats (signed; **reconstruction**: ΔS is not in
    the authors' released code).

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
    x: Any,
    dx: Any,
    *,
    form: str = "authors",
    rank: int | None = None,
    rtol: float | None = None,
    combine: str = "l2",
    eps: float = 0.0,
) -> float:
    """ΔD: how much of the update leaves the residual's subspaces.

    ``form="authors"`` (default; ``novelty_from_hiddens_96`` in the authors'
    ``utils/interp_utils.py`` @ 2ca01fdd): with ``X' = X + ΔX`` and ``P_C = U_r U_rᵀ``,
    ``P_R = V_r V_rᵀ`` the projectors onto the top-``r`` left (token) and right (feature)
    singular subspaces of ``X``, ``c = ‖(I − P_C) X'‖_F / ‖X'‖_F`` and
    ``ρ = ‖X' (I − P_R)‖_F / ‖X'‖_F``; ``ΔD = sqrt(c² + ρ²)`` in ``[0, √2]`` (``combine="l2"``,
    the authors' default) or ``c + ρ`` in ``[0, 2]`` (``combine="sum"``). The authors measure
    a layer's FFN output against the *layer input*'s subspaces: pass ``x = X_in`` and
    ``dx = X_ffn − X_in`` for that (``train.update_geometry`` does).

    ``form="page"`` (ours, a **reconstruction**, the alternative):
    ``‖ΔX (I − P_R)‖²_F / ‖ΔX‖²_F`` in ``[0, 1]``, the share of the update's energy outside the
    row subspace (``0`` for a zero update); ``combine`` and ``eps`` do not apply.

    Deviations from the authors' code (``form="authors"``): computed in float64 from the input's
    values (theirs in the input's dtype) with the residuals formed directly (theirs as
    ``‖X'‖² − ‖projection‖²``, which leaves ``~sqrt(eps)`` of cancellation noise in ``c``);
    their ``1e-12`` guards under the square roots and in the denominators are off by default
    (``eps=0``, scale-invariant; ``eps=1e-12`` restores them); a zero ``X`` (``r = 0``) gives
    the normalised limit ``√2`` (``sum``: ``2``) where theirs returns the unnormalised
    ``√2 ‖X'‖_F``; a zero ``X'`` raises where theirs divides ``1e-6`` by ``1e-12``.

    Args:
      x: ``(N, C)`` residual entering the module; its dtype sets the default rank cutoff.
      dx: ``(N, C)`` the update (``X' = x + dx``).
      form: ``"authors"`` or ``"page"`` (:data:`DELTA_D_FORMS`).
      rank, rtol: the numerical rank ``r`` (:func:`numerical_rank`; default the authors' cutoff
        ``max(N, C) · eps(dtype) · σ_1``).
      combine: ``"l2"`` or ``"sum"`` (authors' form).
      eps: the authors' additive guard (``1e-12`` in their code; default ``0``).

    Returns:
      float: ΔD (dimensionless).

    Raises:
      ValueError: shapes that differ, non-2-D or non-finite input, an unknown ``form`` /
        ``combine``, a negative ``eps``, a bad ``rank`` / ``rtol``, or (authors' form)
        ``x + dx`` equal to zero.
    """
    where = "subspace_innovation"
    _check_form(form, combine, eps, where)
    xa, dxa = _pair(x, dx, where)
    return _innovation(xa, dxa, x, form, rank, rtol, combine, eps, where)[0]


def residual_information_dynamics(
    x: Any,
    dx: Any,
    *,
    form: str = "authors",
    rank: int | None = None,
    rtol: float | None = None,
    combine: str = "l2",
) -> dict[str, float]:
    """RID = ``|ΔS| + ΔD`` of one update (**reconstruction** of the combination and of ΔS; ΔD
    in the authors' form by default, see :func:`subspace_innovation`).

    Args:
      x: ``(N, C)`` residual entering the module (the rows are tokens).
      dx: ``(N, C)`` the module's update (``X + ΔX`` leaves the module).
      form, rank, rtol, combine: ΔD's form and numerical rank (:func:`subspace_innovation`).

    Returns:
      ``{"erank_before", "erank_after", "delta_s", "delta_d", "rid", "rank"}`` (floats; ``rank``
      the ``r`` used).

    Raises:
      ValueError: as :func:`spectral_change` and :func:`subspace_innovation`.
    """
    where = "residual_information_dynamics"
    _check_form(form, combine, 0.0, where)
    xa, dxa = _pair(x, dx, where)
    e0, e1 = erank(xa), erank(xa + dxa)
    if e0 <= 0 or e1 <= 0:
        raise ValueError(f"{where}: x and x + dx must be non-zero (eRank {e0:g} -> {e1:g})")
    dd, r = _innovation(xa, dxa, x, form, rank, rtol, combine, 0.0, where)
    ds = float(np.log(e1) - np.log(e0))
    return {
        "erank_before": e0,
        "erank_after": e1,
        "delta_s": ds,
        "delta_d": dd,
        "rid": abs(ds) + dd,
        "rank": float(r),
    }


def cosine_mixing_entropy(
    x: Any,
    *,
    agg: str = "last",
    mode: str = "shift",
    alpha: float = 8.0,
    normalize: bool = True,
) -> float:
    """TME as the authors compute it: the entropy of a token's cosine-similarity distribution.

    Each token (row of ``X``) is scaled to unit norm (an all-zero row stays zero), ``x̃_t``;
    ``c_tj = x̃_t · x̃_j``; the weights are ``w_tj = ((1 + c_tj) / 2)^alpha`` (``mode="shift"``)
    or ``max(c_tj, 0)^alpha`` (``"relu"``), ``p_tj = w_tj / Σ_j w_tj`` over all ``S`` tokens
    (no mask), ``H_t = −Σ_j p_tj log p_tj`` (nats). ``agg="last"``: TME = ``H_S`` of the last
    token; ``"mean"``: the mean over ``t``. ``normalize``: divide by ``log S``.

    Source: ``tme_hidden`` in the authors' ``utils/interp_utils.py`` @ 2ca01fdd, whose defaults
    (``shift``, ``last``, ``normalize=True``, ``alpha=8``) are these; their
    ``tme_delta_2xnlayer`` applies it to each module's update ``ΔX`` (attention and FFN), their
    ``tme_state_3xnlayer`` to the states. Deviations: float64 from the input's values; their
    ``1e-12`` guards (in the row norms, the weights, the normaliser and the logarithm) are left
    out, so TME is scale-invariant; cosines rounded past ±1 are clipped to the weights' range
    ``[0, 1]`` (their guard plays that role). With ``agg="mean"``, ``alpha=1``,
    ``normalize=False`` this is the third-party note's TME (:func:`similarity_mixing_entropy`).

    Args:
      x: ``(S, H)`` tokens × features (an update ``ΔX`` or a residual).
      agg: ``"last"`` or ``"mean"``.
      mode: ``"shift"`` or ``"relu"``.
      alpha: the sharpening power, finite and ``> 0``.
      normalize: divide by ``log S`` (then TME is in ``[0, 1]``).

    Returns:
      float; ``0.0`` for a single token (as the authors').

    Raises:
      ValueError: not a finite 2-D matrix, an unknown ``agg`` / ``mode``, a bad ``alpha``, or
        (``mode="relu"``) a token with no positive similarity to any token (all-zero weights).
    """
    where = "cosine_mixing_entropy"
    if agg not in ("last", "mean"):
        raise ValueError(f"{where}: agg must be 'last' or 'mean', got {agg!r}")
    if mode not in ("shift", "relu"):
        raise ValueError(f"{where}: mode must be 'shift' or 'relu', got {mode!r}")
    if isinstance(alpha, bool) or not (np.isfinite(alpha) and alpha > 0):
        raise ValueError(f"{where}: alpha must be a finite float > 0, got {alpha!r}")
    a = _matrix(x, "x", where)
    s = a.shape[0]
    if s < 2:
        return 0.0
    h = _cosine_entropies(a, a[-1:] if agg == "last" else a, mode, float(alpha), where)
    out = float(np.mean(h))
    return out / float(np.log(s)) if normalize else out


def _cosine_entropies(a, queries, mode, alpha, where) -> np.ndarray:
    """Entropy (nats) of each query row's distribution over the tokens of ``a``."""

    def unit(m):
        n = np.linalg.norm(m, axis=1, keepdims=True)
        return np.divide(m, n, out=np.zeros_like(m), where=n > 0)

    cos = unit(queries) @ unit(a).T
    w = 0.5 * (cos + 1.0) if mode == "shift" else cos
    w = np.clip(w, 0.0, 1.0) ** alpha
    tot = np.sum(w, axis=1, keepdims=True)
    if np.any(tot == 0.0):
        raise ValueError(f"{where}: a token has zero weight on every token (mode={mode!r})")
    p = w / tot
    return -np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0), axis=1)


def token_mixing_entropy(weights: Any, *, mask: Any = None, normalize: bool = True) -> float:
    """TME in our form (the alternative): mean entropy of the rows of a row-stochastic mixing matrix.

    **Reconstruction** from the paper's name, not the authors' TME: their code
    (``tme_hidden``) reads the update's cosine similarities, not attention weights, and defines
    TME for the FFN too; that form is :func:`cosine_mixing_entropy`, the default of
    :func:`~fidia_jax.projects.residual_geometry.update_geometry`.

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
    input a pre-norm block reads; an all-zero token stays zero), so MixIG does not change when
    ``X`` or ``ΔX`` is rescaled. Not in the authors' released code. Two ridge regressions (:func:`fidia_jax.metrics.ridge_fit`,
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
    rms = np.sqrt(np.mean(x * x, axis=-1, keepdims=True))  # no absolute guard: scale-invariant
    xh = np.divide(x, rms, out=np.zeros_like(x), where=rms > 0)
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
    x: Any, dx: Any, *, rank: int | None = None, rtol: float | None = None
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

    The note does not say how ``r`` is chosen; we use the same rule as the default
    (:func:`numerical_rank`: the authors' dtype cutoff, or ``rtol`` / ``rank``), so the forms
    differ only in their formulas. The note's ΔD is half the authors' ``combine="sum"`` ΔD
    (:func:`subspace_innovation`). With a full-rank ``X`` and ``S <= H`` (``r = S``),
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
    xa, dxa = _pair(x, dx, where)
    xn = xa + dxa
    e0, e1 = erank(xa), erank(xn)
    norm = float(np.linalg.norm(xn))
    if e0 <= 0 or norm == 0.0:
        raise ValueError(f"{where}: x and x + dx must be non-zero (eRank {e0:g} -> {e1:g})")
    u, s, vt = np.linalg.svd(xa, full_matrices=False)
    r = _rank_from_svals(s, rank, rtol, xa.shape, x)
    ur, vr = u[:, :r], vt[:r].T
    col = xn - ur @ (ur.T @ xn)  # (I - P_C) X'
    row = xn - (xn @ vr) @ vr.T  # X' (I - P_R)
    ds = abs(e1 - e0) / min(xa.shape)
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
    paper.** Equal to :func:`cosine_mixing_entropy` with ``agg="mean"``, ``alpha=1`` (the
    authors' TME sharpens with ``alpha=8`` and reads the last token only), except that a zero
    row raises here.

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
    if np.any(np.linalg.norm(a, axis=1) == 0.0):
        raise ValueError(f"{where}: x has an all-zero row (token) with no direction")
    out = float(np.mean(_cosine_entropies(a, a, "shift", 1.0, where)))
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
