"""AlgoTrace experiment: primitive clusters, the injection table, composition and transfer.

Runs :func:`fidia_jax.projects.algotrace.train_and_evaluate` (training included). The "peers"
are the controls measured in the same run: random clusters of the same sizes and the partition
by token identity (for the clustering), and a random vector of the same norm (for injection).
Prints one table of ratios to those controls and writes ``benchmarks/results/algotrace.json``.

    python benchmarks/algotrace.py                 # the default preset (docs/algotrace.md)
    python benchmarks/algotrace.py --smoke         # the tiny preset (numbers mean nothing)
    python benchmarks/algotrace.py --config reduced --set seed=1    # overrides (key=value)
"""

from __future__ import annotations

from _driver_bench import run_driver_benchmark

from fidia_jax.projects import algotrace
from fidia_jax.projects.algotrace.traces import ALGOTRACE_PRIMITIVES


def ratio_table(results: dict) -> str:
    cl = results["clustering"]
    lines = [
        "ratio to the controls measured in the same run",
        "| quantity | method | control | ratio (method / control) |",
        "|---|---|---|---|",
    ]
    for part, ctrl in (("kmeans", "random"), ("kmeans", "token_identity"), ("meta", "random")):
        for m in ("purity", "nmi"):
            a, b = cl[part][m], cl[ctrl][m]
            r = f"{a / b:.2f}" if b > 1e-9 else "inf"
            lines.append(f"| {m}: {part} vs {ctrl} | {a:.3f} | {b:.3f} | {r} |")
    table = results["injection"]["table"]
    for i, p in enumerate(ALGOTRACE_PRIMITIVES):
        a, b = table[p][i], table["random"][i]
        r = f"{a / b:.2f}" if abs(b) > 1e-9 else "n/a"
        lines.append(
            f"| rate change of {p}: its vector vs random vector | {a:+.3f} | {b:+.3f} | {r} |"
        )
    return "\n".join(lines)


def main(argv=None) -> dict:
    return run_driver_benchmark("algotrace", algotrace, lambda r, c: ratio_table(r), __doc__, argv)


if __name__ == "__main__":
    main()
