"""AlgoTrace experiment: primitive clusters, the injection table, composition and transfer.

Runs :func:`fidia_jax.projects.algotrace.train_and_evaluate` (training included). The "peers"
are the controls measured in the same run: random clusters of the same sizes and the partition
by token identity (for the clustering), and a random vector of the same norm (for injection).
Prints one table of ratios to those controls and writes ``benchmarks/results/algotrace.json``.

    python benchmarks/algotrace.py                 # the default preset (docs/algotrace.md)
    python benchmarks/algotrace.py --smoke         # the tiny preset (numbers mean nothing)
    python benchmarks/algotrace.py --config reduced --set seed=1    # overrides (key=value)
    python benchmarks/algotrace.py --report benchmarks/results/algotrace.json   # re-table
"""

from __future__ import annotations

import sys

from _driver_bench import run_driver_benchmark
from _results import retable

from fidia_jax.projects import algotrace
from fidia_jax.projects.algotrace.plots import PARTITIONS
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


def _key(variant: str) -> str:
    """A variant's name as a table-key suffix: ``onset@1`` -> ``onset_1``."""
    return variant.replace("@", "_").replace(".", "p")


def _pair(a: float, b: float) -> str:
    return f"{a:+.3f} / {b:+.3f}"


def tables(results: dict, config=None) -> dict:
    """The results file's tables (docs/algotrace.md renders them): ``clustering`` (the
    clustered layer's partitions against the true primitives), ``per_layer`` (k-means on every
    layer), ``run`` (training loss, uninjected solve rates, baseline primitive rates),
    ``variants`` (the injection summary of every variant) and, per variant ``v`` (``onset_1``,
    ...), ``injection_v`` (change of each primitive's rate, rows: injected vector),
    ``composition_v`` and ``transfer_v``."""
    cl = results["clustering"]
    sc = ("purity", "nmi", "ari")
    out = {
        "clustering": {
            "columns": ["partition", "purity", "NMI", "ARI"],
            "rows": [[PARTITIONS[n], *(cl[n][m] for m in sc)] for n in PARTITIONS],
            "formats": [None, ".3f", ".3f", ".3f"],
        },
        "per_layer": {
            "columns": ["layer (resid_post)", "purity", "NMI", "ARI"],
            "rows": [[i, *(a[m] for m in sc)] for i, a in enumerate(cl["per_layer"])],
            "formats": [None, ".3f", ".3f", ".3f"],
        },
    }
    none = results["conditions"]["none"]
    run = [["training loss (trace tokens), first step -> mean of the last 20",
            f"{results['train']['first_loss']:.2f} -> {results['train']['final_loss']:.3f}"],
           ["clustered trace tokens (layer)", f"{cl['n_points']} ({cl['layer']})"],
           ["uninjected prompts that write the exact solution path: TSP / navigation",
            f"{none['solved']['tsp']:.3f} / {none['solved']['nav']:.3f}"],
           ["uninjected rate of " + " / ".join(ALGOTRACE_PRIMITIVES),
            " / ".join(f"{r:.3f}" for r in none["rates"]["all"])]]  # fmt: skip
    out["run"] = {"columns": ["quantity", "value"], "rows": run}
    out["variants"] = {
        "columns": ["variant (positions @ scale)", "diagonal > 0", "diagonal = row max",
                    "diagonal > random", "pairs whose sum raises both", "transfers > 0"],
        "rows": [[f"`{n}`", f"{v['diagonal_positive']}/5", f"{v['diagonal_row_max']}/5",
                  f"{v['diagonal_beats_random']}/5",
                  f"{v['composition_raises_both']}/{len(results['injection']['composition'])}",
                  f"{v['transfer_positive']}/10"]
                 for n, v in results["variant_summary"].items()],
    }  # fmt: skip
    for name, v in results["variants"].items():
        inj = v["injection"]
        out[f"injection_{_key(name)}"] = {
            "columns": ["injected vector", *ALGOTRACE_PRIMITIVES],
            "rows": [[row, *vals] for row, vals in inj["table"].items()],
            "formats": [None, *["+.3f"] * len(ALGOTRACE_PRIMITIVES)],
        }  # fmt: skip
        comp = []
        for pair, c in inj["composition"].items():
            a, b = pair.split("+")
            comp.append([pair, _pair(c["delta_a"][a], c["delta_b"][a]),
                         _pair(c["delta_a"][b], c["delta_b"][b]),
                         _pair(c["delta_a"][pair], c["delta_b"][pair]),
                         "yes" if c["sum_raises_both"] else "no"])  # fmt: skip
        out[f"composition_{_key(name)}"] = {
            "columns": ["pair a+b", "a alone (a's / b's change)", "b alone", "a + b",
                        "a + b raises both"],
            "rows": comp,
        }  # fmt: skip
        solved = v.get("conditions", {})
        out[f"solved_{_key(name)}"] = {
            "columns": ["condition (injected vector)", "TSP prompts solved", "navigation prompts solved"],
            "rows": [[c, r["solved"]["tsp"], r["solved"]["nav"]] for c, r in solved.items()
                     if c == "none" or c in inj["table"]],
            "formats": [None, ".3f", ".3f"],
        }  # fmt: skip
        out[f"transfer_{_key(name)}"] = {
            "columns": ["primitive", "TSP vector on NAV", "NAV vector on NAV",
                        "NAV vector on TSP", "TSP vector on TSP"],
            "rows": [[p, c["tsp->nav"], c["nav->nav"], c["nav->tsp"], c["tsp->tsp"]]
                     for p, c in inj["transfer"].items()],
            "formats": [None, "+.3f", "+.3f", "+.3f", "+.3f"],
        }  # fmt: skip
    return out


def main(argv=None) -> dict:
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["--report"]:  # re-table results files this script wrote, no training
        for path in args[1:]:
            retable(path, tables)
        return {}
    return run_driver_benchmark(
        "algotrace", algotrace, lambda r, c: ratio_table(r), __doc__, argv, tables=tables
    )


if __name__ == "__main__":
    main()
