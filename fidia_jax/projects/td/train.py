"""The TD(0) step-size comparison: exponential vs constant vs 1/t (+ regularised Markovian TD).

For every horizon ``T``, ``num_mrps`` random MRPs are solved by TD(0) from ``theta = 0`` with
i.i.d. transitions (vmapped over MRPs). Each omega-free schedule gets the same tuning budget: the
best initial step size ``eta_0`` of ``eta_grid``, chosen per ``T`` on the mean error over
separate tuning MRPs and transitions (``config.tuning``), then run on the reported ones. Error =
``||Phi (theta_T - theta*)||_D^2 / ||Phi theta*||_D^2`` (mean over MRPs), ``theta*`` the exact TD
fixed point from a linear solve. The ``1/(omega t)`` row is told the smallest eigenvalue
``omega`` of the symmetrised TD matrix of each MRP (what the exponential schedule does not need).

The Markovian rows run one trajectory per MRP with the exponential schedule (its best
``eta_0``), standard TD(0) versus the regularised TD(0) with ``lambda = 1/sqrt(T)``
(reconstructed constant), both measured against the unregularised fixed point.

No gradient steps (TD(0) is a semi-gradient fixed-point iteration, run by ``lax.scan``), so no
:func:`fidia_jax.train.fit`: :func:`train_and_evaluate` shows a stage per horizon and schedule,
prints the table and writes ``td_schedules.json`` (every number), ``summary.json`` (the table
and the curves) and ``td_curves.png``: the error along the trajectory of every row at the
largest horizon (its best ``eta_0``, the same transitions as the table's run) and, with several
horizons, the final error against ``T``.

Nothing to split over devices or processes (small vmapped scans, no minibatch, no parameters to
share): when a launcher starts it several times, process 0 runs it exactly as one process would
and every other process leaves at once (:func:`train_and_evaluate`), so the work is done once and
the workdir written once.
"""

from __future__ import annotations

import pathlib
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fidia_jax import config as config_lib
from fidia_jax import optim, parallel, rl, train
from fidia_jax._io import atomic_path
from fidia_jax.projects.td._mrp import linear_td0_path, random_linear_mrp, run_linear_td0
from fidia_jax.projects.td.configs import SCHEDULES, TdConfig

__all__ = [
    "EXPONENTIAL",
    "compare_schedules",
    "error_curves",
    "format_table",
    "smallest_eig",
    "train_and_evaluate",
]

#: Name of the reference row (ratios are taken against it).
EXPONENTIAL = SCHEDULES["exponential"]
SUMMARY_FILE = "td_schedules.json"
#: Points of each error curve (log-spaced steps).
CURVE_POINTS = 40
MARKOV_PLAIN = "Markovian exponential"
MARKOV_REG = "Markovian regularised (lambda=1/sqrt(T))"


def _shown(name: str) -> str:
    """A row name as the console shows it: rich reads ``[...]`` as markup and drops it."""
    return name.replace("[", "(").replace("]", ")")


def smallest_eig(mrp: rl.LinearMRP) -> jax.Array:
    """``omega``, the smallest eigenvalue of ``(A + A^T) / 2`` (``A``: :func:`rl.td_linear_system`)."""
    a, _ = rl.td_linear_system(mrp)
    return jnp.min(jnp.linalg.eigvalsh(0.5 * (a + a.T)))


class _Problem(NamedTuple):
    """The MRPs of a config, their fixed points and the sampling keys (batched over MRPs)."""

    mrps: rl.LinearMRP
    theta_star: jax.Array
    omega: jax.Array
    norm_star: jax.Array
    run_keys: jax.Array

    def rel_error(self, thetas) -> float:
        """Mean over MRPs of ``||Phi (theta - theta*)||_D^2 / ||Phi theta*||_D^2``."""
        err = jax.vmap(rl.td_param_error)(self.mrps, thetas, self.theta_star)
        return float(jnp.mean(err / self.norm_star))


#: The ``jax.random.fold_in`` tags of one seed's four random streams. Every stream is folded
#: out of ``key(seed)``, so no stream of one seed is a stream of another (with ``key(seed + k)``
#: offsets, the tuning MRPs of seed ``s`` were the reported MRPs of seed ``s + 2``).
STREAMS = {"mrps": 0, "transitions": 1, "tuning_mrps": 2, "tuning_transitions": 3}


