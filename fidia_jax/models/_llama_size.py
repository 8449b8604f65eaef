"""The size of a byte-level LLaMA as a driver's config group (the optimiser and attention
experiments)."""

from __future__ import annotations

import dataclasses

from fidia_jax.models._llama import LlamaConfig

__all__ = ["LlamaSize"]


@dataclasses.dataclass(frozen=True)
class LlamaSize:
    """The size of a byte-level :class:`Llama` (vocabulary 256) as a driver's config group.

    Attributes:
      dim: model width.
      n_layers: transformer blocks.
      n_heads, n_kv_heads: query and key/value heads (grouped-query attention).
      hidden_dim: SwiGLU width; ``0`` means ``int(dim * 8 / 3) // 8 * 8``.
    """

    dim: int = 128
    n_layers: int = 4
    n_heads: int = 4
    n_kv_heads: int = 2
    hidden_dim: int = 0

    def llama_config(self, max_seq_len: int, attention_impl: str = "xla") -> LlamaConfig:
        """The :class:`LlamaConfig` of this size with context ``max_seq_len``.

        Raises:
          ConfigError: inconsistent sizes (from ``LlamaConfig``).
        """
        return LlamaConfig(
            dim=self.dim,
            n_layers=self.n_layers,
            n_heads=self.n_heads,
            n_kv_heads=self.n_kv_heads,
            hidden_dim=self.hidden_dim or int(self.dim * 8 / 3) // 8 * 8,
            max_seq_len=max_seq_len,
            attention_impl=attention_impl,
        )
