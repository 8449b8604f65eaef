"""Training a small :class:`Llama` / :class:`LlamaVL` on a fixed set of token sequences.

The synthetic-task drivers of issue 14 (DyCon, AlgoTrace, residual-update geometry) all train a
tiny model on sequences whose ground truth they know: padded ``(N, T)`` token arrays with a
per-token loss weight (0 on padding, or 1 only on answer tokens), optionally with image patches
before the text. :func:`fit_llama` is that loop, once: minibatches drawn with a key, one jitted,
donated step over the model's ``nnx.Param`` state, any optax transformation.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from fidia_jax.models._llama import Llama, LlamaVL

__all__ = ["fit_llama", "masked_next_token_loss"]


def masked_next_token_loss(logits: jax.Array, tokens: jax.Array, weights: jax.Array) -> jax.Array:
    """Weighted mean cross-entropy of ``tokens[:, 1:]`` given ``logits[:, :-1]``.

    Args:
      logits: ``(B, T, V)``.
      tokens: ``(B, T)`` int token ids in ``[0, V)``.
      weights: ``(B, T)`` non-negative weight of each *target* token (``weights[:, 0]`` is unused:
        the first token has no prediction). 0 on padding.

    Returns:
      scalar float32: ``sum(w * nll) / sum(w)`` in nats per weighted token (0 when all weights
      are 0, never NaN).

    Raises:
      ValueError: shapes that do not agree.
    """
    if jnp.ndim(logits) != 3 or jnp.shape(tokens) != jnp.shape(logits)[:2]:
        raise ValueError(
            f"masked_next_token_loss: logits must be (B, T, V) and tokens (B, T), got "
            f"{jnp.shape(logits)} and {jnp.shape(tokens)}"
        )
    if jnp.shape(weights) != jnp.shape(tokens):
        raise ValueError(
            f"masked_next_token_loss: weights must have the tokens' shape {jnp.shape(tokens)}, "
            f"got {jnp.shape(weights)}"
        )
    lp = jax.nn.log_softmax(logits[:, :-1].astype(jnp.float32), axis=-1)
    nll = -jnp.take_along_axis(lp, tokens[:, 1:, None], axis=-1)[..., 0]
    w = jnp.asarray(weights, jnp.float32)[:, 1:]
    return jnp.sum(w * nll) / jnp.maximum(jnp.sum(w), 1e-9)


def fit_llama(
    model: Llama | LlamaVL,
    tokens: Any,
    *,
    weights: Any = None,
    patches: Any = None,
    steps: int,
    batch_size: int,
    tx: optax.GradientTransformation,
    key: jax.Array,
) -> tuple[Llama | LlamaVL, np.ndarray]:
    """Trains ``model`` in place on ``tokens`` with the next-token loss; returns it and the losses.

    Step ``t`` draws ``batch_size`` rows uniformly with replacement with ``fold_in(key, t)`` and
    applies ``tx`` to the gradient of :func:`masked_next_token_loss` (jitted; parameters and
    optimiser state donated). For a :class:`LlamaVL`, ``patches`` ``(N, P, F)`` go before the
    text, and the loss reads the logits at the ``T`` text positions only (the first text token is
    not predicted).

    Args:
      model: a :class:`Llama` or :class:`LlamaVL`; its parameters are updated in place.
      tokens: ``(N, T)`` int token ids, ``T <= max_seq_len`` (``P + T`` for a ``LlamaVL``).
      weights: ``(N, T)`` per-target-token loss weights; ``None`` = all ones.
      patches: ``(N, P, F)`` float patches; required for a ``LlamaVL``, refused for a ``Llama``.
      steps: optimiser steps (``>= 1``).
      batch_size: rows per step (``>= 1``).
      tx: any optax transformation.
      key: the minibatch key.

    Returns:
      ``(model, losses)``: the trained model (the same object) and ``(steps,)`` float32 training
      losses, each measured before its update.

    Raises:
      ValueError: shapes that do not agree, ``patches`` given (or missing) for the wrong model
        kind, ``steps`` or ``batch_size`` below 1, or a loss that is not finite (the step and
        the offending loss are named; the model keeps its last finite parameters).
    """
    tokens = jnp.asarray(tokens, jnp.int32)
    if tokens.ndim != 2 or tokens.shape[0] < 1:
        raise ValueError(f"fit_llama: tokens must be (N, T) with N >= 1, got {tokens.shape}")
    weights = (
        jnp.ones(tokens.shape, jnp.float32)
        if weights is None
        else jnp.asarray(weights, jnp.float32)
    )
    if weights.shape != tokens.shape:
        raise ValueError(f"fit_llama: weights {weights.shape} must match tokens {tokens.shape}")
    vision = isinstance(model, LlamaVL)
    if vision != (patches is not None):
        raise ValueError(
            "fit_llama: a LlamaVL needs patches=(N, P, F) and a Llama takes none; got "
            f"{type(model).__name__} with patches={'None' if patches is None else 'given'}"
        )
    if vision:
        patches = jnp.asarray(patches, jnp.float32)
        if patches.ndim != 3 or patches.shape[0] != tokens.shape[0]:
            raise ValueError(
                f"fit_llama: patches must be (N, P, F) with N = {tokens.shape[0]}, got {patches.shape}"
            )
    if int(steps) < 1 or int(batch_size) < 1:
        raise ValueError(f"fit_llama: steps and batch_size must be >= 1, got {steps}, {batch_size}")

    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    n_text = tokens.shape[1]

    def loss_fn(p, idx):
        m = nnx.merge(graphdef, p, rest)
        tok = tokens[idx]
        logits = m(patches[idx], tok)[:, -n_text:] if vision else m(tok)
        return masked_next_token_loss(logits, tok, weights[idx])

    @jax.jit
    def step(p, opt_state, t):
        idx = jax.random.randint(jax.random.fold_in(key, t), (batch_size,), 0, tokens.shape[0])
        loss, grads = jax.value_and_grad(loss_fn)(p, idx)
        updates, opt_state = tx.update(grads, opt_state, p)
        return optax.apply_updates(p, updates), opt_state, loss

    opt_state = tx.init(params)
    losses = np.zeros(int(steps), np.float32)
    for t in range(int(steps)):
        new_params, opt_state, loss = step(params, opt_state, jnp.int32(t))
        losses[t] = float(loss)
        if not np.isfinite(losses[t]):
            nnx.update(model, params)
            raise ValueError(f"fit_llama: the loss at step {t} is {losses[t]} (not finite)")
        params = new_params
    nnx.update(model, params)
    return model, losses
