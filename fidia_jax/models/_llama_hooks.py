"""Capture and intervention hooks of the small LLaMA (:class:`fidia_jax.models.Llama`).

Hooks are *pure arguments*: small frozen dataclasses registered as pytrees whose arrays are
children (traced under ``jit``) and whose layer index / site are static metadata (part of the
tree structure, so a new layer index compiles a new program and an array change does not).
Pass a tuple of them as ``hooks=`` to ``Llama.__call__`` / ``prefill`` / ``decode`` /
``inspect`` or to :func:`sample_llama`. With ``hooks=()`` the model runs exactly the code it ran
before hooks existed (outputs bit-identical).

Positions are *absolute* sequence positions (the RoPE position, equal to the KV-cache slot), so a
hook selects the same tokens in a full forward pass and in a prefill + decode loop. A
``positions`` argument is an int array ``(P,)`` (same positions in every row) or ``(B, P)``;
entries ``< 0`` are padding and select nothing; ``None`` selects every position.

Layer ``l`` of the model computes (``resid_pre`` is the residual entering the block)::

    h = resid_pre                                   + AddToResidual(site="pre")
    o_BxTxHqxD = attention(norm(h))                 (PatchAttention edits its weights,
                                                     PatchHeads edits o per query head)
    attn_out = wo(o)                                (ReplaceUpdate(update="attn") replaces it)
    h = h + attn_out = resid_mid                    + AddToResidual(site="mid")
    ffn_out = ffn(norm(h))                          (ReplaceUpdate(update="ffn") replaces it)
    h = h + ffn_out = resid_post                    + AddToResidual(site="post")

Captured values are the ones that flow on (after the hooks of their site).

Grouped-query attention: query head ``h`` reads key/value head ``h // (Hq // Hkv)``; every
per-head array here (``heads`` masks, captured ``head_out`` and ``attn_weights``) is indexed by
the *query* head ``h`` in ``[0, Hq)``.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from fidia_jax.models._domain import (
    check_right_padded,
    check_temperature,
    check_token_ids,
    concrete,
)

__all__ = [
    "CAPTURE_NAMES",
    "AddToResidual",
    "LlamaSamples",
    "PatchAttention",
    "PatchHeads",
    "ReplaceQKV",
    "ReplaceUpdate",
    "sample_llama",
]

#: Names accepted by ``capture=``, with their stacked shapes (``L`` layers first).
CAPTURE_NAMES = {
    "resid_pre": "(L, B, T, C) residual entering each block",
    "attn_out": "(L, B, T, C) attention update (after the output projection wo)",
    "resid_mid": "(L, B, T, C) residual between attention and feed-forward",
    "ffn_out": "(L, B, T, C) feed-forward update",
    "resid_post": "(L, B, T, C) residual leaving each block",
    "head_out": "(L, B, T, Hq, D) per-query-head attention outputs before wo",
    "attn_weights": "(L, B, Hq, T, S) float32 attention probabilities over the S keys",
    "final_hidden": "(B, T, C) the residual after the final RMSNorm (input of lm_head)",
}

_SITES = ("pre", "mid", "post")
_ROW_STRIDE = 1 << 20  # noise of row b at position p uses fold_in(key, b * 2**20 + p)
_UPDATES = ("attn", "ffn")


def _pytree(cls, data: Sequence[str], meta: Sequence[str]):
    return jax.tree_util.register_dataclass(cls, data_fields=list(data), meta_fields=list(meta))


@dataclasses.dataclass(frozen=True)
class AddToResidual:
    """Adds ``vector`` to the residual stream of block ``layer`` at ``site``.

    Attributes:
      layer: block index in ``[0, n_layers)`` (static).
      vector: array broadcastable to ``(B, T, C)`` (typically ``(C,)``), cast to the model dtype.
      positions: absolute positions to steer, ``(P,)`` / ``(B, P)`` int (``< 0`` = padding), or
        ``None`` for every position.
      site: ``"pre"`` (before attention), ``"mid"`` (between attention and FFN) or ``"post"``
        (after the FFN) (static).
    """

    layer: int
    vector: jax.Array
    positions: jax.Array | None = None
    site: str = "pre"


@dataclasses.dataclass(frozen=True)
class ReplaceUpdate:
    """Replaces the attention or FFN update of ``layer`` by noise of matched per-token RMS.

    At each selected token the update ``u_t`` (``(C,)``) becomes
    ``z_t * rms(u_t) / rms(z_t)``, ``z_t ~ N(0, I)`` drawn from
    ``fold_in(key, b * 2**20 + position)`` for row ``b`` (so the noise of a token is the same in
    a full pass and in a cached decode step; positions below ``2**20``). The paper's "Noise Δ" intervention (Xi et al., ICML 2026).

    Attributes:
      layer: block index (static).
      key: a PRNG key.
      positions: absolute positions to replace, or ``None`` for all.
      update: ``"attn"`` or ``"ffn"`` (static).
    """

    layer: int
    key: jax.Array
    positions: jax.Array | None = None
    update: str = "attn"


@dataclasses.dataclass(frozen=True)
class ReplaceQKV:
    """Replaces the queries, keys and/or values of ``layer`` at chosen tokens by matched-RMS noise.

    At each selected token the query (all query heads together, ``(Hq * D,)``), key or value
    vector ``u_t`` (after RoPE for queries and keys) becomes ``z_t * rms(u_t) / rms(z_t)``,
    ``z_t ~ N(0, I)`` drawn from ``fold_in(fold_in(key, part), b * 2**20 + position)`` (``part``
    0/1/2 for q/k/v), so the noise of a token is the same in a full pass and in a cached decode
    step. The paper's "Noise QKV" intervention on visual tokens (Xi et al., ICML 2026).

    Attributes:
      layer: block index (static).
      key: a PRNG key.
      positions: absolute positions whose q/k/v are replaced, or ``None`` for all.
      parts: which of ``"q"``, ``"k"``, ``"v"`` to replace, a non-empty string over them (static).
    """

    layer: int
    key: jax.Array
    positions: jax.Array | None = None
    parts: str = "qkv"


@dataclasses.dataclass(frozen=True)
class PatchAttention:
    """Sets the attention weights of ``layer`` on chosen *key* positions to ``value``.

    ``w'[b, h, t, s] = value`` where key ``s`` is in ``keys`` (and visible to query ``t``), query
    head ``h`` is in ``heads`` and query position ``t`` is in ``positions``; other weights are
    kept. With ``renormalize`` each patched row is then divided by its sum (zero rows stay zero).
    In a patched row the output is ``sum_s w'[b, h, t, s] v[b, s, h // G]`` computed in float32
    (the explicit reference path, whatever ``attention_impl`` is); rows with no selected weight
    keep the output of the model's own attention bit for bit (so an empty ``keys`` is a no-op).

    Attributes:
      layer: block index (static).
      keys: absolute key positions ``(K,)`` / ``(B, K)`` int (``< 0`` = padding).
      value: weight broadcastable to ``(B, Hq, T, S)`` (a scalar: ``0.0`` knocks the keys out).
      heads: ``(Hq,)`` bool mask of query heads, or ``None`` for all.
      positions: absolute query positions, or ``None`` for all.
      renormalize: rescale patched rows to sum to one (static).
    """

    layer: int
    keys: jax.Array
    value: jax.Array = 0.0
    heads: jax.Array | None = None
    positions: jax.Array | None = None
    renormalize: bool = False


@dataclasses.dataclass(frozen=True)
class PatchHeads:
    """Replaces per-query-head attention outputs (before ``wo``) of ``layer`` with ``value``.

    Activation patching / function-vector heads: ``o[b, t, h] = value[b, t, h]`` for the selected
    query heads ``h`` and positions ``t``.

    Attributes:
      layer: block index (static).
      value: broadcastable to ``(B, T, Hq, D)`` (e.g. ``(Hq, D)`` mean head outputs).
      heads: ``(Hq,)`` bool mask of query heads, or ``None`` for all.
      positions: absolute positions, or ``None`` for all.
    """

    layer: int
    value: jax.Array
    heads: jax.Array | None = None
    positions: jax.Array | None = None


_pytree(AddToResidual, ["vector", "positions"], ["layer", "site"])
_pytree(ReplaceUpdate, ["key", "positions"], ["layer", "update"])
_pytree(ReplaceQKV, ["key", "positions"], ["layer", "parts"])
_pytree(PatchAttention, ["keys", "value", "heads", "positions"], ["layer", "renormalize"])
_pytree(PatchHeads, ["value", "heads", "positions"], ["layer"])

_HOOK_TYPES = (AddToResidual, ReplaceUpdate, PatchAttention, PatchHeads, ReplaceQKV)


# ---------------------------------------------------------------------------- validation
def check_hooks(hooks: Any, n_layers: int, n_heads: int, *, where: str) -> tuple:
    """Validates a hook sequence against the model; returns it as a tuple.

    Raises:
      ValueError: not a sequence of hook objects; a hook naming a layer outside
        ``[0, n_layers)`` (the message names the hook and the layer); an unknown ``site`` or
        ``update``; a ``heads`` mask that is not ``(n_heads,)``.
    """
    if hooks is None:
        return ()
    if isinstance(hooks, _HOOK_TYPES):
        hooks = (hooks,)
    hooks = tuple(hooks)
    for i, hk in enumerate(hooks):
        name = type(hk).__name__
        if not isinstance(hk, _HOOK_TYPES):
            raise ValueError(
                f"{where}: hooks[{i}] is a {name}, expected one of "
                f"{', '.join(t.__name__ for t in _HOOK_TYPES)}"
            )
        if isinstance(hk.layer, bool) or not isinstance(hk.layer, int):
            raise ValueError(f"{where}: hooks[{i}] {name}.layer must be an int, got {hk.layer!r}")
        if not 0 <= hk.layer < n_layers:
            raise ValueError(
                f"{where}: hooks[{i}] {name} names layer {hk.layer}, but the model has "
                f"{n_layers} layers (0..{n_layers - 1})"
            )
        if isinstance(hk, AddToResidual) and hk.site not in _SITES:
            raise ValueError(
                f"{where}: hooks[{i}] AddToResidual.site must be one of {_SITES}, got {hk.site!r}"
            )
        if isinstance(hk, ReplaceUpdate) and hk.update not in _UPDATES:
            raise ValueError(
                f"{where}: hooks[{i}] ReplaceUpdate.update must be one of {_UPDATES}, got {hk.update!r}"
            )
        if isinstance(hk, ReplaceQKV) and (
            not isinstance(hk.parts, str) or not hk.parts or set(hk.parts) - set("qkv")
        ):
            raise ValueError(
                f"{where}: hooks[{i}] ReplaceQKV.parts must be a non-empty string over 'qkv', "
                f"got {hk.parts!r}"
            )
        heads = getattr(hk, "heads", None)
        if heads is not None and jnp.shape(heads) != (n_heads,):
            raise ValueError(
                f"{where}: hooks[{i}] {name}.heads must be a ({n_heads},) bool mask over query "
                f"heads, got shape {jnp.shape(heads)}"
            )
    return hooks


def check_capture(capture: Any, *, where: str) -> frozenset:
    """``capture`` as a frozenset of names from :data:`CAPTURE_NAMES` (``"all"``: every name).

    Raises:
      ValueError: an unknown name (the message lists the known ones).
    """
    if capture is None:
        return frozenset()
    if isinstance(capture, str):
        capture = tuple(CAPTURE_NAMES) if capture == "all" else (capture,)
    capture = frozenset(capture)
    unknown = sorted(capture - set(CAPTURE_NAMES))
    if unknown:
        raise ValueError(
            f"{where}: unknown capture name(s) {unknown}; known: {sorted(CAPTURE_NAMES)}"
        )
    return capture


# ---------------------------------------------------------------------------- application
def position_mask(positions: jax.Array | None, pos_BxT: jax.Array) -> jax.Array:
    """``(B, T)`` bool: which tokens (absolute positions ``pos_BxT``) are listed in ``positions``."""
    b, t = pos_BxT.shape
    if positions is None:
        return jnp.ones((b, t), bool)
    p = jnp.asarray(positions, jnp.int32)
    p_BxP = jnp.broadcast_to(p[None], (b, p.shape[0])) if p.ndim == 1 else p
    hit = (pos_BxT[:, :, None] == p_BxP[:, None, :]) & (p_BxP[:, None, :] >= 0)
    return jnp.any(hit, axis=-1)


def add_to_residual(h_BxTxC, hooks, layer, site, pos_BxT):
    for hk in hooks:
        if isinstance(hk, AddToResidual) and hk.layer == layer and hk.site == site:
            vec = jnp.broadcast_to(jnp.asarray(hk.vector, h_BxTxC.dtype), h_BxTxC.shape)
            m = position_mask(hk.positions, pos_BxT)[:, :, None]
            h_BxTxC = h_BxTxC + jnp.where(m, vec, jnp.zeros((), h_BxTxC.dtype))
    return h_BxTxC


def _matched_noise(u_BxTxF, key, pos_BxT):
    """Gaussian noise with each token's RMS of ``u`` (noise of row b, position p: fold_in)."""
    b, t, f = u_BxTxF.shape
    ids = (jnp.arange(b, dtype=jnp.int32)[:, None] * _ROW_STRIDE + pos_BxT).reshape(-1)
    keys = jax.vmap(jax.random.fold_in, in_axes=(None, 0))(key, ids)
    normal = functools.partial(jax.random.normal, shape=(f,), dtype=jnp.float32)
    z = jax.vmap(normal)(keys).reshape(b, t, f)
    uf = u_BxTxF.astype(jnp.float32)
    rms_u = jnp.sqrt(jnp.mean(uf * uf, axis=-1, keepdims=True))
    rms_z = jnp.sqrt(jnp.mean(z * z, axis=-1, keepdims=True))
    return (z * (rms_u / rms_z)).astype(u_BxTxF.dtype)