def _problem(config: TdConfig, *, tuning: bool = False) -> _Problem:
    """The reported MRPs and transitions (streams ``mrps`` / ``transitions`` of
    :data:`STREAMS`); with ``tuning`` and ``config.tuning == "separate"``, the tuning ones
    (``tuning_mrps`` / ``tuning_transitions``)."""
    prefix = "tuning_" if tuning and config.tuning == "separate" else ""
    root = jax.random.key(config.seed)
    keys = jax.random.split(jax.random.fold_in(root, STREAMS[prefix + "mrps"]), config.num_mrps)
    mrps = jax.vmap(
        lambda k: random_linear_mrp(k, config.n_states, config.n_features, config.discount)
    )(keys)
    theta_star = jax.vmap(rl.td_fixed_point)(mrps)
    omega = jax.vmap(smallest_eig)(mrps)
    norm_star = jax.vmap(lambda m, t: rl.td_param_error(m, t, jnp.zeros_like(t)))(mrps, theta_star)
    run_keys = jax.random.split(
        jax.random.fold_in(root, STREAMS[prefix + "transitions"]), config.num_mrps
    )
    return _Problem(mrps, theta_star, omega, norm_star, run_keys)


def _tuned(horizon: int) -> dict[str, Any]:
    """The omega-free schedules: config key -> ``(eta0, omega) -> schedule``."""
    return {
        "exponential": lambda e, w, h=horizon: optim.exponential_horizon_schedule(e, h),
        "constant": lambda e, w: lambda t: e,
        "inverse_time": lambda e, w: optim.inverse_time_schedule(e, 1.0),
        "inverse_time_offset": lambda e, w: optim.inverse_time_schedule(e, 100.0),
    }


def _told(e, w):
    """Told omega: ``eta_t = 1 / (omega (t + t0))`` with ``t0 = 1/omega + 1`` (step < 1 at 0)."""
    return lambda t: 1.0 / (w * (t + 1.0 / w + 1.0))


def _markov_schedule(best_eta0: float, horizon: int):
    """The Markovian rows' schedule: the exponential one at its best i.i.d. ``eta_0``."""

    def sch(e, w, b=best_eta0, h=horizon):
        return optim.exponential_horizon_schedule(b, h)

    return sch


def compare_schedules(config: TdConfig) -> dict[str, Any]:
    """Runs the comparison at ``config``'s scale (a progress stage per horizon and schedule).

    Returns:
      A JSON-ready dict: ``horizons``, ``eta_grid``, ``tuning``, ``rows`` (``str(T)`` ->
      schedule name -> ``{"error", "best_eta0"?, "grid"?, "grid_reported"?}``: ``grid`` the
      tuning errors per ``eta_0``, ``grid_reported`` the reported MRPs' errors per ``eta_0``,
      ``error`` the latter at ``best_eta0``), ``wall_s``,
      ``omega_median`` and
      ``exponential_best_at_every_T`` (no omega-free i.i.d. schedule beats the exponential one
      at any ``T``).
    """
    horizons = list(config.horizons)
    eta_grid = tuple(config.eta_grid)
    with train.stage(f"drawing {config.num_mrps} random MRPs and their TD fixed points"):
        prob = _problem(config)
        tune = prob if config.tuning == "same" else _problem(config, tuning=True)

    def run(schedule_fn, horizon, markovian=False, l2_reg=0.0, etas=(1.0,), on=(None,)):
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

        out = []
        for p in (prob if q is None else q for q in on):  # one compilation serves every problem
            thetas = go(p.run_keys, p.mrps, p.omega, jnp.asarray(etas, jnp.float32))
            out.append({e: p.rel_error(th) for e, th in zip(etas, thetas, strict=True)})
        return out[0] if len(out) == 1 else out

    def staged(name, horizon, etas=(1.0,)):
        grid = f"{len(etas)} step sizes x " if len(etas) > 1 else ""
        return train.stage(f"T={horizon}: {_shown(name)} ({grid}{config.num_mrps} MRPs)")

    results: dict[str, Any] = {
        "horizons": horizons, "eta_grid": list(eta_grid), "tuning": config.tuning, "rows": {}
    }  # fmt: skip
    t_start = time.time()
    for horizon in horizons:
        row = {}
        for key, make in _tuned(horizon).items():
            if key in config.schedules:
                with staged(SCHEDULES[key], horizon, eta_grid):
                    if tune is prob:
                        errs = reported = run(make, horizon, etas=eta_grid)
                    else:
                        errs, reported = run(make, horizon, etas=eta_grid, on=(tune, prob))
                best = min(errs, key=errs.get)
                row[SCHEDULES[key]] = {
                    "best_eta0": best, "error": reported[best], "grid": errs,
                    "grid_reported": reported,
                }  # fmt: skip
        if "told_omega" in config.schedules:
            with staged(SCHEDULES["told_omega"], horizon):
                row[SCHEDULES["told_omega"]] = {"error": run(_told, horizon)[1.0]}
        if config.markovian:
            lam = 1.0 / np.sqrt(horizon)
            sch = _markov_schedule(row[EXPONENTIAL]["best_eta0"], horizon)
            with staged(MARKOV_PLAIN, horizon):
                row[MARKOV_PLAIN] = {"error": run(sch, horizon, markovian=True)[1.0]}
            with staged(MARKOV_REG, horizon):
                row[MARKOV_REG] = {"error": run(sch, horizon, markovian=True, l2_reg=lam)[1.0]}
        results["rows"][str(horizon)] = row

    results["wall_s"] = time.time() - t_start
    results["omega_median"] = float(jnp.median(prob.omega))
    results["exponential_best_at_every_T"] = all(
        cells[name]["error"] >= cells[EXPONENTIAL]["error"]
        for cells in results["rows"].values()
        for name in cells
        if name != EXPONENTIAL and "Markovian" not in name and "omega" not in name
    )
    return results


