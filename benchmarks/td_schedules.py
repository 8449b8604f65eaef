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

The experiment is the TD driver's (:func:`fidia_jax.projects.td.compare_schedules`, the
``default`` preset; ``fidia-jax td train --config tiny|demo|default`` runs it at other scales).

Usage: python benchmarks/td_schedules.py [--horizons 1000,10000,100000] [--num-mrps 64]
"""

from __future__ import annotations

import argparse
import json
import pathlib

from fidia_jax._io import atomic_write_text
from fidia_jax.projects import td


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--horizons", default="1000,10000,100000")
    ap.add_argument("--num-mrps", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="benchmarks/results/td_schedules.json")
    args = ap.parse_args()
    horizons = tuple(int(x) for x in args.horizons.split(","))
    config = td.get_config("default", horizons=horizons, num_mrps=args.num_mrps, seed=args.seed)

    results = td.compare_schedules(config)
    print("\n" + td.format_table(results, args.num_mrps))
    exp_best = results["exponential_best_at_every_T"]
    print(f"\nexponential best among omega-free i.i.d. schedules at every T: {exp_best}")
    out = pathlib.Path(args.out)
    atomic_write_text(out, json.dumps(results, indent=2))
    print(f"wrote {out} ({results['wall_s']:.0f} s)")


if __name__ == "__main__":
    main()