def replace_update(u_BxTxC, hooks, layer, update, pos_BxT):
    for hk in hooks:
        if isinstance(hk, ReplaceUpdate) and hk.layer == layer and hk.update == update:
            noise = _matched_noise(u_BxTxC, hk.key, pos_BxT)
            m = position_mask(hk.positions, pos_BxT)[:, :, None]
            u_BxTxC = jnp.where(m, noise, u_BxTxC)
    return u_BxTxC


def replace_qkv(q, k, v, hooks, layer, pos_BxT):
    """Applies the layer's :class:`ReplaceQKV` hooks to ``(B, T, H, D)`` q / k / v."""
    out = [q, k, v]
    for hk in hooks:
        if isinstance(hk, ReplaceQKV) and hk.layer == layer:
            m = position_mask(hk.positions, pos_BxT)[:, :, None, None]
            for part, name in enumerate("qkv"):
                if name in hk.parts:
                    u = out[part]
                    b, t, h, d = u.shape
                    noise = _matched_noise(
                        u.reshape(b, t, h * d), jax.random.fold_in(hk.key, part), pos_BxT
                    )
                    out[part] = jnp.where(m, noise.reshape(b, t, h, d), u)
    return tuple(out)


def patch_heads(o_BxTxHxD, hooks, layer, pos_BxT):
    for hk in hooks:
        if isinstance(hk, PatchHeads) and hk.layer == layer:
            b, t, h, _ = o_BxTxHxD.shape
            val = jnp.broadcast_to(jnp.asarray(hk.value, o_BxTxHxD.dtype), o_BxTxHxD.shape)
            heads = jnp.ones((h,), bool) if hk.heads is None else jnp.asarray(hk.heads, bool)
            m = position_mask(hk.positions, pos_BxT)[:, :, None, None] & heads[None, None, :, None]
            o_BxTxHxD = jnp.where(m, val, o_BxTxHxD)
    return o_BxTxHxD


