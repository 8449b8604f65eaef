"""SANTA / S²ANTA stochastic value sampling for decode attention, and dense flash-decoding."""

from fidia_jax.kernels.santa.api import flash_decode as flash_decode
from fidia_jax.kernels.santa.api import flash_decode_attention as flash_decode_attention
from fidia_jax.kernels.santa.api import make_santa_attention as make_santa_attention
from fidia_jax.kernels.santa.api import samples_per_tile_for as samples_per_tile_for
from fidia_jax.kernels.santa.api import santa_attention as santa_attention
from fidia_jax.kernels.santa.api import santa_decode as santa_decode
from fidia_jax.kernels.santa.pallas import BlockSizes as BlockSizes
from fidia_jax.kernels.santa.pallas import flash_decode_pallas as flash_decode_pallas
from fidia_jax.kernels.santa.pallas import santa_decode_pallas as santa_decode_pallas
from fidia_jax.kernels.santa.reference import METHODS as METHODS
from fidia_jax.kernels.santa.reference import dense_decode_reference as dense_decode_reference
from fidia_jax.kernels.santa.reference import distinct_value_rows as distinct_value_rows
from fidia_jax.kernels.santa.reference import flash_decode_reference as flash_decode_reference
from fidia_jax.kernels.santa.reference import make_uniforms as make_uniforms
from fidia_jax.kernels.santa.reference import santa_decode_reference as santa_decode_reference
from fidia_jax.kernels.santa.reference import ternary_query as ternary_query
from fidia_jax.kernels.santa.reference import uniform_shape as uniform_shape

__all__ = [
    "BlockSizes",
    "METHODS",
    "dense_decode_reference",
    "distinct_value_rows",
    "flash_decode",
    "flash_decode_attention",
    "flash_decode_pallas",
    "flash_decode_reference",
    "make_santa_attention",
    "make_uniforms",
    "samples_per_tile_for",
    "santa_attention",
    "santa_decode",
    "santa_decode_pallas",
    "santa_decode_reference",
    "ternary_query",
    "uniform_shape",
]
