"""Per-sample advantages of the methods that share the FIDIA training loop.

All functions act on one stream ``rewards_n`` of ``n`` samples for one backbone (vmap to batch)
and use the *sum* convention of :mod:`fidia_jax.rl`: the policy loss is
``-sum_i A_i * log pi(y_i) / L_designed``, so ``sum_i A_i grad log pi(y_i)`` estimates the
gradient of the method's per-backbone objective:

* ``fidia``: PKPO ``loo-1`` effective rewards with ``k = k_bon``, unbiased for
  ``grad E[max of k_bon]`` (:func:`fidia_jax.rl.max_at_k_effective_rewards`); optionally divided
  by the group's reward std like GRPO (``train.fidia_group_norm``).
* ``rloo``: ``(r_i - mean_{j != i} r_j) / n``, unbiased for ``grad E[r]`` (the ``k = 1`` case).
* ``grpo``: group-normalised ``(r_i - mean r) / (std r + eps) / n`` (DeepSeekMath's GRPO
  averages its per-sample terms over the group, hence ``/ n``; ``std`` uses ``ddof = 1``).
* ``dpo``: not an advantage method; :func:`dpo_pair` picks the best and worst of ``n`` samples of
  the frozen reference.
* ``bon``: the frozen reference, no update.

References:
  Walder & Karkhanis, "Pass@K Policy Optimization", 2025. https://arxiv.org/abs/2505.15201
  Ahmadian et al., "Back to Basics: Revisiting REINFORCE Style Optimization for Learning from
  Human Feedback in LLMs", ACL 2024 (RLOO). https://arxiv.org/abs/2402.14740
  Shao et al., "DeepSeekMath", 2024 (GRPO). https://arxiv.org/abs/2402.03300
  Rafailov et al., "Direct Preference Optimization", NeurIPS 2023. https://arxiv.org/abs/2305.18290
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from fidia_jax import rl

__all__ = ["advantages", "dpo_pair", "fidia_advantages", "grpo_advantages", "rloo_advantages"]


def _check(rewards_n: jax.Array, name: str) -> jax.Array:
    rewards_n = jnp.asarray(rewards_n)
    if rewards_n.ndim != 1:
        raise ValueError(f"{name}: rewards_n must have rank 1 (vmap to batch), got {rewards_n.shape}")
    if rewards_n.shape[0] < 2:
        raise ValueError(f"{name}: needs n >= 2 samples, got {rewards_n.shape[0]}")
    if not jnp.issubdtype(rewards_n.dtype, jnp.floating):
        raise ValueError(f"{name}: rewards_n must be floating point, got {rewards_n.dtype}")
    return rewards_n


def rloo_advantages(rewards_n: jax.Array) -> jax.Array:
    """RLOO: ``A_i = (r_i - mean_{j != i} r_j) / n``.

    Args:
      rewards_n: ``(n,)`` float, ``n >= 2``.

    Returns:
      ``(n,)`` advantages, same dtype.

    Raises:
      ValueError: bad rank, dtype or ``n < 2``.
    """
    rewards_n = _check(rewards_n, "rloo_advantages")
    # RLOO is the k = 1 case of the Best-of-N effective rewards: (r_i - mean of the others) / n.
    return rl.max_at_k_effective_rewards(rewards_n, 1, "loo-1")


def _group_std(rewards_n: jax.Array) -> jax.Array:
    n = rewards_n.shape[0]
    centred = rewards_n - jnp.mean(rewards_n)
    return jnp.sqrt(jnp.sum(centred * centred) / (n - 1))


def grpo_advantages(rewards_n: jax.Array, eps: float = 1e-6) -> jax.Array:
    """GRPO: ``A_i = (r_i - mean r) / (std r + eps) / n`` with the unbiased (ddof=1) std.

    Args:
      rewards_n: ``(n,)`` float, ``n >= 2``.
      eps: added to the standard deviation (all-equal groups give zero advantages).

    Returns:
      ``(n,)`` advantages, same dtype.

    Raises:
      ValueError: bad rank, dtype or ``n < 2``.
    """
    rewards_n = _check(rewards_n, "grpo_advantages")
    n = rewards_n.shape[0]
    return (rewards_n - jnp.mean(rewards_n)) / (_group_std(rewards_n) + eps) / n


def fidia_advantages(rewards_n: jax.Array, k: int, *, group_norm: bool = False,
                     eps: float = 1e-6) -> jax.Array:
    """FIDIA: PKPO ``loo-1`` effective rewards for Best-of-``k``.

    Args:
      rewards_n: ``(n,)`` float.
      k: static int in ``[1, n]``, the Best-of-N size used at design time.
      group_norm: divide by the group's reward standard deviation (``ddof = 1``) plus ``eps``,
        as GRPO does to RLOO. Each backbone's estimate is then that of ``grad E[max of k] / std``:
        scale-free per backbone (a backbone whose rewards have spread down after training keeps
        its weight), at the price of the small bias GRPO also has (the std is estimated from the
        same samples). Our choice, not from the paper.
      eps: see ``group_norm``.

    Returns:
      ``(n,)`` effective rewards (non-negative for ``k >= 2``; only samples that beat the others
      they would be compared with get credit).

    Raises:
      ValueError: bad rank, dtype or ``k``.
    """
    rewards_n = _check(rewards_n, "fidia_advantages")
    eff = rl.max_at_k_effective_rewards(rewards_n, k, "loo-1")
    return eff / (_group_std(rewards_n) + eps) if group_norm else eff


def advantages(method: str, rewards_n: jax.Array, *, k: int, grpo_eps: float = 1e-6,
               fidia_group_norm: bool = False) -> jax.Array:
    """Dispatches to the advantage of ``method`` in ``("fidia", "rloo", "grpo")``.

    Raises:
      ValueError: unknown or non-advantage method (``dpo``, ``bon``).
    """
    if method == "fidia":
        return fidia_advantages(rewards_n, k, group_norm=fidia_group_norm, eps=grpo_eps)
    if method == "rloo":
        return rloo_advantages(rewards_n)
    if method == "grpo":
        return grpo_advantages(rewards_n, grpo_eps)
    raise ValueError(f"advantages: method {method!r} has no per-sample advantages")


def dpo_pair(rewards_n: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Best (chosen) and worst (rejected) sample of one group, and whether they differ.

    Ties resolve to the lowest index (``argmax`` / ``argmin``).

    Args:
      rewards_n: ``(n,)`` float rewards of samples from the frozen reference.

    Returns:
      ``(chosen, rejected, valid)``: int32 indices and a float32 1.0/0.0 flag that is 0 when all
      rewards are equal (no preference).

    Raises:
      ValueError: bad rank, dtype or ``n < 2``.
    """
    rewards_n = _check(rewards_n, "dpo_pair")
    chosen = jnp.argmax(rewards_n).astype(jnp.int32)
    rejected = jnp.argmin(rewards_n).astype(jnp.int32)
    valid = (rewards_n[chosen] > rewards_n[rejected]).astype(jnp.float32)
    return chosen, rejected, valid
