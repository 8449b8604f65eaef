"""Attention implementations looked up by name (the small LLaMA's ``attention_impl`` switch).

Contract of every implementation ``fn``::

    fn(q, k, v, *, causal, kv_lengths, rng) -> out

* ``q``: ``(B, T, Hq, D)``; ``k``, ``v``: ``(B, S, Hkv, D)``; any float dtype. ``Hq`` is a
  multiple of ``Hkv`` (grouped-query attention: query head ``h`` reads kv head
  ``h // (Hq // Hkv)``).
* ``causal``: query ``i`` may attend key ``j`` only if ``j <= i + (S - T)`` (bottom-right
  aligned, so ``T == S`` is the usual lower-triangular mask).
* ``kv_lengths``: ``(B,)`` int32 or ``None``; key ``j`` of row ``b`` is valid iff
  ``j < kv_lengths[b]``. Values lie in ``[0, S]`` (a ``ValueError`` when concrete; not checked
  when traced, where a length above ``S`` acts as ``S`` and a negative one as ``0``).
* masked slots never contribute: a key/value a query may not attend (causal mask, or past
  ``kv_lengths``) is not read into its output at all (``jnp.where``, not a zero weight), so a
  NaN stored there cannot reach the result; a query with no valid key returns zeros.
* ``rng``: a PRNG key or ``None`` (stochastic kernels may use it; deterministic ones ignore it).
* returns ``(B, T, Hq, D)`` in ``q.dtype``. Softmax scale is ``D ** -0.5``.

Training / prefill calls pass ``causal=True, kv_lengths=None``; a decode step passes ``T == 1``,
``causal=False``, ``kv_lengths`` = valid cache length per row and ``rng`` already folded with
``(layer, step)`` (``None`` when the caller gave no key).

Kernel implementations live in ``fidia_jax.kernels`` (which imports neither ``layers`` nor
``models``); they are registered here lazily through ``_LAZY_IMPLS`` so importing a model never
imports a kernel.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

import jax
import jax.numpy as jnp

from fidia_jax import _checks
from fidia_jax.errors import ConfigError

__all__ = [
    "AttentionFn",
    "attention_weights",
    "register_attention_impl",
    "get_attention_impl",
    "is_decode_only",
    "list_attention_impls",
    "xla_attention",
]

AttentionFn = Callable[..., jax.Array]

# name -> (fn, decode_only)
_REGISTRY: dict[str, tuple[AttentionFn, bool]] = {}

# name -> (module path, attribute, decode_only); imported on first lookup.
# The kernels helper adds its entries here (e.g. "santa": ("fidia_jax.kernels.santa.api", ...)).
_LAZY_IMPLS: dict[str, tuple[str, str, bool]] = {
    "santa": ("fidia_jax.kernels.santa.api", "santa_attention", True),
    "flash_decode": ("fidia_jax.kernels.santa.api", "flash_decode_attention", True),
    "attn_qat": ("fidia_jax.kernels.attn_qat.api", "attn_qat_attention", False),
    "attn_qat_dropin": ("fidia_jax.kernels.attn_qat.api", "attn_qat_dropin_attention", False),
}


def register_attention_impl(name: str, fn: AttentionFn, *, decode_only: bool = False) -> None:
    """Registers ``fn`` (see the module docstring for its contract) under ``name``.

    Args:
      name: lookup key used by ``LlamaConfig.attention_impl``.
      fn: the attention function.
      decode_only: ``True`` if ``fn`` only supports decode calls (``T == 1``); the model then
        uses the ``"xla"`` implementation for training / prefill.

    Raises:
      ConfigError: ``name`` is empty or ``fn`` is not callable.
    """
    if not isinstance(name, str) or not name:
        raise ConfigError(f"attention impl name must be a non-empty string, got {name!r}")
    if not callable(fn):
        raise ConfigError(f"attention impl {name!r} must be callable, got {type(fn).__name__}")
    _REGISTRY[name] = (fn, bool(decode_only))


def list_attention_impls() -> list[str]:
    """Sorted names of all registered and lazily registrable implementations."""
    return sorted(set(_REGISTRY) | set(_LAZY_IMPLS))


def _lookup(name: str) -> tuple[AttentionFn, bool]:
    if name not in _REGISTRY and name in _LAZY_IMPLS:
        module, attr, decode_only = _LAZY_IMPLS[name]
        fn = getattr(importlib.import_module(module), attr)
        register_attention_impl(name, fn, decode_only=decode_only)
    if name not in _REGISTRY:
        raise ConfigError(
            f"unknown attention_impl {name!r}; available: {', '.join(list_attention_impls())}"
        )
    return _REGISTRY[name]


def get_attention_impl(name: str) -> AttentionFn:
    """Returns the attention function registered under ``name``.

    Raises:
      ConfigError: no implementation of that name (the message lists the known names).
    """
    return _lookup(name)[0]


def is_decode_only(name: str) -> bool:
    """Whether the implementation ``name`` supports only decode steps (``T == 1``)."""
    return _lookup(name)[1]


def xla_attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    *,
    causal: bool,
    kv_lengths: jax.Array | None = None,
    rng: jax.Array | None = None,
    window: int | None = None,
    q_positions: jax.Array | None = None,
) -> jax.Array:
    """Reference softmax attention in plain ``jnp`` (scores and softmax in float32).

    Args:
      q: ``(B, T, Hq, D)`` queries.
      k: ``(B, S, Hkv, D)`` keys, ``Hq % Hkv == 0``.
      v: ``(B, S, Hkv, D)`` values.
      causal: apply the bottom-right aligned causal mask.
      kv_lengths: ``(B,)`` int32 valid key count per row, or ``None``.
      rng: ignored (deterministic).
      window: optional sliding window (local attention): query at absolute position ``p``
        sees only keys in slots ``j > p - window`` (``window`` keys counting itself). Keys are
        taken to sit at absolute positions ``0 .. S - 1`` (a prefill or a KV cache).
      q_positions: ``(B, T)`` int absolute query positions, needed with ``window`` (default
        the bottom-right aligned ``S - T + i``).

    Returns:
      ``(B, T, Hq, D)`` in ``q.dtype``. Rows with no valid key return zeros. Masked keys and
      values (causal mask, past ``kv_lengths``) are never read into the result; a non-finite
      value in a visible value row makes the output coordinates that read it NaN (an Inf too).

    Raises:
      ValueError: ranks, batch sizes, head counts or head dims do not match (the message names
        which); ``kv_lengths`` of the wrong shape or dtype, or (when concrete) outside
        ``[0, S]``.
    """
    del rng
    where = "xla_attention"
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ValueError(f"{where}: q, k, v must be rank 4, got {q.shape}, {k.shape}, {v.shape}")
    b, t, hq, d = q.shape
    _, s, hkv, _ = k.shape
    if k.shape != v.shape:
        raise ValueError(f"{where}: k {k.shape} and v {v.shape} must have the same shape")
    _checks.assert_attention_dims(q, k, heads_axis=2, where=where)
    if kv_lengths is not None:
        _checks.assert_lengths(kv_lengths, b, s, "kv_lengths", where=where)
    if window is not None and (not isinstance(window, int) or window < 1):
        raise ValueError(f"{where}: window must be a positive int or None, got {window!r}")
    p, mask_BxTxS = attention_weights(
        q, k, causal=causal, kv_lengths=kv_lengths, window=window, q_positions=q_positions
    )
    p = p.reshape(b, hkv, hq // hkv, t, s)
    v_BxSxKxD = v.astype(jnp.float32)
    if not causal and kv_lengths is None and window is None:  # no masked slot
        o_BxTxKxGxD = jnp.einsum("bkgts,bskd->btkgd", p, v_BxSxKxD)
    else:  # masked slots are not read: drop non-finite values, then re-mark the visible ones
        finite = jnp.isfinite(v_BxSxKxD)
        o_BxTxKxGxD = jnp.einsum("bkgts,bskd->btkgd", p, jnp.where(finite, v_BxSxKxD, 0.0))
        bad_BxTxKxD = (
            jnp.einsum(
                "bts,bskd->btkd", mask_BxTxS.astype(jnp.float32), (~finite).astype(jnp.float32)
            )
            > 0
        )
        o_BxTxKxGxD = jnp.where(bad_BxTxKxD[:, :, :, None, :], jnp.nan, o_BxTxKxGxD)
    return o_BxTxKxGxD.reshape(b, t, hq, d).astype(q.dtype)


register_attention_impl("xla", xla_attention)


def attention_weights(
    q, k, *, causal: bool = False, kv_lengths=None, window=None, q_positions=None
):
    """Softmax attention weights of :func:`xla_attention`, and the visibility mask.

    The one place the masking and softmax of the reference attention live (the attention
    function and the LLaMA capture hooks both call it), so captured weights are exactly the ones
    the forward pass uses.

    Args:
      q: ``(B, T, Hq, D)``; k: ``(B, S, Hkv, D)`` with ``Hq % Hkv == 0`` (query head ``h`` reads
        kv head ``h // (Hq // Hkv)``); checked (static shapes only, free under ``jit``).
      causal: bottom-right causal mask (query ``i`` sees keys ``j <= i + S - T``).
      kv_lengths: optional ``(B,)`` int; keys at ``j >= kv_lengths[b]`` are hidden.
      window: optional int; key slot ``j`` is hidden from a query at absolute position ``p``
        when ``p - j >= window`` (sliding-window attention, keys at positions ``0 .. S - 1``).
      q_positions: ``(B, T)`` int query positions for ``window`` (default ``S - T + i``).

    Returns:
      ``(p_BxHqxTxS, mask_BxTxS)``: float32 weights, rows summing to 1 over the visible keys (a
      query with no visible key has all-zero weights, never NaN), and the boolean mask.

    Raises:
      ValueError: ``q`` or ``k`` not rank 4, or batch, head dims or head counts that disagree.
    """
    if jnp.ndim(q) != 4 or jnp.ndim(k) != 4:
        raise ValueError(
            f"attention_weights: q and k must be rank 4, got {jnp.shape(q)} and {jnp.shape(k)}"
        )
    _checks.assert_attention_dims(q, k, heads_axis=2, where="attention_weights")
    b, t, hq, d = q.shape
    _, s, hkv, _ = k.shape
    g = hq // hkv
    q_BxTxKxGxD = q.astype(jnp.float32).reshape(b, t, hkv, g, d)
    s_BxKxGxTxS = jnp.einsum("btkgd,bskd->bkgts", q_BxTxKxGxD, k.astype(jnp.float32)) * (d**-0.5)
    mask_BxTxS = jnp.ones((b, t, s), dtype=bool)
    if causal:
        qi = jnp.arange(t)[:, None] + (s - t)
        kj = jnp.arange(s)[None, :]
        mask_BxTxS = mask_BxTxS & (kj <= qi)[None]
    if kv_lengths is not None:
        kv_lengths = jnp.asarray(kv_lengths, jnp.int32).reshape(b)
        mask_BxTxS = mask_BxTxS & (jnp.arange(s)[None, None, :] < kv_lengths[:, None, None])
    if window is not None:
        if q_positions is None:
            q_positions = jnp.broadcast_to(jnp.arange(t)[None] + (s - t), (b, t))
        qp_BxTx1 = jnp.asarray(q_positions, jnp.int32).reshape(b, t)[:, :, None]
        mask_BxTxS = mask_BxTxS & (qp_BxTx1 - jnp.arange(s)[None, None, :] < window)
    mask_Bx1x1xTxS = mask_BxTxS[:, None, None]
    s_BxKxGxTxS = jnp.where(mask_Bx1x1xTxS, s_BxKxGxTxS, -jnp.inf)
    m = jnp.max(s_BxKxGxTxS, axis=-1, keepdims=True)
    m = jnp.where(jnp.isfinite(m), m, 0.0)
    p = jnp.where(mask_Bx1x1xTxS, jnp.exp(s_BxKxGxTxS - m), 0.0)
    denom = jnp.sum(p, axis=-1, keepdims=True)
    p = p / jnp.where(denom > 0, denom, 1.0)
    return p.reshape(b, hq, t, s), mask_BxTxS
