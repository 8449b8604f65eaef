"""TD(0) step-size schedules on random MRPs: exponential vs constant vs 1/t (+ regularised).

For every horizon T, 64 random MRPs (20 states, 5 unit-norm features, gamma 0.9) are solved by
TD(0) from theta = 0 with i.i.d. transitions (vmapped over MRPs). Each schedule gets the same
tuning budget: the best initial step size eta_0 in a small grid, chosen per T on the mean error
over 64 other MRPs with other transitions (the driver's ``tuning="separate"``).
Error = ||Phi (theta_T - theta*)||_D^2 / ||Phi theta*||_D^2 (mean over MRPs), theta* the exact
TD fixed point from a linear solve. The "1/(omega t)" row is told the smallest eigenvalue omega
of the symmetrised TD matrix of each MRP (the quantity the exponential schedule does not need).

The Markovian rows run one trajectory per MRP with the exponential schedule, standard TD(0)
versus the regularised TD(0) with lambda = 1/sqrt(T) (reconstructed constant), both measured
against the unregularised fixed point.

The experiment is the TD driver's (:func:`fidia_jax.projects.td.compare_schedules`, the
``default`` preset; ``fidia-jax td train --config tiny|demo|default`` runs it at other scales).

Usage: python benchmarks/td_schedules.py [--horizons 1000,10000,100000] [--num-mrps 64]

Writes ``benchmarks/results/td_schedules.json`` (``benchmarks/_results.py``): the raw results and
the table ``schedules`` that docs/benchmarks.md renders.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

from fidia_jax.projects import td

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _results import load_average, write_results  # noqa: E402


def schedules_table(results: dict) -> dict:
    """One row per schedule: ``error (ratio to exponential)`` per horizon, and its eta0s."""
    horizons = results["horizons"]
    names = list(results["rows"][str(horizons[0])])
    rows = []
    for name in names:
        cells = []
        etas = []
        for h in horizons:
            cell = results["rows"][str(h)][name]
            ref = results["rows"][str(h)][td.EXPONENTIAL]["error"]
            cells.append(f"{cell['error']:.3g} ({cell['error'] / ref:.3g})")
            if "best_eta0" in cell:
                etas.append(f"{cell['best_eta0']:g}")
        rows.append([name, *cells, " / ".join(etas) if etas else None])
    columns = ["schedule", *(f"T = {h:g}" for h in horizons), "eta0 per T (chosen on tuning MRPs)"]
    return {"schedules": {"columns": columns, "rows": rows}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--horizons", default="1000,10000,100000")
    ap.add_argument("--num-mrps", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="benchmarks/results/td_schedules.json")
    args = ap.parse_args()
    load_start = load_average()
    horizons = tuple(int(x) for x in args.horizons.split(","))
    config = td.get_config("default", horizons=horizons, num_mrps=args.num_mrps, seed=args.seed)

    results = td.compare_schedules(config)
    print("\n" + td.format_table(results, args.num_mrps))
    exp_best = results["exponential_best_at_every_T"]
    print(f"\nexponential best among omega-free i.i.d. schedules at every T: {exp_best}")
    out = write_results(
        "td_schedules",
        schedules_table(results),
        load_start=load_start,
        extra={"results": results, "num_mrps": args.num_mrps, "seed": args.seed},
        out=args.out,
    )
    print(f"wrote {out} ({results['wall_s']:.0f} s)")


if __name__ == "__main__":
    main()
