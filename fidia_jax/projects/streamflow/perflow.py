"""PeRFlow's per-window conversion of an eps-prediction into a velocity, as a model
parameterisation for the StreamFlow samplers.

StreamFlow's "new velocity field" (github.com/World-Snapshot/StreamFlow,
``src/scheduler_perflow.py`` ``PeRFlowScheduler.step`` and ``src/perflow_batch_scheduler.py``
``step_batch``; read, not copied) is PeRFlow's (Yan et al., "PeRFlow: Piecewise Rectified Flow as
Universal Plug-and-Play Accelerator", NeurIPS 2024): time ``[0, 1]`` (1 = noise) is cut into
``K`` windows ``(t_e, t_s]`` (``t_s = 1, 1 - 1/K, ...``); inside a window the trajectory is a
straight line, and the network predicts an ``eps`` from which the window's end point is

    x_e = lambda_t x_t + eta_t eps,
    lambda_t = lambda_s (t_s - t_e) / D,  eta_t = eta_s (t - t_e) / D,
    D = (t - t_e) + lambda_s (t_s - t),
    lambda_s = 1 / gamma,  eta_s = -sqrt(1 - gamma^2) / gamma,
    gamma = sqrt(abar[i_s] / abar[i_e]),  i = max(0, int(t * N - 1))

(the ``diff_eps`` parameterisation; ``abar`` the cumulative product of a diffusion schedule of
``N`` steps, by default Stable Diffusion's ``scaled_linear`` betas 0.00085 .. 0.012), and the
velocity is the straight line to it: ``v = (x_t - x_e) / (t - t_e)`` in our convention
``x <- x - dt v`` (the authors write ``(x_e - x_t) / (t_e - t)`` with ``x <- x + dt v``,
``dt < 0``: the same step). A window is looked up as in ``Time_Windows.get_window``: the first
window, from ``t = 1`` down, whose end lies below ``t - 0.1 / N``, so a window start belongs to
the window it starts. (The batched ``get_window_alpha_batch`` in ``perflow_batch_scheduler.py``
keeps the LAST window whose end lies below ``t``, which is the last window ``(0, 1/K]`` for
every ``t``; its pipeline calls the single-request ``step``, which uses ``get_window``.)

:func:`perflow_apply` wraps an eps-network into the ``apply_fn(params, x, t, *cond) -> v`` of the
samplers, so the stream batcher and :func:`~fidia_jax.projects.streamflow.serving.sample_euler`
serve it unchanged; :func:`velocity_to_eps` is the exact inverse, the training target of an
eps-network on the rectified-flow path (``eps* = velocity_to_eps(noise - image, x_t, t)``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "PerflowWindows",
    "eps_to_velocity",
    "perflow_apply",
    "perflow_timesteps",
    "velocity_to_eps",
]


@dataclasses.dataclass(frozen=True)
class PerflowWindows:
    """The windows and the diffusion schedule of the conversion.

    Attributes:
      num_windows: ``K`` (the authors' default 4).
      num_train_timesteps: ``N`` of the diffusion schedule (1000).
      beta_start, beta_end: ``scaled_linear`` betas: ``linspace(sqrt(b0), sqrt(b1), N)^2``.
    """

    num_windows: int = 4
    num_train_timesteps: int = 1000
    beta_start: float = 0.00085
    beta_end: float = 0.012

    def __post_init__(self):
        if self.num_windows < 1 or self.num_train_timesteps < self.num_windows:
            raise ValueError(
                f"PerflowWindows: need 1 <= num_windows <= num_train_timesteps, got "
                f"{self.num_windows}, {self.num_train_timesteps}"
            )
        if not 0.0 < self.beta_start <= self.beta_end < 1.0:
            raise ValueError("PerflowWindows: need 0 < beta_start <= beta_end < 1")

    @property
    def starts(self) -> np.ndarray:
        """``(K,)`` float32 window starts ``1, 1 - 1/K, ..., 1/K``."""
        k = self.num_windows
        return (np.arange(k, 0, -1) / k).astype(np.float32)

    @property
    def ends(self) -> np.ndarray:
        """``(K,)`` float32 window ends ``1 - 1/K, ..., 0``."""
        k = self.num_windows
        return (np.arange(k - 1, -1, -1) / k).astype(np.float32)

    @property
    def alphas_cumprod(self) -> np.ndarray:
        """``(N,)`` float64 ``abar``."""
        betas = np.linspace(self.beta_start**0.5, self.beta_end**0.5, self.num_train_timesteps)
        return np.cumprod(1.0 - betas**2)

    @property
    def gammas(self) -> np.ndarray:
        """``(K,)`` float32 ``gamma = sqrt(abar[i_s] / abar[i_e])`` per window (< 1)."""
        n, abar = self.num_train_timesteps, self.alphas_cumprod
        i_s = np.maximum((self.starts.astype(np.float64) * n - 1).astype(np.int64), 0)
        i_e = np.maximum((self.ends.astype(np.float64) * n - 1).astype(np.int64), 0)
        return np.sqrt(abar[i_s] / abar[i_e]).astype(np.float32)


def _window(t_B: jax.Array, windows: PerflowWindows):
    """``(t_s, t_e, gamma)`` per row: the first window whose end lies below ``t - 0.1 / N``."""
    ends = jnp.asarray(windows.ends)
    below = ends[None, :] < (t_B[:, None] - 0.1 / windows.num_train_timesteps)
    k = jnp.argmax(below, axis=1)  # first True (the last window's end 0 is below any t > 0)
    return jnp.asarray(windows.starts)[k], ends[k], jnp.asarray(windows.gammas)[k]


def _coefficients(t_B, windows):
    t = t_B.astype(jnp.float32)
    t_s, t_e, gamma = _window(t, windows)
    lam_s = 1.0 / gamma
    eta_s = -jnp.sqrt(1.0 - gamma**2) / gamma
    d = (t - t_e) + lam_s * (t_s - t)
    return t, t_e, lam_s * (t_s - t_e) / d, eta_s * (t - t_e) / d


def eps_to_velocity(
    eps_BxHxWxC: jax.Array, x_BxHxWxC: jax.Array, t_B: jax.Array, windows: PerflowWindows
) -> jax.Array:
    """PeRFlow's window velocity from an eps-prediction (formulas in the module docstring).

    Args:
      eps_BxHxWxC: the network's eps output.
      x_BxHxWxC: the current latents ``x_t``.
      t_B: ``(B,)`` times in ``(0, 1]`` (1 = noise; never 0, where no window holds ``t``).
      windows: :class:`PerflowWindows`.

    Returns:
      ``(B, H, W, C)`` float32 velocity ``(x_t - x_e) / (t - t_e)``: an Euler step of size
      ``t - t_e`` lands on the predicted window end ``x_e``.
    """
    t, t_e, lam_t, eta_t = _coefficients(t_B, windows)
    bc = (slice(None), None, None, None)
    x_e = lam_t[bc] * x_BxHxWxC + eta_t[bc] * eps_BxHxWxC
    return (x_BxHxWxC - x_e) / (t - t_e)[bc]


def velocity_to_eps(
    v_BxHxWxC: jax.Array, x_BxHxWxC: jax.Array, t_B: jax.Array, windows: PerflowWindows
) -> jax.Array:
    """The inverse of :func:`eps_to_velocity`: the eps whose window velocity is ``v``.

    On the rectified-flow path (``v = noise - image``) this is the regression target of an
    eps-network; ``eps_to_velocity(velocity_to_eps(v, x, t), x, t) == v`` (float rounding).
    """
    t, t_e, lam_t, eta_t = _coefficients(t_B, windows)
    bc = (slice(None), None, None, None)
    x_e = x_BxHxWxC - (t - t_e)[bc] * v_BxHxWxC
    return (x_e - lam_t[bc] * x_BxHxWxC) / eta_t[bc]


def perflow_apply(
    eps_apply: Callable[..., jax.Array], windows: PerflowWindows | None = None
) -> Callable[..., jax.Array]:
    """Wraps an eps-network ``eps_apply(params, x, t, *cond)`` into the velocity ``apply_fn`` of
    the samplers (:func:`eps_to_velocity` per row, each row in its own window)."""
    windows = windows or PerflowWindows()

    def apply_fn(params, x_BxHxWxC, t_B, *cond):
        return eps_to_velocity(eps_apply(params, x_BxHxWxC, t_B, *cond), x_BxHxWxC, t_B, windows)

    return apply_fn


def perflow_timesteps(num_steps: int, windows: PerflowWindows | None = None) -> np.ndarray:
    """The authors' schedule (``PeRFlowScheduler.set_timesteps``): ``num_steps`` (at least ``K``)
    split over the windows (the first ``num_steps % K`` windows get one more), uniform inside
    each window, on the integer grid of ``N`` (``int(t * N) / N``), then 0.

    Returns:
      ``(num_steps + 1,)`` float32, decreasing from 1 to 0 (a schedule for the samplers).

    Raises:
      ValueError: ``num_steps < K`` (the authors raise it to ``K`` with a message; we refuse).
    """
    w = windows or PerflowWindows()
    k, n = w.num_windows, w.num_train_timesteps
    if int(num_steps) != num_steps or num_steps < k:
        raise ValueError(f"perflow_timesteps: need num_steps >= num_windows={k}, got {num_steps}")
    ts = []
    for i, (s, e) in enumerate(
        zip(w.starts.astype(np.float64), w.ends.astype(np.float64), strict=True)
    ):
        m = num_steps // k + (1 if i < num_steps % k else 0)
        ts.append(np.linspace(s, e, m, endpoint=False))
    grid = (np.concatenate(ts) * n).astype(np.int64) / n
    return np.concatenate([grid, [0.0]]).astype(np.float32)
