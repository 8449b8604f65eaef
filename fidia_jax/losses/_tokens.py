"""Token log-likelihoods and the (weighted) token negative log-likelihood, once for the library.

Every language-model and token-predictor loss of the package (next-token prediction of the
LLaMA drivers, next-scale prediction of HIT-VAR, sequence log-likelihoods for DPO) is built from
:func:`token_log_probs`: ``log_softmax`` in float32 and a gather of the target ids.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from fidia_jax import _checks
from fidia_jax.models import check_token_ids

__all__ = ["next_token_loss", "token_log_probs", "token_nll"]


def _check(logits: Any, tokens: Any, where: str) -> jax.Array:
    if jnp.ndim(logits) < 2 or jnp.shape(tokens) != jnp.shape(logits)[:-1]:
        raise ValueError(
            f"{where}: logits must be (..., V) and tokens the leading shape of logits, got "
            f"{jnp.shape(logits)} and {jnp.shape(tokens)}"
        )
    return check_token_ids(tokens, jnp.shape(logits)[-1], name="tokens", where=where)


def token_log_probs(logits: jax.Array, tokens: jax.Array) -> jax.Array:
    """``log softmax(logits)[tokens]`` at every position, in float32.

    Args:
      logits: ``(..., V)`` float logits (any float dtype; computed in float32).
      tokens: ``(...)`` int ids in ``[0, V)`` (the leading shape of ``logits``).

    Returns:
      ``(...)`` float32 log-probabilities (``<= 0``).

    Raises:
      ValueError: shapes that do not agree, or a concrete id outside ``[0, V)`` (a traced one
        gives NaN, never a wrapped-around id).

    Example:
      >>> import jax.numpy as jnp
      >>> lp = token_log_probs(jnp.log(jnp.array([[0.25, 0.75]])), jnp.array([1]))
      >>> round(float(jnp.exp(lp[0])), 6)
      0.75
    """
    tokens = _check(logits, tokens, "token_log_probs")
    lp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    return jnp.take_along_axis(lp, tokens[..., None], axis=-1)[..., 0]


def token_nll(logits: jax.Array, tokens: jax.Array, weights: Any = None) -> jax.Array:
    """Weighted mean negative log-likelihood ``sum(w * -log p) / sum(w)`` in nats per token.

    Args:
      logits: ``(..., V)``.
      tokens: ``(...)`` int ids in ``[0, V)``.
      weights: ``(...)`` non-negative weights (0 on padding); ``None``: all ones (the plain mean).

    Returns:
      ``()`` float32; 0 when all weights are 0 (never NaN).

    Raises:
      ValueError: shapes that do not agree, an id outside ``[0, V)`` (see
        :func:`token_log_probs`), or concrete weights that are negative or non-finite.
    """
    nll = -token_log_probs(logits, tokens)
    if weights is None:
        return jnp.mean(nll)
    w = jnp.asarray(weights, jnp.float32)
    if w.shape != nll.shape:
        raise ValueError(
            f"token_nll: weights must have the tokens' shape {nll.shape}, got {w.shape}"
        )
    if _checks.is_concrete(w) and not bool(jnp.all(jnp.isfinite(w) & (w >= 0))):
        raise ValueError(
            "token_nll: weights must be finite and non-negative (a negative weight turns the "
            f"mean into a meaningless number), got min {float(jnp.min(w))}"
        )
    return jnp.sum(w * nll) / jnp.maximum(jnp.sum(w), 1e-9)


def next_token_loss(logits: jax.Array, tokens: jax.Array, weights: Any = None) -> jax.Array:
    """:func:`token_nll` of predicting ``tokens[:, 1:]`` from ``logits[:, :-1]``.

    Args:
      logits: ``(B, T, V)``.
      tokens: ``(B, T)`` int ids in ``[0, V)``.
      weights: ``(B, T)`` weight of each *target* token (``weights[:, 0]`` is unused: the first
        token has no prediction); ``None``: the plain mean.

    Returns:
      ``()`` float32 nats per (weighted) predicted token.

    Raises:
      ValueError: shapes that do not agree, or an id outside ``[0, V)``.
    """
    if jnp.ndim(logits) != 3 or jnp.shape(tokens) != jnp.shape(logits)[:2]:
        raise ValueError(
            f"next_token_loss: logits must be (B, T, V) and tokens (B, T), got "
            f"{jnp.shape(logits)} and {jnp.shape(tokens)}"
        )
    if weights is not None and jnp.shape(weights) != jnp.shape(tokens):
        raise ValueError(
            f"next_token_loss: weights must have the tokens' shape {jnp.shape(tokens)}, "
            f"got {jnp.shape(weights)}"
        )
    tokens = check_token_ids(tokens, jnp.shape(logits)[-1], name="tokens", where="next_token_loss")
    w = None if weights is None else jnp.asarray(weights)[:, 1:]
    return token_nll(logits[:, :-1], tokens[:, 1:], w)
