"""Pure-jnp reference of SANTA / S²ANTA decode attention and of dense flash-decoding.

SANTA (Stochastic Additive No-mulT Attention) replaces the value stage of a decode step,
``o = softmax(q Kᵀ / √d) V``, by an estimate that sums a few sampled value rows. The reference
design (authors' CUDA kernel ``flash_style_fused_santa_fixed_tile_budgets``, read for semantics)
works tile by tile:

1. split the ``n_k`` keys into tiles of ``block_k`` keys; in tile ``t`` compute the scores, the
   tile max ``m_t``, the unnormalised probabilities ``u_r = exp(s_r - m_t)`` and ``ℓ_t = Σ u_r``;
2. draw ``S_t`` (the fixed per-tile budget) samples from ``u / ℓ_t`` using the prefix sums
   ``C_r = S_t · Σ_{r' ≤ r} u_{r'} / ℓ_t``; systematic sampling with one uniform ``a`` per
   (batch, head, tile) gives the counts ``c_r = floor(a + C_r) - floor(a + C_{r-1})``;
3. the tile's value estimate is ``Σ_r c_r v_r`` (gather-and-add; ``c_r`` are small integers);
4. merge tiles with the flash-decoding weights ``w_t = exp(m_t - m*) ℓ_t``:
   ``o ≈ Σ_t w_t (Σ_r c_r v_r) / (S_t Σ_t w_t)``.

Because ``E[c_r] = S_t u_r / ℓ_t`` for all three samplers, the estimate is unbiased for the
exact attention output (the tile weights are exact, not sampled).

Sampling variants (``method``), all with positions on ``[0, S_t)`` against the prefix sums:

* ``"iid"`` (multinomial): ``y_j = S_t · U_j``, ``S_t`` independent uniforms;
* ``"stratified"``: ``y_j = j + U_j``, one independent uniform per stratum;
* ``"systematic"``: ``y_j = j + 1 - a``, a single uniform (the floor formula above).

iid/stratified sample ``j`` lands in row ``r`` with ``C_{r-1} <= y_j < C_r``; systematic uses
``C_{r-1} < y_j <= C_r`` (so that its counts equal the floor formula exactly).

Masked slots never contribute: keys at or past ``kv_lengths[b]`` (and the zero padding up to a
multiple of ``block_k``) are removed with ``jnp.where`` before any product, never multiplied by a
zero weight, so a NaN or Inf stored in the unused part of a cache cannot reach the output. A row
with ``kv_lengths[b] == 0`` returns zeros (every reference and kernel here, and
``fidia_jax.layers.xla_attention``). Values of ``kv_lengths`` outside ``[0, N]`` are a
``ValueError`` when concrete; under ``jit`` (traced) they are not checked, and a length above
``N`` acts as ``N``, a negative one as ``0``.

Uniforms are inputs (see :func:`make_uniforms`): the kernels need no in-kernel RNG and results
are reproducible. ``S_t`` is a fixed per-tile budget; a proportional budget (more samples in
heavier tiles, as in the authors' ``santa_fused_proportional_tile_budgets``) is not implemented.

Bernoulli ternary queries (:func:`ternary_query`) sparsify the score stage. The paper's exact
construction was not available to us; the one here is **reconstructed**: with ``c = max_i |q_i|``
each coordinate becomes ``c · sign(q_i) · Bernoulli(|q_i| / c)``, an unbiased estimate of ``q``
(hence ``q̃ · k`` is unbiased for ``q · k``) whose score stage needs only additions of ±k rows.
The softmax of unbiased scores is *not* unbiased for the softmax (Jensen); this is measured, not
hidden, in the tests and docs.

References:
  SANTA / S²ANTA: Stochastic Additive No-mulT Attention. ICML 2026.
  https://github.com/OPUSLab/SANTA (CUDA kernels; read for semantics, not copied).
  T. Dao et al. Flash-Decoding for long-context inference, 2023.
"""

from __future__ import annotations

import functools
from typing import Literal

import jax
import jax.numpy as jnp

from fidia_jax import _checks
from fidia_jax.kernels._merge import merge_attention_partials

