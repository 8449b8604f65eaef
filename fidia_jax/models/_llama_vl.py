"""A tiny vision-language variant of :class:`fidia_jax.models.Llama`: linearly embedded image
patches placed before the text tokens (residual-geometry's vision-language checks)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from fidia_jax.errors import ConfigError
from fidia_jax.models._llama import CAPTURE_ALL, Llama, LlamaConfig

__all__ = ["LlamaVL", "image_patches"]


def image_patches(images: jax.Array, patch: int = 2) -> jax.Array:
    """Cuts images into non-overlapping square patches, row-major (visual tokens).

    Args:
      images: ``(B, H, W)`` (e.g. the 8×8 scikit-learn digits), ``H`` and ``W`` multiples of
        ``patch``.
      patch: patch side.

    Returns:
      ``(B, (H / patch) * (W / patch), patch * patch)``: token ``i * (W / patch) + j`` holds the
      pixels ``images[:, patch*i : patch*(i+1), patch*j : patch*(j+1)]`` flattened row-major
      (8×8 digits with ``patch=2``: 16 tokens of 4 values).

    Raises:
      ValueError: not 3-D, or a side not a multiple of ``patch``.
    """
    images = jnp.asarray(images)
    if images.ndim != 3 or patch < 1 or images.shape[1] % patch or images.shape[2] % patch:
        raise ValueError(
            f"image_patches: images must be (B, H, W) with H, W multiples of patch={patch}, "
            f"got {images.shape}"
        )
    b, hh, ww = images.shape
    x = images.reshape(b, hh // patch, patch, ww // patch, patch)
    return x.transpose(0, 1, 3, 2, 4).reshape(b, (hh // patch) * (ww // patch), patch * patch)


class LlamaVL(nnx.Module):
    """A tiny vision-language model: linearly embedded image patches before the text tokens.

    The visual tokens (``(B, P, F)`` patches, see :func:`image_patches`) are mapped by one linear
    layer ``patch_embed`` (``F -> C``, with bias) and placed at positions ``0 .. P - 1``; the text
    tokens follow at ``P .. P + T - 1`` (RoPE positions, causal attention over both). All of
    :class:`Llama`'s capture and hooks apply (positions count the visual tokens); sample with
    :func:`fidia_jax.models.sample_llama` ``(vl.llm, prompt, prefix_embeds=vl.embed_patches(x))``.

    Example::

      vl = LlamaVL(LlamaConfig.tiny(), patch_dim=4, rngs=nnx.Rngs(0))
      logits = vl(image_patches(digits_Bx8x8 / 16.0), text_BxT)   # (B, 16 + T, V)
    """

    def __init__(self, config: LlamaConfig, *, patch_dim: int = 4, rngs: nnx.Rngs):
        if not isinstance(patch_dim, int) or patch_dim < 1:
            raise ConfigError(f"LlamaVL.patch_dim must be a positive int, got {patch_dim!r}")
        self.patch_dim = patch_dim
        self.llm = Llama(config, rngs=rngs)
        self.patch_embed = nnx.Linear(
            patch_dim,
            config.dim,
            dtype=config.dtype,
            param_dtype=config.param_dtype,
            kernel_init=nnx.initializers.normal(stddev=patch_dim**-0.5),
            rngs=rngs,
        )

    def embed_patches(self, patches: jax.Array) -> jax.Array:
        """``(B, P, F)`` patches -> ``(B, P, C)`` visual token embeddings.

        Raises:
          ValueError: ``patches`` not ``(B, P, patch_dim)``.
        """
        patches = jnp.asarray(patches)
        if patches.ndim != 3 or patches.shape[-1] != self.patch_dim:
            raise ValueError(
                f"LlamaVL: patches must be (B, P, {self.patch_dim}), got {patches.shape}"
            )
        return self.patch_embed(patches.astype(self.llm.config.dtype))

    def __call__(self, patches: jax.Array, tokens: jax.Array, *, hooks=()) -> jax.Array:
        """Logits ``(B, P + T, V)`` at every position (visual ones included; ``T`` may be 0).

        Raises:
          ValueError: bad patches or tokens (batch sizes must agree), bad hooks.
        """
        return self.inspect(patches, tokens, capture=(), hooks=hooks)[0]

    def inspect(self, patches, tokens, *, capture=CAPTURE_ALL, hooks=()):
        """:meth:`Llama.inspect` with the visual prefix; shapes use ``T' = P + T``."""
        return self.llm.inspect(
            tokens, capture=capture, hooks=hooks, prefix_embeds=self.embed_patches(patches)
        )
