"""Group advantages from the rewards of ``n`` samples drawn for one prompt: RLOO, GRPO, PKPO.

Each function acts on one stream ``rewards_n`` (one prompt / backbone, shape ``(n,)``; vmap to
batch) and uses the *sum* convention of :mod:`fidia_jax.rl`: ``sum_i A_i grad log pi(y_i)``
estimates the gradient of the method's per-prompt objective (a loss averaged over the ``n``
samples would multiply the advantages by ``n``):

* :func:`rloo_advantages`: ``(r_i - mean_{j != i} r_j) / n``, unbiased for ``grad E[r]`` (the
  ``k = 1`` case of :func:`~fidia_jax.rl.max_at_k_effective_rewards`).
* :func:`grpo_advantages`: ``(r_i - mean r) / (std r + eps) / n`` (GRPO averages its per-sample
  terms over the group, hence ``/ n``; ``std`` uses ``ddof = 1``).
* :func:`pkpo_advantages`: PKPO ``loo-1`` effective rewards for Best-of-``k``, unbiased for
  ``grad E[max of k]``; optionally divided by the group's reward std as GRPO does to RLOO.

References:
  Ahmadian et al., "Back to Basics: Revisiting REINFORCE Style Optimization for Learning from
  Human Feedback in LLMs", ACL 2024 (RLOO). https://arxiv.org/abs/2402.14740
  Shao et al., "DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open Language
  Models", 2024 (GRPO). https://arxiv.org/abs/2402.03300
  Walder & Karkhanis, "Pass@K Policy Optimization", 2025 (PKPO; our reconstruction).
  https://arxiv.org/abs/2505.15201
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from fidia_jax import _checks
from fidia_jax.rl._best_of_n import max_at_k_effective_rewards

__all__ = ["grpo_advantages", "pkpo_advantages", "rloo_advantages"]


def _check_group(rewards_n, name: str) -> jax.Array:
    """``rewards_n`` as a floating rank-1 array of ``n >= 2`` samples."""
    rewards_n = jnp.asarray(rewards_n)
    _checks.assert_rank(rewards_n, 1, "rewards_n", where=name, detail="vmap to batch")
    _checks.assert_min_length(rewards_n, 2, "rewards_n", where=name, what="samples")
    _checks.assert_floating(rewards_n, "rewards_n", where=name)
    return rewards_n


def _group_std(rewards_n: jax.Array) -> jax.Array:
    """Sample standard deviation (``ddof = 1``) of one group."""
    n = rewards_n.shape[0]
    centred = rewards_n - jnp.mean(rewards_n)
    return jnp.sqrt(jnp.sum(centred * centred) / (n - 1))


def rloo_advantages(rewards_n: jax.Array) -> jax.Array:
    """RLOO: ``A_i = (r_i - mean_{j != i} r_j) / n``.

    Args:
      rewards_n: ``(n,)`` float rewards of one group, ``n >= 2``.

    Returns:
      ``(n,)`` advantages, same dtype (they sum to 0).

    Raises:
      ValueError: rank != 1, non-floating dtype or ``n < 2``.

    Example:
      >>> from fidia_jax import rl
      >>> print(rl.rloo_advantages(jnp.array([1.0, 2.0, 6.0])).round(4))  # (1 - 4) / 3, ...
      [-1.  -0.5  1.5]
    """
    rewards_n = _check_group(rewards_n, "rloo_advantages")
    # RLOO is the k = 1 case of the Best-of-N effective rewards: (r_i - mean of the others) / n.
    return max_at_k_effective_rewards(rewards_n, 1, "loo-1")


def grpo_advantages(rewards_n: jax.Array, eps: float = 1e-6) -> jax.Array:
    """GRPO: ``A_i = (r_i - mean r) / (std r + eps) / n`` with the unbiased (``ddof = 1``) std.

    Args:
      rewards_n: ``(n,)`` float rewards of one group, ``n >= 2``.
      eps: added to the standard deviation (an all-equal group gives zero advantages).

    Returns:
      ``(n,)`` advantages, same dtype.

    Raises:
      ValueError: rank != 1, non-floating dtype or ``n < 2``.

    Example:
      >>> from fidia_jax import rl
      >>> print(rl.grpo_advantages(jnp.array([0.0, 2.0])))  # +-1 / sqrt(2) / 2
      [-0.35355... 0.35355...]
      >>> print(rl.grpo_advantages(jnp.ones(3)))
      [0. 0. 0.]
    """
    rewards_n = _check_group(rewards_n, "grpo_advantages")
    n = rewards_n.shape[0]
    return (rewards_n - jnp.mean(rewards_n)) / (_group_std(rewards_n) + eps) / n


def pkpo_advantages(rewards_n: jax.Array, k: int, *, group_norm: bool = False,
                    eps: float = 1e-6) -> jax.Array:
    """PKPO ``loo-1`` effective rewards for Best-of-``k`` (the FIDIA advantage).

    ``max_at_k_effective_rewards(rewards_n, k, "loo-1")``: a sample gets
    ``(1/C(n,k)) sum_{|J|=k-1, i not in J} (r_i - max r_J)_+``, i.e. credit only for how much
    it beats the others it would be compared with; ``k = 1`` is :func:`rloo_advantages`.

    Args:
      rewards_n: ``(n,)`` float rewards of one group, ``n >= 2``.
      k: static int in ``[1, n]``, the Best-of-N size targeted.
      group_norm: divide by the group's reward standard deviation (``ddof = 1``) plus ``eps``,
        as GRPO does to RLOO. The estimate is then that of ``grad E[max of k] / std``:
        scale-free per group, at the price of the small bias GRPO also has (the std is
        estimated from the same samples). Our choice (FIDIA's ``train.fidia_group_norm``), not
        from the PKPO paper.
      eps: see ``group_norm``.

    Returns:
      ``(n,)`` effective rewards, same dtype (non-negative for ``k >= 2``).

    Raises:
      ValueError: rank != 1, non-floating dtype, ``n < 2`` or ``k`` outside ``[1, n]``.

    Example:
      >>> from fidia_jax import rl
      >>> print(rl.pkpo_advantages(jnp.array([1.0, 2.0, 6.0]), 3))  # k = n: best minus runner-up
      [0. 0. 4.]
    """
    rewards_n = _check_group(rewards_n, "pkpo_advantages")
    eff = max_at_k_effective_rewards(rewards_n, k, "loo-1")
    return eff / (_group_std(rewards_n) + eps) if group_norm else eff
