"""fidia_jax.layers: reusable layers any model may call (attention registry, RoPE, Poincaré-ball
operations, the residual quantiser of VAR tokenisers).

Primitives by kind (``docs/architecture.md``): layers import only ``jax``/``flax`` and
``fidia_jax.errors``; the attention registry reaches the Pallas kernels of ``fidia_jax.kernels``
lazily, by name, so importing a layer never imports a kernel. flax is imported only when
:class:`HypLinear` (the one NNX module here) is first used (PEP 562), so ``fidia_jax.optim``,
which uses the Poincaré-ball operations, imports without flax."""

from fidia_jax.layers._attention import AttentionFn as AttentionFn
from fidia_jax.layers._attention import attention_weights as attention_weights
from fidia_jax.layers._attention import get_attention_impl as get_attention_impl
from fidia_jax.layers._attention import is_decode_only as is_decode_only
from fidia_jax.layers._attention import list_attention_impls as list_attention_impls
from fidia_jax.layers._attention import register_attention_impl as register_attention_impl
from fidia_jax.layers._attention import xla_attention as xla_attention
from fidia_jax.layers._poincare import check_curvature as check_curvature
from fidia_jax.layers._poincare import conformal_factor as conformal_factor
from fidia_jax.layers._poincare import expmap as expmap
from fidia_jax.layers._poincare import expmap0 as expmap0
from fidia_jax.layers._poincare import gyration as gyration
from fidia_jax.layers._poincare import logmap as logmap
from fidia_jax.layers._poincare import logmap0 as logmap0
from fidia_jax.layers._poincare import mobius_add as mobius_add
from fidia_jax.layers._poincare import mobius_matvec as mobius_matvec
from fidia_jax.layers._poincare import mobius_scalar_mul as mobius_scalar_mul
from fidia_jax.layers._poincare import parallel_transport as parallel_transport
from fidia_jax.layers._poincare import poincare_distance as poincare_distance
from fidia_jax.layers._poincare import poincare_distance_matrix as poincare_distance_matrix
from fidia_jax.layers._poincare import project_to_ball as project_to_ball
from fidia_jax.layers._poincare import prototype_logits as prototype_logits
from fidia_jax.layers._poincare import safe_arccosh as safe_arccosh
from fidia_jax.layers._poincare import safe_artanh as safe_artanh
from fidia_jax.layers._quantize import CodebookEMA as CodebookEMA
from fidia_jax.layers._quantize import block_causal_mask as block_causal_mask
from fidia_jax.layers._quantize import ema_codebook_update as ema_codebook_update
from fidia_jax.layers._quantize import multiscale_residual_quantize as multiscale_residual_quantize
from fidia_jax.layers._quantize import nearest_code as nearest_code
from fidia_jax.layers._quantize import residual_quantize as residual_quantize
from fidia_jax.layers._quantize import resize_grid as resize_grid
from fidia_jax.layers._quantize import resize_images as resize_images
from fidia_jax.layers._quantize import tokens_to_latent as tokens_to_latent
from fidia_jax.layers._quantize import vector_quantize as vector_quantize
from fidia_jax.layers._rope import RopeScaling as RopeScaling
from fidia_jax.layers._rope import apply_rope as apply_rope
from fidia_jax.layers._rope import rope_frequencies as rope_frequencies

__all__ = [
    "AttentionFn",
    "attention_weights",
    "apply_rope",
    "RopeScaling",
    "rope_frequencies",
    "get_attention_impl",
    "is_decode_only",
    "list_attention_impls",
    "register_attention_impl",
    "xla_attention",
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
    "HypLinear",
    "check_curvature",
    "conformal_factor",
    "expmap",
    "expmap0",
    "gyration",
    "logmap",
    "logmap0",
    "mobius_add",
    "mobius_matvec",
    "mobius_scalar_mul",
    "parallel_transport",
    "poincare_distance",
    "poincare_distance_matrix",
    "project_to_ball",
    "prototype_logits",
    "safe_arccosh",
    "safe_artanh",
]


def __getattr__(name: str):
    if name == "HypLinear":  # the one Flax module: flax is imported on first use (see above)
        from fidia_jax.layers._hyp_linear import HypLinear

        globals()[name] = HypLinear
        return HypLinear
    raise AttributeError(f"module 'fidia_jax.layers' has no attribute {name!r}")
