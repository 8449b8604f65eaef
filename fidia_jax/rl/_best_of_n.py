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

Non-finite rewards (the one rule of :mod:`fidia_jax.rl`): a ``nan`` or ``+-inf`` reward marks a
sample whose reward is *missing* (a failed evaluation). It is **excluded**: it gets a zero
effective reward, and every estimate is the one computed from the ``m`` finite samples alone, as
if the group had been drawn with ``n = m`` (weights ``C(.)/C(m, k)``, ``k/m``, ...). The rule
needs no host check, so it holds unchanged under ``jit`` / ``vmap``. When ``m < k`` (too few
finite samples to estimate anything) the estimates ``max_at_k`` / ``pass_at_k`` are ``nan`` and
the effective rewards are all zero (no gradient signal).

Effective rewards with a baseline are computed on ``g - min(g)`` (exact for a tied group, so a
tied group gets exactly zero, at any offset).

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
import warnings
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
def _max_weights(n: int, k: int) -> np.ndarray:
    """Float64 order-statistic weights of max@k over 1-based sorted ranks ``i = 1..n``:
    ``C(i-1, k-1) / C(n, k)``."""
    total = math.comb(n, k)
    return np.array([_ratio(_comb(i - 1, k - 1), total) for i in range(1, n + 1)], np.float64)


def _split(num: int, den: int) -> tuple[float, int]:
    """``num / den = mant * 2**exp`` with ``mant`` in ``[0.5, 1]`` rounded once to float64.

    Exact integer arithmetic: no overflow or underflow however large ``C(n, k)`` is.
    """
    if num == 0:
        return 0.0, 0
    exp = num.bit_length() - den.bit_length()
    mant = (num << max(-exp, 0)) / (den << max(exp, 0))  # in (0.5, 2), correctly rounded
    if mant >= 1.0:
        mant, exp = mant / 2, exp + 1
    return mant, exp


def _split_array(pairs) -> tuple[np.ndarray, np.ndarray]:
    mant, exp = zip(*pairs, strict=True)
    return np.array(mant, np.float64), np.array(exp, np.int32)


@functools.lru_cache(maxsize=256)
def _tables(n: int, k: int) -> dict[str, tuple[np.ndarray, np.ndarray] | np.ndarray]:
    """Weights for every number ``m = 0..n`` of finite samples, in O(n) memory.

    The weights of a group of ``m`` samples are those of ``n`` samples times one factor per
    ``m`` (rank ``i <= m``)::

        C(i-1, k-1) / C(m, k)    = [C(i-1, k-1) / C(n, k)]     * [C(n, k) / C(m, k)]
        C(j-1, k-1) / C(m-1, k)  = [C(j-1, k-1) / C(n-1, k)]   * [C(n-1, k) / C(m-1, k)]

    so a table holds the ``n``-sample weights (keys ``max`` = ``C(i-1, k-1) / C(n, k)``,
    ``up`` = ``C(j-2, k-2) / C(n, k)``, ``down`` = ``C(j-1, k-2) / C(n, k)``, ``below`` =
    ``C(j-1, k-1) / C(n-1, k)``, ``above`` = ``C(j-2, k-1) / C(n-1, k)``) and the factors
    (``scale`` for the first three, zero when ``m < k``; ``scale_loo`` for the last two, zero
    when ``m <= k``), each split into a float64 mantissa and an int32 power of two
    (:func:`_split`), so neither side under- or overflows for large ``n``; ``kn[m] = k / m`` (0
    at ``m = 0``). At ``m = n`` the factor is exactly 1 and the weights are bit-identical to
    those of a group without excluded samples.
    """
    total, total_loo = math.comb(n, k), math.comb(n - 1, k) if n > k else 0
    ranks = range(1, n + 1)
    out: dict = {
        "max": _split_array(_split(_comb(i - 1, k - 1), total) for i in ranks),
        "up": _split_array(_split(_comb(j - 2, k - 2), total) for j in ranks),
        "down": _split_array(_split(_comb(j - 1, k - 2), total) for j in ranks),
        "below": _split_array(_split(_comb(j - 1, k - 1), total_loo or 1) for j in ranks),
        "above": _split_array(_split(_comb(j - 2, k - 1), total_loo or 1) for j in ranks),
        "scale": _split_array(
            _split(total, math.comb(m, k)) if m >= k else (0.0, 0) for m in range(n + 1)
        ),
        "scale_loo": _split_array(
            _split(total_loo, math.comb(m - 1, k)) if m > k else (0.0, 0) for m in range(n + 1)
        ),
        "kn": np.array([k / m if m else 0.0 for m in range(n + 1)], np.float64),
    }
    return out


