"""The decoder block of the LLaMA family, with the options of released checkpoints.

:class:`fidia_jax.models.Llama` is built from the :class:`Block` here. Every option below is off
by default (the plain LLaMA block, bit for bit) and is set by the checkpoint loaders
(``_checkpoints.py``) for the families that use it:

* QKV biases (Qwen2), QK-norm before RoPE (Qwen3, Gemma 3), a head size other than
  ``dim // n_heads`` (Gemma 3);
* RoPE scaling on the global layers (``"linear"``, ``"llama3"``; :class:`fidia_jax.layers.RopeScaling`);
* sliding-window layers (a query sees its ``window`` most recent positions) on a pattern, with
  their own RoPE base (Gemma 3: five local layers with base 1e4, then a global one);
* Gemma's RMSNorm offset (``x * (1 + scale)``), post-norms on the attention and feed-forward
  updates, GeGLU with the tanh GELU, and the query pre-attention scalar.

The token-embedding scale and the tied output head are applied by ``Llama`` itself.

References:
  Gemma Team, "Gemma 3 Technical Report", arXiv:2503.19786.
  Yang et al., "Qwen2 Technical Report", arXiv:2407.10671; "Qwen3 Technical Report",
  arXiv:2505.09388.
  Grattafiori et al., "The Llama 3 Herd of Models", arXiv:2407.21783 (RoPE scaling).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from fidia_jax.errors import ConfigError
from fidia_jax.layers import RopeScaling, apply_rope, rope_frequencies

if TYPE_CHECKING:
    from fidia_jax.models._llama import LlamaConfig

#: Gated-MLP activations by ``LlamaConfig.mlp_activation``.
ACTIVATIONS = {
    "silu": jax.nn.silu,
    "gelu_tanh": lambda x: jax.nn.gelu(x, approximate=True),
}


def check_release_options(cfg: LlamaConfig) -> None:
    """Validates the released-checkpoint options of a config (called by ``LlamaConfig``).

    Raises:
      ConfigError: a negative window or pattern, a negative local RoPE base or query scalar, a
        non-positive embedding scale, an unknown activation, or a ``rope_scaling`` that is not
        a :class:`fidia_jax.layers.RopeScaling`.
    """
    for name in ("sliding_window", "sliding_window_pattern"):
        value = getattr(cfg, name)
        if not isinstance(value, int) or value < 0:
            raise ConfigError(f"LlamaConfig.{name} must be an int >= 0, got {value!r}")
    for name in ("rope_local_theta", "query_pre_attn_scalar"):
        if not getattr(cfg, name) >= 0:
            raise ConfigError(f"LlamaConfig.{name} must be >= 0, got {getattr(cfg, name)!r}")
    if not cfg.embed_scale > 0:
        raise ConfigError(f"LlamaConfig.embed_scale must be > 0, got {cfg.embed_scale!r}")
    if cfg.mlp_activation not in ACTIVATIONS:
        raise ConfigError(
            f"LlamaConfig.mlp_activation must be one of {sorted(ACTIVATIONS)}, "
            f"got {cfg.mlp_activation!r}"
        )
    if cfg.rope_scaling is not None and not isinstance(cfg.rope_scaling, RopeScaling):
        raise ConfigError(
            f"LlamaConfig.rope_scaling must be a layers.RopeScaling or None, "
            f"got {cfg.rope_scaling!r}"
        )


def layer_window(cfg: LlamaConfig, layer: int) -> int:
    """Sliding window of block ``layer`` (``0``: global attention)."""
    if not cfg.sliding_window:
        return 0
    p = cfg.sliding_window_pattern
    return 0 if p and (layer + 1) % p == 0 else cfg.sliding_window


class RMSNorm(nnx.Module):
    """``x / sqrt(mean(x**2) + eps) * scale`` (statistics in float32)."""

    def __init__(self, dim: int, *, eps: float, dtype, param_dtype, offset: float = 0.0):
        init = jnp.zeros if offset else jnp.ones  # the effective scale starts at 1 either way
        self.scale = nnx.Param(init((dim,), param_dtype))
        self.eps = eps
        self.dtype = dtype
        self.offset = offset

    def __call__(self, x):
        xf = x.astype(jnp.float32)
        y = xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + self.eps)
        scale = self.scale[...].astype(jnp.float32).reshape((1,) * (x.ndim - 1) + (-1,))
        if self.offset:
            scale = scale + self.offset
        return (y * scale).astype(self.dtype)


def make_norm(dim, cfg):
    return RMSNorm(
        dim,
        eps=cfg.norm_eps,
        dtype=cfg.dtype,
        param_dtype=cfg.param_dtype,
        offset=cfg.norm_offset,
    )


def dense(din, dout, cfg, rngs, *, bias=False):
    return nnx.Linear(
        din,
        dout,
        use_bias=bias,
        dtype=cfg.dtype,
        param_dtype=cfg.param_dtype,
        kernel_init=nnx.initializers.normal(stddev=din**-0.5),
        rngs=rngs,
    )


class Attention(nnx.Module):
    """Grouped-query attention projections (the attention kernel is passed in)."""

    def __init__(self, cfg: LlamaConfig, *, rngs: nnx.Rngs, layer: int = 0):
        d = cfg.head_dim
        self.cfg = cfg
        bias = cfg.qkv_bias
        self.wq = dense(cfg.dim, cfg.n_heads * d, cfg, rngs, bias=bias)
        self.wk = dense(cfg.dim, cfg.n_kv_heads * d, cfg, rngs, bias=bias)
        self.wv = dense(cfg.dim, cfg.n_kv_heads * d, cfg, rngs, bias=bias)
        self.wo = dense(cfg.n_heads * d, cfg.dim, cfg, rngs)
        if cfg.qk_norm:
            self.q_norm = make_norm(d, cfg)
            self.k_norm = make_norm(d, cfg)
        self.window = cfg.layer_window(layer)
        # None: the plain theta ** (-2i / D) frequencies computed inside apply_rope
        self.inv_freq = None
        theta = cfg.rope_theta
        if self.window and cfg.rope_local_theta:
            theta = cfg.rope_local_theta
        scaling = None if self.window else cfg.rope_scaling
        if theta != cfg.rope_theta or scaling is not None:
            self.inv_freq = tuple(float(f) for f in rope_frequencies(d, theta, scaling))

    def qkv(self, x_BxTxC, pos_BxT):
        cfg = self.cfg
        b, t, _ = x_BxTxC.shape
        q = self.wq(x_BxTxC).reshape(b, t, cfg.n_heads, cfg.head_dim)
        k = self.wk(x_BxTxC).reshape(b, t, cfg.n_kv_heads, cfg.head_dim)
        v = self.wv(x_BxTxC).reshape(b, t, cfg.n_kv_heads, cfg.head_dim)
        if cfg.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        if self.inv_freq is not None:
            inv = np.asarray(self.inv_freq, np.float32)
            q = apply_rope(q, pos_BxT, inv_freq=inv)
            k = apply_rope(k, pos_BxT, inv_freq=inv)
        else:
            q, k = apply_rope(q, pos_BxT, cfg.rope_theta), apply_rope(k, pos_BxT, cfg.rope_theta)
        if cfg.query_pre_attn_scalar and cfg.query_pre_attn_scalar != cfg.head_dim:
            # the kernels scale scores by D ** -0.5; this makes it query_pre_attn_scalar ** -0.5
            q = q * jnp.asarray((cfg.head_dim / cfg.query_pre_attn_scalar) ** 0.5, q.dtype)
        return q, k, v

    def window_kwargs(self, pos_BxT) -> dict:
        """Keyword arguments of the reference attention for a sliding-window layer (``{}`` for
        a global one): the window and the query positions it is measured from."""
        return dict(window=self.window, q_positions=pos_BxT) if self.window else {}

    def out(self, o_BxTxHxD):
        b, t, h, d = o_BxTxHxD.shape
        return self.wo(o_BxTxHxD.reshape(b, t, h * d))


class FeedForward(nnx.Module):
    """Gated MLP: ``w2(act(w1 x) * w3 x)`` (SwiGLU; GeGLU with ``mlp_activation="gelu_tanh"``)."""

    def __init__(self, cfg: LlamaConfig, *, rngs: nnx.Rngs):
        self.w1 = dense(cfg.dim, cfg.hidden_dim, cfg, rngs)
        self.w2 = dense(cfg.hidden_dim, cfg.dim, cfg, rngs)
        self.w3 = dense(cfg.dim, cfg.hidden_dim, cfg, rngs)
        self.activation = cfg.mlp_activation

    def __call__(self, x):
        if self.activation == "silu":
            return self.w2(jax.nn.silu(self.w1(x)) * self.w3(x))
        return self.w2(ACTIVATIONS[self.activation](self.w1(x)) * self.w3(x))


class Block(nnx.Module):
    def __init__(self, cfg: LlamaConfig, *, rngs: nnx.Rngs, layer: int = 0):
        self.attention_norm = make_norm(cfg.dim, cfg)
        self.attention = Attention(cfg, rngs=rngs, layer=layer)
        self.ffn_norm = make_norm(cfg.dim, cfg)
        self.feed_forward = FeedForward(cfg, rngs=rngs)
        if cfg.post_norms:
            self.attention_post_norm = make_norm(cfg.dim, cfg)
            self.ffn_post_norm = make_norm(cfg.dim, cfg)
