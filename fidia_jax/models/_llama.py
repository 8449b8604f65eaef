"""A small LLaMA-style decoder in Flax NNX (RMSNorm, RoPE, SwiGLU, GQA, untied output head).

Parameter names follow Meta's LLaMA code (``tok_embeddings``, ``layers/<i>/attention/wq`` ...,
``norm``) except the untied output projection, which is called ``lm_head`` so that optimisers
that treat the last layer specially (SCALE) can find it by name. Dense kernels are stored
``(in, out)`` (Flax layout; PyTorch stores ``(out, in)``).

The attention itself is looked up by name (``LlamaConfig.attention_impl``) in
``fidia_jax.layers`` (the attention registry); ``"xla"`` is the plain ``jnp`` reference.

References:
  Touvron et al., "LLaMA: Open and Efficient Foundation Language Models", arXiv:2302.13971.
  Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding", arXiv:2104.09864.
  Ainslie et al., "GQA: Training Generalized Multi-Query Transformer Models", EMNLP 2023.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from fidia_jax.errors import ConfigError
from fidia_jax.layers import apply_rope, get_attention_impl, is_decode_only
from fidia_jax.models._domain import check_token_ids, concrete

__all__ = [
    "LlamaConfig",
    "LlamaCache",
    "Llama",
    "next_token_loss",
]


@dataclasses.dataclass(frozen=True)
class LlamaConfig:
    """Sizes and options of :class:`Llama`.

    Attributes:
      vocab_size: number of token ids (256 for the byte tokenizer).
      dim: model width ``C``.
      n_layers: number of decoder blocks.
      n_heads: query heads ``Hq``; ``dim % n_heads == 0`` and head size ``D = dim // n_heads``
        must be even (RoPE rotates pairs).
      n_kv_heads: key/value heads ``Hkv``; ``n_heads % n_kv_heads == 0``.
      hidden_dim: SwiGLU inner width.
      max_seq_len: longest sequence (and default KV-cache length).
      rope_theta: RoPE base.
      norm_eps: RMSNorm epsilon.
      attention_impl: registered attention implementation name.
      dtype: compute dtype of activations.
      param_dtype: dtype of the parameters.
    """

    vocab_size: int = 256
    dim: int = 256
    n_layers: int = 4
    n_heads: int = 8
    n_kv_heads: int = 4
    hidden_dim: int = 688
    max_seq_len: int = 256
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    attention_impl: str = "xla"
    dtype: jnp.dtype = jnp.float32
    param_dtype: jnp.dtype = jnp.float32

    def __post_init__(self):
        for name in (
            "vocab_size",
            "dim",
            "n_layers",
            "n_heads",
            "n_kv_heads",
            "hidden_dim",
            "max_seq_len",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ConfigError(f"LlamaConfig.{name} must be a positive int, got {value!r}")
        if self.dim % self.n_heads:
            raise ConfigError(f"dim={self.dim} is not a multiple of n_heads={self.n_heads}")
        if self.n_heads % self.n_kv_heads:
            raise ConfigError(
                f"n_heads={self.n_heads} is not a multiple of n_kv_heads={self.n_kv_heads}"
            )
        if self.head_dim % 2:
            raise ConfigError(f"head_dim={self.head_dim} must be even for RoPE")
        if not self.norm_eps > 0 or not self.rope_theta > 0:
            raise ConfigError("norm_eps and rope_theta must be positive")

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    @classmethod
    def tiny(cls, **overrides) -> LlamaConfig:
        """A CPU-test-sized config (about 20k parameters)."""
        kw = dict(dim=32, n_layers=2, n_heads=4, n_kv_heads=2, hidden_dim=64, max_seq_len=32)
        kw.update(overrides)
        return cls(**kw)


class LlamaCache(NamedTuple):
    """Key/value cache for incremental decoding (a plain pytree; pass it through ``jit``).

    Attributes:
      k: ``(L, B, S, Hkv, D)`` cached keys (RoPE already applied).
      v: ``(L, B, S, Hkv, D)`` cached values.
      lengths: ``(B,)`` int32, number of valid positions per row, in ``[0, S]``; ``-1`` marks a
        row whose traced ``prefill`` lengths were invalid (its later decode logits are NaN).
      step: ``()`` int32, number of decode steps taken (folded into the attention rng).
    """

    k: jax.Array
    v: jax.Array
    lengths: jax.Array
    step: jax.Array


class RMSNorm(nnx.Module):
    """``x / sqrt(mean(x**2) + eps) * scale`` (statistics in float32)."""

    def __init__(self, dim: int, *, eps: float, dtype, param_dtype):
        self.scale = nnx.Param(jnp.ones((dim,), param_dtype))
        self.eps = eps
        self.dtype = dtype

    def __call__(self, x):
        xf = x.astype(jnp.float32)
        y = xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + self.eps)
        scale = self.scale[...].astype(jnp.float32).reshape((1,) * (x.ndim - 1) + (-1,))
        return (y * scale).astype(self.dtype)


def _dense(din, dout, cfg, rngs):
    return nnx.Linear(
        din,
        dout,
        use_bias=False,
        dtype=cfg.dtype,
        param_dtype=cfg.param_dtype,
        kernel_init=nnx.initializers.normal(stddev=din**-0.5),
        rngs=rngs,
    )


class Attention(nnx.Module):
    """Grouped-query attention projections (the attention kernel is passed in)."""

    def __init__(self, cfg: LlamaConfig, *, rngs: nnx.Rngs):
        d = cfg.head_dim
        self.cfg = cfg
        self.wq = _dense(cfg.dim, cfg.n_heads * d, cfg, rngs)
        self.wk = _dense(cfg.dim, cfg.n_kv_heads * d, cfg, rngs)
        self.wv = _dense(cfg.dim, cfg.n_kv_heads * d, cfg, rngs)
        self.wo = _dense(cfg.n_heads * d, cfg.dim, cfg, rngs)

    def qkv(self, x_BxTxC, pos_BxT):
        cfg = self.cfg
        b, t, _ = x_BxTxC.shape
        q = self.wq(x_BxTxC).reshape(b, t, cfg.n_heads, cfg.head_dim)
        k = self.wk(x_BxTxC).reshape(b, t, cfg.n_kv_heads, cfg.head_dim)
        v = self.wv(x_BxTxC).reshape(b, t, cfg.n_kv_heads, cfg.head_dim)
        return apply_rope(q, pos_BxT, cfg.rope_theta), apply_rope(k, pos_BxT, cfg.rope_theta), v

    def out(self, o_BxTxHxD):
        b, t, h, d = o_BxTxHxD.shape
        return self.wo(o_BxTxHxD.reshape(b, t, h * d))


class FeedForward(nnx.Module):
    """SwiGLU: ``w2(silu(w1 x) * w3 x)``."""

    def __init__(self, cfg: LlamaConfig, *, rngs: nnx.Rngs):
        self.w1 = _dense(cfg.dim, cfg.hidden_dim, cfg, rngs)
        self.w2 = _dense(cfg.hidden_dim, cfg.dim, cfg, rngs)
        self.w3 = _dense(cfg.dim, cfg.hidden_dim, cfg, rngs)

    def __call__(self, x):
        return self.w2(jax.nn.silu(self.w1(x)) * self.w3(x))


class Block(nnx.Module):
    def __init__(self, cfg: LlamaConfig, *, rngs: nnx.Rngs):
        kw = dict(eps=cfg.norm_eps, dtype=cfg.dtype, param_dtype=cfg.param_dtype)
        self.attention_norm = RMSNorm(cfg.dim, **kw)
        self.attention = Attention(cfg, rngs=rngs)
        self.ffn_norm = RMSNorm(cfg.dim, **kw)
        self.feed_forward = FeedForward(cfg, rngs=rngs)


class Llama(nnx.Module):
    """Decoder-only LLaMA-style language model.

    Example::

      model = Llama(LlamaConfig.tiny(), rngs=nnx.Rngs(0))
      logits = model(jnp.zeros((2, 8), jnp.int32))          # (2, 8, 256)
      cache = model.init_cache(2, 16)
      logits, cache = model.prefill(tokens, cache)           # fills positions [0, T)
      logits, cache = model.decode(next_tok_Bx1, cache)      # one token per row

    Raises:
      ConfigError: unknown ``attention_impl``.
    """

    def __init__(self, config: LlamaConfig, *, rngs: nnx.Rngs):
        self.config = config
        is_decode_only(config.attention_impl)  # validates the name early
        self.tok_embeddings = nnx.Embed(
            config.vocab_size,
            config.dim,
            dtype=config.dtype,
            param_dtype=config.param_dtype,
            embedding_init=nnx.initializers.normal(stddev=1.0),
            rngs=rngs,
        )
        self.layers = nnx.List([Block(config, rngs=rngs) for _ in range(config.n_layers)])
        self.norm = RMSNorm(
            config.dim, eps=config.norm_eps, dtype=config.dtype, param_dtype=config.param_dtype
        )
        self.lm_head = _dense(config.dim, config.vocab_size, config, rngs)

    # ------------------------------------------------------------------ helpers
    def _prefill_attention(self):
        name = self.config.attention_impl
        return get_attention_impl("xla" if is_decode_only(name) else name)

    def _check_tokens(self, tokens, where):
        """Shape/dtype check, then token ids in ``[0, vocab_size)`` (see ``models._domain``)."""
        tokens = jnp.asarray(tokens)
        if tokens.ndim != 2 or not jnp.issubdtype(tokens.dtype, jnp.integer):
            raise ValueError(f"{where}: tokens must be (B, T) integers, got {tokens.shape} {tokens.dtype}")
        return check_token_ids(tokens, self.config.vocab_size, name="tokens", where=where)

    def _run(self, tokens_BxT, pos_BxT, attend):
        h = self.tok_embeddings(tokens_BxT)
        for i, layer in enumerate(self.layers):
            q, k, v = layer.attention.qkv(layer.attention_norm(h), pos_BxT)
            h = h + layer.attention.out(attend(i, q, k, v))
            h = h + layer.feed_forward(layer.ffn_norm(h))
        return self.lm_head(self.norm(h))

    # ------------------------------------------------------------------ public
    def __call__(self, tokens: jax.Array) -> jax.Array:
        """Causal forward pass.

        Args:
          tokens: ``(B, T)`` int32 token ids in ``[0, vocab_size)``, ``T <= max_seq_len`` is not
            enforced (RoPE extrapolates) but is the trained regime.

        Returns:
          ``(B, T, V)`` logits in ``config.dtype``.

        Raises:
          ValueError: ``tokens`` not ``(B, T)`` integers, or a concrete id outside
            ``[0, vocab_size)``. Under tracing such an id reads a NaN embedding (the logits at
            and after it are NaN) instead of wrapping around.
        """
        tokens = self._check_tokens(tokens, "Llama")
        b, t = tokens.shape
        pos = jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32)[None], (b, t))
        fn = self._prefill_attention()
        return self._run(
            tokens, pos, lambda i, q, k, v: fn(q, k, v, causal=True, kv_lengths=None, rng=None)
        )

    def init_cache(self, batch: int, max_len: int | None = None) -> LlamaCache:
        """An empty cache for ``batch`` rows and ``max_len`` positions (default ``max_seq_len``).

        Raises:
          ValueError: ``batch`` or ``max_len`` below 1.
        """
        cfg = self.config
        max_len = cfg.max_seq_len if max_len is None else int(max_len)
        if int(batch) < 1 or max_len < 1:
            raise ValueError(f"Llama.init_cache: batch and max_len must be >= 1, got {batch}, {max_len}")
        shape = (cfg.n_layers, batch, max_len, cfg.n_kv_heads, cfg.head_dim)
        return LlamaCache(
            k=jnp.zeros(shape, cfg.dtype),
            v=jnp.zeros(shape, cfg.dtype),
            lengths=jnp.zeros((batch,), jnp.int32),
            step=jnp.zeros((), jnp.int32),
        )

    def prefill(
        self, tokens: jax.Array, cache: LlamaCache, *, lengths: jax.Array | None = None
    ) -> tuple[jax.Array, LlamaCache]:
        """Runs the causal forward pass on ``tokens`` and stores their keys/values at ``[0, T)``.

        Args:
          tokens: ``(B, T)`` int32, right-padded when rows have different lengths.
          cache: from :meth:`init_cache` (its previous contents are overwritten).
          lengths: ``(B,)`` int valid prompt length per row, ``1 <= lengths <= T`` (default
            ``T``; ``T`` is at most the cache length ``S``).

        Returns:
          ``(logits (B, T, V), cache)`` with ``cache.lengths = lengths``.

        Raises:
          ValueError: ``T`` exceeds the cache length; ``lengths`` not ``(B,)`` integers; a
            concrete length below 1 or above ``T``; a concrete token id outside
            ``[0, vocab_size)``. Under tracing an invalid length cannot raise: that row's logits
            are NaN and its ``cache.lengths`` is ``-1``, so every later :meth:`decode` of the row
            is NaN too.
        """
        where = "Llama.prefill"
        tokens = self._check_tokens(tokens, where)
        b, t = tokens.shape
        if t > cache.k.shape[2]:
            raise ValueError(f"{where}: prompt length {t} exceeds cache length {cache.k.shape[2]}")
        ok_B = None
        if lengths is not None:
            lengths = jnp.asarray(lengths)
            if lengths.shape != (b,) or not jnp.issubdtype(lengths.dtype, jnp.integer):
                raise ValueError(f"{where}: lengths must be ({b},) integers, got {lengths.shape} {lengths.dtype}")
            host = concrete(lengths)
            if host is not None:
                bad = (host < 1) | (host > t)
                if bad.any():
                    i = int(np.flatnonzero(bad)[0])
                    raise ValueError(
                        f"{where}: lengths must be in [1, {t}] (1 <= length <= prompt tokens T = {t} "
                        f"<= cache length {cache.k.shape[2]}), got {int(host[i])} in row {i}"
                    )
            else:
                ok_B = (lengths >= 1) & (lengths <= t)
        pos = jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32)[None], (b, t))
        fn = self._prefill_attention()
        ks, vs = [], []

        def attend(i, q, k, v):
            ks.append(k)
            vs.append(v)
            return fn(q, k, v, causal=True, kv_lengths=None, rng=None)

        logits = self._run(tokens, pos, attend)
        k_all = cache.k.at[:, :, :t].set(jnp.stack(ks).astype(cache.k.dtype))
        v_all = cache.v.at[:, :, :t].set(jnp.stack(vs).astype(cache.v.dtype))
        if lengths is None:
            lengths = jnp.full((b,), t, jnp.int32)
        lengths = jnp.asarray(lengths, jnp.int32)
        if ok_B is not None:  # traced invalid lengths: NaN logits, row marked -1 in the cache
            logits = jnp.where(ok_B[:, None, None], logits, jnp.asarray(jnp.nan, logits.dtype))
            lengths = jnp.where(ok_B, lengths, -1)
        return logits, LlamaCache(k_all, v_all, lengths, cache.step)

    def decode(
        self, tokens: jax.Array, cache: LlamaCache, *, rng: jax.Array | None = None
    ) -> tuple[jax.Array, LlamaCache]:
        """One decode step: appends one token per row at position ``cache.lengths``.

        Args:
          tokens: ``(B, 1)`` int32 in ``[0, vocab_size)``.
          cache: the cache; every row must have room, ``0 <= lengths < S``.
          rng: optional key; the attention of layer ``l`` receives
            ``fold_in(fold_in(rng, l), cache.step)``.

        Returns:
          ``(logits (B, 1, V), cache)`` with ``lengths + 1`` and ``step + 1``.

        Raises:
          ValueError: ``tokens`` not ``(B, 1)`` integers; a concrete token id outside
            ``[0, vocab_size)``; concrete ``cache.lengths`` with a full row (``lengths == S``:
            decoding past the KV cache) or an invalid one (``< 0``, e.g. ``-1`` left by a traced
            ``prefill`` with invalid lengths). Under tracing (``jit``, ``scan``) this cannot
            raise: such a row's logits are NaN and its cache row (keys, values, length) is left
            unchanged, never overwriting its last slot.
        """
        where = "Llama.decode"
        tokens = self._check_tokens(tokens, where)
        if tokens.shape[1] != 1:
            raise ValueError(f"{where}: decode takes one token per row, got {tokens.shape}")
        size = cache.k.shape[2]
        host = concrete(cache.lengths)
        ok_B = None
        if host is not None:
            bad = (host < 0) | (host >= size)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                why = (f"row {i} is full (length {int(host[i])} == cache length {size}): decoding "
                       "past the KV cache; use a larger init_cache(max_len=...)") if host[i] >= size else (
                       f"row {i} has invalid length {int(host[i])} (a traced prefill with invalid lengths)")
                raise ValueError(f"{where}: every cache row needs 0 <= lengths < {size}; {why}")
        else:
            ok_B = (cache.lengths >= 0) & (cache.lengths < size)
        fn = get_attention_impl(self.config.attention_impl)
        pos_Bx1 = cache.lengths[:, None]
        new_len = cache.lengths + 1
        kv_len = new_len
        if ok_B is not None:  # rows without room: nothing written, lengths kept, 1 key attended
            kv_len = jnp.where(ok_B, new_len, 1)
            new_len = jnp.where(ok_B, new_len, cache.lengths)
        k_all, v_all = cache.k, cache.v

        def write(c_BxSxHxD, x_Bx1xHxD):
            if ok_B is None:
                return jax.vmap(
                    lambda c, x, p: jax.lax.dynamic_update_slice(c, x.astype(c.dtype), (p, 0, 0))
                )(c_BxSxHxD, x_Bx1xHxD, cache.lengths)

            def one(c, x, p, ok):  # a row without room writes its (clamped) slot back unchanged
                old = jax.lax.dynamic_slice(c, (p, 0, 0), x.shape)
                return jax.lax.dynamic_update_slice(c, jnp.where(ok, x.astype(c.dtype), old), (p, 0, 0))

            return jax.vmap(one)(c_BxSxHxD, x_Bx1xHxD, cache.lengths, ok_B)

        def attend(i, q, k, v):
            nonlocal k_all, v_all
            k_all = k_all.at[i].set(write(k_all[i], k))
            v_all = v_all.at[i].set(write(v_all[i], v))
            key = None
            if rng is not None:
                key = jax.random.fold_in(jax.random.fold_in(rng, i), cache.step)
            return fn(q, k_all[i], v_all[i], causal=False, kv_lengths=kv_len, rng=key)

        logits = self._run(tokens, pos_Bx1, attend)
        if ok_B is not None:
            logits = jnp.where(ok_B[:, None, None], logits, jnp.asarray(jnp.nan, logits.dtype))
        return logits, LlamaCache(k_all, v_all, new_len, cache.step + 1)


def next_token_loss(logits: jax.Array, tokens: jax.Array) -> jax.Array:
    """Mean cross-entropy of predicting ``tokens[:, 1:]`` from ``logits[:, :-1]``.

    Args:
      logits: ``(B, T, V)``.
      tokens: ``(B, T)`` int32.

    Returns:
      scalar float32 loss in nats per token.

    Raises:
      ValueError: shapes that do not match, or a concrete target id outside ``[0, V)``. Under
        tracing such an id makes the loss NaN (it is not wrapped around).
    """
    if jnp.ndim(logits) != 3 or jnp.shape(tokens) != jnp.shape(logits)[:2]:
        raise ValueError(
            f"next_token_loss: logits must be (B, T, V) and tokens (B, T), got "
            f"{jnp.shape(logits)} and {jnp.shape(tokens)}"
        )
    tokens = check_token_ids(tokens, logits.shape[-1], name="tokens", where="next_token_loss")
    lp = jax.nn.log_softmax(logits[:, :-1].astype(jnp.float32), axis=-1)
    ll = jnp.take_along_axis(lp, tokens[:, 1:, None], axis=-1)[..., 0]
    return -jnp.mean(ll)
