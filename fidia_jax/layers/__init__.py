"""fidia_jax.layers: reusable layers any model may call (attention registry, RoPE).

Primitives by kind (``docs/architecture.md``): layers import only ``jax``/``flax`` and
``fidia_jax.errors``; the attention registry reaches the Pallas kernels of ``fidia_jax.kernels``
lazily, by name, so importing a layer never imports a kernel.
"""

from fidia_jax.layers._attention import AttentionFn as AttentionFn
from fidia_jax.layers._attention import get_attention_impl as get_attention_impl
from fidia_jax.layers._attention import is_decode_only as is_decode_only
from fidia_jax.layers._attention import list_attention_impls as list_attention_impls
from fidia_jax.layers._attention import register_attention_impl as register_attention_impl
from fidia_jax.layers._attention import xla_attention as xla_attention
from fidia_jax.layers._rope import apply_rope as apply_rope

__all__ = [
    "AttentionFn",
    "apply_rope",
    "get_attention_impl",
    "is_decode_only",
    "list_attention_impls",
    "register_attention_impl",
    "xla_attention",
]
