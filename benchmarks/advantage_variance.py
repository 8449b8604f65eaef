"""Gradient variance of the max@k effective rewards on a toy policy, per baseline (docs/fidia_rewards.md).

A 5-outcome categorical policy (logits ``theta``, outcome values ``values``, as in the page's
snippet); for each ``(n, k)``, ``--draws`` vmapped draws of ``n`` samples (key ``--seed``), the
per-draw policy gradient ``sum_i s_i (onehot(x_i) - p)`` with ``s`` from
:func:`fidia_jax.rl.max_at_k_effective_rewards` under each baseline (``none``, ``loo``,
``loo-1``), and the sum over the 5 logits of its variance. ``loo`` needs ``k < n`` (``n/a``
otherwise); at ``k = 1`` ``loo-1`` is RLOO.

    python benchmarks/advantage_variance.py             # 20,000 draws, key 0 (seconds)
    python benchmarks/advantage_variance.py --report    # re-table the results file, no run

Writes ``benchmarks/results/advantage_variance.json`` (``_results``: the table ``variance``).
"""

from __future__ import annotations

import argparse
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _results import load_average, retable, write_results  # noqa: E402

VALUES = (0.0, 1.0, -0.5, 2.0, 0.7)
THETA = (0.4, -0.2, 0.1, -0.8, 0.3)
SETTINGS = ((6, 1), (6, 3), (6, 6), (16, 8))
BASELINES = ("none", "loo", "loo-1")


def variances(draws: int, seed: int, settings=SETTINGS, baselines=BASELINES) -> list[dict]:
    """``[{"n", "k", <baseline>: total variance}]`` per ``(n, k)`` of ``settings`` (``None``
    where a baseline does not apply)."""
    import jax
    import jax.numpy as jnp

    from fidia_jax import rl

    values, theta = jnp.array(VALUES), jnp.array(THETA)
    p = jax.nn.softmax(theta)
    keys = jax.random.split(jax.random.key(seed), draws)

    def total_variance(n: int, k: int, baseline: str) -> float:
        def one(key):
            x = jax.random.categorical(key, theta, shape=(n,))
            s = rl.max_at_k_effective_rewards(values[x], k, baseline)
            return jnp.sum(s[:, None] * (jax.nn.one_hot(x, len(VALUES)) - p[None]), 0)

        return float(jnp.sum(jnp.var(jax.jit(jax.vmap(one))(keys), 0)))

    rows = []
    for n, k in settings:
        row = {"n": n, "k": k}
        for b in baselines:
            row[b] = None if (b == "loo" and k >= n) else total_variance(n, k, b)
        rows.append(row)
        print(f"n = {n}, k = {k}: " + ", ".join(f"{b} {row[b]}" for b in baselines), flush=True)
    return rows


def tables(record: dict) -> dict:
    """The ``variance`` table of a record (``rows`` as :func:`variances` gives them)."""
    rows = [[f"{r['n']}, {r['k']}", *(r[b] for b in BASELINES),
             "loo-1 is RLOO" if r["k"] == 1 else ""] for r in record["rows"]]  # fmt: skip
    return {"variance": {"columns": ["n, k", *BASELINES, "note"], "rows": rows,
                         "formats": [None, ".4f", ".4f", ".4f", None]}}  # fmt: skip


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(HERE / "results" / "advantage_variance.json"))
    ap.add_argument("--report", action="store_true", help="no run: re-table --out")
    args = ap.parse_args(argv)
    if args.report:
        retable(args.out, tables)
        return 0
    if args.draws < 2:
        ap.error(f"--draws must be >= 2, got {args.draws}")
    load_start = load_average()
    record = {"rows": variances(args.draws, args.seed), "draws": args.draws, "seed": args.seed,
              "values": VALUES, "theta": THETA}  # fmt: skip
    path = write_results("advantage_variance", tables(record), load_start=load_start,
                         extra=record, out=args.out)  # fmt: skip
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