def layer_patches_attention(hooks, layer) -> bool:
    return any(isinstance(hk, PatchAttention) and hk.layer == layer for hk in hooks)


def patch_attention_probs(p_BxHxTxS, mask_BxTxS, hooks, layer, pos_BxT):
    """Applies the layer's :class:`PatchAttention` hooks to the weights (see its docstring).

    Returns ``(weights (B, Hq, T, S), touched (B, Hq, T))``: ``touched`` marks the rows where at
    least one weight was selected (the others are left exactly as they were).
    """
    b, hq, t, s = p_BxHxTxS.shape
    touched = jnp.zeros((b, hq, t), bool)
    for hk in hooks:
        if not (isinstance(hk, PatchAttention) and hk.layer == layer):
            continue
        keys_BxS = position_mask(
            hk.keys, jnp.broadcast_to(jnp.arange(s, dtype=jnp.int32)[None], (b, s))
        )
        heads = jnp.ones((hq,), bool) if hk.heads is None else jnp.asarray(hk.heads, bool)
        qsel_BxT = position_mask(hk.positions, pos_BxT)
        sel = (
            keys_BxS[:, None, None, :]
            & mask_BxTxS[:, None, :, :]
            & heads[None, :, None, None]
            & qsel_BxT[:, None, :, None]
        )
        val = jnp.broadcast_to(jnp.asarray(hk.value, jnp.float32), p_BxHxTxS.shape)
        touched = touched | jnp.any(sel, axis=-1)
        new = jnp.where(sel, val, p_BxHxTxS)
        if hk.renormalize:
            row = jnp.any(sel, axis=-1, keepdims=True)
            den = jnp.sum(new, axis=-1, keepdims=True)
            new = jnp.where(row & (den != 0), new / jnp.where(den != 0, den, 1.0), new)
        p_BxHxTxS = new
    return p_BxHxTxS, touched


