"""Backbone geometry for rewards and success criteria: Kabsch RMSD, virtual Cβ, burial, SSE.

The jnp functions (``kabsch``, ``kabsch_rmsd``, ``virtual_cb``, ``cb_neighbor_counts``,
``pairwise_distances``) are pure and jit/vmap-able. :func:`secondary_structure` runs biotite's
P-SEA on the host (numpy in, numpy out).

References:
  Kabsch, "A solution for the best rotation to relate two sets of vectors", Acta Cryst. A32:922
  (1976); Kabsch, "A discussion of the solution for the best rotation...", A34:827 (1978).
  Dauparas et al., "Robust deep learning-based protein sequence design using ProteinMPNN",
  Science 378:49-56 (2022) -- the virtual Cβ constants.
  Labesse et al., "P-SEA: a new efficient assignment of secondary structure from Cα trace of
  proteins", CABIOS 13:291-295 (1997) -- via ``biotite.structure.annotate_sse``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from fidia_jax.errors import needs_extra

__all__ = [
    "SSE_CODES",
    "cb_neighbor_counts",
    "kabsch",
    "kabsch_rmsd",
    "pairwise_distances",
    "secondary_structure",
    "virtual_cb",
]

#: SSE classes returned by :func:`secondary_structure`, index = code (helix, strand, coil).
SSE_CODES = "abc"


def _check_points(name: str, **arrays) -> None:
    for arg, a in arrays.items():
        if a.ndim != 2 or a.shape[-1] != 3:
            raise ValueError(f"{name}: {arg} must have shape (n, 3), got {a.shape}")
        if not jnp.issubdtype(a.dtype, jnp.floating):
            raise ValueError(f"{name}: {arg} must be floating point, got {a.dtype}")


def kabsch(
    mobile_n3: jax.Array, target_n3: jax.Array, weights_n: jax.Array | None = None
) -> tuple[jax.Array, jax.Array]:
    """Optimal proper rotation and translation mapping ``mobile`` onto ``target``.

    Minimises ``sum_i w_i |R x_i + t - y_i|^2`` over rotations ``R`` (det +1, reflections
    excluded via the sign of ``det(V U^T)``) and translations ``t``.

    Args:
      mobile_n3: ``(n, 3)`` float, Å.
      target_n3: ``(n, 3)`` float, Å.
      weights_n: optional ``(n,)`` non-negative weights (a 0/1 mask selects points); default 1.

    Returns:
      ``(R (3, 3), t (3,))`` such that ``mobile @ R.T + t`` is superposed on ``target``.

    Raises:
      ValueError: shapes are not ``(n, 3)`` / ``(n,)`` or differ.
    """
    mobile_n3, target_n3 = jnp.asarray(mobile_n3), jnp.asarray(target_n3)
    _check_points("kabsch", mobile_n3=mobile_n3, target_n3=target_n3)
    if mobile_n3.shape != target_n3.shape:
        raise ValueError(f"kabsch: shapes differ, {mobile_n3.shape} vs {target_n3.shape}")
    n = mobile_n3.shape[0]
    w = (
        jnp.ones((n,), mobile_n3.dtype)
        if weights_n is None
        else jnp.asarray(weights_n, mobile_n3.dtype)
    )
    if w.shape != (n,):
        raise ValueError(f"kabsch: weights_n must have shape ({n},), got {w.shape}")
    wsum = jnp.maximum(jnp.sum(w), jnp.finfo(mobile_n3.dtype).tiny)
    mu_x = jnp.sum(w[:, None] * mobile_n3, 0) / wsum
    mu_y = jnp.sum(w[:, None] * target_n3, 0) / wsum
    x, y = mobile_n3 - mu_x[None, :], target_n3 - mu_y[None, :]
    h_33 = (w[:, None] * x).T @ y  # covariance, sum_i w_i x_i y_i^T
    u, _, vt = jnp.linalg.svd(h_33)
    d = jnp.sign(jnp.linalg.det(vt.T @ u.T))
    d = jnp.where(d == 0, 1.0, d)
    fix = jnp.diag(jnp.array([1.0, 1.0, 1.0], mobile_n3.dtype).at[2].set(d))
    r_33 = vt.T @ fix @ u.T
    t_3 = mu_y - r_33 @ mu_x
    return r_33, t_3


def kabsch_rmsd(
    mobile_n3: jax.Array, target_n3: jax.Array, mask_n: jax.Array | None = None
) -> jax.Array:
    """RMSD (Å) after optimal rigid superposition of ``mobile`` on ``target`` (over ``mask``).

    Args:
      mobile_n3: ``(n, 3)`` float, Å.
      target_n3: ``(n, 3)`` float, Å.
      mask_n: optional ``(n,)`` 0/1 (or bool) mask of points that count (both in the fit and in
        the RMSD); default all.

    Returns:
      Scalar float, Å.

    Raises:
      ValueError: bad shapes.

    Example:
      >>> kabsch_rmsd(x, x @ rot.T + 3.0)   # == 0 for any rotation ``rot``
    """
    mobile_n3, target_n3 = jnp.asarray(mobile_n3), jnp.asarray(target_n3)
    w = None if mask_n is None else jnp.asarray(mask_n).astype(mobile_n3.dtype)
    r_33, t_3 = kabsch(mobile_n3, target_n3, w)
    moved = mobile_n3 @ r_33.T + t_3[None, :]
    sq = jnp.sum((moved - target_n3) ** 2, -1)
    if w is None:
        return jnp.sqrt(jnp.mean(sq))
    return jnp.sqrt(jnp.sum(w * sq) / jnp.maximum(jnp.sum(w), 1.0))


def virtual_cb(X_l43: jax.Array) -> jax.Array:
    """Ideal virtual Cβ from backbone N, CA, C (ProteinMPNN's constants).

    ``b = CA - N``, ``c = C - CA``, ``a = b x c``,
    ``Cb = -0.58273431 a + 0.56802827 b - 0.54067466 c + CA``.

    Args:
      X_l43: ``(L, 4, 3)`` (or ``(..., 4, 3)``) float, Å; atoms N, CA, C, O.

    Returns:
      ``(L, 3)`` float, Å.

    Raises:
      ValueError: last two axes are not ``(4, 3)``.
    """
    X_l43 = jnp.asarray(X_l43)
    if X_l43.ndim < 2 or X_l43.shape[-2:] != (4, 3):
        raise ValueError(f"virtual_cb: X must have shape (L, 4, 3), got {X_l43.shape}")
    n, ca, c = X_l43[..., 0, :], X_l43[..., 1, :], X_l43[..., 2, :]
    b = ca - n
    cc = c - ca
    a = jnp.cross(b, cc)
    return -0.58273431 * a + 0.56802827 * b - 0.54067466 * cc + ca


def pairwise_distances(a_n3: jax.Array, b_m3: jax.Array) -> jax.Array:
    """``(n, m)`` Euclidean distances (Å) between two point sets."""
    a_n3, b_m3 = jnp.asarray(a_n3), jnp.asarray(b_m3)
    _check_points("pairwise_distances", a_n3=a_n3, b_m3=b_m3)
    d2 = jnp.sum((a_n3[:, None, :] - b_m3[None, :, :]) ** 2, -1)
    return jnp.sqrt(jnp.maximum(d2, 0.0))


def cb_neighbor_counts(
    X_l43: jax.Array, mask_l: jax.Array | None = None, radius: float = 10.0
) -> jax.Array:
    """Number of other residues whose virtual Cβ lies within ``radius`` Å of each residue's Cβ.

    A backbone-only burial measure (half-sphere-free Cβ count): high counts = buried core,
    low counts = exposed surface. Residues with ``mask == 0`` neither count nor are counted
    (their own count is 0).

    Args:
      X_l43: ``(L, 4, 3)`` float, Å.
      mask_l: optional ``(L,)`` 0/1 residue mask (default all present).
      radius: cut-off in Å (default 10).

    Returns:
      ``(L,)`` float32 counts.
    """
    cb = virtual_cb(X_l43)
    L = cb.shape[0]
    m = jnp.ones((L,), jnp.float32) if mask_l is None else jnp.asarray(mask_l, jnp.float32)
    if m.shape != (L,):
        raise ValueError(f"cb_neighbor_counts: mask_l must have shape ({L},), got {m.shape}")
    d = pairwise_distances(cb, cb)
    close = (d < radius).astype(jnp.float32) * (1.0 - jnp.eye(L, dtype=jnp.float32))
    return jnp.sum(close * m[None, :], -1) * m


def secondary_structure(
    X_l43: np.ndarray,
    mask_l: np.ndarray,
    chain_encoding_l: np.ndarray | None = None,
    residue_idx_l: np.ndarray | None = None,
) -> np.ndarray:
    """Per-residue SSE codes from CA coordinates with biotite's P-SEA (host function).

    Args:
      X_l43: ``(L, 4, 3)`` Å (only CA is used).
      mask_l: ``(L,)`` 0/1; masked residues are reported as coil.
      chain_encoding_l: optional ``(L,)`` chain labels (chains are annotated separately).
      residue_idx_l: optional ``(L,)`` residue numbers (gaps in numbering break elements).

    Returns:
      ``(L,)`` int32 codes into :data:`SSE_CODES`: 0 helix (``'a'``), 1 strand (``'b'``),
      2 coil (``'c'``).
    """
    with needs_extra("protein", "secondary_structure"):
        import biotite.structure as struc

    X_l43 = np.asarray(X_l43, np.float32)
    mask = np.asarray(mask_l) > 0
    L = X_l43.shape[0]
    chains = np.ones(L, np.int64) if chain_encoding_l is None else np.asarray(chain_encoding_l)
    resid = np.arange(1, L + 1) if residue_idx_l is None else np.asarray(residue_idx_l) + 1
    out = np.full(L, 2, np.int32)
    idx = np.flatnonzero(mask)
    if idx.size == 0:
        return out
    atoms = struc.AtomArray(idx.size)
    atoms.coord = X_l43[idx, 1, :]
    atoms.atom_name[:] = "CA"
    atoms.element[:] = "C"
    atoms.res_name[:] = "ALA"
    atoms.hetero[:] = False
    atoms.res_id = resid[idx].astype(np.int64)
    atoms.chain_id = np.array([f"C{int(c)}" for c in chains[idx]])
    sse = np.asarray(struc.annotate_sse(atoms))
    codes = np.array([SSE_CODES.index(s) if s in ("a", "b", "c") else 2 for s in sse], np.int32)
    out[idx] = codes
    return out
