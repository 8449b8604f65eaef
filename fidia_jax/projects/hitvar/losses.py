"""HIT-VAR objectives: the multi-scale tokenizer loss, next-scale cross-entropy and the token
log-likelihood that the DPO-style preference term compares.

The preference term itself is :func:`fidia_jax.rl.dpo_loss` applied to the log-ratios
:func:`fidia_jax.rl.dpo_log_ratios` of ``token_log_prob(policy)`` and
``token_log_prob(reference)`` of a preferred and a dispreferred token sequence (the driver
composes them). Token log-likelihoods are the library's one helper,
:func:`fidia_jax.losses.token_log_probs`, summed over the sequence.

References:
  HIT-VAR, ICML 2026, arXiv:2605.14891 (abstract only: the weighting over scales, the
  commitment weight and the pairing of reconstructions are our reconstruction). Rafailov et al.,
  "Direct Preference Optimization", NeurIPS 2023 (the DPO loss). van den Oord et al., "Neural
  Discrete Representation Learning", NeurIPS 2017 (the commitment term).
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp

from fidia_jax import _checks, losses

__all__ = ["hitvar_tokenizer_loss", "next_scale_cross_entropy", "token_log_prob"]


def _check_logits(logits, tokens, where):
    _checks.assert_rank(logits, 3, "logits", where=where, detail="(B, T, K)")
    _checks.assert_rank(tokens, 2, "tokens", where=where, detail="(B, T)")
    if logits.shape[:2] != tokens.shape:
        raise ValueError(
            f"{where}: logits {tuple(logits.shape)} and tokens {tuple(tokens.shape)} must share "
            f"(B, T)"
        )


def token_log_prob(logits_BxTxK: jax.Array, tokens_BxT: jax.Array) -> jax.Array:
    """``log p(tokens) = sum_t log softmax(logits_t)[tokens_t]``, per sequence.

    Args:
      logits_BxTxK: float logits (teacher-forced on ``tokens``).
      tokens_BxT: int tokens in ``[0, K)``.

    Returns:
      ``(B,)`` float32 sequence log-likelihoods (``<= 0``).

    Raises:
      ValueError: ranks or ``(B, T)`` mismatch, or a concrete token outside ``[0, K)``
        (:func:`fidia_jax.losses.token_log_probs`; a traced one gives NaN).
    """
    _check_logits(logits_BxTxK, tokens_BxT, "token_log_prob")
    return jnp.sum(losses.token_log_probs(logits_BxTxK, tokens_BxT), axis=-1)


def next_scale_cross_entropy(logits_BxTxK: jax.Array, tokens_BxT: jax.Array) -> jax.Array:
    """Mean token cross-entropy (nats) of the next-scale predictor: ``-token_log_prob / T``,
    averaged over the batch. Returns a ``()`` float32."""
    _check_logits(logits_BxTxK, tokens_BxT, "next_scale_cross_entropy")
    return -jnp.mean(token_log_prob(logits_BxTxK, tokens_BxT)) / tokens_BxT.shape[1]


def hitvar_tokenizer_loss(
    recon: Mapping[int, jax.Array],
    target: Mapping[int, jax.Array],
    f: jax.Array,
    fhat: jax.Array,
    *,
    commitment: float = 0.25,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Tokenizer objective: mean over the decoded scales of the pixel MSE, plus the commitment
    term ``commitment * mean((f - stop_gradient(fhat))^2)`` (the codebook learns by EMA).

    Args:
      recon: SR scale ``m`` -> decoded ``(B, m*l, m*l, 3)`` (HIT-VAR: one per scale; the plain
        tokenizer: only ``M``).
      target: scale -> the HR image at that scale, same shapes (every key of ``recon``).
      f: ``(B, H, H, D)`` encoder latent; fhat: the full quantised latent, same shape.
      commitment: weight ``beta >= 0``.

    Returns:
      ``(loss, parts)``: ``()`` loss and ``{"mse_x{m}": ..., "commit": ...}``.

    Raises:
      ValueError: a scale with no target, or shapes that differ.
    """
    if not recon:
        raise ValueError("hitvar_tokenizer_loss: recon is empty")
    parts = {}
    for m, img in recon.items():
        if m not in target or target[m].shape != img.shape:
            got = None if m not in target else tuple(target[m].shape)
            raise ValueError(
                f"hitvar_tokenizer_loss: scale x{m} needs a target of shape {tuple(img.shape)}, "
                f"got {got}"
            )
        parts[f"mse_x{m}"] = jnp.mean((img - target[m]) ** 2)
    if f.shape != fhat.shape:
        raise ValueError(f"hitvar_tokenizer_loss: f {f.shape} and fhat {fhat.shape} differ")
    parts["commit"] = jnp.mean((f - jax.lax.stop_gradient(fhat)) ** 2)
    mse = sum(v for k, v in parts.items() if k.startswith("mse")) / len(recon)
    return mse + commitment * parts["commit"], parts