def error_curves(
    config: TdConfig, results: dict[str, Any], *, num_points: int = CURVE_POINTS
) -> dict[str, Any]:
    """The error along the trajectory of every row of ``results`` at the largest horizon.

    Each row reruns its table run (same MRPs, transitions and best ``eta_0``) with
    :func:`fidia_jax.projects.td.linear_td0_path`, recording ``theta`` at up to ``num_points``
    log-spaced steps; the last point is the run's final iterate.

    Args:
      config: the config :func:`compare_schedules` ran.
      results: its results.
      num_points: at most this many steps (fewer when the horizon is short).

    Returns:
      ``{"horizon": T, "steps": [...], "rows": {row name: [mean relative error, ...]}}``.
    """
    horizon = max(config.horizons)
    steps = np.unique(np.geomspace(1, horizon, num_points).round().astype(np.int64))
    marks = tuple(int(s) for s in steps)
    prob = _problem(config)
    row = results["rows"][str(horizon)]

    def path(schedule_fn, eta0, markovian=False, l2_reg=0.0):
        @jax.jit
        def go(keys_, mrps_, omega_):
            return jax.vmap(
                lambda k, m, w: linear_td0_path(
                    k, m, schedule_fn(eta0, w), horizon, marks, markovian=markovian, l2_reg=l2_reg
                )
            )(keys_, mrps_, omega_)

        thetas_MxKxd = go(prob.run_keys, prob.mrps, prob.omega)
        return [prob.rel_error(thetas_MxKxd[:, i]) for i in range(len(marks))]

    curves: dict[str, list[float]] = {}
    with train.stage(f"T={horizon}: error curves of {len(row)} rows ({len(marks)} points each)"):
        for key, make in _tuned(horizon).items():
            if SCHEDULES[key] in row:
                eta0 = jnp.float32(row[SCHEDULES[key]]["best_eta0"])
                curves[SCHEDULES[key]] = path(make, eta0)
        if SCHEDULES["told_omega"] in row:
            curves[SCHEDULES["told_omega"]] = path(_told, jnp.float32(1.0))
        if MARKOV_PLAIN in row:
            sch = _markov_schedule(row[EXPONENTIAL]["best_eta0"], horizon)
            curves[MARKOV_PLAIN] = path(sch, jnp.float32(1.0), markovian=True)
            curves[MARKOV_REG] = path(
                sch, jnp.float32(1.0), markovian=True, l2_reg=1.0 / np.sqrt(horizon)
            )
    return {"horizon": horizon, "steps": list(marks), "rows": curves}


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