def attend_with_probs(p_BxHxTxS, v, dtype):
    """``o[b, t, h] = sum_s p[b, h, t, s] v[b, s, h // G]`` in float32, returned as ``dtype``."""
    b, hq, t, s = p_BxHxTxS.shape
    hkv, d = v.shape[2], v.shape[3]
    p5 = p_BxHxTxS.reshape(b, hkv, hq // hkv, t, s)
    o = jnp.einsum("bkgts,bskd->btkgd", p5, v.astype(jnp.float32))
    return o.reshape(b, t, hq, d).astype(dtype)


# ---------------------------------------------------------------------------- sampler
class LlamaSamples(NamedTuple):
    """Output of :func:`sample_llama`.

    Attributes:
      tokens: ``(B, N)`` int32 generated tokens (after a row's ``stop_token``: ``stop_token``).
      logits: ``(B, N, V)`` float32 logits each token was drawn from (bias included).
      num_tokens: ``(B,)`` int32 tokens generated up to and including the first stop token
        (``N`` for a row that never stopped).
    """

    tokens: jax.Array
    logits: jax.Array
    num_tokens: jax.Array


LogitBias = Callable[[jax.Array, jax.Array, Any], jax.Array]


def sample_llama(
    model,
    prompt: jax.Array,
    *,
    max_new_tokens: int,
    key: jax.Array | None = None,
    temperature: float | None = None,
    lengths: jax.Array | None = None,
    hooks: Sequence[Any] = (),
    logit_bias: LogitBias | None = None,
    logit_bias_args: Any = None,
    prefix_embeds: jax.Array | None = None,
    stop_token: int | None = None,
    cache_len: int | None = None,
    prefill_logits: str = "all",
) -> LlamaSamples:
    """Jitted autoregressive sampling with the KV cache, interventions and a state-based logit bias.

    One program: ``prefill`` of ``[prefix_embeds; prompt]`` then a ``lax.scan`` of ``decode``
    steps, all under one ``nnx.jit`` (compiled once per shapes / static options). ``hooks`` apply
    at every position, prompt and generated alike (restrict them with ``positions``). With
    ``hooks=()`` and ``logit_bias=None`` it is exactly ``prefill`` + repeated ``decode`` +
    argmax / categorical sampling (tested bit for bit). The model is only read: the program
    takes its weights as inputs and hands none back (``nnx.jit(graph_updates=False)``; nnx's
    default would return a fresh copy of every weight on each call).

    Args:
      model: a :class:`fidia_jax.models.Llama`.
      prompt: ``(B, T)`` int32 prompt ids in ``[0, vocab_size)``, right-padded when
        ``lengths`` is given (``T`` may be ``0`` when ``prefix_embeds`` is given).
      max_new_tokens: ``N >= 1`` tokens to generate (static); ``P + T + N`` must not exceed
        ``config.max_seq_len``.
      key: PRNG key for sampling (step ``i`` uses ``fold_in(key, i)``); required unless greedy.
      temperature: ``None`` for greedy (argmax), else a scalar ``> 0`` (logits / temperature).
      lengths: ``(B,)`` valid positions per row *including* the prefix (default all ``P + T``).
      hooks: interventions (:class:`AddToResidual`, :class:`ReplaceUpdate`,
        :class:`PatchAttention`, :class:`PatchHeads`).
      logit_bias: static callable ``fn(hidden_BxKxC, step, logit_bias_args) -> (B, V)`` added to
        the float32 logits before each choice; ``hidden`` holds the residual stream at the
        current position, ``K = n_layers + 1`` (index 0: entering block 0; index ``l + 1``:
        leaving block ``l``; the last is the input of the final norm); ``step`` is the int32
        index ``0 .. N - 1`` of the token being chosen. Pass a module-level function (it is a
        static argument: a new closure recompiles).
      logit_bias_args: pytree of arrays given to ``logit_bias`` (traced: a probe's weights).
      prefix_embeds: ``(B, P, C)`` embeddings placed before the prompt (vision-language).
      stop_token: scalar token id in ``[0, vocab_size)`` (traced; ``None`` for none; ``-1``
        never stops but compiles the same program as a real id): once a row emits it, its
        later tokens are ``stop_token``.
      cache_len: KV-cache length (default ``P + T + N - 1``, the most positions written).
      prefill_logits: ``"all"`` (default): the prefill computes the logits of every position,
        ``(B, P + T, V)`` in ``config.dtype``, and the first token is drawn from those of each
        row's last valid position (exactly ``prefill`` + argmax, the reference above).
        ``"last"``: the final hidden state of each row's last valid position is gathered first
        and only its ``(B, V)`` logits are computed (the output head applied to ``(B, 1, C)``
        instead of ``(B, P + T, C)``; Gemma 3's 262 144-token vocabulary: 1 MiB of float32
        per prompt position less, and that many fewer head multiplications). The values are the
        same up to float rounding (a matrix product of another shape may sum in another order;
        ``tests/models/test_llama_greedy_cache.py`` checks tokens equal and logits within
        ``1e-5 * max|logit|``). Static: each value compiles its own program.

    Returns:
      :class:`LlamaSamples`.

    Raises:
      ValueError: ``max_new_tokens < 1``; no ``key`` with a temperature; the cache too short;
        a concrete prompt id outside ``[0, vocab_size)`` (the message names the first one; a
        traced one reads a NaN embedding, as in ``Llama``); prefix + prompt + ``max_new_tokens``
        longer than ``config.max_seq_len``; a concrete ``stop_token`` outside the vocabulary
        (other than ``-1``); ``prefill_logits`` not ``"all"`` / ``"last"``;
        bad hooks (a layer that does not exist, ...) or lengths (see ``prefill``).
    """
    where = "sample_llama"
    cfg = model.config
    if prefill_logits not in _PREFILL_LOGITS:
        raise ValueError(
            f"{where}: prefill_logits must be one of {_PREFILL_LOGITS}, got {prefill_logits!r}"
        )
    hooks = check_hooks(hooks, cfg.n_layers, cfg.n_heads, where=where)
    if (
        isinstance(max_new_tokens, bool)
        or not isinstance(max_new_tokens, int)
        or max_new_tokens < 1
    ):
        raise ValueError(f"{where}: max_new_tokens must be an int >= 1, got {max_new_tokens!r}")
    if temperature is not None and key is None:
        raise ValueError(
            f"{where}: sampling with a temperature needs a key (temperature=None is greedy)"
        )
    prompt = jnp.asarray(prompt)
    if prompt.ndim != 2 or not jnp.issubdtype(prompt.dtype, jnp.integer):
        raise ValueError(
            f"{where}: prompt must be (B, T) integer token ids, got {prompt.shape} {prompt.dtype}"
        )
    prompt = check_token_ids(prompt, cfg.vocab_size, name="prompt", where=where)
    p = 0 if prefix_embeds is None else jnp.shape(prefix_embeds)[1]
    total = p + prompt.shape[1] + max_new_tokens
    if total > cfg.max_seq_len:
        raise ValueError(
            f"{where}: prefix {p} + prompt {prompt.shape[1]} + max_new_tokens {max_new_tokens} "
            f"= {total} tokens exceeds the model's max_seq_len {cfg.max_seq_len}; shorten the "
            "prompt or max_new_tokens, or build the model with a larger max_seq_len "
            "(dataclasses.replace(config, max_seq_len=...)) if it was trained for it"
        )
    need = total - 1
    cache_len = need if cache_len is None else int(cache_len)
    if cache_len < need:
        raise ValueError(
            f"{where}: cache_len {cache_len} < prefix {p} + prompt {prompt.shape[1]} + "
            f"max_new_tokens {max_new_tokens} - 1 = {need}"
        )
    if p + prompt.shape[1] == 0:
        raise ValueError(f"{where}: empty prompt and no prefix_embeds: nothing to condition on")
    if lengths is not None:  # right padding is the contract: a left-padded batch is refused
        check_right_padded(prompt, lengths, prefix=p, where=where)
    if temperature is not None:
        temperature = check_temperature(temperature, where=where)
    if stop_token is not None:
        stop_token = jnp.asarray(stop_token, jnp.int32)
        if stop_token.shape != ():
            raise ValueError(
                f"{where}: stop_token must be a scalar token id, got shape {stop_token.shape}"
            )
        host = concrete(stop_token)
        if host is not None and not -1 <= int(host) < cfg.vocab_size:
            raise ValueError(
                f"{where}: stop_token {int(host)} is outside [0, {cfg.vocab_size}): the model "
                "can never emit it (-1 is the documented 'never stops' id)"
            )
    return _sample_jit(
        model,
        prompt,
        lengths,
        key,
        temperature,
        hooks,
        logit_bias_args,
        prefix_embeds,
        stop_token,
        max_new_tokens=max_new_tokens,
        logit_bias=logit_bias,
        cache_len=cache_len,
        prefill_logits=prefill_logits,
    )


_PREFILL_LOGITS = ("all", "last")


def _hidden_stack(cap):
    """``(B, T, L + 1, C)`` residual stream from captured ``resid_pre`` / ``resid_post``."""
    h = jnp.concatenate([cap["resid_pre"][:1], cap["resid_post"]], axis=0)
    return jnp.moveaxis(h, 0, 2)


def _sample_impl(
    model,
    prompt,
    lengths,
    key,
    temperature,
    hooks,
    bias_args,
    prefix,
    stop_token,
    *,
    max_new_tokens,
    logit_bias,
    cache_len,
    prefill_logits="all",
):
    b = prompt.shape[0]
    capture = frozenset({"resid_pre", "resid_post"}) if logit_bias is not None else frozenset()
    cache = model.init_cache(b, cache_len)
    last_only = prefill_logits == "last"
    logits, cache, cap = model._prefill_impl(
        prompt,
        cache,
        lengths=lengths,
        hooks=hooks,
        capture=capture | {"final_hidden"} if last_only else capture,
        embeds=prefix,
    )
    total = prompt.shape[1] + (0 if prefix is None else prefix.shape[1])
    last_B = (
        jnp.full((b,), total - 1, jnp.int32)
        if lengths is None
        else jnp.asarray(lengths, jnp.int32) - 1
    )
    if last_only:  # the head on each row's last valid position only (the full logits unused)
        hn = jnp.take_along_axis(cap["final_hidden"], last_B[:, None, None], axis=1)
        if model.config.tie_embeddings:  # the head of ``Llama._run``
            lg_BxV = model.tok_embeddings.attend(hn)[:, 0]
        else:
            lg_BxV = model.lm_head(hn)[:, 0]
        if lengths is not None:  # a traced invalid length: NaN, as ``prefill`` gives it
            ok_B = cache.lengths >= 0
            lg_BxV = jnp.where(ok_B[:, None], lg_BxV, jnp.asarray(jnp.nan, lg_BxV.dtype))
    else:
        lg_BxV = jnp.take_along_axis(logits, last_B[:, None, None], axis=1)[:, 0]
    hid = None
    if logit_bias is not None:
        hid = jnp.take_along_axis(_hidden_stack(cap), last_B[:, None, None, None], axis=1)[:, 0]

    def choose(lg_BxV, hid_BxKxC, step, done_B):
        lg = lg_BxV.astype(jnp.float32)
        if logit_bias is not None:
            lg = lg + jnp.asarray(logit_bias(hid_BxKxC, step, bias_args), jnp.float32)
        if temperature is None:
            tok = jnp.argmax(lg, axis=-1).astype(jnp.int32)
        else:
            tok = jax.random.categorical(jax.random.fold_in(key, step), lg / temperature, axis=-1)
            tok = tok.astype(jnp.int32)
        if stop_token is not None:
            tok = jnp.where(done_B, stop_token, tok)
            done_B = done_B | (tok == stop_token)
        return tok, lg, done_B

    done = jnp.zeros((b,), bool)
    tok0, lg0, done = choose(lg_BxV, hid, jnp.int32(0), done)

    def body(carry, step):
        tok, cache, done = carry
        lg, cache, cap = model._decode_impl(
            tok[:, None], cache, rng=None, hooks=hooks, capture=capture
        )
        h = _hidden_stack(cap)[:, 0] if logit_bias is not None else None
        tok, lg, done = choose(lg[:, 0], h, step, done)
        return (tok, cache, done), (tok, lg)

    steps = jnp.arange(1, max_new_tokens, dtype=jnp.int32)
    _, (toks, lgs) = jax.lax.scan(body, (tok0, cache, done), steps)
    tokens = jnp.concatenate([tok0[:, None], toks.T], axis=1)
    all_lg = jnp.concatenate([lg0[:, None], jnp.moveaxis(lgs, 0, 1)], axis=1)
    if stop_token is None:
        n = jnp.full((b,), max_new_tokens, jnp.int32)
    else:
        hit = tokens == stop_token
        n = jnp.where(jnp.any(hit, axis=1), jnp.argmax(hit, axis=1) + 1, max_new_tokens).astype(
            jnp.int32
        )
    return LlamaSamples(tokens, all_lg, n)


# ``graph_updates=False``: sampling changes no variable of the model, and nnx's default (graph
# updates) hands every variable back out of the program, i.e. a fresh copy of all the weights per
# call: Gemma 3 270M, 1.1 GB more at the peak of each call (measured, docs/safesci.md *Memory*).
# A flax whose ``nnx.jit`` lacks the keyword keeps its default (same tokens, more memory).
_NO_GRAPH_UPDATES = (
    {"graph_updates": False} if "graph_updates" in inspect.signature(nnx.jit).parameters else {}
)
_sample_jit = nnx.jit(
    _sample_impl,
    static_argnames=("max_new_tokens", "logit_bias", "cache_len", "prefill_logits"),
    **_NO_GRAPH_UPDATES,
)
