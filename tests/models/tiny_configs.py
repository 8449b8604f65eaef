"""Tiny model options shared by the model tests."""

from __future__ import annotations

import math

from fidia_jax import layers

#: Every Gemma 3 option at a tiny size (width 32 with 2 query heads of 16): local layers of
#: window 4 with one global layer every 3rd, QK-norm, tied embeddings, offset and post norms,
#: the embedding scale, GELU-tanh, the query scalar and linear RoPE scaling.
GEMMA3_LIKE = dict(
    n_layers=3,
    head_size=16,
    n_kv_heads=1,
    qk_norm=True,
    tie_embeddings=True,
    sliding_window=4,
    sliding_window_pattern=3,
    rope_theta=1e6,
    rope_local_theta=1e4,
    rope_scaling=layers.RopeScaling("linear", factor=8.0),
    norm_offset=1.0,
    post_norms=True,
    embed_scale=math.sqrt(32),
    mlp_activation="gelu_tanh",
    query_pre_attn_scalar=16.0,
    norm_eps=1e-6,
)