def _table_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (schedule, horizon): error, ratio to the exponential schedule, best eta0."""
    out = []
    for name in results["rows"][str(results["horizons"][0])]:
        for h in results["horizons"]:
            r = results["rows"][str(h)]
            out.append(
                {
                    "schedule": name,
                    "T": h,
                    "error": r[name]["error"],
                    "ratio to exponential": r[name]["error"] / r[EXPONENTIAL]["error"],
                    "best eta0": r[name].get("best_eta0"),
                }
            )
    return out


def _plot_curves(curves: dict[str, Any], results: dict[str, Any], out_png) -> None:
    """Error along the trajectory at the largest horizon (left) and final error against ``T``."""
    plt = train.pyplot()
    several = len(results["horizons"]) > 1
    fig, axes = plt.subplots(
        1, 2 if several else 1, figsize=(12.5 if several else 7, 4.6), squeeze=False
    )
    ax = axes[0, 0]
    for i, (name, errs) in enumerate(curves["rows"].items()):
        style = "--" if "Markovian" in name else "-"
        ax.plot(curves["steps"], errs, style, color=f"C{i}", label=name, lw=1.4)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("step t")
    ax.set_ylabel("relative value error (mean over MRPs)")
    ax.set_title(
        f"TD(0) error along the run, T = {curves['horizon']} (best eta0 each)", fontsize=10
    )
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    if several:
        ax = axes[0, 1]
        hs = results["horizons"]
        for i, name in enumerate(curves["rows"]):
            style = "--" if "Markovian" in name else "-"
            errs = [results["rows"][str(h)][name]["error"] for h in hs]
            ax.plot(hs, errs, style, marker="o", color=f"C{i}", label=name, lw=1.4)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("horizon T")
        ax.set_title("final error against the horizon", fontsize=10)
        ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    with atomic_path(out_png) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)


def train_and_evaluate(config: TdConfig, workdir: str | pathlib.Path) -> dict[str, Any]:
    """Runs :func:`compare_schedules` and :func:`error_curves` with progress, prints the table
    and writes, in ``workdir``: ``td_schedules.json`` (the results of :func:`compare_schedules`
    plus the ``config`` that produced them), ``summary.json`` (the table and the curves) and
    ``td_curves.png``; every file atomically (temp file, then rename).

    On a launcher's process ``i > 0`` (:func:`fidia_jax.parallel.exit_if_secondary`) it
    computes and writes nothing: it prints one line and exits with status 0, as
    :func:`fidia_jax.train.fit` does for a driver that cannot share its work. (Where the caller
    joined the distributed runtime itself, every process computes and process 0 alone prints
    and writes.)

    Returns:
      The results dict (as written to ``td_schedules.json``, without ``config``).
    """
    parallel.exit_if_secondary("td")  # nothing to split: process 0 runs it alone
    workdir = pathlib.Path(workdir)
    results = compare_schedules(config)
    curves = error_curves(config, results)
    rows = _table_rows(results)
    if not parallel.is_primary():  # a caller joined the runtime itself: process 0 writes alone
        return results
    train.print_table(
        f"TD(0) relative value error ||Phi (theta_T - theta*)||_D^2 / ||Phi theta*||_D^2, mean "
        f"over {config.num_mrps} MRPs (ratio > 1: the exponential schedule is better)",
        ["schedule", "T", "error", "ratio to exponential", "best eta0"],
        [
            [
                _shown(r["schedule"]),
                r["T"],
                f"{r['error']:.3g}",
                f"{r['ratio to exponential']:.2f}",
                "" if r["best eta0"] is None else f"{r['best eta0']:g}",
            ]
            for r in rows
        ],
    )
    config_lib.write_summary(workdir / SUMMARY_FILE, results, config)
    train.write_summary(
        workdir,
        {
            "num_mrps": config.num_mrps,
            "horizons": results["horizons"],
            "table": rows,
            "exponential_best_at_every_T": results["exponential_best_at_every_T"],
            "omega_median": results["omega_median"],
            "curves": curves,
        },
    )
    # the error curves as metrics.jsonl records (one run per schedule), like every training run
    metrics_path = pathlib.Path(workdir) / "metrics.jsonl"
    metrics_path.unlink(missing_ok=True)
    train.append_metrics(
        metrics_path,
        [
            {"run": name, "step": int(step), "rel_error": float(np.mean(err))}
            for name, errs in curves["rows"].items()
            for step, err in zip(curves["steps"], errs, strict=True)
        ],
    )
    _plot_curves(curves, results, workdir / "td_curves.png")
    return results
