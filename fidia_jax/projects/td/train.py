"""The TD(0) step-size comparison: exponential vs constant vs 1/t (+ regularised Markovian TD).

For every horizon ``T``, ``num_mrps`` random MRPs are solved by TD(0) from ``theta = 0`` with
i.i.d. transitions (vmapped over MRPs). Each omega-free schedule gets the same tuning budget: the
best initial step size ``eta_0`` of ``eta_grid``, chosen per ``T`` on the mean error. Error =
``||Phi (theta_T - theta*)||_D^2 / ||Phi theta*||_D^2`` (mean over MRPs), ``theta*`` the exact TD
fixed point from a linear solve. The ``1/(omega t)`` row is told the smallest eigenvalue
``omega`` of the symmetrised TD matrix of each MRP (what the exponential schedule does not need).

The Markovian rows run one trajectory per MRP with the exponential schedule (its best
``eta_0``), standard TD(0) versus the regularised TD(0) with ``lambda = 1/sqrt(T)``
(reconstructed constant), both measured against the unregularised fixed point.
"""

from __future__ import annotations

import pathlib
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from fidia_jax import optim, rl
from fidia_jax.config import write_summary
from fidia_jax.projects.td._mrp import random_linear_mrp, run_linear_td0
from fidia_jax.projects.td.configs import SCHEDULES, TdConfig

__all__ = ["EXPONENTIAL", "compare_schedules", "format_table", "smallest_eig", "train_and_evaluate"]

#: Name of the reference row (ratios are taken against it).
EXPONENTIAL = SCHEDULES["exponential"]
SUMMARY_FILE = "td_schedules.json"


def smallest_eig(mrp: rl.LinearMRP) -> jax.Array:
    """``omega``, the smallest eigenvalue of ``(A + A^T) / 2`` (``A``: :func:`rl.td_linear_system`)."""
    a, _ = rl.td_linear_system(mrp)
    return jnp.min(jnp.linalg.eigvalsh(0.5 * (a + a.T)))


