"""Attn-QAT: FP4 (NVFP4-style) attention training with a matched backward, and the drop-in
variant (FP4 forward, plain flash backward)."""

from fidia_jax.kernels.attn_qat.api import attn_qat as attn_qat
from fidia_jax.kernels.attn_qat.api import attn_qat_attention as attn_qat_attention
from fidia_jax.kernels.attn_qat.api import attn_qat_dropin_attention as attn_qat_dropin_attention
from fidia_jax.kernels.attn_qat.pallas import BlockSizes as BlockSizes
from fidia_jax.kernels.attn_qat.pallas import attn_qat_pallas as attn_qat_pallas
from fidia_jax.kernels.attn_qat.reference import VARIANTS as VARIANTS
from fidia_jax.kernels.attn_qat.reference import attn_qat_reference as attn_qat_reference
from fidia_jax.kernels.attn_qat.reference import hp_path_reference as hp_path_reference

__all__ = [
    "BlockSizes",
    "VARIANTS",
    "attn_qat",
    "attn_qat_attention",
    "attn_qat_dropin_attention",
    "attn_qat_pallas",
    "attn_qat_reference",
    "hp_path_reference",
]
