"""The serving table shared by ``benchmarks/streamflow.py`` and ``benchmarks/streamflow_pipeline.py``
(run as scripts from ``benchmarks/``)."""

from __future__ import annotations


def serving_table(
    by_clock: dict[str, dict[str, dict]],
    policies: dict[str, str],
    rates: dict[str, dict[str, float]],
    ratio_to: tuple[str, ...] = ("a",),
) -> list[str]:
    """Markdown header and rows of the serving comparison, one row per (clock, arrivals, policy).

    Args:
      by_clock: ``{clock: {arrivals: {policy key: {"images_per_s", "latency_p50_s",
        "latency_p95_s", "max_abs_diff_vs_a", ...}}}}``; arrivals ``"burst"`` or a rate name; a
        policy missing from an arrivals entry is skipped (other keys of the entry are ignored).
      policies: policy key -> description, in table order.
      rates: ``{clock: {rate name: images/s}}`` of the Poisson arrivals (for the row labels).
      ratio_to: a "ratio to (k)" column (images/s over policy ``k``'s) for each key.

    Returns:
      The table's lines (header, separator, rows).
    """
    ratio_cols = "".join(f" ratio to ({k}) |" for k in ratio_to)
    lines = [
        f"| clock | arrivals | policy | images/s |{ratio_cols} p50 latency s | p95 latency s | "
        "max abs diff vs (a) |",
        "|---|---|---|---|" + "---|" * len(ratio_to) + "---|---|---|",
    ]
    for clock, crows in by_clock.items():
        for name, by in crows.items():
            label = (
                "burst (all at t=0)"
                if name == "burst"
                else f"Poisson {name} ({rates[clock][name]:.0f}/s)"
            )
            for key in policies:
                if key not in by:
                    continue
                r = by[key]
                ratios = "".join(
                    f" {r['images_per_s'] / by[k]['images_per_s']:.2f} |" for k in ratio_to
                )
                lines.append(
                    f"| {clock} | {label} | ({key}) {policies[key]} | {r['images_per_s']:.1f} |"
                    f"{ratios} {r['latency_p50_s']:.3f} | {r['latency_p95_s']:.3f} | "
                    f"{r['max_abs_diff_vs_a']:.1e} |"
                )
    return lines
