"""DyCon experiment: probe R² by layer, and baseline / NoWait / static probe / DyCon decoding.

Runs :func:`fidia_jax.projects.dycon.train_and_evaluate` (training included: the "peers" are the
other decoders of the same model, measured in the same run), prints one table of ratios to the
baseline (tokens ratio, accuracy difference, per difficulty bucket) and writes
``benchmarks/results/dycon.json``.

    python benchmarks/dycon.py                 # the default preset (docs/dycon.md)
    python benchmarks/dycon.py --smoke         # the tiny preset, seconds (numbers mean nothing)
    python benchmarks/dycon.py --set steps=3000 num_test=2000   # overrides (key=value, JSON values)
"""

from __future__ import annotations

from _driver_bench import run_driver_benchmark

from fidia_jax.projects import dycon


def ratio_table(results: dict, buckets) -> str:
    names = [f"{lo}-{hi}" for lo, hi in buckets] + ["all"]
    s = results["summary"]
    lines = [
        "ratio to the baseline: tokens (method / baseline) and accuracy difference (method - baseline)",
        "| method | " + " | ".join(f"k={b} tokens x | k={b} acc diff" for b in names) + " |",
        "|" + "---|" * (2 * len(names) + 1),
    ]
    for method in dycon.METHODS:
        cells = []
        for b in names:
            c, r = s[method][b], s["baseline"][b]
            cells += [f"{c['tokens'] / r['tokens']:.3f}", f"{c['accuracy'] - r['accuracy']:+.3f}"]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> dict:
    return run_driver_benchmark(
        "dycon", dycon, lambda r, c: ratio_table(r, c.buckets), __doc__, argv
    )


if __name__ == "__main__":
    main()
