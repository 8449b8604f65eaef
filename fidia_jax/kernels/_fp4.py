"""NVFP4-style fake quantisation: E2M1 values with an E4M3 scale per 16-element block.

Both roundings are written out with explicit arithmetic (round-to-nearest-even on the
element grid) instead of ``astype(float4_e2m1fn)``, so that

* ``round_to_e2m1``, ``round_to_e4m3`` and ``fake_quant_nvfp4(..., rounding="exact")`` are
  bit-exact against ``ml_dtypes.float4_e2m1fn`` / ``float8_e4m3fn`` for every finite input, and
  the default ``fake_quant_nvfp4(..., rounding="reciprocal")`` is bit-exact against the
  authors' torch quantiser (fixture ``tests/data/attn_qat/``) and against a numpy emulation
  (tested, including ties, subnormal and saturating scales and signed zeros),
* it lowers everywhere (also inside Pallas kernels, where 4-bit dtypes are not available), and
* XLA cannot fold a pair of converts away.

Divisions are avoided on purpose: XLA's vectorised float32 division on CPU is not correctly
rounded (``4.6875 / 0.9375`` comes out one ulp above 5), which flips ties. The block quantiser
therefore compares ``|x|`` (``"exact"``) or ``|x| * float32(1/scale)`` (``"reciprocal"``, the
reciprocal from a table) against exact midpoints (``midpoint * scale`` has a few significant
bits, so it is exact in float32), and the scale ``e4m3(amax / 6)`` is corrected with exact
midpoint comparisons against ``amax``.

Non-finite inputs (NaN, +-Inf) are never hidden: all three functions return them unchanged at
their position. In :func:`fake_quant_nvfp4` a non-finite element also does not take part in its
block's scale: the other elements of the block quantise exactly as if it were absent (a NaN does
not zero its block, and an Inf does not flush its neighbours to 0). ``ml_dtypes`` differs here:
``float4_e2m1fn`` has no NaN/Inf (it maps NaN to -0 and Inf to +-6) and ``float8_e4m3fn`` has no
Inf (Inf becomes NaN); the bit-exact contract covers finite inputs.

The NVFP4 format of NVIDIA Blackwell also carries a per-tensor FP32 second-level scale; it is
omitted here (the block scale is ``e4m3(amax / 6)`` directly), as the Attn-QAT issue specifies
and as the authors' training backend runs (``use_global_sf_qkv=False``, ``use_global_sf_p=False``
in hao-ai-lab/FastVideo ``fastvideo/attention/backends/attn_qat_train.py``).

Element rounding (``fake_quant_nvfp4(..., rounding=...)``):

* ``"reciprocal"`` (default, the authors' rule): ``y = x * float32(1 / scale)`` is rounded to
  E2M1, as the authors' torch reference ``fp4_fake_quantize``
  (``fastvideo-kernel/tests/qat_forward_reference.py``) and their Triton quantiser
  (``nvfp4_utils._compute_quant_and_scale``: ``x * (1 / scale)``, then an RNE convert) do. The
  float32 reciprocal is taken from a table of the eight E4M3 mantissas (correctly rounded,
  times an exact power of two), so no platform division is involved. When ``1 / scale`` is not
  exact (scale mantissa not a power of two), ``x * float32(1/scale)`` can land on the other side
  of an E2M1 midpoint than the exact quotient ``x / scale``, so ties round differently from
  ``"exact"``; bf16 inputs hit such ties often.
* ``"exact"`` (our earlier choice, kept as an option): ``e2m1(x / scale)`` rounded from the
  exact quotient (compared against the exact products ``midpoint * scale``), which is what a
  bit-exact ``ml_dtypes`` ``x / scale`` then ``float4_e2m1fn`` convert gives.

Both rules give the block scale ``e4m3(amax / 6)`` rounded from the exact quotient; for float32
``amax`` that equals rounding the correctly rounded float32 quotient (as torch does), because a
float32 quotient can only fall on an E4M3 midpoint when the exact one does. Signed zeros: the
result carries the sign bit of ``x`` (``-0.0 -> -0.0``; a negative value that rounds to 0, or
any negative value of a block whose scale is 0, gives ``-0.0``), as in the authors' reference.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "E2M1_MAX",
    "E4M3_MAX",
    "round_to_e2m1",
    "round_to_e4m3",
    "fake_quant_nvfp4",
    "ROUNDINGS",
]

E2M1_MAX = 6.0
E4M3_MAX = 448.0


def _round_half_even(y: jax.Array) -> jax.Array:
    """``jnp.round`` (half to even) from ``floor`` and exact comparisons.

    Pallas' Triton lowering has no ``round`` primitive; ``y - floor(y)`` is exact in float32, so
    this equals ``jnp.round`` for every finite ``y`` (tested against it), except that inputs in
    ``(-0.5, 0]`` give ``+0.0`` where ``jnp.round`` gives ``-0.0`` (the callers pass ``|x|``).
    """
    f = jnp.floor(y)
    frac = y - f
    odd = jnp.floor(f * 0.5) * 2.0 != f
    return f + jnp.where((frac > 0.5) | ((frac == 0.5) & odd), 1.0, 0.0)


def _is_finite(x: jax.Array) -> jax.Array:
    """``jnp.isfinite`` as one comparison (False for NaN and +-Inf; lowers inside Triton kernels)."""
    return jnp.abs(x) < jnp.inf


def _is_even_integer(k: jax.Array) -> jax.Array:
    """Whether the integer-valued float ``k`` is even (no ``rem``, which Triton lowers poorly)."""
    return jnp.floor(k * 0.5) * 2.0 == k


def round_to_e2m1(x: jax.Array) -> jax.Array:
    """Rounds to the nearest FP4 E2M1 value (ties to even), saturating at +-6.

    The E2M1 grid is {0, 0.5, 1, 1.5, 2, 3, 4, 6}: spacing 0.5 below 2, 1 in [2, 4), 2 in [4, 6].
    Within each binade the "even" neighbour is the one with an even multiple of the spacing,
    which is exactly round-half-to-even of ``|x| / spacing``.

    Args:
      x: any float array (computed in float32).

    Returns:
      float32 array of the same shape holding E2M1 values. Finite values beyond +-6 saturate;
      NaN and +-Inf are returned unchanged (``ml_dtypes.float4_e2m1fn`` maps NaN to -0 and Inf
      to +-6).
    """
    x = jnp.asarray(x, jnp.float32)
    a = jnp.abs(x)
    step = jnp.where(a < 2.0, 0.5, jnp.where(a < 4.0, 1.0, 2.0))
    q = jnp.minimum(_round_half_even(a / step) * step, E2M1_MAX)
    return jnp.where(_is_finite(x), jnp.where(x < 0, -q, q), x)


def round_to_e4m3(x: jax.Array) -> jax.Array:
    """Rounds to the nearest FP8 E4M3FN value (ties to even), saturating at +-448.

    E4M3FN: exponent bias 7, 3 mantissa bits, smallest normal 2**-6, subnormal spacing 2**-9,
    largest finite 448 (there is no infinity; values above 448 are clamped here, where a plain
    convert would give NaN beyond 464).

    Args:
      x: any float array (computed in float32).

    Returns:
      float32 array holding E4M3 values; NaN and +-Inf are returned unchanged (a plain
      ``float8_e4m3fn`` convert keeps NaN and turns Inf into NaN).
    """
    x = jnp.asarray(x, jnp.float32)
    a = jnp.abs(x)
    _, e = jnp.frexp(a)  # a = m * 2**e with m in [0.5, 1): floor(log2 a) = e - 1
    e = jnp.maximum(e - 1, -6)  # subnormals share the spacing of the smallest binade
    step = jnp.ldexp(jnp.ones_like(a), e - 3)
    q = jnp.minimum(_round_half_even(a / step) * step, E4M3_MAX)
    return jnp.where(_is_finite(x), jnp.where(x < 0, -q, q), x)


ROUNDINGS: tuple[str, ...] = ("reciprocal", "exact")

# float32(1 / m) for the E4M3 mantissas m = (8 + i) / 8, i = 0..7 (numpy float32 division is
# IEEE correctly rounded); 1 / (m * 2**e) = float32(1 / m) * 2**-e exactly.
_E4M3_MANT_RECIP = tuple(float(np.float32(1.0) / np.float32((8 + i) / 8.0)) for i in range(8))


def _e4m3_reciprocal(scale: jax.Array) -> jax.Array:
    """``float32(1 / scale)`` (correctly rounded) for E4M3 values ``scale > 0``; 1 where 0."""
    m, e = jnp.frexp(scale)  # scale = m * 2**e, m in [0.5, 1): m * 16 in {8, ..., 15}
    idx = m * 16.0 - 8.0
    r = jnp.zeros_like(scale)
    for i, c in enumerate(_E4M3_MANT_RECIP):
        r = r + jnp.where(idx == float(i), c, 0.0)
    inv = jnp.ldexp(r, 1 - e)  # 1 / (2m * 2**(e-1)) = r * 2**(1-e)
    return jnp.where(scale > 0, inv, 1.0)


_E2M1_MIDS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)
_E2M1_GAPS = (0.5, 0.5, 0.5, 0.5, 1.0, 1.0, 2.0)
_E2M1_NEXT_EVEN = (False, True, False, True, False, True, False)  # codes 1..7: even mantissa?


def _e2m1_units(a: jax.Array, scale: jax.Array) -> jax.Array:
    """``round_to_e2m1(a / scale)`` for ``a >= 0``, ``scale > 0`` without dividing (exact)."""
    q = jnp.zeros_like(a)
    for mid, gap, even in zip(_E2M1_MIDS, _E2M1_GAPS, _E2M1_NEXT_EVEN, strict=True):
        thr = mid * scale
        adv = (a >= thr) if even else (a > thr)
        q = q + jnp.where(adv, gap, 0.0)
    return q


def _e4m3_step(q: jax.Array) -> jax.Array:
    _, e = jnp.frexp(q)
    return jnp.ldexp(jnp.ones_like(q), jnp.maximum(e - 1, -6) - 3)


def _e4m3_is_even(q: jax.Array) -> jax.Array:
    return _is_even_integer(q / _e4m3_step(q))  # q / step is a small exact integer


def _e4m3_of_sixth(amax: jax.Array) -> jax.Array:
    """``round_to_e4m3(amax / 6)`` rounded from the exact quotient (``amax >= 0``)."""
    q0 = round_to_e4m3(amax / E2M1_MAX)
    nxt = jnp.minimum(q0 + _e4m3_step(q0), E4M3_MAX)
    prv = jnp.maximum(q0 - _e4m3_step(q0 * (1.0 - 2.0**-5)), 0.0)
    mid_up = (q0 + nxt) * (0.5 * E2M1_MAX)
    mid_dn = (prv + q0) * (0.5 * E2M1_MAX)
    up = (nxt > q0) & ((amax > mid_up) | ((amax == mid_up) & _e4m3_is_even(nxt)))
    dn = (prv < q0) & ((amax < mid_dn) | ((amax == mid_dn) & _e4m3_is_even(prv)))
    return jnp.where(up, nxt, jnp.where(dn, prv, q0))


def fake_quant_nvfp4(
    x: jax.Array, *, axis: int = -1, block: int = 16, rounding: str = "reciprocal"
) -> jax.Array:
    """NVFP4 fake quantisation: E2M1 values times an E4M3 scale per ``block`` elements.

    For each contiguous block of ``block`` elements along ``axis``: ``scale = e4m3(amax / 6)``
    (saturating at 448), then ``y = e2m1(x * float32(1 / scale)) * scale`` (``rounding=
    "reciprocal"``, the authors' rule) or ``y = e2m1(x / scale) * scale`` from the exact quotient
    (``rounding="exact"``); see the module docstring for where the two differ (ties). Values
    beyond ``6 * scale`` (because the scale rounded down) saturate at ``+-6 * scale``. Where the
    scale rounds to 0 the block becomes zeros. The result carries the sign bit of ``x`` (signed
    zeros preserved, as in the authors' ``fp4_fake_quantize``).

    Non-finite elements (NaN, +-Inf) are returned unchanged and are left out of their block's
    ``amax``: the block's other elements quantise as if they were absent (so one NaN neither
    zeroes nor hides its block). The authors' torch reference instead lets a NaN or Inf poison
    its whole block; this is a deliberate deviation (issue 17.14), outside the fixture.

    Args:
      x: float array; ``x.shape[axis]`` must be a multiple of ``block``.
      axis: the axis that is grouped into blocks.
      block: block length (16 for NVFP4).
      rounding: ``"reciprocal"`` (default) or ``"exact"``.

    Returns:
      Array of ``x.dtype`` and shape, holding the dequantised values (computed in float32).

    Raises:
      ValueError: if ``x.shape[axis]`` is not a multiple of ``block``, or ``rounding`` is unknown.

    Source: hao-ai-lab/FastVideo ``fastvideo-kernel/tests/qat_forward_reference.py``
    (``fp4_fake_quantize``, commit 20e4f7d3) and
    ``fastvideo-kernel/python/fastvideo_kernel/triton_kernels/nvfp4_utils.py``; fixture
    ``tests/data/attn_qat/``.
    """
    if rounding not in ROUNDINGS:
        raise ValueError(f"fake_quant_nvfp4: rounding={rounding!r}; expected one of {ROUNDINGS}")
    axis = axis % x.ndim
    n = x.shape[axis]
    if n % block:
        raise ValueError(f"fake_quant_nvfp4: axis {axis} has length {n}, not a multiple of {block}")
    xf = jnp.moveaxis(jnp.asarray(x, jnp.float32), axis, -1)
    shape = xf.shape
    xb = xf.reshape(shape[:-1] + (n // block, block))
    finite = _is_finite(xb)
    a = jnp.where(finite, jnp.abs(xb), 0.0)  # non-finite elements take no part in the scale
    amax = jnp.max(a, axis=-1, keepdims=True)
    scale = _e4m3_of_sixth(amax)
    if rounding == "exact":
        units = _e2m1_units(a, scale)
    else:  # |x| * float32(1/scale) (one correctly rounded product), then RNE on the E2M1 grid
        units = _e2m1_units(a * _e4m3_reciprocal(scale), jnp.ones_like(scale))
    mag = jnp.where(scale > 0, units * scale, 0.0)
    y = jnp.where(jnp.signbit(xb), -mag, mag)
    y = jnp.where(finite, y, xb)
    return jnp.moveaxis(y.reshape(shape), -1, axis).astype(x.dtype)
