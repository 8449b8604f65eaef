"""Rotary position embedding (RoPE).

References:
  Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding", arXiv:2104.09864.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["apply_rope"]


def apply_rope(x: jax.Array, positions: jax.Array, theta: float = 10000.0) -> jax.Array:
    """Rotary position embedding, "rotate-half" layout.

    Pair ``(x[..., i], x[..., i + D/2])`` is rotated by angle ``pos * theta ** (-2 i / D)``.
    (Meta's code rotates interleaved pairs ``(2i, 2i+1)``; the two differ by a fixed permutation
    of the head dimension of ``wq``/``wk``, so they are equivalent models.)

    Args:
      x: ``(B, T, H, D)`` with ``D`` even.
      positions: ``(B, T)`` integer positions.
      theta: RoPE base.

    Returns:
      ``(B, T, H, D)`` in ``x.dtype`` (computed in float32).

    Raises:
      ValueError: ``x`` not rank 4, ``D`` odd, or ``positions`` not ``(B, T)``.
    """
    if jnp.ndim(x) != 4 or x.shape[-1] % 2:
        raise ValueError(f"apply_rope: x must be (B, T, H, D) with D even, got {jnp.shape(x)}")
    if jnp.shape(positions) != x.shape[:2]:
        raise ValueError(
            f"apply_rope: positions must be (B, T) = {x.shape[:2]}, got {jnp.shape(positions)}"
        )
    d = x.shape[-1]
    half = d // 2
    inv_freq = theta ** (-jnp.arange(half, dtype=jnp.float32) * 2.0 / d)
    ang_BxTxF = positions.astype(jnp.float32)[..., None] * inv_freq[None, None, :]
    cos = jnp.cos(ang_BxTxF)[:, :, None, :]
    sin = jnp.sin(ang_BxTxF)[:, :, None, :]
    xf = x.astype(jnp.float32)
    x1, x2 = xf[..., :half], xf[..., half:]
    out = jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)
    return out.astype(x.dtype)
