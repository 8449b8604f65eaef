"""Direct Preference Optimization: the pair loss (from sequence log-ratios, or from the per-token
log-probabilities of the two sequences), the log-ratios it compares, and a (chosen, rejected)
pair from a scored group.

References:
  Rafailov et al., "Direct Preference Optimization: Your Language Model is Secretly a Reward
  Model", NeurIPS 2023. https://arxiv.org/abs/2305.18290
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from fidia_jax import _checks
from fidia_jax.rl._advantages import _check_group

__all__ = ["dpo_log_ratios", "dpo_loss", "dpo_pair", "dpo_sequence_loss"]


def dpo_loss(
    log_ratio_chosen: jax.Array, log_ratio_rejected: jax.Array, beta: float | jax.Array
) -> jax.Array:
    """DPO loss of one preference pair: ``-log sigmoid(beta * (lr_w - lr_l))``.

    ``lr = log pi(y) - log pi_ref(y)`` is the sequence log-ratio of the policy to the frozen
    reference (sum over the tokens the policy chose; ``pi_ref`` constant). Batch with
    ``jax.vmap``.

    Args:
      log_ratio_chosen: ``()`` float log-ratio of the preferred sequence ``y_w``.
      log_ratio_rejected: ``()`` float log-ratio of the dispreferred sequence ``y_l``.
      beta: DPO temperature (``> 0``).

    Returns:
      ``()`` loss, ``>= 0``; ``log 2`` at a zero margin.

    Raises:
      ValueError: inputs that are not scalars.

    Example:
      >>> from fidia_jax import rl
      >>> print(rl.dpo_loss(jnp.array(0.0), jnp.array(0.0), 0.5))  # log 2
      0.6931472
      >>> print(rl.dpo_loss(jnp.array(3.0), jnp.array(-1.0), 0.5))  # log(1 + e^-2)
      0.126928

    References:
      Rafailov et al. 2023, https://arxiv.org/abs/2305.18290 (eq. 7).
    """
    _checks.assert_rank(
        log_ratio_chosen, 0, "log_ratio_chosen", where="dpo_loss", detail="one pair; vmap to batch"
    )
    _checks.assert_rank(
        log_ratio_rejected,
        0,
        "log_ratio_rejected",
        where="dpo_loss",
        detail="one pair; vmap to batch",
    )
    return -jax.nn.log_sigmoid(beta * (log_ratio_chosen - log_ratio_rejected))


def dpo_log_ratios(
    policy_logp_w: jax.Array, ref_logp_w: jax.Array, policy_logp_l: jax.Array, ref_logp_l: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """The log-ratios :func:`dpo_loss` compares, with the reference held constant.

    ``(log pi(y_w) - log pi_ref(y_w), log pi(y_l) - log pi_ref(y_l))`` of the preferred (``w``)
    and dispreferred (``l``) sequences; the reference log-probabilities get no gradient
    (``stop_gradient``).

    Args:
      policy_logp_w: ``(...)`` float sequence log-probabilities of ``y_w`` under the policy.
      ref_logp_w: same shape, under the frozen reference.
      policy_logp_l: ``(...)`` of ``y_l`` under the policy.
      ref_logp_l: same shape, under the reference.

    Returns:
      ``(log_ratio_chosen, log_ratio_rejected)``, each of its inputs' shape; feed them to
      :func:`dpo_loss` (``jax.vmap`` over a batch).

    Example:
      >>> from fidia_jax import rl
      >>> w, l = rl.dpo_log_ratios(jnp.array(-1.0), jnp.array(-3.0), jnp.array(-5.0), jnp.array(-4.0))
      >>> float(w), float(l)
      (2.0, -1.0)

    References:
      Rafailov et al. 2023, https://arxiv.org/abs/2305.18290 (eq. 7).
    """
    return (
        policy_logp_w - jax.lax.stop_gradient(ref_logp_w),
        policy_logp_l - jax.lax.stop_gradient(ref_logp_l),
    )


def dpo_sequence_loss(
    logp_2xT: jax.Array,
    ref_logp_2xT: jax.Array,
    mask_2xT: jax.Array,
    valid: jax.Array,
    beta: float | jax.Array,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """DPO loss of one (chosen, rejected) pair of token sequences, from per-token log-probs.

    The sequence log-ratios are summed over the tokens the policy chose (``mask``):
    ``lr = sum_t mask_t * (log pi(y_t) - log pi_ref(y_t))`` (``pi_ref`` constant: its gradient
    is stopped), and ``loss = valid * dpo_loss(lr_w, lr_l, beta)``, i.e.
    ``-valid * log sigmoid(beta * (lr_w - lr_l))``. Batch over pairs with ``jax.vmap``.

    Args:
      logp_2xT: ``(2, T)`` float per-token log pi of (chosen, rejected) (differentiated).
      ref_logp_2xT: ``(2, T)`` per-token log pi_ref of the same tokens (constant).
      mask_2xT: ``(2, T)`` float, 1.0 on the tokens that count (0 on padding, fixed tokens).
      valid: ``()`` float weight of the pair, 0.0 when it carries no preference (the flag of
        :func:`dpo_pair`).
      beta: DPO temperature (``> 0``).

    Returns:
      ``(loss, aux)``: the ``()`` loss and ``aux`` with ``margin`` (``lr_w - lr_l``) and
      ``accuracy`` (``valid`` where the margin is positive, else 0).

    Raises:
      ValueError: ``logp_2xT`` not of shape ``(2, T)`` or ``ref_logp_2xT`` of another shape.

    Example:
      >>> from fidia_jax import rl
      >>> logp = jnp.log(jnp.array([[0.5, 0.5], [0.25, 0.5]]))
      >>> loss, aux = rl.dpo_sequence_loss(logp, jnp.log(jnp.full((2, 2), 0.5)),
      ...                                  jnp.ones((2, 2)), jnp.float32(1.0), 1.0)
      >>> print(aux["margin"], loss)  # log 2; log(1 + 1/2)
      0.6931472 0.4054651

    References:
      Rafailov et al. 2023, https://arxiv.org/abs/2305.18290 (eq. 7).
    """
    where = "dpo_sequence_loss"
    _checks.assert_rank(logp_2xT, 2, "logp_2xT", where=where)
    _checks.assert_shape(logp_2xT, (2, logp_2xT.shape[1]), "logp_2xT", where=where)
    _checks.assert_shape(ref_logp_2xT, logp_2xT.shape, "ref_logp_2xT", where=where)
    ref = jax.lax.stop_gradient(ref_logp_2xT)
    seq = jnp.sum((logp_2xT - ref) * mask_2xT, axis=-1)  # (2,)
    margin = seq[0] - seq[1]
    loss = valid * dpo_loss(seq[0], seq[1], beta)
    return loss, {"margin": margin, "accuracy": valid * (margin > 0).astype(jnp.float32)}


def dpo_pair(rewards_n: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Best (chosen) and worst (rejected) sample of one scored group, and whether they differ.

    Ties resolve to the lowest index (``argmax`` / ``argmin``). Non-finite rewards follow the
    rule of :mod:`fidia_jax.rl`: those samples are excluded (never chosen nor rejected, unless
    no finite pair exists, and then ``valid`` is 0).

    Args:
      rewards_n: ``(n,)`` float rewards of ``n >= 2`` samples (e.g. from the frozen reference).

    Returns:
      ``(chosen, rejected, valid)``: ``()`` int32 indices and a ``()`` float32 flag, 1.0 when
      ``rewards_n[chosen] > rewards_n[rejected]``, 0.0 when all finite rewards are equal or
      fewer than two are finite (no preference: weight the pair's loss by it).

    Raises:
      ValueError: rank != 1, non-floating dtype or ``n < 2``.

    Example:
      >>> from fidia_jax import rl
      >>> [int(x) for x in rl.dpo_pair(jnp.array([0.3, 2.5, -1.2, 2.5]))]
      [1, 2, 1]
      >>> [int(x) for x in rl.dpo_pair(jnp.array([0.3, jnp.inf, -1.2, jnp.nan]))]
      [0, 2, 1]
    """
    rewards_n = _check_group(rewards_n, "dpo_pair")
    finite = jnp.isfinite(rewards_n)
    chosen = jnp.argmax(jnp.where(finite, rewards_n, -jnp.inf)).astype(jnp.int32)
    rejected = jnp.argmin(jnp.where(finite, rewards_n, jnp.inf)).astype(jnp.int32)
    both = finite[chosen] & finite[rejected]
    valid = (both & (rewards_n[chosen] > rewards_n[rejected])).astype(jnp.float32)
    return chosen, rejected, valid