def _row(n: int, k: int, name: str, m: jax.Array, dtype) -> jax.Array:
    """The weights ``name`` of a group of ``m`` (traced) finite samples, ``(n,)`` in ``dtype``
    (zero beyond rank ``m``); ``kn`` is the scalar ``k / m``."""
    tables = _tables(n, k)
    if name == "kn":
        return jnp.asarray(tables["kn"], dtype)[m]
    mant, exp = tables[name]
    f_mant, f_exp = tables["scale_loo" if name in ("below", "above") else "scale"]
    w = jnp.ldexp(
        jnp.asarray(mant, dtype) * jnp.asarray(f_mant, dtype)[m],
        jnp.asarray(exp, jnp.int32) + jnp.asarray(f_exp, jnp.int32)[m],
    )
    return jnp.where(jnp.arange(n) < m, w, jnp.zeros((), dtype))


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
    _checks.assert_rank(
        rewards_n, 1, "rewards_n", where=name, detail="one stream of n samples; vmap to batch"
    )
    _checks.assert_min_length(rewards_n, 1, "rewards_n", where=name, what="samples")
    return rewards_n


def _check_rewards(rewards_n, name: str) -> jax.Array:
    rewards_n = _check_stream(rewards_n, name)
    _checks.assert_floating(rewards_n, "rewards_n", where=name)
    return rewards_n


