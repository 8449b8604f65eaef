"""TD(0) step-size schedules on random MRPs: exponential vs constant vs 1/t (+ regularised).

For every horizon T, 64 random MRPs (20 states, 5 unit-norm features, gamma 0.9) are solved by
TD(0) from theta = 0 with i.i.d. transitions (vmapped over MRPs). Each schedule gets the same
tuning budget: the best initial step size eta_0 in a small grid, chosen per T on the mean error.
Error = ||Phi (theta_T - theta*)||_D^2 / ||Phi theta*||_D^2 (mean over MRPs), theta* the exact
TD fixed point from a linear solve. The "1/(omega t)" row is told the smallest eigenvalue omega
of the symmetrised TD matrix of each MRP (the quantity the exponential schedule does not need).

The Markovian rows run one trajectory per MRP with the exponential schedule, standard TD(0)
versus the regularised TD(0) with lambda = 1/sqrt(T) (reconstructed constant), both measured
against the unregularised fixed point.

Usage: python benchmarks/td_schedules.py [--horizons 1000,10000,100000] [--num-mrps 64]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time

import jax
import jax.numpy as jnp
import numpy as np

from fidia_jax import optim, rl
from fidia_jax._io import atomic_write_text

ETA_GRID = (0.03, 0.1, 0.3, 1.0)


def smallest_eig(mrp):
    p, _, phi, gamma = mrp
    mu = rl.stationary_distribution(p)
    d_phi = phi * mu[:, None]
    a = d_phi.T @ (phi - gamma * (p @ phi))
    return jnp.min(jnp.linalg.eigvalsh(0.5 * (a + a.T)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--horizons", default="1000,10000,100000")
    ap.add_argument("--num-mrps", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="benchmarks/results/td_schedules.json")
    args = ap.parse_args()
    horizons = [int(x) for x in args.horizons.split(",")]

    keys = jax.random.split(jax.random.key(args.seed), args.num_mrps)
    mrps = jax.vmap(lambda k: rl.random_linear_mrp(k, 20, 5, 0.9))(keys)
    theta_star = jax.vmap(rl.td_fixed_point)(mrps)
    omega = jax.vmap(smallest_eig)(mrps)
    norm_star = jax.vmap(lambda m, t: rl.td_param_error(m, t, jnp.zeros_like(t)))(mrps, theta_star)
    run_keys = jax.random.split(jax.random.key(args.seed + 1), args.num_mrps)

    def rel_error(thetas):
        err = jax.vmap(rl.td_param_error)(mrps, thetas, theta_star)
        return float(jnp.mean(err / norm_star))

    def run(schedule_fn, horizon, markovian=False, l2_reg=0.0, etas=(1.0,)):
        """schedule_fn(eta0, omega) -> schedule; one jit per call, vmapped over (eta0, MRP)."""

        @jax.jit
        def go(keys_, mrps_, omega_, etas_):
            per_mrp = jax.vmap(
                lambda k, m, w, e: rl.run_linear_td0(
                    k, m, schedule_fn(e, w), horizon, markovian=markovian, l2_reg=l2_reg
                ),
                in_axes=(0, 0, 0, None),
            )
            return jax.vmap(per_mrp, in_axes=(None, None, None, 0))(keys_, mrps_, omega_, etas_)

        thetas = go(run_keys, mrps, omega, jnp.asarray(etas, jnp.float32))
        return {e: rel_error(th) for e, th in zip(etas, thetas, strict=True)}

    results = {"horizons": horizons, "eta_grid": list(ETA_GRID), "rows": {}}
    t_start = time.time()
    for horizon in horizons:
        row = {}
        schedules = {
            "exponential eta0*T^(-t/T)": lambda e, w, h=horizon: optim.exponential_horizon_schedule(
                e, h
            ),
            "constant eta0": lambda e, w: lambda t: e,
            "1/t: eta0/(1+t)": lambda e, w: optim.inverse_time_schedule(e, 1.0),
            "1/t: eta0*100/(t+100)": lambda e, w: optim.inverse_time_schedule(e, 100.0),
        }
        for name, make in schedules.items():
            errs = run(make, horizon, etas=ETA_GRID)
            best = min(errs, key=errs.get)
            row[name] = {"best_eta0": best, "error": errs[best], "grid": errs}
        # Told omega: eta_t = 1 / (omega (t + t0)) with t0 = 1/omega + 1 (step < 1 at t = 0).
        told = lambda e, w: lambda t: 1.0 / (w * (t + 1.0 / w + 1.0))  # noqa: E731
        row["1/(omega t) [told omega]"] = {"error": run(told, horizon)[1.0]}
        lam = 1.0 / np.sqrt(horizon)
        best_exp = row["exponential eta0*T^(-t/T)"]["best_eta0"]
        sch = lambda e, w, b=best_exp, h=horizon: optim.exponential_horizon_schedule(b, h)  # noqa: E731
        row["Markovian exponential"] = {"error": run(sch, horizon, markovian=True)[1.0]}
        row["Markovian regularised (lambda=1/sqrt(T))"] = {
            "error": run(sch, horizon, markovian=True, l2_reg=lam)[1.0]
        }
        results["rows"][str(horizon)] = row

    results["wall_s"] = time.time() - t_start
    results["omega_median"] = float(jnp.median(omega))
    names = list(results["rows"][str(horizons[0])])
    ref = "exponential eta0*T^(-t/T)"
    print(
        f"\nTD(0) relative value error, mean over {args.num_mrps} MRPs "
        f"(ratio = error / exponential's, >1 means exponential is better)"
    )
    header = "| schedule | " + " | ".join(f"T={h:g} error (ratio)" for h in horizons) + " |"
    print(header)
    print("|" + "---|" * (len(horizons) + 1))
    exp_best = True
    for name in names:
        cells = []
        for h in horizons:
            r = results["rows"][str(h)]
            e, e_ref = r[name]["error"], r[ref]["error"]
            extra = f", eta0={r[name]['best_eta0']}" if "best_eta0" in r[name] else ""
            cells.append(f"{e:.3g} ({e / e_ref:.2f}{extra})")
            if name != ref and "Markovian" not in name and "omega" not in name and e < e_ref:
                exp_best = False
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(f"\nexponential best among omega-free i.i.d. schedules at every T: {exp_best}")
    results["exponential_best_at_every_T"] = exp_best
    out = pathlib.Path(args.out)
    atomic_write_text(out, json.dumps(results, indent=2))
    print(f"wrote {out} ({results['wall_s']:.0f} s)")


if __name__ == "__main__":
    main()
