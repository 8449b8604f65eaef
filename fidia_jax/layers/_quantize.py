"""Vector quantisation: nearest codes, EMA codebooks, residual and next-scale (VAR) quantisers.

* :func:`nearest_code` / :func:`vector_quantize`: nearest-neighbour lookup in a codebook, with
  the straight-through estimator (forward: the code; backward: identity to the input).
* :class:`CodebookEMA` / :func:`ema_codebook_update`: the exponential-moving-average codebook
  update of VQ-VAE-2 (van den Oord et al. 2017, app. A.1; Razavi et al. 2019), with Laplace
  smoothing of the cluster sizes; a code without mass keeps its vector (never ``0 / 0``).
* :func:`residual_quantize`: depth-``D`` residual quantisation on one grid (RQ-VAE, Lee et al.
  2022).
* :func:`multiscale_residual_quantize` / :func:`tokens_to_latent`: VAR's next-scale residual
  tokenisation (Tian et al., NeurIPS 2024) as in the authors' ``VectorQuantizer2`` (VAR /
  VARSR ``models/quant.py``): scale ``k`` quantises the area-downsampled residual on an
  ``s_k x s_k`` grid and adds the bicubic upsampling of its codes, passed through the shared
  residual convolution ``Phi`` (``quant_resi``), to the running sum;
  :func:`block_causal_mask`: VAR's attention mask over scales.
* :func:`resize_images`: antialiased linear / cubic resizing as two small matrix products
  (``jax.image.resize``); :func:`resize_grid`: torch's ``area`` / ``bicubic`` interpolation of
  latent grids, the authors' rule (other modes as options).

Closed-form tests in ``tests/layers/test_quantize.py``; parity with the authors' code (github
qyp2000/VARSR @ ``eca07cecaf42c020cb7aa4cd594928c659ad7ce3``) in
``tests/layers/test_quantize_fidelity.py`` (fixture ``tests/data/varsr/``, made by
``tools/varsr_make_fixture.py``). HIT-VAR's prefix -> scale schedule is the driver's
(:mod:`fidia_jax.projects.hitvar`).

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
    ``N~_k = (N_k + eps) / (sum_j N_j + K eps) * sum_j N_j`` (Laplace smoothing);
    ``e_k = m_k / N~_k`` for every code with mass (``N_k > 0``). A code without mass keeps its
    previous vector ``e_k``: with all counts zero (``sum_j N_j = 0``, e.g. zero counts followed
    by an empty batch) the whole codebook is left unchanged instead of becoming ``0 / 0 = NaN``,
    and a code whose count underflowed to zero is not pulled to the origin. A code that gets
    assignments again has mass again and moves toward its new vectors.

    Args:
      state: the current :class:`CodebookEMA`.
      z: ``(N, D)`` float vectors (gradients are stopped); ``N = 0`` (an empty batch) is allowed.
      idx: ``(N,)`` int codes they were assigned to.
      decay: EMA decay in ``[0, 1)``.
      eps: Laplace smoothing ``> 0``.

    Returns:
      The new :class:`CodebookEMA` (finite whenever ``state``, ``z`` are finite).

    Raises:
      ValueError: ranks, lengths or code dimension do not match, decay outside ``[0, 1)`` or
        ``eps <= 0``.
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
    if not eps > 0.0:
        raise ValueError(f"{where}: eps must be > 0, got {eps}")
    k = state.codebook.shape[0]
    z = jax.lax.stop_gradient(z).astype(jnp.float32)
    onehot_NxK = jax.nn.one_hot(idx, k, dtype=jnp.float32)
    n_K = jnp.sum(onehot_NxK, axis=0)
    s_KxD = onehot_NxK.T @ z
    size = decay * state.cluster_size + (1.0 - decay) * n_K
    embed_sum = decay * state.embed_sum + (1.0 - decay) * s_KxD
    total = jnp.sum(size)
    smoothed = (size + eps) / (total + k * eps) * total
    has_mass = (size > 0.0) & (smoothed > 0.0)
    # guarded division: a code without mass divides by 1 and is then replaced by its old value
    new = embed_sum / jnp.where(has_mass, smoothed, 1.0)[:, None]
    codebook = jnp.where(has_mass[:, None], new, state.codebook.astype(jnp.float32))
    return CodebookEMA(codebook, size, embed_sum)


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


@functools.lru_cache(maxsize=256)
def _area_matrix(n_in: int, n_out: int) -> np.ndarray:
    """``(n_out, n_in)`` float32 weights of torch's ``F.interpolate(mode="area")`` along one axis
    (adaptive average pooling): output ``i`` averages inputs ``floor(i n_in / n_out)`` to
    ``ceil((i + 1) n_in / n_out) - 1`` (bins overlap when ``n_out`` does not divide ``n_in``)."""
    w = np.zeros((n_out, n_in), np.float64)
    for i in range(n_out):
        lo = (i * n_in) // n_out
        hi = -((-(i + 1) * n_in) // n_out)
        w[i, lo:hi] = 1.0 / (hi - lo)
    return w.astype(np.float32)


@functools.lru_cache(maxsize=256)
def _torch_bicubic_matrix(n_in: int, n_out: int) -> np.ndarray:
    """``(n_out, n_in)`` float32 weights of torch's ``F.interpolate(mode="bicubic",
    align_corners=False)`` along one axis: source ``x = (i + 0.5) n_in / n_out - 0.5`` (not
    clamped), Keys' cubic with ``a = -0.75`` on the 4 neighbours ``floor(x) - 1 .. floor(x) + 2``,
    out-of-range neighbours replaced by the border pixel (clamped indices), no antialiasing."""
    a = -0.75
    w = np.zeros((n_out, n_in), np.float64)
    for i in range(n_out):
        x = (i + 0.5) * (n_in / n_out) - 0.5
        x0 = int(np.floor(x))
        t = x - x0
        ws = (
            ((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
            ((a + 2) * t - (a + 3)) * t * t + 1,
            ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1,
            ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a,
        )
        for j, wj in zip(range(x0 - 1, x0 + 3), ws, strict=True):
            w[i, min(max(j, 0), n_in - 1)] += wj
    return w.astype(np.float32)


_UP = ("bicubic", "cubic", "linear")
_DOWN = ("area", "linear")


def _axis_matrix(n_in: int, n_out: int, up: str, down: str) -> np.ndarray | None:
    if n_in == n_out:
        return None
    if n_out < n_in:
        return _area_matrix(n_in, n_out) if down == "area" else _resize_matrix(n_in, n_out, down)
    if up == "bicubic":
        return _torch_bicubic_matrix(n_in, n_out)
    return _resize_matrix(n_in, n_out, up)


def resize_grid(x: jax.Array, size: int, *, up: str = "bicubic", down: str = "area") -> jax.Array:
    """Resizes a latent grid ``(B, H, W, D)`` to ``(B, size, size, D)`` as VAR's quantiser does.

    Defaults follow the authors' code (VAR / VARSR ``models/quant.py``, github qyp2000/VARSR @
    ``eca07ce``, checked against ``tests/data/varsr/``): an axis that shrinks uses torch's
    ``F.interpolate(mode="area")`` (adaptive average pooling; overlapping bins when ``size`` does
    not divide the side), an axis that grows uses torch's ``F.interpolate(mode="bicubic",
    align_corners=False)`` (Keys ``a = -0.75``, border pixels repeated, no antialiasing). An
    axis of the same length is left unchanged.

    Args:
      x: ``(B, H, W, D)`` float.
      size: output side ``>= 1``.
      up: ``"bicubic"`` (torch's rule, default), ``"cubic"`` (``jax.image.resize(method=
        "cubic")``: Keys ``a = -0.5``, border weights renormalised instead of repeated; it
        differs from torch's bicubic, see ``docs/hitvar.md``) or ``"linear"`` (antialiased
        bilinear, ``jax.image.resize(method="linear")``; this module's rule before it followed
        the authors).
      down: ``"area"`` (torch's adaptive area, default) or ``"linear"`` (antialiased bilinear;
        the former rule for sides that ``size`` does not divide).

    Returns:
      ``(B, size, size, D)`` in ``x``'s dtype (products at full float32 precision).

    Raises:
      ValueError: ``x`` not rank 4, ``size < 1`` or an unknown mode.
    """
    _checks.assert_rank(x, 4, "x", where="resize_grid", detail="(B, H, W, D)")
    if up not in _UP or down not in _DOWN or int(size) != size or size < 1:
        raise ValueError(
            f"resize_grid: need size >= 1, up in {_UP} and down in {_DOWN}; got size={size}, "
            f"up={up!r}, down={down!r}"
        )
    _, h, w, _ = x.shape
    mh = _axis_matrix(h, int(size), up, down)
    mw = _axis_matrix(w, int(size), up, down)
    hp = jax.lax.Precision.HIGHEST
    if mh is not None:
        x = jnp.einsum("oh,bhwc->bowc", jnp.asarray(mh, x.dtype), x, precision=hp)
    if mw is not None:
        x = jnp.einsum("pw,bhwc->bhpc", jnp.asarray(mw, x.dtype), x, precision=hp)
    return x


def _phi_index(scale: int, num_scales: int, num_phi: int) -> int:
    """Which of ``num_phi`` shared ``Phi`` convolutions scale ``scale`` (0-based) uses.

    The authors' rule (``PhiPartiallyShared`` / ``PhiNonShared`` in VAR's ``models/quant.py``):
    the index of the tick nearest to ``scale / (num_scales - 1)`` (first on ties), with ticks
    ``linspace(1/(3P), 1 - 1/(3P), P)`` when ``P = 4`` and ``linspace(1/(2P), 1 - 1/(2P), P)``
    otherwise. ``P = 1`` is the fully shared ``Phi``; ``P = num_scales`` one ``Phi`` per scale.

    Raises:
      ValueError: ``num_phi < 1``, ``scale`` outside ``[0, num_scales)``, or ``num_phi > 1`` with
        a single scale (the authors' ``scale / (num_scales - 1)`` divides by zero).
    """
    if num_phi < 1 or not 0 <= scale < num_scales:
        raise ValueError(
            f"_phi_index: need num_phi >= 1 and 0 <= scale < num_scales, got scale={scale}, "
            f"num_scales={num_scales}, num_phi={num_phi}"
        )
    if num_phi == 1:
        return 0
    if num_scales == 1:
        raise ValueError("_phi_index: several Phi need at least 2 scales (tick = scale / (K - 1))")
    p = num_phi
    lo = 1.0 / 3.0 / p if p == 4 else 1.0 / 2.0 / p
    ticks = np.linspace(lo, 1.0 - lo, p)
    return int(np.argmin(np.abs(ticks - scale / (num_scales - 1))))


def _apply_phi(h, phi, ratio, scale: int, num_scales: int):
    """``(1 - r) h + r (conv3x3(h) + b)`` with the ``Phi`` that ``_phi_index`` picks."""
    kernels, biases = phi
    j = _phi_index(scale, num_scales, kernels.shape[0])
    conv = jax.lax.conv_general_dilated(
        h,
        kernels[j].astype(h.dtype),
        (1, 1),
        "SAME",
        dimension_numbers=("NHWC", "HWIO", "NHWC"),
        precision=jax.lax.Precision.HIGHEST,
    )
    r = abs(ratio)
    return h * (1.0 - r) + (conv + biases[j].astype(h.dtype)[None, None, None]) * r


def _check_phi(phi, d: int, where: str) -> None:
    if phi is None:
        return
    if not isinstance(phi, (tuple, list)) or len(phi) != 2:
        raise ValueError(f"{where}: phi must be (kernels, biases) or None")
    k, b = phi
    if k.ndim != 5 or k.shape[1:] != (3, 3, d, d) or b.shape != (k.shape[0], d) or k.shape[0] < 1:
        raise ValueError(
            f"{where}: phi kernels must be (P, 3, 3, {d}, {d}) and biases (P, {d}), P >= 1; got "
            f"{tuple(k.shape)} and {tuple(b.shape)}"
        )


def multiscale_residual_quantize(
    f: jax.Array,
    codebook: jax.Array,
    grids: tuple[int, ...],
    *,
    phi: tuple[jax.Array, jax.Array] | None = None,
    phi_ratio: float = 0.5,
    phi_last: bool = False,
    up: str = "bicubic",
    down: str = "area",
) -> tuple[list[jax.Array], jax.Array, list[jax.Array]]:
    """VAR's next-scale residual quantisation of a latent map.

    ``r_0 = f``, ``fhat_0 = 0``; for scales ``k = 1..K``: ``z_k = down(r_{k-1}, s_k)``;
    ``c_k = nearest(z_k)``; ``h_k = Phi_k(up(e[c_k], H))``; ``fhat_k = fhat_{k-1} + h_k``;
    ``r_k = r_{k-1} - h_k``. ``Phi_k(h) = (1 - r) h + r (conv3x3(h) + b)`` is VAR's residual
    convolution (``quant_resi``), picked among ``P`` shared ones by the authors' tick rule
    (``_phi_index``); the last scale is neither resized nor, by default, passed through ``Phi``.

    This is ``VectorQuantizer2.f_to_idxBl_or_fhat`` of the authors' code (github
    qyp2000/VARSR @ ``eca07ce``, ``models/quant.py``; VAR, Tian et al. NeurIPS 2024), checked
    against it in ``tests/layers/test_quantize_fidelity.py`` (fixture ``tests/data/varsr/``).

    Args:
      f: ``(B, H, H, D)`` float latent (square; gradients are stopped).
      codebook: ``(K, D)`` float (gradients are stopped: learned by :func:`ema_codebook_update`).
      grids: increasing token-grid sides ``s_1 < ... < s_K``, ``s_K == H``.
      phi: ``(kernels, biases)``: ``(P, 3, 3, D, D)`` HWIO kernels (torch's ``(P, D_out, D_in,
        3, 3)`` transposed by ``(0, 3, 4, 2, 1)``) and ``(P, D)`` biases of ``P`` residual
        convolutions (``P = 4``: the authors' default ``share_quant_resi=4``; ``1``: shared;
        ``K``: one per scale); ``None``: identity (the authors' ``quant_resi=0``). Gradients
        flow into them through ``fhat_prefixes``.
      phi_ratio: ``r`` (the authors' ``quant_resi``, default ``0.5``; its absolute value is used).
      phi_last: also apply ``Phi`` at the last scale. Default ``False``: VARSR's tokenisation
        (``f_to_idxBl_or_fhat``) and generation (``get_next_autoregressive_input``) skip it;
        ``True`` is upstream VAR's rule, also VARSR's ``forward`` (VQ-VAE training).
      up: upsampling of code maps, see :func:`resize_grid` (default the authors' bicubic).
      down: downsampling of the residual, see :func:`resize_grid` (default the authors' area).

    Returns:
      ``(codes, fhat_prefixes, residuals)``: ``codes[k]`` ``(B, s_k, s_k)`` int32;
      ``fhat_prefixes`` ``(K, B, H, H, D)`` with ``fhat_prefixes[k-1] = fhat_k`` (no
      straight-through: callers add ``f + stop_gradient(fhat - f)``); ``residuals[k]`` the
      quantised inputs ``z_k`` ``(B, s_k, s_k, D)`` (for the EMA update).

    Raises:
      ValueError: ``f`` not ``(B, H, H, D)``, grids not increasing and ending at ``H``, ``phi``
        of the wrong shape, or an unknown resize mode.
    """
    where = "multiscale_residual_quantize"
    _checks.assert_rank(f, 4, "f", where=where, detail="(B, H, H, D)")
    _check_grids(grids, f.shape[1], f.shape[2], where)
    _check_phi(phi, f.shape[3], where)
    cb = jax.lax.stop_gradient(codebook)
    h, n = f.shape[1], len(grids)
    rest = jax.lax.stop_gradient(f)
    fhat = jnp.zeros_like(f)
    codes, prefixes, residuals = [], [], []
    for k, s in enumerate(grids):
        z = resize_grid(rest, s, up=up, down=down)
        c = nearest_code(z, cb)
        hk = resize_grid(jnp.take(cb, c, axis=0), h, up=up, down=down)
        if phi is not None and (k < n - 1 or phi_last):
            hk = _apply_phi(hk, phi, phi_ratio, k, n)
        fhat = fhat + hk
        rest = rest - hk
        codes.append(c)
        prefixes.append(fhat)
        residuals.append(z)
    return codes, jnp.stack(prefixes), residuals


def tokens_to_latent(
    codes: list[jax.Array],
    codebook: jax.Array,
    size: int,
    prefix: int | None = None,
    *,
    phi: tuple[jax.Array, jax.Array] | None = None,
    phi_ratio: float = 0.5,
    phi_last: bool = False,
    num_scales: int | None = None,
    up: str = "bicubic",
) -> jax.Array:
    """The latent of a token prefix: ``sum_{k <= prefix} Phi_k(up(e[c_k], size))``.

    With the same ``phi`` / ``phi_last`` / ``up`` it equals ``fhat_prefix`` of
    :func:`multiscale_residual_quantize`; ``phi_last=True`` is the authors'
    ``VectorQuantizer2.embed_to_fhat`` (``Phi`` at every scale).

    Args:
      codes: per scale ``(B, s_k, s_k)`` int token grids (at least ``prefix`` of them).
      codebook: ``(K, D)``.
      size: latent side ``H``.
      prefix: how many scales to sum (default all).
      phi, phi_ratio, phi_last, up: as in :func:`multiscale_residual_quantize`.
      num_scales: number of scales ``K`` of the schedule (picks each scale's ``Phi`` and which
        scale is the last); default ``len(codes)``.

    Returns:
      ``(B, H, H, D)`` float.

    Raises:
      ValueError: ``prefix`` outside ``[1, len(codes)]``, ``num_scales < len(codes)`` or ``phi``
        of the wrong shape.
    """
    prefix = len(codes) if prefix is None else prefix
    if not 1 <= prefix <= len(codes):
        raise ValueError(f"tokens_to_latent: prefix must be in [1, {len(codes)}], got {prefix}")
    n = len(codes) if num_scales is None else int(num_scales)
    if n < len(codes):
        raise ValueError(f"tokens_to_latent: num_scales {n} < len(codes) {len(codes)}")
    _check_phi(phi, codebook.shape[1], "tokens_to_latent")
    out = 0.0
    for k, c in enumerate(codes[:prefix]):
        hk = resize_grid(jnp.take(codebook, c, axis=0), size, up=up)
        if phi is not None and (k < n - 1 or phi_last):
            hk = _apply_phi(hk, phi, phi_ratio, k, n)
        out = out + hk
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