def _sort(rewards_n: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """Stable ascending sort with the non-finite (excluded) samples last.

    Returns ``(g, order, valid, m)``: the sorted rewards with excluded slots set to 0 (so that
    zero weights keep them out of every sum), the permutation, ``valid = (arange(n) < m)`` and
    the number ``m`` of finite samples (int32). Without excluded samples this is a plain stable
    sort.
    """
    finite = jnp.isfinite(rewards_n)
    order = jnp.argsort(jnp.where(finite, rewards_n, jnp.inf), stable=True)
    valid = finite[order]
    g = jnp.where(valid, rewards_n[order], jnp.zeros((), rewards_n.dtype))
    return g, order, valid, jnp.sum(finite, dtype=jnp.int32)


def _unsort(
    values_sorted: jax.Array, order: jax.Array, g_sorted: jax.Array, valid: jax.Array
) -> jax.Array:
    """Scatter back to input order; tied rewards all take the value of their group's first rank.

    The closed forms give tied samples the same value in exact arithmetic; copying the first one
    makes that hold bit-for-bit too (no rounding asymmetry between tied samples). Excluded
    (non-finite) samples get exactly 0.
    """
    n = g_sorted.shape[0]
    idx = jnp.arange(n)
    is_new = jnp.concatenate([jnp.ones((1,), bool), g_sorted[1:] != g_sorted[:-1]]) | ~valid
    group_start = jax.lax.cummax(jnp.where(is_new, idx, 0), axis=0)
    values_sorted = jnp.where(valid, values_sorted[group_start], jnp.zeros((), values_sorted.dtype))
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
    return _max_weights(int(n), k).copy()


def _warn_excluded(rewards_n: jax.Array, where: str) -> None:
    """Tells the caller (a ``UserWarning``, concrete input only) that non-finite rewards were
    excluded as missing samples; traced input cannot warn (the rule is the same)."""
    if rewards_n.dtype == jnp.bool_ or not _checks.is_concrete(rewards_n):
        return
    values = np.asarray(rewards_n)
    bad = ~np.isfinite(values)
    if bad.any():
        warnings.warn(
            f"{where}: {int(bad.sum())} of {values.size} rewards are non-finite (nan/inf) and "
            f"were excluded as missing samples (first at index {int(np.flatnonzero(bad)[0])}); "
            f"the estimate uses the {int((~bad).sum())} finite ones",
            UserWarning,
            stacklevel=3,
        )


def max_at_k(rewards_n: jax.Array, k: int) -> jax.Array:
    """Unbiased estimate of ``E[max of k i.i.d. rewards]`` from ``n >= k`` samples.

    ``rho = sum_i C(i-1, k-1) / C(n, k) * g_(i)`` over the ascending order statistics: the mean
    of ``max`` over all ``C(n, k)`` size-``k`` subsets. ``k = 1`` is the sample mean, ``k = n``
    the sample maximum. Also the evaluation metric ``max@N``.

    Args:
      rewards_n: ``(n,)`` floating rewards of one stream. Non-finite entries are excluded
        (module docstring): the estimate is that of the ``m`` finite samples.
      k: static int, ``1 <= k <= n``.

    Returns:
      Scalar of ``rewards_n.dtype``; ``nan`` when fewer than ``k`` rewards are finite.

    Raises:
      ValueError: rank != 1, non-floating dtype, or ``k`` outside ``[1, n]``.

    Warns:
      UserWarning: (concrete input) some rewards are non-finite and were excluded; the message
        gives their count and the first index. Under ``jit`` / ``vmap`` nothing can warn.

    Example:
      >>> float(max_at_k(jnp.array([3.0, 1.0, 2.0]), 2))  # (2 + 3 + 3) / 3
      2.6666...
      >>> import warnings
      >>> with warnings.catch_warnings(record=True) as caught:
      ...     warnings.simplefilter("always")
      ...     float(max_at_k(jnp.array([3.0, jnp.nan, 1.0, 2.0]), 2))  # the nan is excluded
      2.6666...
      >>> str(caught[0].message).split(";")[0]
      'max_at_k: 1 of 4 rewards are non-finite (nan/inf) and were excluded as missing samples (first at index 1)'
    """
    rewards_n = _check_rewards(rewards_n, "max_at_k")
    n = rewards_n.shape[0]
    k = _check_k(n, k, "max_at_k")
    _warn_excluded(rewards_n, "max_at_k")
    sorted_n, _, _, m = _sort(rewards_n)
    w_max = _row(n, k, "max", m, rewards_n.dtype)
    estimate = jnp.sum(w_max * sorted_n)
    return jnp.where(m >= k, estimate, jnp.full((), jnp.nan, rewards_n.dtype))


def max_at_k_effective_rewards(
    rewards_n: jax.Array, k: int, baseline: Baseline = "loo-1"
) -> jax.Array:
    """Per-sample effective rewards for an unbiased policy gradient of ``E[max of k]``.

    ``sum_i s_i * grad log pi(x_i)`` is unbiased for ``grad E[max of k]`` ("sum" convention;
    the k = 1 ``loo-1`` case is RLOO's ``(r_i - mean_{j != i} r_j) / n``). O(n log n): one sort,
    prefix/suffix sums, one scatter. See the module docstring for the closed forms.

    Args:
      rewards_n: ``(n,)`` floating rewards of one stream. Non-finite entries are excluded
        (module docstring): they get 0 and the others are the effective rewards of the group
        of the ``m`` finite samples; all zeros when there are too few (``m < k``, or ``m <= k``
        for ``"loo"``).
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
        _checks.assert_min_length(
            rewards_n, 2, "rewards_n", where=name, what="samples for a leave-one-out baseline"
        )
    if baseline == "loo-1" and k == 1:
        baseline = "loo"
    if baseline == "loo" and k >= n:
        raise ValueError(
            f"{name}: baseline='loo' needs k < n (the other n-1 samples must hold a k-subset), "
            f"got k={k}, n={n}; use baseline='loo-1'."
        )
    dtype = rewards_n.dtype
    g, order, valid, m = _sort(rewards_n)
    # Weights of the group of the m finite samples (row n: no sample excluded).
    w_max = _row(n, k, "max", m, dtype)

    if baseline == "none":
        # s_(i) = w_max[i] g_(i) + sum_{j>i} w_up[j] g_(j) (not shift-invariant: no centring).
        wg_up = _row(n, k, "up", m, dtype) * g
        above = jnp.cumsum(wg_up[::-1])[::-1] - wg_up
        return _unsort(w_max * g + above, order, g, valid)

    # With a baseline the weights of each s_(i) sum to 0, so s is invariant to a shift of the
    # rewards: work on g - min(g) (0 in excluded slots), so that a large common offset cannot
    # cancel away float32 digits and a tied group gives exactly 0.
    g0 = jnp.where(valid, g - g[0], jnp.zeros((), dtype))
    if baseline == "loo-1":
        # s_(i) = w_max[i] g_(i) - sum_{j<i} w_down[j] g_(j).
        wg = _row(n, k, "down", m, dtype) * g0
        below = jnp.cumsum(wg) - wg
        # Exact value is >= 0; clip rounding noise.
        return _unsort(jnp.maximum(w_max * g0 - below, 0.0), order, g, valid)

    # "loo": s_(i) = w_max[i] g_(i) + sum_{j>i} w_up[j] g_(j) - b_(i) with
    # b_(i) = (k/m) * rho_k(others); others' ranks: j (j < i) and j-1 (j > i).
    # rho_k(others) = [sum_{j<i} C(j-1,k-1) g_j + sum_{j>i} C(j-2,k-1) g_j] / C(m-1,k)
    wg_up = _row(n, k, "up", m, dtype) * g0
    above = jnp.cumsum(wg_up[::-1])[::-1] - wg_up
    ag = _row(n, k, "below", m, dtype) * g0
    bg = _row(n, k, "above", m, dtype) * g0
    below = jnp.cumsum(ag) - ag
    above_b = jnp.cumsum(bg[::-1])[::-1] - bg
    s = w_max * g0 + above - _row(n, k, "kn", m, dtype) * (below + above_b)
    # Fewer than k + 1 finite samples: no leave-one-out baseline, no signal.
    return _unsort(jnp.where(m > k, s, jnp.zeros((), dtype)), order, g, valid)


def _binary(
    rewards_n, name: str, threshold: float | None
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Successes, finite mask and an ``invalid`` flag of a binary stream.

    Returns ``(f, finite, invalid)``: ``f`` the 0/1 successes as floats (0 in excluded
    non-finite slots; float32 for bool input), ``finite`` the mask of samples kept, and
    ``invalid`` (a ``()`` bool) true when ``threshold is None`` and a finite reward is neither 0
    nor 1. Concrete input with such a reward raises ``ValueError`` here; traced input cannot,
    and the caller turns ``invalid`` into a ``nan`` result.
    """
    rewards_n = _check_stream(rewards_n, name)
    _checks.assert_type(
        rewards_n, (jnp.bool_, jnp.floating), "rewards_n", where=name, detail="0/1 values"
    )
    if threshold is not None and not isinstance(threshold, (int, float, np.floating, np.integer)):
        raise ValueError(
            f"{name}: threshold must be a Python float or None, got {type(threshold).__name__}."
        )
    if rewards_n.dtype == jnp.bool_:
        return (rewards_n.astype(jnp.float32), jnp.ones(rewards_n.shape, bool), jnp.zeros((), bool))
    finite = jnp.isfinite(rewards_n)
    if threshold is None:
        binary = (rewards_n == 0) | (rewards_n == 1)
        invalid = jnp.any(finite & ~binary)
        if _checks.is_concrete(rewards_n) and bool(invalid):
            values = np.asarray(rewards_n)
            bad = np.flatnonzero(np.isfinite(values) & (values != 0) & (values != 1))
            first = float(values[bad[0]])
            raise ValueError(
                f"{name}: rewards_n must be binary (0/1 or bool), got {first:.7g} at "
                f"index {int(bad[0])} ({bad.size} non-binary value(s)); pass threshold=t to "
                f"count rewards > t as successes, or use max_at_k for real-valued rewards."
            )
        success = rewards_n > 0.5
    else:
        invalid = jnp.zeros((), bool)
        success = rewards_n > threshold
    f = (success & finite).astype(rewards_n.dtype)
    return f, finite, invalid


def _comb_ratio(top: jax.Array, n, m: int, dtype) -> jax.Array:
    """``C(top, m) / C(n, m)`` for traced integer-valued ``top <= n`` as a stable product.

    ``n`` is a Python int or a traced integer (the number of finite samples), ``n >= m``.
    """
    if m == 0:
        return jnp.ones((), dtype)
    j = jnp.arange(m, dtype=dtype)
    factors = jnp.maximum(top.astype(dtype) - j, 0.0) / (jnp.asarray(n).astype(dtype) - j)
    return jnp.prod(factors)


def pass_at_k(rewards_n: jax.Array, k: int, *, threshold: float | None = None) -> jax.Array:
    """Unbiased estimate of ``pass@k = 1 - (1 - p)^k`` from ``n >= k`` binary rewards.

    ``1 - C(n - c, k) / C(n, k)`` with ``c`` the number of successes, evaluated as the product
    ``prod_{j<k} (n - c - j) / (n - j)`` (no large binomials). Equals ``max_at_k`` on 0/1 input.

    Args:
      rewards_n: ``(n,)`` bool, or floating values in ``{0, 1}``. Non-finite entries are
        excluded (module docstring): the estimate is that of the ``m`` finite samples.
      k: static int, ``1 <= k <= n``.
      threshold: ``None`` (default): the rewards must be binary; a float ``t``: a finite reward
        ``> t`` is a success (explicit binarisation of real-valued rewards).

    Returns:
      Scalar float (float32 for bool input); ``nan`` when fewer than ``k`` rewards are finite,
      or, under ``jit`` / ``vmap`` (where the check below cannot raise), when ``threshold`` is
      ``None`` and a finite reward is not 0 or 1.

    Raises:
      ValueError: bad rank/dtype, ``k`` outside ``[1, n]``, or (concrete input,
        ``threshold=None``) a finite reward other than 0 and 1.

    Warns:
      UserWarning: (concrete input) some rewards are non-finite and were excluded as missing;
        the message gives their count and the first index (nothing under ``jit`` / ``vmap``).

    Example:
      >>> float(pass_at_k(jnp.array([1.0, 0.0, 0.0, 1.0]), 2))  # 1 - C(2, 2) / C(4, 2)
      0.8333...
      >>> float(pass_at_k(jnp.array([0.95, 0.3, 0.0, -1.0]), 2, threshold=0.5))  # 1 - 3/6
      0.5

    References:
      Chen et al. 2021, https://arxiv.org/abs/2107.03374 ; Walder & Karkhanis 2025.
    """
    f, finite, invalid = _binary(rewards_n, "pass_at_k", threshold)
    n = f.shape[0]
    k = _check_k(n, k, "pass_at_k")
    _warn_excluded(jnp.asarray(rewards_n), "pass_at_k")
    m = jnp.sum(finite, dtype=jnp.int32)
    c = jnp.sum(f > 0.5)
    estimate = 1.0 - _comb_ratio(m - c, m, k, f.dtype)
    return jnp.where((m >= k) & ~invalid, estimate, jnp.full((), jnp.nan, f.dtype))


def pass_at_k_effective_rewards(
    rewards_n: jax.Array,
    k: int,
    baseline: Literal["none", "loo-1"] = "loo-1",
    *,
    threshold: float | None = None,
) -> jax.Array:
    """Effective rewards for an unbiased gradient of ``pass@k`` from binary rewards.

    Closed forms ("sum" convention, ``c`` successes among ``n``):

    * ``"none"``: ``k/n`` for a success, ``(k/n) * (1 - C(n-1-c, k-1) / C(n-1, k-1))`` for a
      failure (the leave-one-out pass@(k-1) of the others).
    * ``"loo-1"``: ``C(n-c, k-1) / C(n, k)`` for a success (the share of subsets in which it is
      the only success), 0 for a failure; for ``k = 1``, RLOO: ``(f_i - mean_{j!=i} f_j) / n``.
      Identical to :func:`max_at_k_effective_rewards` on 0/1 input.

    Args:
      rewards_n: ``(n,)`` bool or floating 0/1. Non-finite entries are excluded (module
        docstring): they get 0 and ``n`` above becomes the number ``m`` of finite samples; all
        zeros when ``m < k`` (``m < 2`` for ``k = 1``).
      k: static int, ``1 <= k <= n``.
      baseline: ``"loo-1"`` (default) or ``"none"``.
      threshold: as in :func:`pass_at_k`.

    Returns:
      ``(n,)`` float effective rewards in the input order; all ``nan`` under ``jit`` / ``vmap``
      when ``threshold`` is ``None`` and a finite reward is not 0 or 1.

    Raises:
      ValueError: bad rank/dtype, ``k`` outside ``[1, n]``, unknown baseline, or (concrete
        input, ``threshold=None``) a finite reward other than 0 and 1.
    """
    name = "pass_at_k_effective_rewards"
    f, finite, invalid = _binary(rewards_n, name, threshold)
    n = f.shape[0]
    k = _check_k(n, k, name)
    _checks.assert_in(baseline, ("none", "loo-1"), "baseline", where=name)
    dtype = f.dtype
    m = jnp.sum(finite, dtype=jnp.int32)
    c = jnp.sum(f)
    kn = _row(n, k, "kn", m, dtype)
    zero = jnp.zeros((), dtype)
    if baseline == "none":
        fail_value = kn * (1.0 - _comb_ratio(m - 1 - c, m - 1, k - 1, dtype))
        s = jnp.where(f > 0, kn, fail_value)
        enough = m >= k
    elif k == 1:
        _checks.assert_min_length(
            f, 2, "rewards_n", where=name, what="samples for a leave-one-out baseline"
        )
        s = (f - (c - f) / (m - 1)) / m
        enough = m >= 2
    else:
        # C(m-c, k-1) / C(m, k) = (k/m) * C(m-c, k-1) / C(m-1, k-1)
        success_value = kn * _comb_ratio(m - c, m - 1, k - 1, dtype)
        s = jnp.where(f > 0, success_value, zero)
        enough = m >= k
    s = jnp.where(finite & enough, s, zero)
    return jnp.where(invalid, jnp.full((), jnp.nan, dtype), s)
