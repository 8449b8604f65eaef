"""Per-step policy-gradient terms: the clipped-ratio (PPO) surrogate and the k3 KL estimator.

Both act elementwise on one stream of steps (tokens) ``t`` and return per-step values; the caller
chooses the reduction (mask, per-sequence normalisation, mean over samples) and batches with
``jax.vmap`` or plain broadcasting.

References:
  Schulman et al., "Proximal Policy Optimization Algorithms", 2017.
  https://arxiv.org/abs/1707.06347
  Schulman, "Approximating KL Divergence", 2020. http://joschu.net/blog/kl-approx.html
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from fidia_jax import _checks

__all__ = ["K3_LOG_RATIO_MAX", "clipped_surrogate", "k3_kl"]

#: Bound on the log-ratio ``d = log pi_ref - log pi`` inside ``exp`` in :func:`k3_kl`.
#: ``exp(20) ~ 4.9e8`` is far from float32/bfloat16 overflow (``exp(88.7)``), and a token whose
#: probability under the policy is ``e^20`` times below the reference's is far from it for any
#: practical purpose (verl clamps this log-ratio to ``[-20, 20]`` as well).
K3_LOG_RATIO_MAX = 20.0


def clipped_surrogate(ratio_t: jax.Array, advantage_t: jax.Array, clip_eps: float) -> jax.Array:
    """PPO's clipped surrogate objective per step (to be *maximised*).

    ``min(rho_t A_t, clip(rho_t, 1 - eps, 1 + eps) A_t)`` for ``eps > 0``; ``rho_t A_t`` (the
    importance-weighted policy gradient objective, no clipping) for ``eps = 0``. At
    ``rho_t = 1`` (the rollout parameters) its gradient is ``A_t grad log pi(a_t)``.

    Args:
      ratio_t: ``(T,)`` float ``pi(a_t) / pi_old(a_t)`` (``pi_old`` constant).
      advantage_t: ``(T,)`` float per-step advantages, or ``()`` for one advantage shared by
        every step (a sequence-level advantage).
      clip_eps: Python float ``>= 0`` (static); ``0`` disables clipping.

    Returns:
      ``(T,)`` per-step surrogate, ``ratio_t.dtype`` promoted with ``advantage_t``'s.

    Raises:
      ValueError: ``ratio_t`` not rank 1, ``advantage_t`` not rank 0 or 1, negative
        ``clip_eps``.

    Example:
      >>> from fidia_jax import rl
      >>> ratio_t = jnp.array([0.5, 1.0, 1.5])
      >>> print(rl.clipped_surrogate(ratio_t, jnp.array(2.0), 0.2))  # 2 * [0.5, 1.0, 1.2]
      [1.  2.  2.4]
      >>> print(rl.clipped_surrogate(ratio_t, jnp.array(-2.0), 0.2))  # -2 * [0.8, 1.0, 1.5]
      [-1.6 -2.  -3. ]

    References:
      Schulman et al. 2017, https://arxiv.org/abs/1707.06347 (eq. 7).
    """
    _checks.assert_rank(ratio_t, 1, "ratio_t", where="clipped_surrogate", detail="vmap to batch")
    _checks.assert_rank(advantage_t, (0, 1), "advantage_t", where="clipped_surrogate")
    if clip_eps < 0:
        raise ValueError(f"clipped_surrogate: clip_eps must be >= 0, got {clip_eps}.")
    surr_t = ratio_t * advantage_t
    if clip_eps == 0:
        return surr_t
    clipped_t = jnp.clip(ratio_t, 1.0 - clip_eps, 1.0 + clip_eps) * advantage_t
    return jnp.minimum(surr_t, clipped_t)


def k3_kl(logp_t: jax.Array, ref_logp_t: jax.Array) -> jax.Array:
    """Schulman's k3 estimator of ``KL(pi || pi_ref)`` per sampled step, with a clamped exponent.

    ``k3(d) = exp(d) - 1 - d`` with ``d = log pi_ref(a_t) - log pi(a_t)``, for ``a_t ~ pi``:
    non-negative, and ``E_pi[k3] = KL(pi || pi_ref)`` exactly. As a loss its gradient is that of
    ``KL(pi_ref || pi)`` (as in GRPO), not of ``KL(pi || pi_ref)``.

    Clamp: ``exp`` only sees ``min(d, K3_LOG_RATIO_MAX)`` (``= 20``). Above the bound the
    penalty continues along its tangent, ``exp(c) (1 + d - c) - 1 - d`` with ``c = 20``, so value
    and gradient stay finite (about ``4.9e8 * d``) however far the policy is from the reference
    and keep pulling it back; there the value is a lower bound of the unclamped ``k3`` (``exp``
    is convex). For ``d <= 20`` it is the unclamped formula, bit for bit.

    Args:
      logp_t: ``(T,)`` float ``log pi(a_t)`` (differentiated).
      ref_logp_t: ``(T,)`` float ``log pi_ref(a_t)`` (treat as constant).

    Returns:
      ``(T,)`` per-step estimates, ``>= 0``.

    Raises:
      ValueError: ranks other than 1 or different shapes.

    Example:
      >>> from fidia_jax import rl
      >>> print(rl.k3_kl(jnp.array([-1.0, -1.0]), jnp.array([-1.0, -1.5])))  # exp(-.5) - .5
      [0.         0.10653...]
      >>> # d = 1e4 > 20: the tangent, e^20 (1 + 1e4 - 20) - 1 - 1e4
      >>> print(rl.k3_kl(jnp.array([-1e4]), jnp.array([0.0])))
      [4.8424...e+12]

    References:
      Schulman 2020, http://joschu.net/blog/kl-approx.html
    """
    _checks.assert_rank(logp_t, 1, "logp_t", where="k3_kl", detail="vmap to batch")
    _checks.assert_shape(ref_logp_t, jnp.shape(logp_t), "ref_logp_t", where="k3_kl")
    return _k3(ref_logp_t - logp_t)


@jax.custom_jvp
def _k3(d: jax.Array) -> jax.Array:
    e = jnp.exp(jnp.minimum(d, K3_LOG_RATIO_MAX))
    tangent = e * (1.0 + (d - K3_LOG_RATIO_MAX)) - 1.0 - d
    return jnp.where(d > K3_LOG_RATIO_MAX, tangent, e - 1.0 - d)


@_k3.defjvp
def _k3_jvp(primals, tangents):
    # k3'(d) = exp(min(d, c)) - 1 on both sides of the bound c (the tangent line's slope is
    # exp(c) - 1). Written as e * d_dot - d_dot, the derivative of exp(d) - 1 - d exactly as
    # autodiff forms it, so that below the bound gradients are those of the unclamped formula.
    (d,), (d_dot,) = primals, tangents
    e = jnp.exp(jnp.minimum(d, K3_LOG_RATIO_MAX))
    return _k3(d), e * d_dot - d_dot