def compare_schedules(config: TdConfig) -> dict[str, Any]:
    """Runs the comparison at ``config``'s scale.

    Returns:
      A JSON-ready dict: ``horizons``, ``eta_grid``, ``rows`` (``str(T)`` -> schedule name ->
      ``{"error", "best_eta0"?, "grid"?}``), ``wall_s``, ``omega_median`` and
      ``exponential_best_at_every_T`` (no omega-free i.i.d. schedule beats the exponential one
      at any ``T``).
    """
    horizons = list(config.horizons)
    eta_grid = tuple(config.eta_grid)
    keys = jax.random.split(jax.random.key(config.seed), config.num_mrps)
    mrps = jax.vmap(
        lambda k: random_linear_mrp(k, config.n_states, config.n_features, config.discount)
    )(keys)
    theta_star = jax.vmap(rl.td_fixed_point)(mrps)
    omega = jax.vmap(smallest_eig)(mrps)
    norm_star = jax.vmap(lambda m, t: rl.td_param_error(m, t, jnp.zeros_like(t)))(mrps, theta_star)
    run_keys = jax.random.split(jax.random.key(config.seed + 1), config.num_mrps)

    def rel_error(thetas):
        err = jax.vmap(rl.td_param_error)(mrps, thetas, theta_star)
        return float(jnp.mean(err / norm_star))

    def run(schedule_fn, horizon, markovian=False, l2_reg=0.0, etas=(1.0,)):
        """schedule_fn(eta0, omega) -> schedule; one jit per call, vmapped over (eta0, MRP)."""

        @jax.jit
        def go(keys_, mrps_, omega_, etas_):
            per_mrp = jax.vmap(
                lambda k, m, w, e: run_linear_td0(
                    k, m, schedule_fn(e, w), horizon, markovian=markovian, l2_reg=l2_reg
                ),
                in_axes=(0, 0, 0, None),
            )
            return jax.vmap(per_mrp, in_axes=(None, None, None, 0))(keys_, mrps_, omega_, etas_)

        thetas = go(run_keys, mrps, omega, jnp.asarray(etas, jnp.float32))
        return {e: rel_error(th) for e, th in zip(etas, thetas, strict=True)}

    results: dict[str, Any] = {"horizons": horizons, "eta_grid": list(eta_grid), "rows": {}}
    t_start = time.time()
    for horizon in horizons:
        row = {}
        tuned = {
            "exponential": lambda e, w, h=horizon: optim.exponential_horizon_schedule(e, h),
            "constant": lambda e, w: lambda t: e,
            "inverse_time": lambda e, w: optim.inverse_time_schedule(e, 1.0),
            "inverse_time_offset": lambda e, w: optim.inverse_time_schedule(e, 100.0),
        }
        for key, make in tuned.items():
            if key in config.schedules:
                errs = run(make, horizon, etas=eta_grid)
                best = min(errs, key=errs.get)
                row[SCHEDULES[key]] = {"best_eta0": best, "error": errs[best], "grid": errs}
        if "told_omega" in config.schedules:
            # Told omega: eta_t = 1 / (omega (t + t0)) with t0 = 1/omega + 1 (step < 1 at t = 0).
            told = lambda e, w: lambda t: 1.0 / (w * (t + 1.0 / w + 1.0))  # noqa: E731
            row[SCHEDULES["told_omega"]] = {"error": run(told, horizon)[1.0]}
        if config.markovian:
            lam = 1.0 / np.sqrt(horizon)
            best_exp = row[EXPONENTIAL]["best_eta0"]

            def sch(e, w, b=best_exp, h=horizon):
                return optim.exponential_horizon_schedule(b, h)

            row["Markovian exponential"] = {"error": run(sch, horizon, markovian=True)[1.0]}
            row["Markovian regularised (lambda=1/sqrt(T))"] = {
                "error": run(sch, horizon, markovian=True, l2_reg=lam)[1.0]
            }
        results["rows"][str(horizon)] = row

    results["wall_s"] = time.time() - t_start
    results["omega_median"] = float(jnp.median(omega))
    results["exponential_best_at_every_T"] = all(
        cells[name]["error"] >= cells[EXPONENTIAL]["error"]
        for cells in results["rows"].values()
        for name in cells
        if name != EXPONENTIAL and "Markovian" not in name and "omega" not in name
    )
    return results


def format_table(results: dict[str, Any], num_mrps: int) -> str:
    """The markdown table: errors and ratios to the exponential schedule, a row per schedule."""
    horizons = results["horizons"]
    names = list(results["rows"][str(horizons[0])])
    lines = [
        f"TD(0) relative value error, mean over {num_mrps} MRPs "
        f"(ratio = error / exponential's, >1 means exponential is better)",
        "| schedule | " + " | ".join(f"T={h:g} error (ratio)" for h in horizons) + " |",
        "|" + "---|" * (len(horizons) + 1),
    ]
    for name in names:
        cells = []
        for h in horizons:
            r = results["rows"][str(h)]
            e, e_ref = r[name]["error"], r[EXPONENTIAL]["error"]
            extra = f", eta0={r[name]['best_eta0']}" if "best_eta0" in r[name] else ""
            cells.append(f"{e:.3g} ({e / e_ref:.2f}{extra})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def train_and_evaluate(config: TdConfig, workdir: str | pathlib.Path) -> dict[str, Any]:
    """Runs :func:`compare_schedules`, prints its table and writes ``workdir/td_schedules.json``.

    The JSON holds the results of :func:`compare_schedules` plus the ``config`` that produced
    them; it is written atomically (temp file, then rename).

    Returns:
      The results dict (as written, without ``config``).
    """
    results = compare_schedules(config)
    print(format_table(results, config.num_mrps))
    out = pathlib.Path(workdir) / SUMMARY_FILE
    write_summary(out, results, config)
    return results
