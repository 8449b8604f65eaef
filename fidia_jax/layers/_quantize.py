"""Vector quantisation: nearest codes, EMA codebooks, residual and next-scale (VAR) quantisers.

* :func:`nearest_code` / :func:`vector_quantize`: nearest-neighbour lookup in a codebook, with
  the straight-through estimator (forward: the code; backward: identity to the input).
* :class:`CodebookEMA` / :func:`ema_codebook_update`: the exponential-moving-average codebook
  update of VQ-VAE-2 (van den Oord et al. 2017, app. A.1; Razavi et al. 2019), with Laplace
  smoothing of the cluster sizes.
* :func:`residual_quantize`: depth-``D`` residual quantisation on one grid (RQ-VAE, Lee et al.
  2022).
* :func:`multiscale_residual_quantize` / :func:`tokens_to_latent`: VAR's next-scale residual
  tokenisation (Tian et al., NeurIPS 2024): scale ``k`` quantises the area-downsampled residual
  on an ``s_k x s_k`` grid and adds its bilinear upsampling to the running sum;
  :func:`block_causal_mask`: VAR's attention mask over scales.
* :func:`resize_images` / :func:`resize_grid`: antialiased linear / cubic resizing as two small
  matrix products, and VAR's area-down / bilinear-up resizing of latent grids.

Textbook primitives with closed-form tests (``tests/layers/test_quantize.py``); HIT-VAR's
prefix -> scale schedule is the driver's (:mod:`fidia_jax.projects.hitvar`).

References:
  van den Oord, Vinyals, Kavukcuoglu, "Neural Discrete Representation Learning", NeurIPS 2017.
  Razavi, van den Oord, Vinyals, "Generating Diverse High-Fidelity Images with VQ-VAE-2",
  NeurIPS 2019. Lee et al., "Autoregressive Image Generation using Residual Quantization", CVPR
  2022. Tian et al., "Visual Autoregressive Modeling: Scalable Image Generation via Next-Scale
  Prediction", NeurIPS 2024, https://arxiv.org/abs/2404.02905.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fidia_jax import _checks

__all__ = [
    "CodebookEMA",
    "block_causal_mask",
    "ema_codebook_update",
    "multiscale_residual_quantize",
    "nearest_code",
    "resize_grid",
    "resize_images",
    "residual_quantize",
    "tokens_to_latent",
    "vector_quantize",
]


def nearest_code(z: jax.Array, codebook: jax.Array) -> jax.Array:
    """Index of the nearest code (squared Euclidean distance) of every vector.

    Args:
      z: ``(..., D)`` float vectors.
      codebook: ``(K, D)`` float codes.

    Returns:
      ``(...)`` int32 indices in ``[0, K)``; ties go to the lowest index.

    Raises:
      ValueError: codebook not rank 2, or ``D`` mismatch.
    """
    _checks.assert_rank(codebook, 2, "codebook", where="nearest_code", detail="(K, D)")
    if z.shape[-1] != codebook.shape[1]:
        raise ValueError(
            f"nearest_code: z's last axis ({z.shape[-1]}) must equal the code dimension "
            f"{codebook.shape[1]} of codebook {tuple(codebook.shape)}."
        )
    # ||z - e||^2 = ||z||^2 - 2 z.e + ||e||^2; ||z||^2 does not change the argmin.
    e2 = jnp.sum(codebook**2, axis=-1).reshape((1,) * (z.ndim - 1) + (-1,))
    d = -2.0 * jnp.einsum("...d,kd->...k", z, codebook) + e2
    return jnp.argmin(d, axis=-1).astype(jnp.int32)


def vector_quantize(z: jax.Array, codebook: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Quantises ``z`` to its nearest codes, with straight-through gradients.

    Returns ``(q_st, idx)``: ``q_st = z + stop_gradient(e[idx] - z)`` equals the code in the
    forward pass and has Jacobian identity with respect to ``z`` (no gradient reaches the
    codebook: it is learned by :func:`ema_codebook_update`).

    Args:
      z: ``(..., D)`` float.
      codebook: ``(K, D)`` float.

    Returns:
      ``(q_st, idx)``: ``(..., D)`` quantised vectors and ``(...)`` int32 indices.
    """
    idx = nearest_code(z, codebook)
    q = jnp.take(jax.lax.stop_gradient(codebook), idx, axis=0)
    return z + jax.lax.stop_gradient(q - z), idx


