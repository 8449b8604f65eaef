"""The policy-gradient loss shared by FIDIA and its baselines (the DPO baseline's loss is
:func:`fidia_jax.rl.dpo_sequence_loss`).

Per backbone with ``n`` sampled sequences ``y_i`` (designed positions ``D``, ``L_D = |D|``)::

    loss = sum_i [ -(1/L_D) sum_{t in D} surr_{i,t}  +  beta * (1/L_D) sum_{t in D} k3_{i,t} ]

    surr_{i,t} = min(rho_{i,t} A_i, clip(rho_{i,t}, 1 - eps, 1 + eps) A_i)   (eps > 0)
               = rho_{i,t} A_i                                              (eps = 0)
    rho_{i,t}  = pi(y_{i,t} | ctx) / pi_old(y_{i,t} | ctx)
    k3_{i,t}   = exp(d) - 1 - d,  d = log pi_ref(y_{i,t}) - log pi(y_{i,t})

The per-token terms are the primitives :func:`fidia_jax.rl.clipped_surrogate` and
:func:`fidia_jax.rl.k3_kl` (whose exponent is clamped at ``rl.K3_LOG_RATIO_MAX``); this module
adds what is FIDIA's: the tempered, token-masked log-probabilities, the designed-position mask and
the per-residue normalisation. At the rollout parameters (``pi = pi_old``, first PPO epoch) the
gradient of the first term is exactly ``-sum_i A_i grad log pi(y_i) / L_D``, the score-function
estimator of the method's objective with the per-residue normalisation of the issue; later epochs
are PPO-style clipped importance-weighted updates. ``k3`` is Schulman's non-negative unbiased
estimator of ``KL(pi || pi_ref)`` per token (samples come from ``pi``). The token
log-probabilities are those of the distribution actually sampled: ProteinMPNN's teacher-forced
log-softmax, divided by the sampling temperature, with omitted tokens removed, re-normalised (see
:func:`tempered_token_log_probs`).

References:
  Schulman et al., "Proximal Policy Optimization Algorithms", 2017. https://arxiv.org/abs/1707.06347
  Schulman, "Approximating KL Divergence", 2020. http://joschu.net/blog/kl-approx.html
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from fidia_jax import _checks, models, rl
from fidia_jax.protein import ALPHABET

__all__ = [
    "omit_mask",
    "policy_loss",
    "policy_token_log_probs",
    "tempered_token_log_probs",
]

_NEG = -1e9


def omit_mask(omit_aas: str) -> jax.Array:
    """``(21,)`` float32, 1.0 for tokens in ``omit_aas`` (letters of ``ALPHABET``)."""
    bad = [c for c in omit_aas if c not in ALPHABET]
    if bad:
        raise ValueError(f"omit_mask: unknown amino-acid letters {bad}; alphabet {ALPHABET}")
    return jnp.asarray([1.0 if c in omit_aas else 0.0 for c in ALPHABET], jnp.float32)


def tempered_token_log_probs(
    log_probs_NxLx21: jax.Array,
    sequences_NxL: jax.Array,
    *,
    temperature: float,
    omit_21: jax.Array | None = None,
) -> jax.Array:
    """Log-probability of each chosen token under the tempered, token-masked distribution.

    ``log_softmax(log p / T)`` equals ``log_softmax(logits / T)`` because ``log p`` and the logits
    differ by a per-position constant, so the model's T=1 log-softmax is enough.

    Args:
      log_probs_NxLx21: ``(..., L, 21)`` float32 log-softmax at temperature 1.
      sequences_NxL: ``(..., L)`` int32 tokens in ``[0, 21)``.
      temperature: sampling temperature, a scalar ``> 0`` (the domain of
        :func:`fidia_jax.models.sample`).
      omit_21: ``(21,)`` float32 mask of tokens never sampled (``None``: none).

    Returns:
      ``(..., L)`` float32 log-probabilities. Under ``jit`` (where nothing can raise) a
      temperature that is not ``> 0`` makes every entry NaN, and an out-of-range token id makes
      its entry NaN (never a wrapped-around id).

    Raises:
      ValueError: (concrete values) a temperature that is not ``> 0`` (0, negative, NaN: it gave
        NaN at 0 and a finite number at ``-0.1``), a token id outside ``[0, 21)``, or shapes
        that disagree.
    """
    where = "tempered_token_log_probs"
    if jnp.ndim(temperature) != 0:
        raise ValueError(
            f"{where}: temperature must be a scalar, got shape {jnp.shape(temperature)}"
        )
    if _checks.is_concrete(temperature) and not float(temperature) > 0:
        raise ValueError(
            f"{where}: temperature must be > 0 (as models.sample requires), got {float(temperature)}"
        )
    if jnp.shape(log_probs_NxLx21)[-1:] != (21,) or (
        jnp.shape(log_probs_NxLx21)[:-1] != jnp.shape(sequences_NxL)
    ):
        raise ValueError(
            f"{where}: log_probs must be (..., L, 21) and sequences (..., L), got "
            f"{jnp.shape(log_probs_NxLx21)} and {jnp.shape(sequences_NxL)}"
        )
    sequences_NxL = models.check_token_ids(sequences_NxL, 21, name="sequences", where=where)
    temperature = jnp.asarray(temperature, jnp.float32)
    logits = log_probs_NxLx21 / temperature
    if omit_21 is not None:
        logits = logits + jnp.broadcast_to(omit_21, logits.shape) * _NEG
    logp = jax.nn.log_softmax(logits, axis=-1)
    out = jnp.take_along_axis(logp, sequences_NxL[..., None], axis=-1, mode="fill")[..., 0]
    return jnp.where(temperature > 0, out, jnp.nan)


def policy_token_log_probs(
    model,
    inputs_B,
    sequences_BxNxL: jax.Array,
    decoding_order_BxNxL: jax.Array,
    *,
    temperature: float,
    omit_21: jax.Array | None = None,
) -> jax.Array:
    """Teacher-forced per-token log pi of sampled sequences, in each sample's decoding order.

    Args:
      model: a :class:`fidia_jax.models.ProteinMPNN`.
      inputs_B: batched :class:`fidia_jax.models.MPNNInputs`, leading axis ``B`` (backbones).
      sequences_BxNxL: ``(B, N, L)`` int32 sampled sequences.
      decoding_order_BxNxL: ``(B, N, L)`` int32 decoding orders returned by the sampler.
      temperature, omit_21: see :func:`tempered_token_log_probs`.

    Returns:
      ``(B, N, L)`` float32.
    """
    b, n, length = sequences_BxNxL.shape
    lp = model.log_probs_many(
        inputs_B, sequences_BxNxL, decoding_order_BxNxL
    )  # encoder once per backbone
    tok = tempered_token_log_probs(
        lp.reshape(b * n, length, -1),
        sequences_BxNxL.reshape(b * n, length),
        temperature=temperature,
        omit_21=omit_21,
    )
    return tok.reshape(b, n, length)


def policy_loss(
    logp_NxL: jax.Array,
    old_logp_NxL: jax.Array,
    ref_logp_NxL: jax.Array,
    advantages_N: jax.Array,
    designed_NxL: jax.Array,
    *,
    beta_kl: float,
    clip_eps: float = 0.0,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Clipped policy-gradient loss with a per-token k3 KL penalty, one backbone.

    Args:
      logp_NxL: ``(N, L)`` float32 log pi of the sampled tokens (differentiated).
      old_logp_NxL: ``(N, L)`` log pi at rollout time (treated as constant).
      ref_logp_NxL: ``(N, L)`` log pi_ref of the frozen reference (constant).
      advantages_N: ``(N,)`` per-sample advantages (sum convention, constant).
      designed_NxL: ``(N, L)`` float32, 1.0 on designed (non-fixed, non-padding) positions.
      beta_kl: KL weight (>= 0).
      clip_eps: PPO clip range; 0 disables clipping.

    Returns:
      ``(loss, aux)``: scalar loss ``pg + beta_kl * mean_i kl_i``; aux has ``pg`` (policy term),
      ``kl`` (mean over samples of the per-token k3 estimate) and ``clip_frac``. The k3 value is
      an unbiased estimate of KL(pi || pi_ref) for tokens drawn from pi; as in GRPO, its
      gradient as a loss is that of KL(pi_ref || pi), not of KL(pi || pi_ref).

    Raises:
      ValueError: shape mismatch.
    """
    _checks.assert_rank(logp_NxL, 2, "logp_NxL", where="policy_loss")
    n, length = logp_NxL.shape
    for name, a in (
        ("old_logp_NxL", old_logp_NxL),
        ("ref_logp_NxL", ref_logp_NxL),
        ("designed_NxL", designed_NxL),
    ):
        _checks.assert_shape(a, (n, length), name, where="policy_loss")
    _checks.assert_shape(advantages_N, (n,), "advantages_N", where="policy_loss")
    old = jax.lax.stop_gradient(old_logp_NxL)
    ref = jax.lax.stop_gradient(ref_logp_NxL)
    adv = jax.lax.stop_gradient(advantages_N)
    mask = designed_NxL
    inv_len = 1.0 / jnp.maximum(jnp.sum(mask, axis=-1, keepdims=True), 1.0)  # (N, 1)

    on = mask > 0
    # Padding / fixed positions can hold log-probs near the -1e9 omit floor, where policy and
    # reference may round apart by > 88 nats: zero the exponents there so exp() cannot overflow
    # into inf * 0 = NaN.
    ratio = jnp.exp(jnp.where(on, logp_NxL - old, 0.0))
    surr = jax.vmap(rl.clipped_surrogate, in_axes=(0, 0, None))(ratio, adv, clip_eps)
    if clip_eps > 0:
        clipped = jnp.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * adv[:, None]
        is_clipped = clipped < ratio * adv[:, None]
        clip_frac = jnp.sum(mask * is_clipped) / jnp.maximum(jnp.sum(mask), 1.0)
    else:
        clip_frac = jnp.zeros((), logp_NxL.dtype)
    pg = -jnp.sum(surr * mask * inv_len)

    k3 = jax.vmap(rl.k3_kl)(jnp.where(on, logp_NxL, 0.0), jnp.where(on, ref, 0.0))
    kl_per_seq = jnp.sum(k3 * mask * inv_len, axis=-1)  # (N,)
    # The policy term already carries a 1/n (RLOO, GRPO) or C(.)/C(n, k) (PKPO) factor in the
    # advantages, so the KL term is averaged over the n samples: beta is per sequence, not per
    # group.
    loss = pg + beta_kl * jnp.mean(kl_per_seq)
    return loss, {"pg": pg, "kl": jnp.mean(kl_per_seq), "clip_frac": clip_frac}
