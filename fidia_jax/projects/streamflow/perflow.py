"""PeRFlow's per-window conversion of an eps-prediction into a velocity, as a model
parameterisation for the StreamFlow samplers.

StreamFlow's "new velocity field" (github.com/World-Snapshot/StreamFlow at commit
``b5135a88d37be351438b1dc737ac5abacfce173d``, ``src/scheduler_perflow.py``
``PeRFlowScheduler.step`` and ``src/perflow_batch_scheduler.py`` ``step_batch``; read, not copied)
is PeRFlow's (Yan et al., "PeRFlow: Piecewise Rectified Flow as Universal Plug-and-Play
Accelerator", NeurIPS 2024): time ``[0, 1]`` (1 = noise) is cut into ``K`` windows
``(t_e, t_s]`` (``t_s = 1, 1 - 1/K, ...``); inside a window the trajectory is a straight line,
and the network predicts an ``eps`` from which the window's end point is

    x_e = lambda_t x_t + eta_t eps,
    lambda_t = lambda_s (t_s - t_e) / D,  eta_t = eta_s (t - t_e) / D,
    D = (t - t_e) + lambda_s (t_s - t),
    lambda_s = 1 / gamma,  gamma = sqrt(abar[i_s] / abar[i_e]),
    i = max(0, trunc(float32(t) * N - 1))   (float32 arithmetic, as torch does it),

with ``eta_s`` by ``prediction_type``: ``"diff_eps"`` (what the StreamFlow pipeline runs:
``PeRFlowScheduler.from_config(..., prediction_type="diff_eps")`` in ``utils/wrapper_perflow.py``
and ``test_demo_gen.py``) ``eta_s = -sqrt(1 - gamma^2) / gamma``; ``"ddim_eps"`` (the class's
own default) ``eta_s = sqrt(1 - abar[i_e]) - sqrt(abar[i_e] / abar[i_s] (1 - abar[i_s]))``.
``abar`` is the cumulative product of a diffusion schedule of ``N`` steps, by default Stable
Diffusion's ``scaled_linear`` betas 0.00085 .. 0.012 (we form it in float64; the authors in
float32: a relative difference of ~1e-6 in ``gamma``, see the fixture test). The velocity is the
straight line to ``x_e``: ``v = (x_t - x_e) / (t - t_e)`` in our convention ``x <- x - dt v``
(the authors write ``(x_e - x_t) / (t_e - t)`` with ``x <- x + dt v``, ``dt < 0``: the same
step).

A window is looked up as in ``Time_Windows.get_window``: the first window, from ``t = 1`` down,
whose end lies below ``t - 0.1 / N`` (float32), so a window start, and ``t`` up to ``0.1 / N``
past it, belongs to the window it starts. Deviation: for ``t <= 0.1 / N`` the authors' loop
runs past the last window (``IndexError``); a jitted lookup cannot raise, so ours takes the
last window ``(0, 1/K]``, the one that holds such ``t`` (no schedule of
:func:`perflow_timesteps` reaches it: its smallest ``t`` is ``1 / N``). The batched
``get_window_alpha_batch`` in ``perflow_batch_scheduler.py`` keeps the LAST window whose end
lies below ``t + 0.1 / N``, which is the last window ``(0, 1/K]`` for every ``t > 0.1 / N``, a
bug; its ``step_batch`` raises ``NameError`` (``device`` undefined) and the pipeline calls the
single-request ``step``, which uses ``get_window``: that is what we follow.

Fidelity: ``tests/projects/streamflow/test_streamflow_perflow_fixture.py`` compares the
schedule, the lookup and whole trajectories with the authors' scheduler
(``tests/data/streamflow/perflow_scheduler.npz``, made by ``tools/streamflow_make_fixture.py``).

:func:`perflow_apply` wraps an eps-network into the ``apply_fn(params, x, t, *cond) -> v`` of the
samplers, so the stream batcher and :func:`~fidia_jax.projects.streamflow.serving.sample_euler`
serve it unchanged; :func:`velocity_to_eps` is the exact inverse, the training target of an
eps-network on the rectified-flow path (``eps* = velocity_to_eps(noise - image, x_t, t)``).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from fidia_jax.errors import ConfigError

__all__ = [
    "PerflowWindows",
    "eps_to_velocity",
    "perflow_apply",
    "perflow_timesteps",
    "velocity_to_eps",
]

PREDICTION_TYPES = ("diff_eps", "ddim_eps")


@dataclasses.dataclass(frozen=True)
class PerflowWindows:
    """The windows and the diffusion schedule of the conversion.

    Attributes:
      num_windows: ``K`` (the authors' default 4).
      num_train_timesteps: ``N`` of the diffusion schedule (1000).
      beta_start, beta_end: ``scaled_linear`` betas: ``linspace(sqrt(b0), sqrt(b1), N)^2``.
      prediction_type: ``"diff_eps"`` (default: what the authors' StreamFlow pipeline runs) or
        ``"ddim_eps"`` (``PeRFlowScheduler``'s own constructor default); only ``eta_s``
        differs (module docstring).

    Raises:
      ConfigError: ``num_windows < 1``, ``num_train_timesteps < num_windows``, betas not
        ``0 < beta_start <= beta_end < 1``, or an unknown ``prediction_type``.
    """

    num_windows: int = 4
    num_train_timesteps: int = 1000
    beta_start: float = 0.00085
    beta_end: float = 0.012
    prediction_type: str = "diff_eps"

    def __post_init__(self):
        if self.num_windows < 1 or self.num_train_timesteps < self.num_windows:
            raise ConfigError(
                f"PerflowWindows: need 1 <= num_windows <= num_train_timesteps, got "
                f"num_windows={self.num_windows}, num_train_timesteps={self.num_train_timesteps}"
            )
        if not 0.0 < self.beta_start <= self.beta_end < 1.0:
            raise ConfigError(
                f"PerflowWindows: need 0 < beta_start <= beta_end < 1, got "
                f"beta_start={self.beta_start}, beta_end={self.beta_end}"
            )
        if self.prediction_type not in PREDICTION_TYPES:
            raise ConfigError(
                f"PerflowWindows: prediction_type must be one of {PREDICTION_TYPES}, got "
                f"{self.prediction_type!r}"
            )

    @property
    def starts(self) -> np.ndarray:
        """``(K,)`` float32 window starts ``1, 1 - 1/K, ..., 1/K`` (``i / K`` in float64, then
        float32, as torch casts the authors' Python floats)."""
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

    def _train_index(self, t32: np.ndarray) -> np.ndarray:
        # the authors' ``(t * N - 1).long()`` on a float32 tensor: float32 product, truncation
        x = t32.astype(np.float32) * np.float32(self.num_train_timesteps) - np.float32(1.0)
        return np.maximum(np.trunc(x).astype(np.int64), 0)

    @property
    def gammas(self) -> np.ndarray:
        """``(K,)`` float32 ``gamma = sqrt(abar[i_s] / abar[i_e])`` per window (< 1)."""
        abar = self.alphas_cumprod
        a_s, a_e = abar[self._train_index(self.starts)], abar[self._train_index(self.ends)]
        return np.sqrt(a_s / a_e).astype(np.float32)

    @property
    def lambdas_etas(self) -> tuple[np.ndarray, np.ndarray]:
        """``(K,)`` float32 ``lambda_s`` and ``eta_s`` per window (by ``prediction_type``)."""
        abar = self.alphas_cumprod
        a_s, a_e = abar[self._train_index(self.starts)], abar[self._train_index(self.ends)]
        g = np.sqrt(a_s / a_e)
        if self.prediction_type == "diff_eps":
            eta = -np.sqrt(1.0 - g**2) / g
        else:  # ddim_eps
            eta = np.sqrt(1.0 - a_e) - np.sqrt(a_e / a_s * (1.0 - a_s))
        return (1.0 / g).astype(np.float32), eta.astype(np.float32)


def _window(t_B: jax.Array, windows: PerflowWindows) -> jax.Array:
    """``(B,)`` int32 window index per row: the first window whose end lies below
    ``t - 0.1 / N`` (float32); the last window where none does (``t <= 0.1 / N``)."""
    ends = jnp.asarray(windows.ends)
    thr = 0.1 * (1.0 / windows.num_train_timesteps)  # the authors' 0.1 * precision
    below = ends[None, :] < (t_B.astype(jnp.float32)[:, None] - thr)
    k = jnp.argmax(below, axis=1)
    return jnp.where(below.any(axis=1), k, windows.num_windows - 1).astype(jnp.int32)


def _coefficients(t_B, windows):
    t = t_B.astype(jnp.float32)
    k = _window(t, windows)
    lam, eta = windows.lambdas_etas
    t_s, t_e = jnp.asarray(windows.starts)[k], jnp.asarray(windows.ends)[k]
    lam_s, eta_s = jnp.asarray(lam)[k], jnp.asarray(eta)[k]
    d = (t - t_e) + lam_s * (t_s - t)
    return t, t_e, lam_s * (t_s - t_e) / d, eta_s * (t - t_e) / d


def eps_to_velocity(
    eps_BxHxWxC: jax.Array, x_BxHxWxC: jax.Array, t_B: jax.Array, windows: PerflowWindows
) -> jax.Array:
    """PeRFlow's window velocity from an eps-prediction (formulas in the module docstring).

    Args:
      eps_BxHxWxC: the network's eps output.
      x_BxHxWxC: the current latents ``x_t``.
      t_B: ``(B,)`` times in ``(0, 1]`` (1 = noise; never 0: ``t - t_e`` is 0 there and the
        velocity is not finite). ``t <= 0.1 / N`` takes the last window (the authors raise
        ``IndexError``; module docstring).
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


def perflow_timesteps(
    num_steps: int, windows: PerflowWindows | None = None, *, strict: bool = False
) -> np.ndarray:
    """The authors' schedule (``PeRFlowScheduler.set_timesteps``): ``num_steps`` split over the
    windows (the first ``num_steps % K`` windows get one more), uniform inside each window
    (``linspace(t_s, t_e, m, endpoint=False)`` of the float64 window bounds ``i / K``), on the
    integer grid of ``N`` (``int64(t * N)``, truncation), each divided by ``N``; then 0.

    Args:
      num_steps: the step count, an integer >= 1.
      windows: :class:`PerflowWindows` (default: the authors' ``K = 4``, ``N = 1000``).
      strict: ``False`` (default, the authors): ``num_steps < K`` is raised to ``K`` with a
        ``UserWarning`` (the authors print a note); ``True``: a ``ConfigError`` instead.

    Returns:
      ``(max(num_steps, K) + 1,)`` float32, strictly decreasing from 1 to 0 (a schedule for the
      samplers); entry ``j < n`` is ``timesteps[j] / N``, the ``t`` the authors' ``step`` sees.

    Raises:
      ConfigError: ``num_steps`` not an integer >= 1; ``num_steps < K`` with ``strict=True``;
        a window with more steps than grid points (two equal timesteps, on which the authors'
        ``step`` cannot find its successor).
    """
    w = windows or PerflowWindows()
    k, n = w.num_windows, w.num_train_timesteps
    if isinstance(num_steps, bool) or int(num_steps) != num_steps or num_steps < 1:
        raise ConfigError(
            f"perflow_timesteps: num_steps must be an integer >= 1, got {num_steps!r}"
        )
    num_steps = int(num_steps)
    if num_steps < k:
        if strict:
            raise ConfigError(
                f"perflow_timesteps: need num_steps >= num_windows={k}, got {num_steps}"
            )
        warnings.warn(
            f"perflow_timesteps: num_steps={num_steps} < num_windows={k}; using {k} steps "
            "(as the authors' set_timesteps does)",
            UserWarning,
            stacklevel=2,
        )
        num_steps = k
    starts = [i / k for i in range(k, 0, -1)]
    ends = [*starts[1:], 0.0]
    ts = []
    for i, (s, e) in enumerate(zip(starts, ends, strict=True)):
        m = num_steps // k + (1 if i < num_steps % k else 0)
        ts.append(np.linspace(s, e, m, endpoint=False))
    grid = (np.concatenate(ts) * n).astype(np.int64)
    if not np.all(grid[:-1] > grid[1:]) or grid[-1] <= 0:
        raise ConfigError(
            f"perflow_timesteps: num_steps={num_steps} puts more steps in a window than the "
            f"{n // k} grid points of N={n} (equal timesteps)"
        )
    return np.concatenate([grid / n, [0.0]]).astype(np.float32)