__all__ = [
    "Method",
    "METHODS",
    "VALUE_STAGES",
    "num_tiles",
    "make_uniforms",
    "uniform_shape",
    "ternary_query",
    "tile_scores",
    "tile_counts",
    "tile_sample_indices",
    "dense_decode_reference",
    "flash_decode_reference",
    "santa_decode_reference",
    "distinct_value_rows",
]

Method = Literal["iid", "stratified", "systematic"]
METHODS: tuple[str, ...] = ("iid", "stratified", "systematic")
#: SANTA value stages; ``"gather"`` (add the sampled V rows) is the default everywhere.
VALUE_STAGES: tuple[str, ...] = ("gather", "counts")


def num_tiles(n_k: int, block_k: int) -> int:
    """Number of key tiles, ``ceil(n_k / block_k)``."""
    return -(-n_k // block_k)


def uniform_shape(
    batch: int, num_q_heads: int, n_k: int, *, block_k: int, samples_per_tile: int, method: str
) -> tuple[int, int, int, int]:
    """Shape ``(B, Hq, n_tiles, s)`` of the uniforms a SANTA call needs (``s = 1`` if systematic)."""
    s = 1 if method == "systematic" else samples_per_tile
    return (batch, num_q_heads, num_tiles(n_k, block_k), s)


def make_uniforms(
    key: jax.Array,
    batch: int,
    num_q_heads: int,
    n_k: int,
    *,
    block_k: int,
    samples_per_tile: int,
    method: str,
) -> jax.Array:
    """Float32 uniforms on ``[0, 1)`` of :func:`uniform_shape` drawn from ``key``.

    Callers derive ``key`` by folding a base key with (layer, step), e.g.
    ``jax.random.fold_in(jax.random.fold_in(key, layer), step)``.
    """
    shape = uniform_shape(
        batch, num_q_heads, n_k, block_k=block_k, samples_per_tile=samples_per_tile, method=method
    )
    return jax.random.uniform(key, shape, jnp.float32)


def ternary_query(q: jax.Array, uniforms: jax.Array) -> jax.Array:
    """Unbiased stochastic ternary version of ``q`` (reconstructed construction).

    Args:
      q: ``(..., D)`` float queries.
      uniforms: ``(..., D)`` float32 uniforms on ``[0, 1)``.

    Returns:
      float32 ``(..., D)`` with entries in ``{-c, 0, +c}``, ``c = max_i |q_i|`` per row, and
      ``E[result] = q`` (coordinate ``i`` is kept with probability ``|q_i| / c``).
    """
    qf = q.astype(jnp.float32)
    c = jnp.max(jnp.abs(qf), axis=-1, keepdims=True)
    keep = uniforms * c < jnp.abs(qf)
    return jnp.where(keep, jnp.sign(qf) * c, 0.0)


def _prefix_sum(x: jax.Array, *, inclusive: bool = True) -> jax.Array:
    """Prefix sum along the last axis as a triangular matmul (the kernel does the same).

    The kernels call this same function; the exclusive form avoids slicing, which Pallas' Triton
    lowering does not support inside a kernel.
    """
    n = x.shape[-1]
    i, j = jnp.arange(n)[:, None], jnp.arange(n)[None, :]
    tri = ((i <= j) if inclusive else (i < j)).astype(jnp.float32)
    return jnp.dot(x, tri, precision=jax.lax.Precision.HIGHEST)


def _first_uniform(uniforms_GxS: jax.Array) -> jax.Array:
    """The ``(G, 1)`` uniform of systematic sampling (its uniforms come with ``S = 1``)."""
    return uniforms_GxS if uniforms_GxS.shape[-1] == 1 else uniforms_GxS[:, :1]


def tile_scores(
    q_GxD: jax.Array, k_NxD: jax.Array, valid_N: jax.Array, scale: float
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Scores of one tile: tile max, unnormalised probabilities and their sum.

    Args:
      q_GxD: float32 queries of the ``G`` query heads sharing one kv head.
      k_NxD: float32 keys of the tile.
      valid_N: bool, which keys are valid.
      scale: softmax scale.

    Returns:
      ``m_G`` (``-inf`` for an empty tile), ``u_GxN = exp(s - m)`` (0 where invalid), ``ell_G``.
    """
    s = jnp.dot(q_GxD, k_NxD.T, precision=jax.lax.Precision.HIGHEST) * scale
    s = jnp.where(valid_N[None, :], s, -jnp.inf)
    m = jnp.max(s, axis=-1)
    m_safe = jnp.where(jnp.isfinite(m), m, 0.0)
    u = jnp.where(valid_N[None, :], jnp.exp(s - m_safe[:, None]), 0.0)
    return m, u, jnp.sum(u, axis=-1)


def _positions(
    uniforms_GxS: jax.Array, samples_per_tile: int, method: str, num_slots: int | None = None
) -> jax.Array:
    """Sample positions on ``[0, S)``; ``num_slots >= S`` columns (slots ``>= S`` are padding)."""
    j = jnp.arange(num_slots or samples_per_tile, dtype=jnp.float32)[None, :]
    if method == "iid":
        return uniforms_GxS * samples_per_tile
    if method == "stratified":
        return j + uniforms_GxS
    if method == "systematic":
        return j + 1.0 - _first_uniform(uniforms_GxS)
    _checks.assert_in(method, METHODS, "method", where="santa sampling")
    raise AssertionError("unreachable")


def _cumulative(
    u_GxN: jax.Array, ell_G: jax.Array, samples_per_tile: int, *, inclusive: bool = True
) -> jax.Array:
    invdel = jnp.where(ell_G > 0, samples_per_tile / jnp.where(ell_G > 0, ell_G, 1.0), 0.0)
    return _prefix_sum(u_GxN * invdel[:, None], inclusive=inclusive)


def _tile_counts(
    u_GxN: jax.Array,
    ell_G: jax.Array,
    uniforms_GxS: jax.Array,
    *,
    samples_per_tile: int,
    method: str,
    num_slots: int | None = None,
) -> jax.Array:
    """Sample counts ``c_GxN`` (float32, small integers) of one tile; ``Σ_r c_r ≈ S_t``.

    Systematic uses the floor formula ``floor(a + C_r) - floor(a + C_{r-1})``; iid and stratified
    count positions ``y_j`` with ``C_{r-1} <= y_j < C_r``. An empty tile (``ell = 0``) gets no
    samples. ``num_slots``: the uniforms' (padded) sample axis, ``>= samples_per_tile``; slots
    past ``samples_per_tile`` never count (the Pallas kernels pad it to a power of two).
    """
    c = _cumulative(u_GxN, ell_G, samples_per_tile)
    # the exclusive prefix sums the same terms in the same order minus the last (not c - x), so
    # row r's upper bound and row r+1's lower bound are the same float
    c_prev = _cumulative(u_GxN, ell_G, samples_per_tile, inclusive=False)
    if method == "systematic":
        a = _first_uniform(uniforms_GxS)
        return jnp.floor(a + c) - jnp.floor(a + c_prev)
    y_GxSx1 = _positions(uniforms_GxS, samples_per_tile, method, num_slots)[:, :, None]
    hit = (y_GxSx1 >= c_prev[:, None, :]) & (y_GxSx1 < c[:, None, :]) & (u_GxN[:, None, :] > 0)
    hit = hit & _real_slots(y_GxSx1.shape[1], samples_per_tile)[None, :, None]
    return jnp.sum(hit.astype(jnp.float32), axis=1)


def _real_slots(num_slots: int, samples_per_tile: int) -> jax.Array:
    return jax.lax.broadcasted_iota(jnp.int32, (num_slots,), 0) < samples_per_tile


def _tile_sample_indices(
    u_GxN: jax.Array,
    ell_G: jax.Array,
    uniforms_GxS: jax.Array,
    *,
    samples_per_tile: int,
    method: str,
    num_slots: int | None = None,
) -> tuple[jax.Array, jax.Array]:
    """Row index of every sample in one tile (for the gather-based value stage).

    Returns:
      ``idx_GxS`` int32 row indices within the tile and ``ok_GxS`` bool (a sample is dropped
      when it falls past the last prefix sum, which only rounding or an empty tile can cause,
      and padding slots ``>= samples_per_tile`` of a ``num_slots`` axis are always dropped).
    """
    c = _cumulative(u_GxN, ell_G, samples_per_tile)
    y_GxS = _positions(uniforms_GxS, samples_per_tile, method, num_slots)
    n = u_GxN.shape[-1]
    if method == "systematic":  # first r with C_r >= y
        idx = jnp.sum((c[:, None, :] < y_GxS[:, :, None]).astype(jnp.int32), axis=-1)
    else:  # first r with C_r > y
        idx = jnp.sum((c[:, None, :] <= y_GxS[:, :, None]).astype(jnp.int32), axis=-1)
    ok = (idx < n) & _real_slots(y_GxS.shape[1], samples_per_tile)[None, :]
    return jnp.minimum(idx, n - 1), ok


tile_counts = functools.partial(jax.jit, static_argnames=("samples_per_tile", "method"))(
    _tile_counts
)
tile_sample_indices = functools.partial(jax.jit, static_argnames=("samples_per_tile", "method"))(
    _tile_sample_indices
)


def check_decode_shapes(q, k, v, *, where: str) -> None:
    """Validates decode inputs ``q (B, Hq, D)``, ``k = v (B, N, Hkv, D)`` with ``Hq % Hkv == 0``.

    Shared by the reference and the Pallas wrappers (:mod:`fidia_jax._checks` messages).

    Raises:
      ValueError: wrong ranks, ``v.shape != k.shape``, batch/head-dim mismatch, or ``Hq`` not a
        multiple of ``Hkv``.
    """
    _checks.assert_rank(q, 3, "q", where=where, detail="B, Hq, D")
    _checks.assert_rank(k, 4, "k", where=where, detail="B, N, Hkv, D")
    _checks.assert_shape(v, k.shape, "v", where=where)
    _checks.assert_attention_dims(q, k, heads_axis=1, where=where)


def check_kv_lengths(kv_lengths, k, *, where: str) -> None:
    """``kv_lengths``: ``None`` or ``(B,)`` integers in ``[0, N]`` (values checked when concrete).

    Raises:
      ValueError: wrong shape or dtype, or (concrete values only) a length below 0 or above the
        number of keys ``N = k.shape[1]``.
    """
    if kv_lengths is not None:
        _checks.assert_lengths(kv_lengths, k.shape[0], k.shape[1], "kv_lengths", where=where)


def check_santa_args(
    q,
    k,
    v,
    uniforms,
    *,
    samples_per_tile: int,
    method: str,
    block_k: int,
    value_stage: str,
    where: str,
) -> None:
    """:func:`check_decode_shapes`, then the SANTA arguments (shared by reference and Pallas).

    Raises:
      ValueError: bad shapes, unknown ``method`` or ``value_stage``, ``samples_per_tile < 1``,
        or ``uniforms`` not of :func:`uniform_shape`.
    """
    check_decode_shapes(q, k, v, where=where)
    _checks.assert_in(method, METHODS, "method", where=where)
    _checks.assert_in(value_stage, VALUE_STAGES, "value_stage", where=where)
    if samples_per_tile < 1:
        raise ValueError(f"{where}: samples_per_tile must be >= 1, got {samples_per_tile}")
    want = uniform_shape(
        q.shape[0],
        q.shape[1],
        k.shape[1],
        block_k=block_k,
        samples_per_tile=samples_per_tile,
        method=method,
    )
    _checks.assert_shape(uniforms, want, "uniforms", where=where)


def _prepare(q, k, v, kv_lengths, block_k, where):
    check_decode_shapes(q, k, v, where=where)
    b, hq, d = q.shape
    _, n, hkv, _ = k.shape
    if kv_lengths is None:
        kv_lengths = jnp.full((b,), n, jnp.int32)
    kv_lengths = jnp.asarray(kv_lengths, jnp.int32).reshape(b)
    nt = num_tiles(n, block_k)
    pad = nt * block_k - n
    if pad:
        k = jnp.pad(k, ((0, 0), (0, pad), (0, 0), (0, 0)))
        v = jnp.pad(v, ((0, 0), (0, pad), (0, 0), (0, 0)))
    g = hq // hkv
    q_BxKxGxD = q.astype(jnp.float32).reshape(b, hkv, g, d)
    k_BxKxTxNxD = k.astype(jnp.float32).reshape(b, nt, block_k, hkv, d).transpose(0, 3, 1, 2, 4)
    v_BxKxTxNxD = v.astype(jnp.float32).reshape(b, nt, block_k, hkv, d).transpose(0, 3, 1, 2, 4)
    pos_TxN = jnp.arange(nt * block_k).reshape(nt, block_k)
    valid_BxTxN = pos_TxN[None] < kv_lengths[:, None, None]
    # masked slots are removed, not weighted by 0: a NaN/Inf past kv_lengths must not reach o
    v_BxKxTxNxD = jnp.where(valid_BxTxN[:, None, :, :, None], v_BxKxTxNxD, 0.0)
    return q_BxKxGxD, k_BxKxTxNxD, v_BxKxTxNxD, valid_BxTxN, (b, hq, hkv, g, d, nt)


def _merge(m_T, ell_T, acc_TxD, denom_scale):
    """Flash-decoding merge for one (batch, head): ``Σ_t w_t acc_t / (denom_scale Σ_t w_t)``
    with ``w_t = exp(m_t - m*) ℓ_t``; ``acc_t`` estimates the tile's normalised output times
    ``denom_scale`` (SANTA: ``acc_t = Σ_r c_r v_r``, ``denom_scale = S_t``)."""
    return merge_attention_partials(
        m_T, ell_T, acc_TxD, axis=0, normalised=True, denom_scale=denom_scale
    )


def dense_decode_reference(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    kv_lengths: jax.Array | None = None,
    *,
    scale: float | None = None,
) -> jax.Array:
    """Exact decode attention ``softmax(q Kᵀ · scale) V`` with GQA and ragged lengths.

    Args:
      q: ``(B, Hq, D)`` query of the current step.
      k, v: ``(B, N, Hkv, D)`` cache; query head ``h`` reads kv head ``h // (Hq // Hkv)``.
      kv_lengths: ``(B,)`` int32 valid cache length per row in ``[0, N]`` (``None``: all
        ``N``); rows with length 0 return zeros. Slots past the length are never read into the
        result (a NaN there does not propagate).
      scale: softmax scale (default ``D ** -0.5``).

    Returns:
      ``(B, Hq, D)`` in ``q.dtype`` (float32 accumulation).

    Raises:
      ValueError: bad shapes; ``kv_lengths`` of the wrong shape or dtype, or (when concrete)
        outside ``[0, N]``.
    """
    check_decode_shapes(q, k, v, where="dense_decode_reference")
    check_kv_lengths(kv_lengths, k, where="dense_decode_reference")
    return _dense_decode(q, k, v, kv_lengths, scale=scale)


@functools.partial(jax.jit, static_argnames=("scale",))
def _dense_decode(q, k, v, kv_lengths, *, scale):
    q_, k_, v_, valid, (b, hq, hkv, g, d, nt) = _prepare(
        q, k, v, kv_lengths, max(k.shape[1], 1), "dense_decode_reference"
    )
    scale = d**-0.5 if scale is None else scale
    s = jnp.einsum("bkgd,bknd->bkgn", q_, k_[:, :, 0], precision=jax.lax.Precision.HIGHEST) * scale
    s = jnp.where(valid[:, None, None, 0], s, -jnp.inf)
    m = jnp.max(s, axis=-1, keepdims=True)
    p = jnp.where(valid[:, None, None, 0], jnp.exp(s - jnp.where(jnp.isfinite(m), m, 0.0)), 0.0)
    z = jnp.sum(p, axis=-1, keepdims=True)
    o = jnp.einsum(
        "bkgn,bknd->bkgd",
        p / jnp.where(z > 0, z, 1.0),
        v_[:, :, 0],
        precision=jax.lax.Precision.HIGHEST,
    )
    return o.reshape(b, hq, d).astype(q.dtype)


def flash_decode_reference(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    kv_lengths: jax.Array | None = None,
    *,
    block_k: int = 64,
    scale: float | None = None,
) -> jax.Array:
    """Dense flash-decoding (split-K over key tiles + log-sum-exp merge); equals the exact output.

    Same arguments, result and errors as :func:`dense_decode_reference`, plus ``block_k`` (tile
    length).
    """
    check_decode_shapes(q, k, v, where="flash_decode_reference")
    check_kv_lengths(kv_lengths, k, where="flash_decode_reference")
    return _flash_decode(q, k, v, kv_lengths, block_k=block_k, scale=scale)


@functools.partial(jax.jit, static_argnames=("block_k", "scale"))
def _flash_decode(q, k, v, kv_lengths, *, block_k, scale):
    q_, k_, v_, valid, (b, hq, hkv, g, d, nt) = _prepare(
        q, k, v, kv_lengths, block_k, "flash_decode_reference"
    )
    scale = d**-0.5 if scale is None else scale

    def one(q_GxD, k_TxNxD, v_TxNxD, valid_TxN):
        m, u, ell = jax.vmap(tile_scores, in_axes=(None, 0, 0, None))(
            q_GxD, k_TxNxD, valid_TxN, scale
        )
        acc_TxGxD = jnp.einsum("tgn,tnd->tgd", u, v_TxNxD, precision=jax.lax.Precision.HIGHEST)
        # _merge weights a tile by exp(m_t - m*) * ell_t, so pass the tile's normalised output
        acc_TxGxD = acc_TxGxD / jnp.where(ell > 0, ell, 1.0)[..., None]
        return jax.vmap(_merge, in_axes=(1, 1, 1, None))(m, ell, acc_TxGxD, 1.0)

    out = jax.vmap(jax.vmap(one, in_axes=(0, 0, 0, None)), in_axes=(0, 0, 0, 0))(q_, k_, v_, valid)
    return out.reshape(b, hq, d).astype(q.dtype)


def santa_decode_reference(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    uniforms: jax.Array,
    kv_lengths: jax.Array | None = None,
    *,
    samples_per_tile: int,
    method: str = "systematic",
    block_k: int = 64,
    scale: float | None = None,
    value_stage: Literal["gather", "counts"] = "gather",
    query_uniforms: jax.Array | None = None,
) -> jax.Array:
    """SANTA decode attention estimate (tile-wise sampling + flash merge), pure jnp.

    Args:
      q: ``(B, Hq, D)`` float query of the current step.
      k, v: ``(B, N, Hkv, D)`` float cache (bf16 or f32); ``Hq % Hkv == 0``.
      uniforms: float32 on ``[0, 1)``, shape :func:`uniform_shape` = ``(B, Hq, n_tiles, s)``
        with ``s = samples_per_tile`` (iid, stratified) or 1 (systematic).
      kv_lengths: ``(B,)`` int32 valid length per row in ``[0, N]`` (``None``: all ``N``); slots
        past it are never read into the result, and a row of length 0 returns zeros.
      samples_per_tile: fixed per-tile budget ``S_t`` (total samples ``≈ S_t · n_tiles``).
      method: ``"iid"``, ``"stratified"`` or ``"systematic"``.
      block_k: tile length; ``N`` is zero-padded to a multiple of it.
      scale: softmax scale (default ``D ** -0.5``).
      value_stage: ``"gather"`` (default, as the Pallas kernel: gather the sampled rows and add
        them) or ``"counts"`` (``Σ_r c_r v_r`` as a product with the count vector); identical in
        exact arithmetic, they may differ in the last float32 bits.
      query_uniforms: optional ``(B, Hq, D)`` uniforms; if given the score stage uses the
        Bernoulli ternary query :func:`ternary_query` (reconstructed, see module docstring).

    Returns:
      ``(B, Hq, D)`` estimate in ``q.dtype`` (float32 accumulation).

    Raises:
      ValueError: bad ranks/shapes, unknown ``method`` or ``value_stage``; ``kv_lengths`` of the
        wrong shape or dtype, or (when concrete) outside ``[0, N]``.
    """
    where = "santa_decode_reference"
    check_santa_args(
        q,
        k,
        v,
        uniforms,
        samples_per_tile=samples_per_tile,
        method=method,
        block_k=block_k,
        value_stage=value_stage,
        where=where,
    )
    check_kv_lengths(kv_lengths, k, where=where)
    return _santa_decode(
        q,
        k,
        v,
        uniforms,
        kv_lengths,
        samples_per_tile=samples_per_tile,
        method=method,
        block_k=block_k,
        scale=scale,
        value_stage=value_stage,
        query_uniforms=query_uniforms,
    )


@functools.partial(
    jax.jit, static_argnames=("samples_per_tile", "method", "block_k", "scale", "value_stage")
)
def _santa_decode(
    q,
    k,
    v,
    uniforms,
    kv_lengths,
    *,
    samples_per_tile,
    method,
    block_k,
    scale,
    value_stage,
    query_uniforms,
):
    where = "santa_decode_reference"
    out_dtype = q.dtype
    if query_uniforms is not None:
        q = ternary_query(q, query_uniforms)
    q_, k_, v_, valid, (b, hq, hkv, g, d, nt) = _prepare(q, k, v, kv_lengths, block_k, where)
    scale = (q.shape[-1]) ** -0.5 if scale is None else scale
    u_ = uniforms.astype(jnp.float32).reshape(b, hkv, g, nt, uniforms.shape[-1])
    u_ = u_.transpose(0, 1, 3, 2, 4)

    def tile(q_GxD, k_NxD, v_NxD, valid_N, unif_GxS):
        m, u, ell = tile_scores(q_GxD, k_NxD, valid_N, scale)
        if value_stage == "counts":
            c = _tile_counts(u, ell, unif_GxS, samples_per_tile=samples_per_tile, method=method)
            acc = jnp.dot(c, v_NxD, precision=jax.lax.Precision.HIGHEST)
        else:
            if method == "systematic":
                unif_GxS = jnp.broadcast_to(unif_GxS, (unif_GxS.shape[0], samples_per_tile))
            idx, ok = _tile_sample_indices(
                u, ell, unif_GxS, samples_per_tile=samples_per_tile, method=method
            )
            rows_GxSxD = v_NxD[idx]
            acc = jnp.sum(jnp.where(ok[..., None], rows_GxSxD, 0.0), axis=1)
        return m, ell, acc

    def one(q_GxD, k_TxNxD, v_TxNxD, valid_TxN, unif_TxGxS):
        m, ell, acc = jax.vmap(tile, in_axes=(None, 0, 0, 0, 0))(
            q_GxD, k_TxNxD, v_TxNxD, valid_TxN, unif_TxGxS
        )
        return jax.vmap(_merge, in_axes=(1, 1, 1, None))(m, ell, acc, float(samples_per_tile))

    out = jax.vmap(jax.vmap(one, in_axes=(0, 0, 0, None, 0)), in_axes=(0, 0, 0, 0, 0))(
        q_, k_, v_, valid, u_
    )
    return out.reshape(b, hq, d).astype(out_dtype)


def distinct_value_rows(
    q: jax.Array,
    k: jax.Array,
    uniforms: jax.Array,
    *,
    samples_per_tile: int,
    block_k: int,
    method: str = "systematic",
) -> int:
    """Number of distinct V rows a gather-stage SANTA decode reads (the memory-traffic proxy).

    A row counts once per (batch, kv head) if any of the query heads sharing that kv head samples
    it. All keys are taken as valid (full caches), as in the benchmarks.

    Args:
      q: ``(B, Hq, D)`` decode queries.
      k: ``(B, n_k, Hkv, D)`` keys; ``n_k`` a multiple of ``block_k``.
      uniforms: uniforms of :func:`uniform_shape` for these shapes.
      samples_per_tile: per-tile sample budget ``S_t``.
      block_k: key tile size.
      method: ``"iid"``, ``"stratified"`` or ``"systematic"``.

    Returns:
      A Python int, at most ``B * Hkv * n_k``.
    """
    b, hq, d = q.shape
    _, n, hkv, _ = k.shape
    g = hq // hkv
    nt = num_tiles(n, block_k)
    qf = q.astype(jnp.float32).reshape(b, hkv, g, d)
    kf = k.astype(jnp.float32).reshape(b, nt, block_k, hkv, d).transpose(0, 3, 1, 2, 4)
    uu = uniforms.reshape(b, hkv, g, nt, -1).transpose(0, 1, 3, 2, 4)

    def tile(q_gxd, k_nxd, u_gxs):
        _, p, ell = tile_scores(q_gxd, k_nxd, jnp.ones((block_k,), bool), d**-0.5)
        c = _tile_counts(p, ell, u_gxs, samples_per_tile=samples_per_tile, method=method)
        return jnp.sum(jnp.any(c > 0, axis=0))

    per_tile = jax.jit(jax.vmap(jax.vmap(jax.vmap(tile, in_axes=(None, 0, 0)))))
    return int(jnp.sum(per_tile(qf, kf, uu)))
