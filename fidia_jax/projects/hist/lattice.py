"""HiST's sparse lattice primitives: window partition, window attention, patch pooling/unpooling.

The spots of a spatial-transcriptomics section sit on an integer lattice, sparsely (the tissue
covers part of it). These primitives work on the *active* spots only, with static shapes: every
array is padded to a fixed size and carries a boolean mask, and every index table uses the
sentinel ``n`` (one past the last row) that gathers zeros (``jnp.take(..., mode="fill")``), so
padding never contributes to a sum, a softmax or a loss.

Two kinds of functions:

* planning (NumPy, host side, run once per section / per augmentation): :func:`check_lattice`,
  :func:`plan_windows`, :func:`plan_pooling`, :func:`plan_hierarchy`, :func:`hierarchy_sizes`;
* compute (``jnp``, jit/grad-safe, shapes fixed by the plans): :func:`sparse_patch_pool`,
  :func:`sparse_unpool`, :func:`window_attention_stats`, :func:`merge_attention_stats`,
  :func:`lattice_window_attention`, and the dense reference :func:`dense_window_attention`.

Window attention groups the active spots into square windows of side ``S`` (sort by window id,
pad each window to the largest occupancy ``P``), so memory is ``O(W P^2 H) <= O(N S^2 H)``, never
``O(N^2)``. HiST's "hybrid" local pattern (authors' code, ``ATTENTION_CONFIGS['hybrid']``) lets a
spot attend to the union of its regular window and its shifted window (offset ``S // 2``, a
padding shift, not a cyclic roll: spots on opposite borders are never in one window); the union
is computed here as two block softmaxes merged by log-sum-exp, keys already in the query's
regular window being excluded from the shifted part so that no key counts twice.

Two rules of the authors' code (``src/span/layers/attention.py`` and
``src/span/preprocessing/padding.py`` at commit 3e60ea3) are followed by default in
:func:`plan_hierarchy`, each with an option for our earlier behaviour:

* ``pad="authors"``: their model first places the section on a padded canvas
  (``SPAN_Padder``): the spots move by the left/top padding of each axis, so the window grid and
  the stride-2 pooling are aligned to the canvas, not to the lattice origin
  (:func:`authors_canvas`); ``pad="none"`` keeps the lattice where it is;
* ``always_shift=False``: ``generate_swin_windows`` pads (and hence shifts) only when the extent
  ``max + 1`` of the positions it is given (the canvas, at each level) is not a multiple of the
  window side in at least one axis; when it is a multiple in both, their shifted partition is the
  regular one (a quirk: the shifted windows silently disappear). ``always_shift=True`` always
  shifts.

References:
  Wu, Xu, Diao, Li, Wei, Andersson, Gui, "HiST: hierarchical sparse transformer for spatial
  transcriptomics from histology", ICML 2026, arXiv:2606.14251; code github.com/wwyi1828/HiST (MIT).
  Liu et al., "Swin Transformer", ICCV 2021 (shifted windows, relative position bias).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fidia_jax.projects.hist.data import check_spots

__all__ = [
    "AttentionStats",
    "LatticeLevel",
    "PoolPlan",
    "WindowPlan",
    "authors_canvas",
    "check_lattice",
    "dense_window_attention",
    "hierarchy_sizes",
    "lattice_window_attention",
    "local_attention_mask",
    "merge_attention_stats",
    "plan_hierarchy",
    "plan_pooling",
    "plan_windows",
    "sparse_patch_pool",
    "sparse_unpool",
    "window_attention_stats",
]


class WindowPlan(NamedTuple):
    """Active spots grouped by window (one partition of the lattice).

    Attributes:
      table: ``(W, P)`` int32, the spot index in each window slot; ``n`` (sentinel) where empty.
      valid: ``(W, P)`` bool, ``table < n``.
      spot_window: ``(n,)`` int32, each spot's window row; ``W`` (sentinel) for inactive spots.
      spot_slot: ``(n,)`` int32, each spot's slot in its window; ``0`` for inactive spots.
    """

    table: np.ndarray
    valid: np.ndarray
    spot_window: np.ndarray
    spot_slot: np.ndarray


class PoolPlan(NamedTuple):
    """A stride-2 pooling of a sparse lattice (each parent covers a 2x2 block of children).

    Attributes:
      children: ``(M, 4)`` int32, the child index at offset ``2 * (x % 2) + (y % 2)``; ``n``
        (sentinel) for a missing child, which then contributes zero.
      parent: ``(n,)`` int32, each child's parent row; ``M`` (sentinel) for inactive children.
      offset: ``(n,)`` int32, each child's offset ``2 * (x % 2) + (y % 2)`` in ``0..3``.
    """

    children: np.ndarray
    parent: np.ndarray
    offset: np.ndarray


class LatticeLevel(NamedTuple):
    """One scale of the hierarchy: its spots, both window partitions, and the pooling to the next.

    ``coords`` ``(n, 2)`` int32 (zeros where padded; with ``pad="authors"`` already moved onto
    the authors' canvas), ``mask`` ``(n,)`` bool, ``regular`` and ``shifted`` :class:`WindowPlan`
    (``shifted`` is the regular partition again where the authors' rule drops the shift),
    ``pool`` the :class:`PoolPlan` to the next (coarser) level, or ``None`` at the coarsest;
    ``extent`` ``(2,)`` int32, the extent of the positions the authors' window builder sees at
    this level (the canvas with ``pad="authors"``, else ``max + 1`` of the active coordinates).
    """

    coords: np.ndarray
    mask: np.ndarray
    regular: WindowPlan
    shifted: WindowPlan
    pool: PoolPlan | None
    extent: np.ndarray | None = None


def check_lattice(coords, mask=None) -> np.ndarray:
    """Validates integer lattice coordinates and returns them as ``(n, 2)`` int64.

    The rules of :func:`fidia_jax.projects.hist.data.check_spots` without counts: shape ``(n, 2)``, integer
    values (whole-number floats accepted), and among the active rows (``mask``, default all)
    no negative coordinate and no two spots at one point.

    Raises:
      DataError: naming the first offending spot(s).
    """
    return check_spots(coords, None, name="lattice", mask=mask)


def _sizes(n_active: int, cap: int | None, what: str) -> int:
    if cap is None:
        return max(n_active, 1)
    if n_active > cap:
        raise ValueError(f"{what}: need {n_active}, but the fixed size is {cap}")
    return cap


def plan_windows(
    coords,
    mask=None,
    *,
    window: int,
    shift: int = 0,
    num_windows: int | None = None,
    occupancy: int | None = None,
) -> WindowPlan:
    """Groups active spots into ``window x window`` squares whose origin is offset by ``-shift``.

    Spot ``(x, y)`` falls in window ``((x + shift) // window, (y + shift) // window)``: ``shift =
    window // 2`` is the Swin shifted partition, done by padding the lattice's low edges (authors'
    code, ``generate_swin_windows``) rather than by a cyclic roll, so no window wraps around.

    Args:
      coords: ``(n, 2)`` integer lattice coordinates (validated by :func:`check_lattice`).
      mask: ``(n,)`` bool, active spots (default all).
      window: side ``S >= 1``; shift: ``0 <= shift < S``.
      num_windows, occupancy: fixed sizes ``W`` and ``P`` (static shapes across sections and
        augmentations); default the exact counts.

    Returns:
      :class:`WindowPlan`; windows are ordered by id, slots by spot index.

    Raises:
      DataError: invalid coordinates. ValueError: bad ``window``/``shift``, or more windows /
      a fuller window than the fixed sizes allow.
    """
    if window < 1 or not 0 <= shift < window:
        raise ValueError(f"need window >= 1 and 0 <= shift < window, got {window=}, {shift=}")
    c = check_lattice(coords, mask)
    n = len(c)
    m = np.ones(n, bool) if mask is None else np.asarray(mask, bool)
    act = np.flatnonzero(m)
    wc = (c[act] + shift) // window
    key = wc[:, 0] * (int(wc[:, 1].max(initial=0)) + 1) + wc[:, 1]
    order = np.argsort(key, kind="stable")
    uniq, win_of, counts = np.unique(key, return_inverse=True, return_counts=True)
    W = _sizes(len(uniq), num_windows, "plan_windows: windows")
    P = _sizes(int(counts.max(initial=0)), occupancy, "plan_windows: window occupancy")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    slot_sorted = np.arange(len(act)) - starts[win_of[order]]
    slot = np.empty(len(act), np.int64)
    slot[order] = slot_sorted
    table = np.full((W, P), n, np.int32)
    table[win_of, slot] = act
    spot_window = np.full(n, W, np.int32)
    spot_slot = np.zeros(n, np.int32)
    spot_window[act] = win_of
    spot_slot[act] = slot
    return WindowPlan(table, table < n, spot_window, spot_slot)


def plan_pooling(coords, mask=None, *, num_parents: int | None = None):
    """Stride-2 pooling of a sparse lattice: parents are the distinct ``coords // 2`` of active spots.

    Returns:
      ``(parent_coords (M, 2) int32, parent_mask (M,) bool, PoolPlan)``; parents sorted by
      ``(x, y)``; padded rows have coordinates ``0`` and mask ``False``.

    Raises:
      DataError: invalid coordinates. ValueError: more parents than ``num_parents``.
    """
    c = check_lattice(coords, mask)
    n = len(c)
    m = np.ones(n, bool) if mask is None else np.asarray(mask, bool)
    act = np.flatnonzero(m)
    pc, inv = np.unique(c[act] // 2, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    M = _sizes(len(pc), num_parents, "plan_pooling: parents")
    off = (2 * (c[:, 0] % 2) + (c[:, 1] % 2)).astype(np.int32)
    children = np.full((M, 4), n, np.int32)
    children[inv, off[act]] = act
    parent = np.full(n, M, np.int32)
    parent[act] = inv
    coords_out = np.zeros((M, 2), np.int32)
    coords_out[: len(pc)] = pc
    mask_out = np.zeros(M, bool)
    mask_out[: len(pc)] = True
    return coords_out, mask_out, PoolPlan(children, parent, np.where(m, off, 0).astype(np.int32))


def authors_canvas(extent, levels: int) -> tuple[np.ndarray, np.ndarray]:
    """The authors' padded canvas of a section (``SPAN_Padder.compute_padding``, our code).

    Their model (``tasks/gene_prediction/main.py``) pads for ``n_layers = levels - 1`` stride-2,
    kernel-2 poolings: with ``S_n = 2 ** n_layers`` and receptive field ``RF = S_n``, an axis of
    extent ``I`` becomes ``I_adj = 2 RF + S_n ceil(max(I - RF, 0) / S_n)`` (a multiple of
    ``S_n``), of which ``(I_adj - I) // 2`` is added before the spots (left/top). Two padding
    nodes are placed at the canvas corners ``0`` and ``I_adj - 1``; at level ``l`` the canvas
    is ``I_adj / 2**l``.

    Args:
      extent: ``(2,)`` ints ``>= 1``, ``max + 1`` of the active coordinates per axis.
      levels: scales of the hierarchy ``>= 1``.

    Returns:
      ``(offset (2,) int64, canvas (2,) int64)``: the left/top padding added to every
      coordinate, and the canvas extent ``I_adj`` at level 0.

    Raises:
      ValueError: ``levels < 1`` or an extent below 1.
    """
    e = np.asarray(extent, np.int64).reshape(-1)
    if levels < 1 or e.shape != (2,) or (e < 1).any():
        raise ValueError(f"authors_canvas: need levels >= 1 and extent >= 1, got {levels}, {e}")
    sn = 2 ** (levels - 1)
    rf = sn
    k = np.maximum(-(-(e - rf) // sn), 0)  # ceil((I - RF) / S_n), at least 0
    canvas = 2 * rf + sn * k
    return (canvas - e) // 2, canvas


def _shift_used(extent, window: int, always_shift: bool) -> bool:
    """The authors' rule: shifted windows exist iff an axis' extent is not a multiple of ``S``."""
    return bool(always_shift or (np.asarray(extent) % window != 0).any())


def plan_hierarchy(
    coords,
    mask=None,
    *,
    levels: int,
    window: int,
    sizes: Sequence[tuple[int, int, int, int]] | None = None,
    pad: str = "authors",
    always_shift: bool = False,
) -> tuple[LatticeLevel, ...]:
    """Plans a U-shaped hierarchy: ``levels`` scales, each pooled 2x from the previous one.

    Args:
      coords: ``(n, 2)`` lattice coordinates of level 0; mask: ``(n,)`` bool (default all).
      levels: number of scales ``>= 1``; window: window side ``S`` at every scale (the shifted
        partition uses ``S // 2``; the authors' ``window_size`` is ``S / 2``).
      sizes: optional fixed sizes per level ``(spots, regular windows, shifted windows,
        occupancy)`` (e.g. :func:`hierarchy_sizes` of the largest section, with a margin);
        level 0's ``spots`` must equal ``n``.
      pad: ``"authors"`` (default, their ``SPAN_Padder``): the active spots are moved by the
        canvas offset of :func:`authors_canvas` before windows and pooling are planned, and the
        shift rule reads the canvas extent ``I_adj / 2**l`` at level ``l``; ``"none"``: no
        offset, the extent is ``max + 1`` of the active coordinates of each level. The two
        padding nodes the authors add at the canvas corners are not added (see docs/hist.md).
      always_shift: ``False`` (default, the authors' ``generate_swin_windows``): no shifted
        windows at a level whose extent is a multiple of ``S`` in both axes (its shifted
        partition is then the regular one); ``True``: always shift by ``S // 2``.

    Returns:
      A tuple of :class:`LatticeLevel`, finest first.

    Raises:
      DataError: invalid coordinates. ValueError: ``levels < 1``, an unknown ``pad``, or a plan
      exceeds ``sizes``.
    """
    if levels < 1:
        raise ValueError(f"plan_hierarchy: levels must be >= 1, got {levels}")
    if pad not in ("authors", "none"):
        raise ValueError(f"plan_hierarchy: pad must be 'authors' or 'none', got {pad!r}")
    if sizes is not None and (len(sizes) != levels or sizes[0][0] != len(coords)):
        raise ValueError(
            f"plan_hierarchy: sizes {sizes} do not fit {levels} levels / {len(coords)} spots"
        )
    c = check_lattice(coords, mask).astype(np.int64)
    m = np.ones(len(c), bool) if mask is None else np.asarray(mask, bool)
    canvas = None
    if pad == "authors" and m.any():
        offset, canvas = authors_canvas(c[m].max(axis=0) + 1, levels)
        c = c + offset[None, :]
    c = np.where(m[:, None], c, 0).astype(np.int32)
    out = []
    for lvl in range(levels):
        s = sizes[lvl] if sizes is not None else (None, None, None, None)
        if canvas is not None:
            extent = canvas >> lvl
        else:
            extent = c[m].max(axis=0, initial=0) + 1 if m.any() else np.ones(2, np.int64)
        reg = plan_windows(c, m, window=window, shift=0, num_windows=s[1], occupancy=s[3])
        shift = window // 2 if _shift_used(extent, window, always_shift) else 0
        shf = plan_windows(c, m, window=window, shift=shift, num_windows=s[2], occupancy=s[3])
        if lvl + 1 < levels:
            nxt = sizes[lvl + 1][0] if sizes is not None else None
            pc, pm, pool = plan_pooling(c, m, num_parents=nxt)
        else:
            pc = pm = pool = None
        out.append(LatticeLevel(c, m, reg, shf, pool, np.asarray(extent, np.int32)))
        c, m = pc, pm
    return tuple(out)


def local_attention_mask(level: LatticeLevel) -> np.ndarray:
    """The ``(n, n)`` bool pattern ``A[query, key]`` of :func:`lattice_window_attention` on a level.

    ``A[i, j]`` is true when spots ``i`` and ``j`` are active and share a window of
    ``level.regular`` or of ``level.shifted`` (self included): the key set each query's softmax
    runs over. Host-side NumPy (tests, inspection); memory ``O(n^2)``.
    """
    n = len(level.coords)
    a = np.zeros((n, n), bool)
    for plan in (level.regular, level.shifted):
        for row, ok in zip(np.asarray(plan.table), np.asarray(plan.valid), strict=True):
            idx = row[ok]
            a[np.ix_(idx, idx)] = True
    return a


def hierarchy_sizes(plan: Sequence[LatticeLevel]) -> tuple[tuple[int, int, int, int], ...]:
    """The sizes ``(spots, regular windows, shifted windows, occupancy)`` of each level of a plan."""
    return tuple(
        (
            len(lv.coords),
            lv.regular.table.shape[0],
            lv.shifted.table.shape[0],
            max(lv.regular.table.shape[1], lv.shifted.table.shape[1]),
        )
        for lv in plan
    )


# ----------------------------------------------------------------------------- compute (jnp)


def _take_rows(x, idx):
    """``x[idx]`` along axis 0 where out-of-range (sentinel) indices give zeros."""
    return jnp.take(x, idx, axis=0, mode="fill", fill_value=0)


def sparse_patch_pool(x_NxC, children_Mx4):
    """Gathers each parent's 2x2 children into one row ``(M, 4 C)``; a missing child gives zeros.

    Followed by a ``Linear(4 C -> C')`` this is the stride-2, kernel-2 "patch conv" of HiST
    (authors' code ``s_PatchMerge`` / ``_sparse_conv2d``): the convolution over the active set
    where absent children contribute zero.

    Args:
      x_NxC: ``(n, C)`` features of the children. children_Mx4: :attr:`PoolPlan.children`.

    Returns:
      ``(M, 4 C)``, children concatenated in offset order ``0..3``.
    """
    g_Mx4xC = _take_rows(x_NxC, jnp.asarray(children_Mx4))
    return g_Mx4xC.reshape(g_Mx4xC.shape[0], -1)


def sparse_unpool(y_Mx4xC, parent_N, offset_N):
    """Sparse pixel shuffle: each active child reads its parent's sub-output at its offset.

    Only the children of the cached active support (the ``parent``/``offset`` of the pooling
    plan of that scale) are produced; the other three positions a parent could expand to are
    dropped (authors' code ``s_PixelShuffle.forward``).

    Args:
      y_Mx4xC: ``(M, 4, C)`` per-parent outputs (e.g. ``Linear(C_in -> 4 C)`` reshaped).
      parent_N, offset_N: :attr:`PoolPlan.parent` and :attr:`PoolPlan.offset` (``(n,)``).

    Returns:
      ``(n, C)``; rows of inactive children (parent sentinel) are zero.
    """
    M = y_Mx4xC.shape[0]
    flat = jnp.asarray(parent_N) * 4 + jnp.asarray(offset_N)
    flat = jnp.where(jnp.asarray(parent_N) < M, flat, 4 * M)
    return _take_rows(y_Mx4xC.reshape(4 * M, -1), flat)


class AttentionStats(NamedTuple):
    """Unnormalised partial softmax attention per query: running max ``m``, sum ``l``, output ``o``.

    ``m``, ``l``: ``(n, H)``; ``o``: ``(n, H, D)``; a query with no key has ``m = -inf``, ``l = 0``.
    """

    m: jax.Array
    l: jax.Array  # noqa: E741
    o: jax.Array


def _check_attention_shapes(q, k, v, coords, where: str, bias=None, mask=None) -> None:
    """Static shape checks of the window attention functions (work under ``jit``)."""
    qs, ks, vs = jnp.shape(q), jnp.shape(k), jnp.shape(v)
    if len(qs) != 3 or len(ks) != 3 or len(vs) != 3:
        raise ValueError(f"{where}: q, k, v must be (n, H, D), got {qs}, {ks}, {vs}")
    if qs != ks:
        raise ValueError(f"{where}: q {qs} and k {ks} must have the same shape (n, H, D)")
    if vs[:2] != qs[:2]:
        raise ValueError(
            f"{where}: v {vs} must have q's spots and heads {qs[:2]} (its width may differ)"
        )
    if jnp.shape(coords) != (qs[0], 2):
        raise ValueError(f"{where}: coords must be (n, 2) = ({qs[0]}, 2), got {jnp.shape(coords)}")
    if mask is not None and jnp.shape(mask) != (qs[0],):
        raise ValueError(f"{where}: mask must be (n,) = ({qs[0]},), got {jnp.shape(mask)}")
    if bias is not None:
        bs = jnp.shape(bias)
        if len(bs) != 3 or bs[0] != qs[1] or bs[1] != bs[2] or bs[1] % 2 == 0:
            raise ValueError(
                f"{where}: bias must be (H, 2S - 1, 2S - 1) with H = {qs[1]}, got {bs}"
            )


def _check_plan(plan, n: int, where: str, name: str, copies: bool = False) -> None:
    """A :class:`WindowPlan` made for ``n`` spots (its sentinel is ``n``)."""
    sw = np.shape(plan.spot_window)
    ok = (sw[0] % n == 0 and sw[0] > 0) if copies and n else sw == (n,)
    if len(sw) != 1 or not ok or np.shape(plan.spot_slot) != sw:
        raise ValueError(
            f"{where}: {name}.spot_window / spot_slot must be ({n},) for {n} spots, got "
            f"{sw} / {np.shape(plan.spot_slot)} (a plan made for another set of spots?)"
        )
    if np.shape(plan.valid) != np.shape(plan.table) or len(np.shape(plan.table)) != 2:
        raise ValueError(
            f"{where}: {name}.table and .valid must be (W, P), got {np.shape(plan.table)} and "
            f"{np.shape(plan.valid)}"
        )
    if not isinstance(plan.table, jax.core.Tracer):
        t = np.asarray(plan.table)
        if t.size and (t.min() < 0 or t.max() > n):
            raise ValueError(
                f"{where}: {name}.table holds spot indices up to {int(t.max())}, but there are "
                f"{n} spots (sentinel {n}): a plan made for another set of spots"
            )


def window_attention_stats(
    q_NxHxD,
    k_NxHxD,
    v_NxHxD,
    coords_Nx2,
    plan: WindowPlan,
    bias_HxRxR=None,
    *,
    exclude_group_N=None,
    exclude_from_window: int = 0,
    include_self: bool = True,
) -> AttentionStats:
    """Softmax attention within each window of ``plan``, as unnormalised statistics per query.

    Scores are ``q . k / sqrt(D) + bias[h, dx + S - 1, dy + S - 1]`` with ``(dx, dy) = key -
    query`` lattice offsets (learned relative position bias, Swin / authors'
    ``RelativePositionBias``; ``R = 2 S - 1``). A key is used only if it is an active spot in
    the query's window, and, when ``exclude_group_N`` is given, not in the query's group (used
    to drop keys already counted by another partition).

    Args:
      q_NxHxD, k_NxHxD, v_NxHxD: ``(n, H, D)`` float. coords_Nx2: ``(n, 2)`` int lattice coords.
      plan: :class:`WindowPlan` over the same ``n`` spots. bias_HxRxR: ``(H, R, R)`` or ``None``.
      exclude_group_N: optional ``(n,)`` int group id; the exclusion applies in windows
        ``>= exclude_from_window`` only. include_self: keep the query as its own key.
      ``plan.spot_window`` may list each spot several times (spot ``i`` of copy ``k`` is row
      ``k n + i`` of the result); :func:`lattice_window_attention` uses this to run both
      partitions as one batch of windows.

    Returns:
      :class:`AttentionStats` per spot (inactive spots: ``m = -inf``, ``l = 0``, ``o = 0``);
      ``o`` has ``v``'s width ``Dv`` (which may differ from ``D``).

    Raises:
      ValueError: q, k not the same ``(n, H, D)``; v not ``(n, H, Dv)``; coords not
        ``(n, 2)``; bias not ``(H, R, R)`` with ``R`` odd; a plan not made for ``n`` spots.
    """
    where = "window_attention_stats"
    _check_attention_shapes(q_NxHxD, k_NxHxD, v_NxHxD, coords_Nx2, where, bias_HxRxR)
    _check_plan(plan, q_NxHxD.shape[0], where, "plan", copies=True)
    H, D = q_NxHxD.shape[1:]
    Dv = v_NxHxD.shape[-1]
    table = jnp.asarray(plan.table)
    valid = jnp.asarray(plan.valid)
    W, P = table.shape
    q = _take_rows(q_NxHxD, table)  # (W, P, H, D)
    k = _take_rows(k_NxHxD, table)
    v = _take_rows(v_NxHxD, table)
    s_WxHxPxP = jnp.einsum("wphd,wqhd->whpq", q, k) / jnp.sqrt(jnp.asarray(D, q.dtype))
    if bias_HxRxR is not None:
        S = (bias_HxRxR.shape[-1] + 1) // 2
        c = _take_rows(jnp.asarray(coords_Nx2, jnp.int32), table)  # (W, P, 2)
        d = c[:, None, :, :] - c[:, :, None, :]  # key - query, (W, Pq, Pk, 2)
        ix = jnp.clip(d[..., 0] + S - 1, 0, 2 * S - 2)
        iy = jnp.clip(d[..., 1] + S - 1, 0, 2 * S - 2)
        b_HxWxPxP = jnp.take(bias_HxRxR.reshape(H, -1), ix * (2 * S - 1) + iy, axis=1)
        s_WxHxPxP = s_WxHxPxP + jnp.moveaxis(b_HxWxPxP, 0, 1).astype(s_WxHxPxP.dtype)
    allowed = valid[:, :, None] & valid[:, None, :]
    if exclude_group_N is not None:
        g = _take_rows(jnp.asarray(exclude_group_N), table)
        same = g[:, :, None] == g[:, None, :]
        excl = (jnp.arange(W) >= exclude_from_window)[:, None, None]
        allowed = allowed & ~(same & excl)
    if not include_self:
        allowed = allowed & ~jnp.eye(P, dtype=bool)[None, :, :]
    allowed_WxHxPxP = jnp.broadcast_to(allowed[:, None, :, :], s_WxHxPxP.shape)
    s = jnp.where(allowed_WxHxPxP, s_WxHxPxP, -jnp.inf)
    m = jnp.max(s, axis=-1)  # (W, H, P)
    m_safe = jnp.where(jnp.isfinite(m), m, 0.0)
    p = jnp.where(allowed_WxHxPxP, jnp.exp(s - m_safe[..., None]), 0.0)
    l = jnp.sum(p, axis=-1)  # noqa: E741
    o = jnp.einsum("whpq,wqhd->wphd", p, v)
    # back to spots: spot i sits at (spot_window[i], spot_slot[i]); sentinel rows give nothing
    sw = jnp.asarray(plan.spot_window)
    flat = jnp.where(sw < W, sw * P + jnp.asarray(plan.spot_slot), W * P)
    m_n = jnp.take(
        jnp.moveaxis(m, 1, 2).reshape(-1, H), flat, axis=0, mode="fill", fill_value=-jnp.inf
    )
    l_n = _take_rows(jnp.moveaxis(l, 1, 2).reshape(-1, H), flat)
    o_n = _take_rows(o.reshape(-1, H, Dv), flat)
    return AttentionStats(m_n, l_n, o_n)


def merge_attention_stats(*stats: AttentionStats):
    """Normalised attention output ``(n, H, D)`` of the union of disjoint key sets (log-sum-exp).

    Queries with no key at all get zeros (never NaN).
    """
    m = stats[0].m
    for s in stats[1:]:
        m = jnp.maximum(m, s.m)
    m_safe = jnp.where(jnp.isfinite(m), m, 0.0)
    l_tot = jnp.zeros_like(stats[0].l)
    o_tot = jnp.zeros_like(stats[0].o)
    for s in stats:
        a = jnp.where(jnp.isfinite(s.m), jnp.exp(s.m - m_safe), 0.0)
        l_tot = l_tot + a * s.l
        o_tot = o_tot + a[..., None] * s.o
    return o_tot / jnp.where(l_tot > 0, l_tot, 1.0)[..., None]


def lattice_window_attention(
    q_NxHxD, k_NxHxD, v_NxHxD, coords_Nx2, regular: WindowPlan, shifted: WindowPlan, bias_HxRxR=None
):
    """HiST's local attention: each spot attends to its regular window ∪ its shifted window.

    The union (authors' code, ``'hybrid'`` pattern ``['swmsa', 'wmsa', 'lloop']`` with
    de-duplicated edges) is one softmax over the active spots of both windows, each key once,
    the query itself included. Memory ``O((W_r + W_s) P^2 H)``.

    Args:
      q_NxHxD, k_NxHxD: ``(n, H, D)``. v_NxHxD: ``(n, H, Dv)`` (``Dv`` may differ from ``D``,
        as in :func:`dense_window_attention`). coords_Nx2: ``(n, 2)`` int.
      regular, shifted: :class:`WindowPlan` with shifts ``0`` and ``S // 2`` (see
        :func:`plan_hierarchy`), made for these ``n`` spots. bias_HxRxR: ``(H, 2S-1, 2S-1)``
        relative position bias or None.

    Returns:
      ``(n, H, Dv)``; zeros for inactive spots.

    Raises:
      ValueError: q and k not the same ``(n, H, D)``, v not ``(n, H, Dv)``, coords not
        ``(n, 2)``, bias not ``(H, R, R)`` with ``R`` odd, or a plan made for another number of
        spots (it used to return a scrambled ``(n, H, D)`` when ``Dv != D``).
    """
    where = "lattice_window_attention"
    _check_attention_shapes(q_NxHxD, k_NxHxD, v_NxHxD, coords_Nx2, where, bias_HxRxR)
    for name, plan in (("regular", regular), ("shifted", shifted)):
        _check_plan(plan, q_NxHxD.shape[0], where, name)
    # both partitions in one batch of windows (one program, not two): the shifted windows
    # follow the regular ones, and spot i's two rows are merged by log-sum-exp
    Wr, Pr = regular.table.shape
    Ws, Ps = shifted.table.shape
    n = q_NxHxD.shape[0]
    P = max(Pr, Ps)

    def widen(t, fill):
        t = jnp.asarray(t)
        return jnp.pad(t, ((0, 0), (0, P - t.shape[1])), constant_values=fill)

    table = jnp.concatenate([widen(regular.table, n), widen(shifted.table, n)], axis=0)
    rw, sw = jnp.asarray(regular.spot_window), jnp.asarray(shifted.spot_window)
    both = WindowPlan(
        table=table,
        valid=table < n,
        spot_window=jnp.concatenate([rw, jnp.where(sw < Ws, sw + Wr, Wr + Ws)]),
        spot_slot=jnp.concatenate([jnp.asarray(regular.spot_slot), jnp.asarray(shifted.spot_slot)]),
    )
    # exclusion: in a shifted window, keys in the query's regular window are already counted;
    # in a regular window nothing is excluded (every spot gets a group of its own there)
    st = window_attention_stats(
        q_NxHxD,
        k_NxHxD,
        v_NxHxD,
        coords_Nx2,
        both,
        bias_HxRxR,
        exclude_group_N=rw,
        exclude_from_window=Wr,
    )
    a = AttentionStats(st.m[:n], st.l[:n], st.o[:n])
    b = AttentionStats(st.m[n:], st.l[n:], st.o[n:])
    return merge_attention_stats(a, b)


def dense_window_attention(
    q_NxHxD,
    k_NxHxD,
    v_NxHxD,
    coords_Nx2,
    mask_N,
    *,
    window: int,
    bias_HxRxR=None,
    shifted: bool = True,
    extent=None,
    always_shift: bool = False,
):
    """Dense ``n x n`` masked reference of :func:`lattice_window_attention` (tests, small ``n``).

    Key ``j`` is allowed for query ``i`` when both are active and they share the regular window
    (``coords // S``) or, if ``shifted`` and the shift applies, the shifted one
    (``(coords + S // 2) // S``). The shift applies (the authors' rule, see
    :func:`plan_hierarchy`) when ``always_shift`` or when ``extent`` (``(2,)`` ints; default
    ``max + 1`` of the active coordinates; pass :attr:`LatticeLevel.extent` to mirror a plan) is
    not a multiple of ``S`` in some axis. Memory ``O(n^2 H)``. ``v`` may have its own width
    ``Dv``; the result is ``(n, H, Dv)``.

    Raises:
      ValueError: the shapes of :func:`lattice_window_attention`, mask not ``(n,)``, or
        ``window < 1``.
    """
    _check_attention_shapes(
        q_NxHxD, k_NxHxD, v_NxHxD, coords_Nx2, "dense_window_attention", bias_HxRxR, mask_N
    )
    if int(window) < 1:
        raise ValueError(f"dense_window_attention: window must be >= 1, got {window}")
    n, H, D = q_NxHxD.shape
    c = jnp.asarray(coords_Nx2, jnp.int32)
    mask = jnp.asarray(mask_N, bool)

    def same(shift):
        w = (c + shift) // window
        return jnp.all(w[:, None, :] == w[None, :, :], axis=-1)

    allowed = same(0)
    if shifted:
        if extent is None:
            ext = jnp.max(jnp.where(mask[:, None], c, 0), axis=0) + 1
        else:
            ext = jnp.asarray(extent, jnp.int32)
        use = jnp.logical_or(always_shift, jnp.any(ext % window != 0))
        allowed = allowed | (same(window // 2) & use)
    allowed = allowed & mask[:, None] & mask[None, :]
    s = jnp.einsum("ihd,jhd->hij", q_NxHxD, k_NxHxD) / jnp.sqrt(jnp.asarray(D, q_NxHxD.dtype))
    if bias_HxRxR is not None:
        S = (bias_HxRxR.shape[-1] + 1) // 2
        d = c[None, :, :] - c[:, None, :]
        ix = jnp.clip(d[..., 0] + S - 1, 0, 2 * S - 2)
        iy = jnp.clip(d[..., 1] + S - 1, 0, 2 * S - 2)
        s = s + bias_HxRxR[:, ix, iy]
    allowed_H = jnp.broadcast_to(allowed[None], s.shape)
    s = jnp.where(allowed_H, s, -jnp.inf)
    m = jnp.max(s, axis=-1, keepdims=True)
    p = jnp.where(allowed_H, jnp.exp(s - jnp.where(jnp.isfinite(m), m, 0.0)), 0.0)
    l = jnp.sum(p, axis=-1, keepdims=True)  # noqa: E741
    p = p / jnp.where(l > 0, l, 1.0)
    return jnp.einsum("hij,jhd->ihd", p, v_NxHxD)