class CodebookEMA(NamedTuple):
    """State of an EMA-learned codebook.

    Attributes:
      codebook: ``(K, D)`` float32 codes ``e_k = m_k / N~_k``.
      cluster_size: ``(K,)`` float32 EMA counts ``N_k``.
      embed_sum: ``(K, D)`` float32 EMA sums ``m_k`` of the vectors assigned to code ``k``.
    """

    codebook: jax.Array
    cluster_size: jax.Array
    embed_sum: jax.Array

    @classmethod
    def create(cls, codebook: jax.Array) -> CodebookEMA:
        """State whose codes are ``codebook`` (counts 1, sums = codes: ``e_k`` unchanged)."""
        codebook = jnp.asarray(codebook, jnp.float32)
        _checks.assert_rank(codebook, 2, "codebook", where="CodebookEMA.create", detail="(K, D)")
        return cls(codebook, jnp.ones((codebook.shape[0],), jnp.float32), codebook)


def ema_codebook_update(
    state: CodebookEMA, z: jax.Array, idx: jax.Array, *, decay: float = 0.99, eps: float = 1e-5
) -> CodebookEMA:
    """One EMA step of the codebook on a batch of assigned vectors.

    ``n_k = #{i: idx_i = k}``, ``s_k = sum_{i: idx_i = k} z_i``;
    ``N_k <- decay N_k + (1 - decay) n_k``; ``m_k <- decay m_k + (1 - decay) s_k``;
    ``N~_k = (N_k + eps) / (sum_j N_j + K eps) * sum_j N_j`` (Laplace smoothing, so an unused
    code never divides by zero); ``e_k = m_k / N~_k``.

    Args:
      state: the current :class:`CodebookEMA`.
      z: ``(N, D)`` float vectors (gradients are stopped).
      idx: ``(N,)`` int codes they were assigned to.
      decay: EMA decay in ``[0, 1)``.
      eps: Laplace smoothing ``> 0``.

    Returns:
      The new :class:`CodebookEMA`.

    Raises:
      ValueError: ranks, lengths or code dimension do not match, or decay outside ``[0, 1)``.
    """
    where = "ema_codebook_update"
    _checks.assert_rank(z, 2, "z", where=where, detail="(N, D)")
    _checks.assert_rank(idx, 1, "idx", where=where, detail="(N,)")
    if z.shape[0] != idx.shape[0] or z.shape[1] != state.codebook.shape[1]:
        raise ValueError(
            f"{where}: z {tuple(z.shape)} and idx {tuple(idx.shape)} must be (N, D) and (N,) "
            f"with D = {state.codebook.shape[1]}."
        )
    if not 0.0 <= decay < 1.0:
        raise ValueError(f"{where}: decay must be in [0, 1), got {decay}")
    k = state.codebook.shape[0]
    z = jax.lax.stop_gradient(z).astype(jnp.float32)
    onehot_NxK = jax.nn.one_hot(idx, k, dtype=jnp.float32)
    n_K = jnp.sum(onehot_NxK, axis=0)
    s_KxD = onehot_NxK.T @ z
    size = decay * state.cluster_size + (1.0 - decay) * n_K
    embed_sum = decay * state.embed_sum + (1.0 - decay) * s_KxD
    total = jnp.sum(size)
    smoothed = (size + eps) / (total + k * eps) * total
    return CodebookEMA(embed_sum / smoothed[:, None], size, embed_sum)


