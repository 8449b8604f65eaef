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

Non-finite rewards follow the one rule of :mod:`fidia_jax.rl`: a ``nan`` / ``+-inf`` reward is a
missing sample. It is excluded with a zero advantage and the others get the advantages of the
group of the ``m`` finite samples (``n`` replaced by ``m`` in every formula below); with too few
finite samples (``m < 2``, or ``m < k`` for PKPO) every advantage is zero. The rule is
branch-free, so it holds under ``jit`` / ``vmap`` (where nothing could be raised).

Tied groups get exactly zero advantages, at any offset and scale: every estimator centres the
rewards on the group minimum (``r - min r`` is exact for ties, and a float32 mean of a large
offset is not), and the std-normalised ones (GRPO, PKPO with ``group_norm``) treat a group whose
spread ``max r - min r`` is at most ``TIE_ULPS`` units in the last place of its largest
magnitude (``TIE_ULPS * finfo.eps * max |r|``) as tied: such a spread is float rounding, which
dividing by the std would otherwise blow up to O(1) advantages. RLOO and GRPO advantages sum
to zero (up to float rounding relative to the spread); PKPO's loo-1 effective rewards are
non-negative for ``k >= 2`` and do not.

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

#: A group whose spread is at most this many float ulps of its largest magnitude counts as tied
#: in the std-normalised advantages (GRPO, PKPO with ``group_norm``): all zeros.
TIE_ULPS = 4


def _check_group(rewards_n, name: str) -> jax.Array:
    """``rewards_n`` as a floating rank-1 array of ``n >= 2`` samples."""
    rewards_n = jnp.asarray(rewards_n)
    _checks.assert_rank(rewards_n, 1, "rewards_n", where=name, detail="vmap to batch")
    _checks.assert_min_length(rewards_n, 2, "rewards_n", where=name, what="samples")
    _checks.assert_floating(rewards_n, "rewards_n", where=name)
    return rewards_n


