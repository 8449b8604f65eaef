"""A small LLaMA-style decoder in Flax NNX (RMSNorm, RoPE, SwiGLU, GQA, untied output head).

Parameter names follow Meta's LLaMA code (``tok_embeddings``, ``layers/<i>/attention/wq`` ...,
``norm``) except the untied output projection, which is called ``lm_head`` so that optimisers
that treat the last layer specially (SCALE) can find it by name. Dense kernels are stored
``(in, out)`` (Flax layout; PyTorch stores ``(out, in)``).

The attention itself is looked up by name (``LlamaConfig.attention_impl``) in
``fidia_jax.layers`` (the attention registry); ``"xla"`` is the plain ``jnp`` reference.

Looking inside and steering (issue 14): :meth:`Llama.inspect` returns the per-layer residual
stream, attention / FFN updates, per-query-head outputs and attention weights; every entry point
takes ``hooks=`` (interventions as pure pytree arguments, see ``_llama_hooks.py``), and
:func:`fidia_jax.models.sample_llama` samples with them under one ``jit``. With no hooks and no
capture the model runs exactly the operations it ran before (bit-identical outputs).
:class:`fidia_jax.models.LlamaVL` (``_llama_vl.py``) puts linearly embedded image patches before
the text tokens. The block and the options of released checkpoints (Qwen2/3, Gemma 3: QKV bias,
QK-norm, RoPE scaling, sliding-window layers, Gemma's norms and GeGLU) live in
``_llama_layers.py``.

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
from fidia_jax.layers import (
    RopeScaling,
    attention_weights,
    get_attention_impl,
    is_decode_only,
    xla_attention,
)
from fidia_jax.models import _llama_hooks as _hk
from fidia_jax.models._domain import check_right_padded, check_token_ids, concrete
from fidia_jax.models._llama_layers import (
    Block,
    check_release_options,
    dense,
    layer_window,
    make_norm,
)

CAPTURE_ALL = "all"

__all__ = [
    "LlamaConfig",
    "LlamaCache",
    "Llama",
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
      attention_impl: registered attention implementation name (sliding-window layers always
        use the ``"xla"`` reference with the window mask).
      dtype: compute dtype of activations.
      param_dtype: dtype of the parameters.

    Options of released checkpoints (every default keeps the plain model, bit for bit):

    Attributes:
      head_size: head size ``D`` when it is not ``dim // n_heads`` (Gemma 3: 640 wide, 4 heads
        of 256); ``0`` means ``dim // n_heads``.
      qkv_bias: biases on the query/key/value projections (Qwen2).
      qk_norm: RMSNorm over each head's ``D`` features of queries and keys, before RoPE
        (Qwen3, Gemma 3); parameters ``attention/q_norm``, ``attention/k_norm`` of shape ``(D,)``.
      tie_embeddings: the output head is the transposed token embedding (no ``lm_head``).
      rope_scaling: a :class:`fidia_jax.layers.RopeScaling` (``"linear"`` or ``"llama3"``),
        applied to the global (non-sliding) layers.
      sliding_window: window of the local layers (``0``: none); a query sees the ``window`` most
        recent positions, itself included.
      sliding_window_pattern: with ``sliding_window``, layer ``i`` is global (full attention)
        iff ``(i + 1) % pattern == 0`` (Gemma 3: 6, five local layers then one global); ``0``
        makes every layer local.
      rope_local_theta: RoPE base of the local layers (``0``: ``rope_theta``; Gemma 3: 1e4).
      norm_offset: every RMSNorm multiplies by ``norm_offset + scale`` (Gemma: 1.0, the stored
        weights are ``scale``).
      post_norms: an RMSNorm on the attention update and on the feed-forward update before
        each is added to the residual (Gemma 2/3 ``post_attention_layernorm``,
        ``post_feedforward_layernorm``); parameters ``attention_post_norm``, ``ffn_post_norm``.
      embed_scale: token embeddings are multiplied by this (Gemma: ``sqrt(dim)``, rounded to
        the compute dtype); ``1.0``: not multiplied.
      mlp_activation: ``"silu"`` (SwiGLU) or ``"gelu_tanh"`` (GeGLU with the tanh GELU, Gemma).
      query_pre_attn_scalar: attention scores are scaled by ``query_pre_attn_scalar ** -0.5``
        instead of ``D ** -0.5`` (Gemma 3); ``0``: ``D``.
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
    head_size: int = 0
    qkv_bias: bool = False
    qk_norm: bool = False
    tie_embeddings: bool = False
    rope_scaling: RopeScaling | None = None
    sliding_window: int = 0
    sliding_window_pattern: int = 0
    rope_local_theta: float = 0.0
    norm_offset: float = 0.0
    post_norms: bool = False
    embed_scale: float = 1.0
    mlp_activation: str = "silu"
    query_pre_attn_scalar: float = 0.0

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
        if not isinstance(self.head_size, int) or self.head_size < 0:
            raise ConfigError(f"LlamaConfig.head_size must be an int >= 0, got {self.head_size!r}")
        if not self.head_size and self.dim % self.n_heads:
            raise ConfigError(f"dim={self.dim} is not a multiple of n_heads={self.n_heads}")
        if self.n_heads % self.n_kv_heads:
            raise ConfigError(
                f"n_heads={self.n_heads} is not a multiple of n_kv_heads={self.n_kv_heads}"
            )
        if self.head_dim % 2:
            raise ConfigError(f"head_dim={self.head_dim} must be even for RoPE")
        if not self.norm_eps > 0 or not self.rope_theta > 0:
            raise ConfigError("norm_eps and rope_theta must be positive")
        check_release_options(self)

    @property
    def head_dim(self) -> int:
        return self.head_size or self.dim // self.n_heads

    def layer_window(self, layer: int) -> int:
        """Sliding window of block ``layer`` (``0``: global attention)."""
        return layer_window(self, layer)

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
        self.layers = nnx.List([Block(config, rngs=rngs, layer=i) for i in range(config.n_layers)])
        self.norm = make_norm(config.dim, config)
        if not config.tie_embeddings:
            self.lm_head = dense(config.dim, config.vocab_size, config, rngs)

    # ------------------------------------------------------------------ helpers
    def _prefill_attention(self):
        name = self.config.attention_impl
        return get_attention_impl("xla" if is_decode_only(name) else name)

    def _check_tokens(self, tokens, where):
        """Shape/dtype check, then token ids in ``[0, vocab_size)`` (see ``models._domain``)."""
        tokens = jnp.asarray(tokens)
        if tokens.ndim != 2 or not jnp.issubdtype(tokens.dtype, jnp.integer):
            raise ValueError(
                f"{where}: tokens must be (B, T) integers, got {tokens.shape} {tokens.dtype}"
            )
        return check_token_ids(tokens, self.config.vocab_size, name="tokens", where=where)

    def _run(self, tokens_BxT, pos_BxT, fn, context, *, hooks=(), capture=frozenset(), embeds=None):
        """Shared body: embeddings (``embeds`` first, then ``tokens``), blocks, head.

        ``context(i, k, v) -> (k_att, v_att, causal, kv_lengths, rng)`` stores the new keys /
        values where the caller keeps them and says what layer ``i`` attends to. With no hooks
        and no capture this runs exactly the ops of the plain model. Returns
        ``(logits, captured)`` (``captured`` holds the requested names, see ``CAPTURE_NAMES``).
        """
        cfg = self.config
        h = self.tok_embeddings(tokens_BxT)
        if cfg.embed_scale != 1.0:
            h = h * jnp.asarray(cfg.embed_scale, h.dtype)
        if embeds is not None:
            h = jnp.concatenate([jnp.asarray(embeds).astype(h.dtype), h], axis=1)
        cap = {name: [] for name in capture if name != "final_hidden"}

        def keep(name, x):
            if name in cap:
                cap[name].append(x)

        for i, layer in enumerate(self.layers):
            if hooks:
                h = _hk.add_to_residual(h, hooks, i, "pre", pos_BxT)
            keep("resid_pre", h)
            q, k, v = layer.attention.qkv(layer.attention_norm(h), pos_BxT)
            if hooks:
                q, k, v = _hk.replace_qkv(q, k, v, hooks, i, pos_BxT)
            k_att, v_att, causal, kv_len, key = context(i, k, v)
            win = layer.attention.window_kwargs(pos_BxT)  # sliding window: the reference
            patch = bool(hooks) and _hk.layer_patches_attention(hooks, i)
            if patch or "attn_weights" in cap:
                p, mask = attention_weights(q, k_att, causal=causal, kv_lengths=kv_len, **win)
                if patch:
                    p, touched_BxHxT = _hk.patch_attention_probs(p, mask, hooks, i, pos_BxT)
                keep("attn_weights", p)
            if win:
                o = xla_attention(q, k_att, v_att, causal=causal, kv_lengths=kv_len, **win)
            else:
                o = fn(q, k_att, v_att, causal=causal, kv_lengths=kv_len, rng=key)
            if patch:  # patched rows from the explicit weights, the others exactly as before
                touched_BxTxHx1 = jnp.transpose(touched_BxHxT, (0, 2, 1))[..., None]
                o = jnp.where(touched_BxTxHx1, _hk.attend_with_probs(p, v_att, q.dtype), o)
            if hooks:
                o = _hk.patch_heads(o, hooks, i, pos_BxT)
            keep("head_out", o)
            a = layer.attention.out(o)
            if cfg.post_norms:
                a = layer.attention_post_norm(a)
            if hooks:
                a = _hk.replace_update(a, hooks, i, "attn", pos_BxT)
            keep("attn_out", a)
            h = h + a
            if hooks:
                h = _hk.add_to_residual(h, hooks, i, "mid", pos_BxT)
            keep("resid_mid", h)
            f = layer.feed_forward(layer.ffn_norm(h))
            if cfg.post_norms:
                f = layer.ffn_post_norm(f)
            if hooks:
                f = _hk.replace_update(f, hooks, i, "ffn", pos_BxT)
            keep("ffn_out", f)
            h = h + f
            if hooks:
                h = _hk.add_to_residual(h, hooks, i, "post", pos_BxT)
            keep("resid_post", h)
        hn = self.norm(h)
        out = {name: jnp.stack(xs) for name, xs in cap.items()}
        if "final_hidden" in capture:
            out["final_hidden"] = hn
        if cfg.tie_embeddings:
            return self.tok_embeddings.attend(hn), out
        return self.lm_head(hn), out

    def _checked(self, hooks, capture, where):
        cfg = self.config
        return (
            _hk.check_hooks(hooks, cfg.n_layers, cfg.n_heads, where=where),
            _hk.check_capture(capture, where=where),
        )

    @staticmethod
    def _check_embeds(embeds, b, dim, where):
        if embeds is None:
            return 0
        shape = jnp.shape(embeds)
        if len(shape) != 3 or shape[0] != b or shape[2] != dim:
            raise ValueError(f"{where}: prefix embeds must be ({b}, P, {dim}), got {shape}")
        return shape[1]

    # ------------------------------------------------------------------ public
    def __call__(self, tokens: jax.Array, *, hooks=()) -> jax.Array:
        """Causal forward pass.

        Args:
          tokens: ``(B, T)`` int32 token ids in ``[0, vocab_size)``, ``T <= max_seq_len`` is not
            enforced (RoPE extrapolates) but is the trained regime.
          hooks: interventions (``AddToResidual``, ``ReplaceUpdate``, ``PatchAttention``,
            ``PatchHeads`` from :mod:`fidia_jax.models`); ``()`` runs the plain model.

        Returns:
          ``(B, T, V)`` logits in ``config.dtype``.

        Raises:
          ValueError: ``tokens`` not ``(B, T)`` integers, or a concrete id outside
            ``[0, vocab_size)``. Under tracing such an id reads a NaN embedding (the logits at
            and after it are NaN) instead of wrapping around; a hook naming a layer that does
            not exist.
        """
        hooks, _ = self._checked(hooks, None, "Llama")
        return self._forward(tokens, hooks, frozenset(), None, "Llama")[0]

    def _forward(self, tokens, hooks, capture, embeds, where):
        tokens = self._check_tokens(tokens, where)
        b, t = tokens.shape
        t = t + self._check_embeds(embeds, b, self.config.dim, where)
        pos = jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32)[None], (b, t))
        return self._run(
            tokens,
            pos,
            self._prefill_attention(),
            lambda i, k, v: (k, v, True, None, None),
            hooks=hooks,
            capture=capture,
            embeds=embeds,
        )

    def inspect(
        self,
        tokens: jax.Array,
        *,
        capture=CAPTURE_ALL,
        hooks=(),
        prefix_embeds: jax.Array | None = None,
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        """Causal forward pass that also returns the model's internals (works under ``jit``).

        Args:
          tokens: ``(B, T)`` int32 token ids.
          capture: names from :data:`fidia_jax.models.LLAMA_CAPTURE_NAMES` (``"all"``, the
            default, for every name): ``resid_pre`` / ``attn_out`` / ``resid_mid`` /
            ``ffn_out`` / ``resid_post`` ``(L, B, T', C)``, ``head_out`` ``(L, B, T', Hq, D)``
            (per *query* head, before ``wo``), ``attn_weights`` ``(L, B, Hq, T', T')`` float32,
            ``final_hidden`` ``(B, T', C)``; ``T' = P + T``. Only requested names are computed
            (attention weights cost an extra score pass; the others are free).
          hooks: interventions (see :mod:`fidia_jax.models` ``AddToResidual`` ...).
          prefix_embeds: ``(B, P, C)`` embeddings placed before the tokens (vision-language).

        Returns:
          ``(logits (B, T', V), captured)``; the logits equal ``model(tokens, hooks=hooks)``.

        Raises:
          ValueError: as :meth:`__call__`; an unknown capture name; a hook naming a layer that
            does not exist (the message names the hook and the layer).
        """
        hooks, capture = self._checked(hooks, capture, "Llama.inspect")
        return self._forward(tokens, hooks, capture, prefix_embeds, "Llama.inspect")

    def init_cache(self, batch: int, max_len: int | None = None) -> LlamaCache:
        """An empty cache for ``batch`` rows and ``max_len`` positions (default ``max_seq_len``).

        Raises:
          ValueError: ``batch`` or ``max_len`` below 1.
        """
        cfg = self.config
        max_len = cfg.max_seq_len if max_len is None else int(max_len)
        if int(batch) < 1 or max_len < 1:
            raise ValueError(
                f"Llama.init_cache: batch and max_len must be >= 1, got {batch}, {max_len}"
            )
        shape = (cfg.n_layers, batch, max_len, cfg.n_kv_heads, cfg.head_dim)
        return LlamaCache(
            k=jnp.zeros(shape, cfg.dtype),
            v=jnp.zeros(shape, cfg.dtype),
            lengths=jnp.zeros((batch,), jnp.int32),
            step=jnp.zeros((), jnp.int32),
        )

    def prefill(
        self,
        tokens: jax.Array,
        cache: LlamaCache,
        *,
        lengths: jax.Array | None = None,
        hooks=(),
        prefix_embeds: jax.Array | None = None,
        padding: str | None = None,
    ) -> tuple[jax.Array, LlamaCache]:
        """Runs the causal forward pass on ``tokens`` and stores their keys/values at ``[0, T)``.

        Args:
          tokens: ``(B, T)`` int32, right-padded when rows have different lengths (or
            left-padded with ``padding="left"``).
          cache: from :meth:`init_cache` (its previous contents are overwritten).
          lengths: ``(B,)`` int valid prompt length per row, ``1 <= lengths <= T`` (default
            ``T``; ``T`` is at most the cache length ``S``). With ``prefix_embeds`` of ``P``
            positions, ``T`` counts them too (``P + T`` positions in all).
          hooks: interventions (see :meth:`__call__`).
          prefix_embeds: ``(B, P, C)`` embeddings placed before ``tokens`` (vision-language).
          padding: where the padding of rows shorter than ``T`` is. ``None`` (default): right
            padding, and a concrete batch that looks left-padded (the short rows start with one
            repeated id and hold other tokens past their length) is refused, since it would be
            read as garbage without a word; ``"right"``: right padding, not checked;
            ``"left"``: left padding (row ``b`` is ``tokens[b, T - lengths[b]:]``), supported
            by rotating each row to the right-padded layout: the cache is the one of the
            right-padded batch (decode goes on as usual) and the logits come back in the
            caller's layout (at a pad position they are not meaningful). ``"left"`` needs
            ``lengths`` and no ``prefix_embeds``.

        Returns:
          ``(logits (B, T, V), cache)`` with ``cache.lengths = lengths``.

        Raises:
          ValueError: ``T`` exceeds the cache length; ``lengths`` not ``(B,)`` integers; a
            concrete length below 1 or above ``T``; a concrete token id outside
            ``[0, vocab_size)``; a concrete batch that looks left-padded with ``padding=None``;
            an unknown ``padding``. Under tracing an invalid length cannot raise: that row's
            logits are NaN and its ``cache.lengths`` is ``-1``, so every later :meth:`decode` of
            the row is NaN too.
        """
        hooks, _ = self._checked(hooks, None, "Llama.prefill")
        if padding not in (None, "right", "left"):
            raise ValueError(
                f"Llama.prefill: padding must be None, 'right' or 'left', got {padding!r}"
            )
        if padding == "left":
            return self._prefill_left(tokens, cache, lengths, hooks, prefix_embeds)
        if padding is None and lengths is not None:
            p = 0 if prefix_embeds is None else jnp.shape(prefix_embeds)[1]
            check_right_padded(tokens, lengths, prefix=p, where="Llama.prefill")
        return self._prefill_impl(
            tokens, cache, lengths=lengths, hooks=hooks, embeds=prefix_embeds
        )[:2]

    def _prefill_left(self, tokens, cache, lengths, hooks, embeds):
        """``padding="left"``: rotate each row left by its pad count, prefill the right-padded
        batch, rotate the logits back."""
        where = "Llama.prefill"
        if lengths is None or embeds is not None:
            raise ValueError(f"{where}: padding='left' needs lengths and no prefix_embeds")
        tokens = self._check_tokens(tokens, where)
        t = tokens.shape[1]
        lengths = jnp.asarray(lengths)
        shift_Bx1 = (t - lengths.astype(jnp.int32)).reshape(-1, 1)
        pos_1xT = jnp.arange(t, dtype=jnp.int32)[None]
        right = jnp.take_along_axis(tokens, (pos_1xT + shift_Bx1) % t, axis=1)
        logits, cache = self._prefill_impl(right, cache, lengths=lengths, hooks=hooks)[:2]
        back_BxTx1 = ((pos_1xT - shift_Bx1) % t)[..., None]
        return jnp.take_along_axis(logits, back_BxTx1, axis=1), cache

    def _prefill_impl(
        self, tokens, cache, *, lengths=None, hooks=(), capture=frozenset(), embeds=None
    ):
        where = "Llama.prefill"
        tokens = self._check_tokens(tokens, where)
        b, t = tokens.shape
        t = t + self._check_embeds(embeds, b, self.config.dim, where)
        if t > cache.k.shape[2]:
            raise ValueError(f"{where}: prompt length {t} exceeds cache length {cache.k.shape[2]}")
        ok_B = None
        if lengths is not None:
            lengths = jnp.asarray(lengths)
            if lengths.shape != (b,) or not jnp.issubdtype(lengths.dtype, jnp.integer):
                raise ValueError(
                    f"{where}: lengths must be ({b},) integers, got {lengths.shape} {lengths.dtype}"
                )
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

        def context(i, k, v):
            ks.append(k)
            vs.append(v)
            return k, v, True, None, None

        logits, cap = self._run(
            tokens, pos, fn, context, hooks=hooks, capture=capture, embeds=embeds
        )
        k_all = cache.k.at[:, :, :t].set(jnp.stack(ks).astype(cache.k.dtype))
        v_all = cache.v.at[:, :, :t].set(jnp.stack(vs).astype(cache.v.dtype))
        if lengths is None:
            lengths = jnp.full((b,), t, jnp.int32)
        lengths = jnp.asarray(lengths, jnp.int32)
        if ok_B is not None:  # traced invalid lengths: NaN logits, row marked -1 in the cache
            logits = jnp.where(ok_B[:, None, None], logits, jnp.asarray(jnp.nan, logits.dtype))
            lengths = jnp.where(ok_B, lengths, -1)
        return logits, LlamaCache(k_all, v_all, lengths, cache.step), cap

    def decode(
        self, tokens: jax.Array, cache: LlamaCache, *, rng: jax.Array | None = None, hooks=()
    ) -> tuple[jax.Array, LlamaCache]:
        """One decode step: appends one token per row at position ``cache.lengths``.

        Args:
          tokens: ``(B, 1)`` int32 in ``[0, vocab_size)``.
          cache: the cache; every row must have room, ``0 <= lengths < S``.
          rng: optional key; the attention of layer ``l`` receives
            ``fold_in(fold_in(rng, l), cache.step)``.
          hooks: interventions (see :meth:`__call__`); positions are absolute, the new token's
            position is ``cache.lengths``.

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
        hooks, _ = self._checked(hooks, None, "Llama.decode")
        return self._decode_impl(tokens, cache, rng=rng, hooks=hooks)[:2]

    def _decode_impl(self, tokens, cache, *, rng=None, hooks=(), capture=frozenset()):
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
                why = (
                    (
                        f"row {i} is full (length {int(host[i])} == cache length {size}): decoding "
                        "past the KV cache; use a larger init_cache(max_len=...)"
                    )
                    if host[i] >= size
                    else (
                        f"row {i} has invalid length {int(host[i])} (a traced prefill with invalid lengths)"
                    )
                )
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
                return jax.lax.dynamic_update_slice(
                    c, jnp.where(ok, x.astype(c.dtype), old), (p, 0, 0)
                )

            return jax.vmap(one)(c_BxSxHxD, x_Bx1xHxD, cache.lengths, ok_B)

        def context(i, k, v):
            nonlocal k_all, v_all
            k_all = k_all.at[i].set(write(k_all[i], k))
            v_all = v_all.at[i].set(write(v_all[i], v))
            key = None
            if rng is not None:
                key = jax.random.fold_in(jax.random.fold_in(rng, i), cache.step)
            return k_all[i], v_all[i], False, kv_len, key

        logits, cap = self._run(tokens, pos_Bx1, fn, context, hooks=hooks, capture=capture)
        if ok_B is not None:
            logits = jnp.where(ok_B[:, None, None], logits, jnp.asarray(jnp.nan, logits.dtype))
        return logits, LlamaCache(k_all, v_all, new_len, cache.step + 1), cap
