"""Best-of-N estimators: unbiased max@k / pass@k and their policy-gradient effective rewards.

Setting: a policy draws ``n`` i.i.d. samples for one prompt (one backbone), each gets a scalar
reward ``rewards_n[i]``; the Best-of-N protocol keeps the best of ``k <= n`` samples. The target
is ``E[max of k rewards]`` (``max@k``), or for 0/1 rewards ``pass@k = 1 - (1 - p)^k``.

Every function here acts on a *single stream* (one prompt, shape ``(n,)``) and is batched with
``jax.vmap`` (rlax style). ``k`` is a static Python ``int``: the combinatorial weights depend only
on ``(n, k)`` and are computed once, exactly (integer binomials, then one division to float64),
and baked into the trace as constants, so there is no overflow or cancellation for any ``n``.

Notation (used in all docstrings): sort the rewards ascending, ``g_(1) <= ... <= g_(n)`` (stable
sort; 1-based ranks), and write ``C(a, b)`` for the binomial coefficient (0 when ``b < 0`` or
``b > a``).

* ``max_at_k``: ``rho_k = sum_i C(i-1, k-1) / C(n, k) * g_(i)``, the average of ``max`` over all
  ``C(n, k)`` size-``k`` subsets of the batch, hence unbiased for ``E[max of k]``.
* Effective rewards ``s_i`` such that ``sum_i s_i * grad log pi(x_i)`` is an unbiased estimate of
  ``grad E[max of k]`` (the "sum" convention: a loss ``-sum_i s_i * log pi(x_i)``; for a loss
  that *averages* over the ``n`` samples multiply by ``n``). Without baseline,
  ``s_i = (1/C(n,k)) * sum_{|I|=k, I contains i} max(g_I)``; sorted closed form
  ``s_(i) = [C(i-1, k-1) g_(i) + sum_{j>i} C(j-2, k-2) g_(j)] / C(n, k)``.
* Baselines: any ``b_i`` that does not depend on sample ``i`` keeps the estimate unbiased.

  - ``"loo"``: ``b_i = (k/n) * rho_k(rewards without i)`` (needs ``k < n``).
  - ``"loo-1"`` (the lowest-variance variant): subtract, inside every subset ``I`` containing
    ``i``, the max of the *other* ``k-1`` members, i.e. ``b_i = (k/n) * rho_{k-1}(rewards
    without i)``. Then ``s_i = (1/C(n,k)) * sum_{|J|=k-1, i not in J} (g_i - max g_J)_+``,
    with sorted closed form (hockey-stick identity)
    ``s_(i) = [C(i-1, k-1) g_(i) - sum_{j<i} C(j-1, k-2) g_(j)] / C(n, k)``.
    A sample only gets credit for how much it beats the others it would be compared with;
    samples never get negative weight. ``k = n`` gives ``g_(n) - g_(n-1)`` to the best sample and
    0 to every other one. For ``k = 1`` the "other ``k-1`` members" set is empty; there we use
    the mean of the other samples (the ``"loo"`` baseline), so ``k = 1`` is exactly REINFORCE
    with a leave-one-out baseline, ``s_i = (g_i - mean_{j != i} g_j) / n`` (RLOO).

Ties are safe: tied samples receive identical effective rewards (the closed forms above are
invariant to how a stable sort orders equal values), so outputs are permutation-equivariant.

The formulas are our reconstruction of PKPO's estimators from the combinatorial definitions
(average over all size-``k`` subsets); the sorted closed forms are derived in
``docs/fidia_rewards.md`` and checked against brute-force enumeration over all subsets in
``tests/rl/test_best_of_n.py``.

References:
  Walder & Karkhanis, "Pass@K Policy Optimization: Solving Harder Reinforcement Learning
  Problems", 2025. https://arxiv.org/abs/2505.15201
  Chen et al., "Evaluating Large Language Models Trained on Code", 2021 (unbiased pass@k).
  https://arxiv.org/abs/2107.03374
  Kool, van Hoof & Welling, "Buy 4 REINFORCE Samples, Get a Baseline for Free!", ICLR 2019
  workshop (RLOO).
"""

from __future__ import annotations

import functools
import math
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from fidia_jax import _checks

__all__ = [
    "max_at_k",
    "max_at_k_weights",
    "max_at_k_effective_rewards",
    "pass_at_k",
    "pass_at_k_effective_rewards",
]

Baseline = Literal["none", "loo", "loo-1"]
_BASELINES = ("none", "loo", "loo-1")


def _comb(a: int, b: int) -> int:
    return math.comb(a, b) if 0 <= b <= a else 0


