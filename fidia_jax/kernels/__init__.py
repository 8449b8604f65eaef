"""fidia_jax.kernels: attention kernels (jnp references + Pallas kernels + dispatching APIs).

* ``santa``: SANTA / S²ANTA stochastic value sampling for decode, and dense flash-decoding.
* ``attn_qat``: Attn-QAT FP4 attention training (matched backward) and the drop-in variant.
* NVFP4 fake quantisation helpers; the log-sum-exp merge of attention partials.
"""

from fidia_jax.kernels import attn_qat as attn_qat  # noqa: E402  (after _fp4, which it uses)
from fidia_jax.kernels import santa as santa  # noqa: E402
from fidia_jax.kernels._fp4 import E2M1_MAX as E2M1_MAX
from fidia_jax.kernels._fp4 import E4M3_MAX as E4M3_MAX
from fidia_jax.kernels._fp4 import fake_quant_nvfp4 as fake_quant_nvfp4
from fidia_jax.kernels._fp4 import round_to_e2m1 as round_to_e2m1
from fidia_jax.kernels._fp4 import round_to_e4m3 as round_to_e4m3
from fidia_jax.kernels._merge import merge_attention_partials as merge_attention_partials

__all__ = [
    "E2M1_MAX",
    "E4M3_MAX",
    "attn_qat",
    "santa",
    "fake_quant_nvfp4",
    "merge_attention_partials",
    "round_to_e2m1",
    "round_to_e4m3",
]
