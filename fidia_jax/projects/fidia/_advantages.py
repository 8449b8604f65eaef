"""Per-sample advantages of the methods that share the FIDIA training loop.

The advantages themselves are primitives of :mod:`fidia_jax.rl` (one group ``rewards_n`` of
``n`` samples for one backbone; vmap to batch; *sum* convention: the policy loss is
``-sum_i A_i * log pi(y_i) / L_designed``). This module names them after the methods and
dispatches on the configured method:

* ``fidia``: :func:`fidia_jax.rl.pkpo_advantages` with ``k = k_bon`` (PKPO ``loo-1`` effective
  rewards, unbiased for ``grad E[max of k_bon]``); optionally divided by the group's reward std
  like GRPO (``train.fidia_group_norm``).
* ``rloo``: :func:`fidia_jax.rl.rloo_advantages`, ``(r_i - mean_{j != i} r_j) / n``.
* ``grpo``: :func:`fidia_jax.rl.grpo_advantages`, ``(r_i - mean r) / (std r + eps) / n``.
* ``dpo``: not an advantage method; :func:`fidia_jax.rl.dpo_pair` picks the best and worst of
  ``n`` samples of the frozen reference.
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

from fidia_jax import rl
from fidia_jax.rl import grpo_advantages as grpo_advantages
from fidia_jax.rl import pkpo_advantages as fidia_advantages
from fidia_jax.rl import rloo_advantages as rloo_advantages

__all__ = ["advantages", "fidia_advantages", "grpo_advantages", "rloo_advantages"]


def advantages(
    method: str,
    rewards_n: jax.Array,
    *,
    k: int,
    grpo_eps: float = 1e-6,
    fidia_group_norm: bool = False,
) -> jax.Array:
    """Dispatches to the advantage of ``method`` in ``("fidia", "rloo", "grpo")``.

    Args:
      method: the configured method.
      rewards_n: ``(n,)`` float rewards of one backbone's group, ``n >= 2``.
      k: Best-of-N size of ``fidia`` (ignored by the others).
      grpo_eps: added to the group std of ``grpo`` (and of ``fidia`` with group norm).
      fidia_group_norm: see :func:`fidia_jax.rl.pkpo_advantages` (``group_norm``).

    Returns:
      ``(n,)`` advantages, same dtype.

    Raises:
      ValueError: unknown or non-advantage method (``dpo``, ``bon``), or bad ``rewards_n``.
    """
    if method == "fidia":
        return rl.pkpo_advantages(rewards_n, k, group_norm=fidia_group_norm, eps=grpo_eps)
    if method == "rloo":
        return rl.rloo_advantages(rewards_n)
    if method == "grpo":
        return rl.grpo_advantages(rewards_n, grpo_eps)
    raise ValueError(f"advantages: method {method!r} has no per-sample advantages")