def _ratio(num: int, den: int) -> float:
    """``num / den`` rounded once to float64 (Python's int true division is correctly rounded)."""
    return num / den if num else 0.0


@functools.lru_cache(maxsize=256)
def _weights(n: int, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Float64 weight vectors over 1-based sorted ranks ``i = 1..n`` for ``(n, k)``.

    Returns ``(w_max, w_up, w_down)``:
      w_max[i]  = C(i-1, k-1) / C(n, k)      (order-statistic weight of max@k)
      w_up[j]   = C(j-2, k-2) / C(n, k)      (j's weight in s_i for i < j, no baseline)
      w_down[j] = C(j-1, k-2) / C(n, k)      (j's weight in the loo-1 baseline for i > j)
    """
    total = math.comb(n, k)
    ranks = range(1, n + 1)
    w_max = np.array([_ratio(_comb(i - 1, k - 1), total) for i in ranks], np.float64)
    w_up = np.array([_ratio(_comb(j - 2, k - 2), total) for j in ranks], np.float64)
    w_down = np.array([_ratio(_comb(j - 1, k - 2), total) for j in ranks], np.float64)
    return w_max, w_up, w_down


@functools.lru_cache(maxsize=256)
def _loo_weights(n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``C(j-1, k-1) / C(n-1, k)`` and ``C(j-2, k-1) / C(n-1, k)`` over ranks ``j = 1..n`` (k < n)."""
    total = math.comb(n - 1, k)
    ranks = range(1, n + 1)
    below = np.array([_ratio(_comb(j - 1, k - 1), total) for j in ranks], np.float64)
    above = np.array([_ratio(_comb(j - 2, k - 1), total) for j in ranks], np.float64)
    return below, above


def _check_k(n: int, k, name: str) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise ValueError(f"{name}: k must be a static Python int, got {type(k).__name__}.")
    k = int(k)
    if not 1 <= k <= n:
        raise ValueError(f"{name}: need 1 <= k <= n, got k={k} with n={n} samples.")
    return k


def _check_stream(rewards_n, name: str) -> jax.Array:
    """``rewards_n`` as an array of rank 1 with at least one sample (any dtype)."""
    rewards_n = jnp.asarray(rewards_n)
    _checks.assert_rank(rewards_n, 1, "rewards_n", where=name,
                        detail="one stream of n samples; vmap to batch")
    _checks.assert_min_length(rewards_n, 1, "rewards_n", where=name, what="samples")
    return rewards_n


def _check_rewards(rewards_n, name: str) -> jax.Array:
    rewards_n = _check_stream(rewards_n, name)
    _checks.assert_floating(rewards_n, "rewards_n", where=name)
    return rewards_n


def _sort(rewards_n: jax.Array) -> tuple[jax.Array, jax.Array]:
    order = jnp.argsort(rewards_n, stable=True)
    return rewards_n[order], order


def _unsort(values_sorted: jax.Array, order: jax.Array, g_sorted: jax.Array) -> jax.Array:
    """Scatter back to input order; tied rewards all take the value of their group's first rank.

    The closed forms give tied samples the same value in exact arithmetic; copying the first one
    makes that hold bit-for-bit too (no rounding asymmetry between tied samples).
    """
    n = g_sorted.shape[0]
    idx = jnp.arange(n)
    is_new = jnp.concatenate([jnp.ones((1,), bool), g_sorted[1:] != g_sorted[:-1]])
    group_start = jax.lax.cummax(jnp.where(is_new, idx, 0), axis=0)
    values_sorted = values_sorted[group_start]
    return jnp.zeros_like(values_sorted).at[order].set(values_sorted)


def max_at_k_weights(n: int, k: int) -> np.ndarray:
    """``(n,)`` float64 weights ``C(i-1, k-1) / C(n, k)`` on the ascending order statistics.

    They are non-negative and sum to 1; ``max_at_k(r, k) == sum(w * sort(r))``.

    Raises:
      ValueError: ``k`` not an int in ``[1, n]``.
    """
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"max_at_k_weights: n must be a positive int, got {n!r}.")
    k = _check_k(int(n), k, "max_at_k_weights")
    return _weights(int(n), k)[0].copy()


def max_at_k(rewards_n: jax.Array, k: int) -> jax.Array:
    """Unbiased estimate of ``E[max of k i.i.d. rewards]`` from ``n >= k`` samples.

    ``rho = sum_i C(i-1, k-1) / C(n, k) * g_(i)`` over the ascending order statistics: the mean
    of ``max`` over all ``C(n, k)`` size-``k`` subsets. ``k = 1`` is the sample mean, ``k = n``
    the sample maximum. Also the evaluation metric ``max@N``.

    Args:
      rewards_n: ``(n,)`` floating rewards of one stream.
      k: static int, ``1 <= k <= n``.

    Returns:
      Scalar of ``rewards_n.dtype``.

    Raises:
      ValueError: rank != 1, non-floating dtype, or ``k`` outside ``[1, n]``.

    Example:
      >>> float(max_at_k(jnp.array([3.0, 1.0, 2.0]), 2))  # (2 + 3 + 3) / 3
      2.6666...
    """
    rewards_n = _check_rewards(rewards_n, "max_at_k")
    n = rewards_n.shape[0]
    k = _check_k(n, k, "max_at_k")
    w_max = jnp.asarray(_weights(n, k)[0], rewards_n.dtype)
    sorted_n, _ = _sort(rewards_n)
    return jnp.sum(w_max * sorted_n)


def max_at_k_effective_rewards(
    rewards_n: jax.Array, k: int, baseline: Baseline = "loo-1"
) -> jax.Array:
    """Per-sample effective rewards for an unbiased policy gradient of ``E[max of k]``.

    ``sum_i s_i * grad log pi(x_i)`` is unbiased for ``grad E[max of k]`` ("sum" convention;
    the k = 1 ``loo-1`` case is RLOO's ``(r_i - mean_{j != i} r_j) / n``). O(n log n): one sort,
    prefix/suffix sums, one scatter. See the module docstring for the closed forms.

    Args:
      rewards_n: ``(n,)`` floating rewards of one stream.
      k: static int, ``1 <= k <= n`` (the Best-of-N size targeted).
      baseline: ``"loo-1"`` (default, lowest variance; for ``k = 1`` it is the leave-one-out
        mean), ``"loo"`` (leave-one-out max@k of the other samples, needs ``k < n``), or
        ``"none"``.

    Returns:
      ``(n,)`` effective rewards, ``rewards_n.dtype``, in the input order.

    Raises:
      ValueError: bad rank/dtype, ``k`` outside ``[1, n]``, unknown baseline, or
        ``baseline="loo"`` with ``k == n`` (or ``n == 1`` for any leave-one-out baseline).

    References:
      Walder & Karkhanis 2025, https://arxiv.org/abs/2505.15201 (PKPO; our reconstruction).
    """
    name = "max_at_k_effective_rewards"
    rewards_n = _check_rewards(rewards_n, name)
    n = rewards_n.shape[0]
    k = _check_k(n, k, name)
    _checks.assert_in(baseline, _BASELINES, "baseline", where=name)
    if baseline != "none":
        _checks.assert_min_length(rewards_n, 2, "rewards_n", where=name,
                                  what="samples for a leave-one-out baseline")
    if baseline == "loo-1" and k == 1:
        baseline = "loo"
    if baseline == "loo" and k >= n:
        raise ValueError(
            f"{name}: baseline='loo' needs k < n (the other n-1 samples must hold a k-subset), "
            f"got k={k}, n={n}; use baseline='loo-1'."
        )
    dtype = rewards_n.dtype
    w_max64, w_up64, w_down64 = _weights(n, k)
    w_max = jnp.asarray(w_max64, dtype)
    g, order = _sort(rewards_n)

    if baseline == "loo-1":
        # s_(i) = w_max[i] g_(i) - sum_{j<i} w_down[j] g_(j). The weights of each s_(i) sum to 0
        # (it is a sum of (g_i - g_j)_+ terms), so s is invariant to a shift of the rewards:
        # work on g - min(g) so that a large common offset cannot cancel away float32 digits.
        g0 = g - g[0]
        wg = jnp.asarray(w_down64, dtype) * g0
        below = jnp.cumsum(wg) - wg
        # Exact value is >= 0; clip rounding noise.
        return _unsort(jnp.maximum(w_max * g0 - below, 0.0), order, g)

    # No baseline: s_(i) = w_max[i] g_(i) + sum_{j>i} w_up[j] g_(j)
    wg_up = jnp.asarray(w_up64, dtype) * g
    above = jnp.cumsum(wg_up[::-1])[::-1] - wg_up
    s = w_max * g + above
    if baseline == "loo":
        # b_(i) = (k/n) * rho_k(others); others' ranks: j (j < i) and j-1 (j > i).
        # rho_k(others) = [sum_{j<i} C(j-1,k-1) g_j + sum_{j>i} C(j-2,k-1) g_j] / C(n-1,k)
        a, b = _loo_weights(n, k)
        ag = jnp.asarray(a, dtype) * g
        bg = jnp.asarray(b, dtype) * g
        below = jnp.cumsum(ag) - ag
        above_b = jnp.cumsum(bg[::-1])[::-1] - bg
        s = s - jnp.asarray(k / n, dtype) * (below + above_b)
    return _unsort(s, order, g)


def _check_binary(rewards_n, name: str) -> jax.Array:
    rewards_n = _check_stream(rewards_n, name)
    _checks.assert_type(rewards_n, (jnp.bool_, jnp.floating), "rewards_n", where=name,
                        detail="0/1 values")
    return rewards_n.astype(jnp.float32) if rewards_n.dtype == jnp.bool_ else rewards_n


def _comb_ratio(top: jax.Array, n: int, m: int, dtype) -> jax.Array:
    """``C(top, m) / C(n, m)`` for traced integer-valued ``top <= n`` as a stable product."""
    if m == 0:
        return jnp.ones((), dtype)
    j = jnp.arange(m, dtype=dtype)
    factors = jnp.maximum(top.astype(dtype) - j, 0.0) / (jnp.asarray(n, dtype) - j)
    return jnp.prod(factors)


def pass_at_k(rewards_n: jax.Array, k: int) -> jax.Array:
    """Unbiased estimate of ``pass@k = 1 - (1 - p)^k`` from ``n >= k`` binary rewards.

    ``1 - C(n - c, k) / C(n, k)`` with ``c`` the number of successes, evaluated as the product
    ``prod_{j<k} (n - c - j) / (n - j)`` (no large binomials). Equals ``max_at_k`` on 0/1 input.

    Args:
      rewards_n: ``(n,)`` bool, or floating values in ``{0, 1}`` (not checked under jit).
      k: static int, ``1 <= k <= n``.

    Returns:
      Scalar float (float32 for bool input).

    Raises:
      ValueError: bad rank/dtype or ``k`` outside ``[1, n]``.

    References:
      Chen et al. 2021, https://arxiv.org/abs/2107.03374 ; Walder & Karkhanis 2025.
    """
    rewards_n = _check_binary(rewards_n, "pass_at_k")
    n = rewards_n.shape[0]
    k = _check_k(n, k, "pass_at_k")
    c = jnp.sum(rewards_n > 0.5)
    return 1.0 - _comb_ratio(n - c, n, k, rewards_n.dtype)


def pass_at_k_effective_rewards(
    rewards_n: jax.Array, k: int, baseline: Literal["none", "loo-1"] = "loo-1"
) -> jax.Array:
    """Effective rewards for an unbiased gradient of ``pass@k`` from binary rewards.

    Closed forms ("sum" convention, ``c`` successes among ``n``):

    * ``"none"``: ``k/n`` for a success, ``(k/n) * (1 - C(n-1-c, k-1) / C(n-1, k-1))`` for a
      failure (the leave-one-out pass@(k-1) of the others).
    * ``"loo-1"``: ``C(n-c, k-1) / C(n, k)`` for a success (the share of subsets in which it is
      the only success), 0 for a failure; for ``k = 1``, RLOO: ``(f_i - mean_{j!=i} f_j) / n``.
      Identical to :func:`max_at_k_effective_rewards` on 0/1 input.

    Args:
      rewards_n: ``(n,)`` bool or floating 0/1.
      k: static int, ``1 <= k <= n``.
      baseline: ``"loo-1"`` (default) or ``"none"``.

    Returns:
      ``(n,)`` float effective rewards in the input order.

    Raises:
      ValueError: bad rank/dtype, ``k`` outside ``[1, n]``, unknown baseline.
    """
    name = "pass_at_k_effective_rewards"
    rewards_n = _check_binary(rewards_n, name)
    n = rewards_n.shape[0]
    k = _check_k(n, k, name)
    _checks.assert_in(baseline, ("none", "loo-1"), "baseline", where=name)
    dtype = rewards_n.dtype
    f = (rewards_n > 0.5).astype(dtype)
    c = jnp.sum(f)
    kn = jnp.asarray(k / n, dtype)
    if baseline == "none":
        fail_value = kn * (1.0 - _comb_ratio(n - 1 - c, n - 1, k - 1, dtype))
        return jnp.where(f > 0, kn, fail_value)
    if k == 1:
        _checks.assert_min_length(rewards_n, 2, "rewards_n", where=name,
                                  what="samples for a leave-one-out baseline")
        return (f - (c - f) / (n - 1)) / n
    # C(n-c, k-1) / C(n, k) = (k/n) * C(n-c, k-1) / C(n-1, k-1)
    success_value = kn * _comb_ratio(n - c, n - 1, k - 1, dtype)
    return jnp.where(f > 0, success_value, jnp.zeros((), dtype))