def residual_quantize(
    z: jax.Array, codebook: jax.Array, depth: int
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Depth-``depth`` residual quantisation on one grid (RQ-VAE).

    ``r_0 = z``; ``c_d = nearest(r_{d-1})``; ``r_d = r_{d-1} - e[c_d]``; partial sums
    ``zhat_d = sum_{j <= d} e[c_j]``. With the zero vector among the codes the error
    ``||r_d||`` is non-increasing in ``d`` (the zero code is always a candidate).

    Args:
      z: ``(..., D)`` float.
      codebook: ``(K, D)`` float.
      depth: number of stages ``>= 1``.

    Returns:
      ``(codes, partial_sums, errors)``: ``(depth, ...)`` int32, ``(depth, ..., D)`` float and
      ``(depth,)`` float32 mean squared residual after each stage.
    """
    if depth < 1:
        raise ValueError(f"residual_quantize: depth must be >= 1, got {depth}")
    r, acc = z, jnp.zeros_like(z)
    codes, sums, errs = [], [], []
    for _ in range(depth):
        c = nearest_code(r, codebook)
        e = jnp.take(codebook, c, axis=0)
        r, acc = r - e, acc + e
        codes.append(c)
        sums.append(acc)
        errs.append(jnp.mean(r**2))
    return jnp.stack(codes), jnp.stack(sums), jnp.stack(errs)


def _kernel(x: np.ndarray, method: str) -> np.ndarray:
    x = np.abs(x)
    if method == "linear":  # triangle
        return np.maximum(0.0, 1.0 - x)
    out = ((1.5 * x - 2.5) * x) * x + 1.0  # Keys cubic, a = -0.5
    out = np.where(x >= 1.0, ((-0.5 * x + 2.5) * x - 4.0) * x + 2.0, out)
    return np.where(x >= 2.0, 0.0, out)


@functools.lru_cache(maxsize=256)
def _resize_matrix(n_in: int, n_out: int, method: str) -> np.ndarray:
    """``(n_out, n_in)`` float32 weights of 1-D ``jax.image.resize(..., antialias=True)``
    (``jax.image.scale_and_translate``'s weight matrix: half-pixel centres, the kernel widened
    by ``n_in / n_out`` when downsampling, rows normalised to sum 1), in numpy."""
    inv_scale = n_in / n_out
    kernel_scale = max(inv_scale, 1.0)
    sample = (np.arange(n_out) + 0.5) * inv_scale - 0.5
    w = _kernel((sample[:, None] - np.arange(n_in)[None, :]) / kernel_scale, method)
    total = w.sum(axis=1, keepdims=True)
    w = np.where(
        np.abs(total) > 1000.0 * np.finfo(np.float32).eps, w / np.where(total != 0, total, 1.0), 0.0
    )
    return w.astype(np.float32)


def resize_images(x: jax.Array, size: int, method: str = "linear") -> jax.Array:
    """``(B, H, W, C) -> (B, size, size, C)``, equal to ``jax.image.resize(x, ..., method,
    antialias=True)`` (``"linear"`` or ``"cubic"``, Keys ``a = -0.5``), computed as two small
    matrix products (separable weights cached per size): cheap to compile.

    Raises:
      ValueError: ``x`` not rank 4, ``size < 1`` or an unknown method.
    """
    _checks.assert_rank(x, 4, "x", where="resize_images", detail="(B, H, W, C)")
    if method not in ("linear", "cubic") or int(size) != size or size < 1:
        raise ValueError(
            f"resize_images: need size >= 1 and method 'linear' or 'cubic', got {size}, {method!r}"
        )
    _, h, w, _ = x.shape
    if h == size and w == size:
        return x
    wh = jnp.asarray(_resize_matrix(h, int(size), method), x.dtype)
    ww = jnp.asarray(_resize_matrix(w, int(size), method), x.dtype)
    return jnp.einsum("oh,bhwc,pw->bopc", wh, x, ww)


def resize_grid(x: jax.Array, size: int) -> jax.Array:
    """Resizes ``(B, H, W, D)`` to ``(B, size, size, D)``: area average when ``H`` is a multiple
    of ``size`` (VAR's downsampling), bilinear otherwise (VAR's upsampling; antialiased)."""
    b, h, w, d = x.shape
    if h == size and w == size:
        return x
    if h % size == 0 and w % size == 0:
        f = h // size
        return x.reshape(b, size, f, size, w // size, d).mean(axis=(2, 4))
    return resize_images(x, size, "linear")


def multiscale_residual_quantize(
    f: jax.Array, codebook: jax.Array, grids: tuple[int, ...]
) -> tuple[list[jax.Array], jax.Array, list[jax.Array]]:
    """VAR's next-scale residual quantisation of a latent map.

    For ``k = 1..K``: ``z_k = resize(f - fhat_{k-1}, s_k)``; ``c_k = nearest(z_k)``;
    ``fhat_k = fhat_{k-1} + resize(e[c_k], H)`` (``fhat_0 = 0``).

    Args:
      f: ``(B, H, H, D)`` float latent (square).
      codebook: ``(K, D)`` float (gradients are stopped).
      grids: increasing token-grid sides ``s_1 < ... < s_K``, ``s_K == H``.

    Returns:
      ``(codes, fhat_prefixes, residuals)``: ``codes[k]`` ``(B, s_k, s_k)`` int32;
      ``fhat_prefixes`` ``(K, B, H, H, D)`` with ``fhat_prefixes[k-1] = fhat_k`` (no
      straight-through: callers add ``f + stop_gradient(fhat - f)``); ``residuals[k]`` the
      quantised inputs ``z_k`` ``(B, s_k, s_k, D)`` (for the EMA update).

    Raises:
      ValueError: ``f`` not ``(B, H, H, D)``, or grids not increasing and ending at ``H``.
    """
    _checks.assert_rank(f, 4, "f", where="multiscale_residual_quantize", detail="(B, H, H, D)")
    _check_grids(grids, f.shape[1], f.shape[2], "multiscale_residual_quantize")
    cb = jax.lax.stop_gradient(codebook)
    h = f.shape[1]
    fhat = jnp.zeros_like(f)
    codes, prefixes, residuals = [], [], []
    for s in grids:
        z = resize_grid(jax.lax.stop_gradient(f) - fhat, s)
        c = nearest_code(z, cb)
        fhat = fhat + resize_grid(jnp.take(cb, c, axis=0), h)
        codes.append(c)
        prefixes.append(fhat)
        residuals.append(z)
    return codes, jnp.stack(prefixes), residuals


def tokens_to_latent(
    codes: list[jax.Array], codebook: jax.Array, size: int, prefix: int | None = None
) -> jax.Array:
    """The latent of a token prefix: ``sum_{k <= prefix} resize(e[c_k], size)``.

    Args:
      codes: per scale ``(B, s_k, s_k)`` int token grids (at least ``prefix`` of them).
      codebook: ``(K, D)``.
      size: latent side ``H``.
      prefix: how many scales to sum (default all).

    Returns:
      ``(B, H, H, D)`` float, equal to ``fhat_prefix`` of :func:`multiscale_residual_quantize`.

    Raises:
      ValueError: ``prefix`` outside ``[1, len(codes)]``.
    """
    prefix = len(codes) if prefix is None else prefix
    if not 1 <= prefix <= len(codes):
        raise ValueError(f"tokens_to_latent: prefix must be in [1, {len(codes)}], got {prefix}")
    out = 0.0
    for c in codes[:prefix]:
        out = out + resize_grid(jnp.take(codebook, c, axis=0), size)
    return out


def _check_grids(grids, h: int, w: int, where: str) -> None:
    grids = tuple(grids)
    if h != w:
        raise ValueError(f"{where}: the latent must be square, got {h}x{w}")
    if (
        not grids
        or any(int(a) >= int(b) for a, b in zip(grids, grids[1:], strict=False))
        or grids[0] < 1
    ):
        raise ValueError(f"{where}: grids must be increasing positive ints, got {grids}")
    if grids[-1] != h:
        raise ValueError(f"{where}: the last grid ({grids[-1]}) must equal the latent side {h}")


def block_causal_mask(grids: tuple[int, ...]) -> np.ndarray:
    """``(T, T)`` bool mask, ``T = sum s_k^2``: token ``i`` (of scale ``k_i``) may attend token
    ``j`` iff ``k_j <= k_i`` (all tokens of its own and coarser scales)."""
    scale_of = np.concatenate([np.full(s * s, k) for k, s in enumerate(grids)])
    return scale_of[None, :] <= scale_of[:, None]
