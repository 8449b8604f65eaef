"""Step-size schedules (optax ``Schedule`` callables) used by the TD(0) and PASO code."""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import optax

from fidia_jax.errors import ConfigError

__all__ = ["exponential_horizon_schedule", "inverse_time_schedule"]

#: A step size or a schedule (``count -> step size``): what ``optax.ScalarOrSchedule`` means,
#: spelled with typed names so that a type checker flags ``scale(learning_rate="oops")``
#: (optax itself ships no type information, so its alias reads as ``Any``).
ScalarOrSchedule = float | int | jax.Array | Callable[[jax.Array], jax.Array | float]


def exponential_horizon_schedule(
    init_value: float, horizon: int, beta: float = 1.0
) -> optax.Schedule:
    """``eta_t = init_value * (beta / T) ** (t / T)`` for a known horizon ``T``.

    With ``beta = 1`` this is ``eta_0 * T ** (-t / T)``: it decays geometrically from ``eta_0``
    at ``t = 0`` to ``eta_0 / T`` at ``t = T`` and needs the horizon only, not the smallest
    eigenvalue of the feature covariance (which a ``1 / (omega t)`` schedule needs). The
    ``beta`` generalisation follows the exponential step sizes of Vaswani et al. for SGD
    (``alpha = (beta / T) ** (1 / T)``); it is reconstructed, the TD paper's abstract only
    names "an exponential step-size schedule". Steps beyond ``T`` keep decaying.

    Args:
      init_value: ``eta_0 > 0`` (a Python number, or an array, e.g. traced for a vmapped
        sweep; arrays are not validated).
      horizon: ``T >= 1`` (number of updates).
      beta: ``0 < beta <= T``; the final step size is ``eta_0 * beta / T``.

    Returns:
      an ``optax.Schedule`` (``count -> float32 step size``).

    Raises:
      ConfigError: non-positive ``init_value``, ``horizon`` or ``beta``.

    Example::

      >>> import jax.numpy as jnp, numpy as np
      >>> from fidia_jax import optim
      >>> eta = optim.exponential_horizon_schedule(1.0, horizon=100)
      >>> np.asarray(eta(jnp.array([0, 50, 100])), np.float64).round(4).tolist()
      [1.0, 0.1, 0.01]

    References:
      Li, Schmidt, Babanezhad, Vaswani, "Towards Parameter-Free Temporal Difference
      Learning", arXiv:2603.02577 (2026).
      Vaswani, Dubois-Taine, Babanezhad, "Towards Noise-adaptive, Problem-adaptive
      (Accelerated) Stochastic Gradient Descent", ICML 2022.
    """
    if isinstance(init_value, int | float) and not init_value > 0:
        raise ConfigError(f"init_value must be > 0, got {init_value}")
    if int(horizon) < 1:
        raise ConfigError(f"horizon must be >= 1, got {horizon}")
    if not 0 < beta <= horizon:
        raise ConfigError(f"beta must be in (0, horizon], got {beta}")
    log_ratio = math.log(beta / horizon)
    t_total = float(horizon)

    def schedule(count):
        t = jnp.asarray(count, jnp.float32)
        return jnp.asarray(init_value, jnp.float32) * jnp.exp(log_ratio * t / t_total)

    return schedule


def inverse_time_schedule(init_value: float, offset: float = 1.0) -> optax.Schedule:
    """``eta_t = init_value * offset / (t + offset)`` (the classic ``1/t`` decay).

    Args:
      init_value: step size at ``t = 0``.
      offset: ``t0 > 0``; theory for TD(0) picks ``init_value * offset = 1 / omega`` with
        ``omega`` the smallest eigenvalue of the feature covariance.

    Raises:
      ConfigError: non-positive arguments.

    Example::

      >>> import jax.numpy as jnp, numpy as np
      >>> from fidia_jax import optim
      >>> eta = optim.inverse_time_schedule(1.0, offset=10.0)
      >>> np.asarray(eta(jnp.array([0, 10, 30])), np.float64).round(4).tolist()
      [1.0, 0.5, 0.25]
    """
    if isinstance(init_value, int | float) and not init_value > 0 or not offset > 0:
        raise ConfigError(f"init_value and offset must be > 0, got {init_value}, {offset}")

    def schedule(count):
        t = jnp.asarray(count, jnp.float32)
        return jnp.asarray(init_value * offset, jnp.float32) / (t + offset)

    return schedule