def _group_std(rewards_n: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """Statistics of the finite samples of one group, centred on their minimum.

    Returns ``(centred, std, m, tied)``: ``x - mean x`` with ``x = r - min r`` (0 at excluded
    samples), the sample standard deviation (``ddof = 1``), the number ``m`` of finite samples
    (as ``rewards_n.dtype``) and ``tied``: ``m < 2`` or a spread of at most ``TIE_ULPS`` ulps of
    the largest magnitude (then the std carries no information).
    """
    dtype = rewards_n.dtype
    zero = jnp.zeros((), dtype)
    finite = jnp.isfinite(rewards_n)
    m = jnp.sum(finite).astype(dtype)
    lo = jnp.min(jnp.where(finite, rewards_n, jnp.inf))
    x = jnp.where(finite, rewards_n - lo, zero)  # exact zeros for a tied group
    centred = jnp.where(finite, x - jnp.sum(x) / m, zero)
    std = jnp.sqrt(jnp.sum(centred * centred) / (m - 1))
    magnitude = jnp.max(jnp.where(finite, jnp.abs(rewards_n), zero))
    resolution = TIE_ULPS * jnp.finfo(dtype).eps * magnitude
    tied = (m < 2) | (jnp.max(x) <= resolution)
    return centred, std, m, tied


def _normalise(values_n: jax.Array, std: jax.Array, eps, tied: jax.Array) -> jax.Array:
    """``values_n / (std + eps)``, exactly zero for a tied group (no 0/0 with ``eps = 0``).

    A group whose standard deviation underflows to 0 (a spread near the smallest normal float,
    flushed to zero on CPU) counts as tied too, so ``eps = 0`` never divides by zero.
    """
    zero = jnp.zeros((), values_n.dtype)
    tied = tied | ~(std + eps > 0)
    denom = jnp.where(tied, jnp.ones((), values_n.dtype), std + eps)
    return jnp.where(tied, zero, values_n / denom)


def rloo_advantages(rewards_n: jax.Array) -> jax.Array:
    """RLOO: ``A_i = (r_i - mean_{j != i} r_j) / n``.

    Args:
      rewards_n: ``(n,)`` float rewards of one group, ``n >= 2``; non-finite ones are excluded
        (module docstring).

    Returns:
      ``(n,)`` advantages, same dtype (they sum to 0; exactly 0 for a tied group).

    Raises:
      ValueError: rank != 1, non-floating dtype or ``n < 2``.

    Example:
      >>> from fidia_jax import rl
      >>> print(rl.rloo_advantages(jnp.array([1.0, 2.0, 6.0])).round(4))  # (1 - 4) / 3, ...
      [-1.  -0.5  1.5]
      >>> print(rl.rloo_advantages(jnp.array([1.0, jnp.nan, 2.0, 6.0])).round(4))  # excluded
      [-1.   0.  -0.5  1.5]
    """
    rewards_n = _check_group(rewards_n, "rloo_advantages")
    # RLOO is the k = 1 case of the Best-of-N effective rewards: (r_i - mean of the others) / n.
    return max_at_k_effective_rewards(rewards_n, 1, "loo-1")


def grpo_advantages(rewards_n: jax.Array, eps: float = 1e-6) -> jax.Array:
    """GRPO: ``A_i = (r_i - mean r) / (std r + eps) / n`` with the unbiased (``ddof = 1``) std.

    Args:
      rewards_n: ``(n,)`` float rewards of one group, ``n >= 2``; non-finite ones are excluded
        (module docstring).
      eps: added to the standard deviation (``>= 0``; 0 is safe: a tied group, including one
        whose spread is within ``TIE_ULPS`` ulps, gives exact zeros whatever ``eps``).

    Returns:
      ``(n,)`` advantages, same dtype (they sum to 0 up to rounding).

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
    centred, std, m, tied = _group_std(rewards_n)
    return _normalise(centred, std, eps, tied) / jnp.maximum(m, 1)


def pkpo_advantages(
    rewards_n: jax.Array, k: int, *, group_norm: bool = False, eps: float = 1e-6
) -> jax.Array:
    """PKPO ``loo-1`` effective rewards for Best-of-``k`` (the FIDIA advantage).

    ``max_at_k_effective_rewards(rewards_n, k, "loo-1")``: a sample gets
    ``(1/C(n,k)) sum_{|J|=k-1, i not in J} (r_i - max r_J)_+``, i.e. credit only for how much
    it beats the others it would be compared with; ``k = 1`` is :func:`rloo_advantages`.

    Args:
      rewards_n: ``(n,)`` float rewards of one group, ``n >= 2``; non-finite ones are excluded
        (module docstring).
      k: static int in ``[1, n]``, the Best-of-N size targeted.
      group_norm: divide by the group's reward standard deviation (``ddof = 1``) plus ``eps``,
        as GRPO does to RLOO. The estimate is then that of ``grad E[max of k] / std``:
        scale-free per group, at the price of the small bias GRPO also has (the std is
        estimated from the same samples). Our choice (FIDIA's ``train.fidia_group_norm``), not
        from the PKPO paper.
      eps: see ``group_norm``.

    Returns:
      ``(n,)`` effective rewards, same dtype (non-negative for ``k >= 2``; exactly 0 for a
      tied group).

    Raises:
      ValueError: rank != 1, non-floating dtype, ``n < 2`` or ``k`` outside ``[1, n]``.

    Example:
      >>> from fidia_jax import rl
      >>> print(rl.pkpo_advantages(jnp.array([1.0, 2.0, 6.0]), 3))  # k = n: best minus runner-up
      [0. 0. 4.]
    """
    rewards_n = _check_group(rewards_n, "pkpo_advantages")
    eff = max_at_k_effective_rewards(rewards_n, k, "loo-1")
    if not group_norm:
        return eff
    _, std, _, tied = _group_std(rewards_n)
    return _normalise(eff, std, eps, tied)
