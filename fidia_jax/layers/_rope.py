"""Rotary position embedding (RoPE), with the frequency rescalings of long-context checkpoints.

References:
  Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding", arXiv:2104.09864.
  Chen et al., "Extending Context Window of Large Language Models via Positional
  Interpolation", arXiv:2306.15595 (the ``"linear"`` rescaling).
  Llama Team, "The Llama 3 Herd of Models", arXiv:2407.21783 (the ``"llama3"`` rescaling).
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np

from fidia_jax.errors import ConfigError

__all__ = ["RopeScaling", "apply_rope", "rope_frequencies"]


@dataclasses.dataclass(frozen=True)
class RopeScaling:
    """A RoPE frequency rescaling (Hugging Face ``rope_scaling`` / GGUF ``rope.scaling.*``).

    Attributes:
      kind: ``"linear"`` (every frequency divided by ``factor``: position interpolation) or
        ``"llama3"`` (wavelengths above ``original_max_position_embeddings / low_freq_factor``
        divided by ``factor``, those below ``original_max_position_embeddings /
        high_freq_factor`` kept, a linear blend in ``original / wavelength`` between).
      factor: the context extension factor, ``> 0``.
      low_freq_factor, high_freq_factor: ``"llama3"`` only; ``high > low > 0``.
      original_max_position_embeddings: ``"llama3"`` only, the pre-extension context.
    """

    kind: str = "linear"
    factor: float = 1.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192

    def __post_init__(self):
        if self.kind not in ("linear", "llama3"):
            raise ConfigError(f"RopeScaling.kind must be 'linear' or 'llama3', got {self.kind!r}")
        if not self.factor > 0:
            raise ConfigError(f"RopeScaling.factor must be > 0, got {self.factor!r}")
        if self.kind == "llama3" and not (
            0 < self.low_freq_factor < self.high_freq_factor
            and self.original_max_position_embeddings > 0
        ):
            raise ConfigError(
                "RopeScaling('llama3') needs 0 < low_freq_factor < high_freq_factor and "
                f"original_max_position_embeddings > 0, got {self}"
            )


def rope_frequencies(head_dim: int, theta: float, scaling: RopeScaling | None = None) -> np.ndarray:
    """The ``head_dim // 2`` RoPE angular frequencies ``theta ** (-2 i / head_dim)``, rescaled.

    Args:
      head_dim: even head size ``D``.
      theta: RoPE base.
      scaling: optional :class:`RopeScaling`.

    Returns:
      ``(D // 2,)`` float32 numpy array (radians per position).
    """
    inv = theta ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    if scaling is None:
        return inv.astype(np.float32)
    if scaling.kind == "linear":
        return (inv / scaling.factor).astype(np.float32)
    wavelen = 2 * math.pi / inv
    old = scaling.original_max_position_embeddings
    lo, hi = scaling.low_freq_factor, scaling.high_freq_factor
    mix = np.clip((old / wavelen - lo) / (hi - lo), 0.0, 1.0)  # 0: long waves, 1: short waves
    return ((1.0 - mix) * inv / scaling.factor + mix * inv).astype(np.float32)


def apply_rope(
    x: jax.Array, positions: jax.Array, theta: float = 10000.0, *, inv_freq=None
) -> jax.Array:
    """Rotary position embedding, "rotate-half" layout.

    Pair ``(x[..., i], x[..., i + D/2])`` is rotated by angle ``pos * theta ** (-2 i / D)``.
    (Meta's code rotates interleaved pairs ``(2i, 2i+1)``; the two differ by a fixed permutation
    of the head dimension of ``wq``/``wk``, so they are equivalent models.)

    Args:
      x: ``(B, T, H, D)`` with ``D`` even.
      positions: ``(B, T)`` integer positions.
      theta: RoPE base.
      inv_freq: optional ``(D // 2,)`` frequencies replacing ``theta ** (-2 i / D)`` (from
        :func:`rope_frequencies`, for rescaled RoPE); ``theta`` is then unused.

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
    if inv_freq is None:
        inv_freq = theta ** (-jnp.arange(half, dtype=jnp.float32) * 2.0 / d)
    else:
        inv_freq = jnp.asarray(inv_freq, jnp.float32)
        if inv_freq.shape != (half,):
            raise ValueError(f"apply_rope: inv_freq must be ({half},), got {inv_freq.shape}")
    ang_BxTxF = positions.astype(jnp.float32)[..., None] * inv_freq[None, None, :]
    cos = jnp.cos(ang_BxTxF)[:, :, None, :]
    sin = jnp.sin(ang_BxTxF)[:, :, None, :]
    xf = x.astype(jnp.float32)
    x1, x2 = xf[..., :half], xf[..., half:]
    out = jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)
    return out.astype(x.dtype)
