"""DyCon's probe on a released checkpoint (issue 26, Deliver 4): held-out R² of the
log-normalised remaining length per hidden state, the shuffled-label control, and the
position-only and counter baselines on the same test boundaries.

Runs ``fidia-jax dycon train --config default --set checkpoint=PATH --set checkpoint_traces=N``
in this process (the CLI's own ``main``, into ``--workdir``: a fresh temporary folder unless
given), reads the run's ``dycon_checkpoint.json`` and writes
``benchmarks/results/dycon_checkpoint.json`` through :func:`_results.write_results` (the run's
record kept beside the tables); ``docs/dycon.md`` renders its tables from that file
(``python tools/render_tables.py --write docs/dycon.md``). Tables:

* ``probe``: per hidden state (0: embeddings, ``l``: after block ``l - 1``), the probe's
  held-out R² and the shuffled-label control's, the layer chosen on the validation traces marked;
* ``baselines``: on the same test boundaries, the probe at the chosen layer, the position-only
  ridge (``t``, ``log(1 + t)``) and the counter ridge (``k``, steps done / left, tokens done:
  what a reader of the text can count), with the boundary and trace counts;
* ``paired``: the per-trace paired bootstrap of the test squared error, probe minus the
  position-only ridge (mean, 95 % CI, P(probe not better)).

    python benchmarks/dycon_checkpoint.py --checkpoint gemma-3-270m-q4_k_m.gguf
    python benchmarks/dycon_checkpoint.py --checkpoint PATH --traces 60 --workdir runs/gemma_dycon
    python benchmarks/dycon_checkpoint.py --report benchmarks/results/dycon_checkpoint.json

The GGUF file: ``python tools/gemma3_270m_gguf.py`` assembles it.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from collections.abc import Mapping
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _results import default_out, load_average, retable, run_fidia_cli, write_results  # noqa: E402

NAME = "dycon_checkpoint"


def _state(layer: int) -> str:
    return "0: embeddings" if layer == 0 else f"{layer}: after block {layer - 1}"


def _test_traces(num_traces: int) -> int:
    """Traces of the test split (:func:`fidia_jax.projects.dycon.lm_probe.checkpoint_probe`:
    the first half fits, the next quarter chooses the layer, the rest is the test)."""
    return num_traces - (3 * num_traces) // 4


def probe_table(record: Mapping[str, Any]) -> dict:
    """One row per hidden state: the probe's and the shuffled control's held-out R²."""
    p = record["probe"]
    rows = []
    for layer, (r2, shuffled) in enumerate(zip(p["r2_test"], p["r2_shuffled_test"], strict=True)):
        name = _state(layer)
        if layer == p["layer"]:
            name += " (chosen on validation traces)"
        if layer == len(p["r2_test"]) - 1:
            name += " (last)"
        rows.append([name, float(r2), float(shuffled)])
    return {
        "columns": ["hidden state", "probe, held-out R²", "shuffled-label control, held-out R²"],
        "rows": rows,
        "formats": [None, ".3f", ".3f"],
    }


def baselines_table(record: Mapping[str, Any]) -> dict:
    """The probe at the chosen layer against the two ridge baselines, same test boundaries."""
    p = record["probe"]
    n_test, n_traces = p["num_test_boundaries"], _test_traces(p["num_traces"])
    rows = [
        [f"probe at hidden state {p['layer']} (chosen on validation traces)", p["r2_layer"]],
        ["position only: ridge on t, log(1 + t) (reasoning tokens so far)",
         p["r2_position_baseline"]],
        ["counter: ridge on k, steps done, steps left, log(1 + steps left), t, log(1 + t)",
         p["r2_counter_baseline"]],
    ]  # fmt: skip
    return {
        "columns": ["predictor", "held-out R²", "test boundaries", "test traces"],
        "rows": [[name, float(r2), n_test, n_traces] for name, r2 in rows],
        "formats": [None, ".3f", None, None],
    }


def _p_cell(p: float, draws: int = 2000) -> float | str:
    """A bootstrap share, or ``"< 1/draws"`` when no draw was at or above zero."""
    return f"< {1 / draws:g}" if p == 0 else float(p)


def paired_table(record: Mapping[str, Any]) -> dict:
    """Per-trace paired bootstrap (2000 draws) of test squared error, probe − position only."""
    p = record["probe"]
    d = p["paired"]
    return {
        "columns": [
            "comparison (test squared error, per test trace)",
            "MSE difference",
            "95 % CI low",
            "95 % CI high",
            "P(probe not better)",
        ],
        "rows": [
            [
                f"probe (hidden state {p['layer']}) − position only",
                float(d["mse_difference"]),
                float(d["ci95"][0]),
                float(d["ci95"][1]),
                _p_cell(float(d["p_probe_not_better"])),
            ]
        ],
        "formats": [None, "+.3f", "+.3f", "+.3f", ".4f"],
    }


def tables_of(record: Mapping[str, Any]) -> dict[str, dict]:
    return {
        "probe": probe_table(record),
        "baselines": baselines_table(record),
        "paired": paired_table(record),
    }


def cli_argv(checkpoint: str, traces: int, workdir: str, sets=()) -> list[str]:
    """The ``fidia-jax`` arguments this benchmark runs."""
    argv = ["dycon", "train", "--config", "default", "--workdir", workdir]
    for s in (f"checkpoint={checkpoint}", f"checkpoint_traces={traces}", *sets):
        argv += ["--set", s]
    return argv


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", help="a .gguf file or a Hugging Face directory")
    ap.add_argument("--traces", type=int, default=60, help="checkpoint_traces (default 60)")
    ap.add_argument("--set", dest="sets", action="append", default=[],
                    help="more key=value overrides of the default preset")  # fmt: skip
    ap.add_argument("--workdir", default=None, help="the run's folder (default: a fresh temp one)")
    ap.add_argument("--out", default=None, help=f"default benchmarks/results/{NAME}.json")
    ap.add_argument("--report", default=None, help="re-table this results file (no run)")
    args = ap.parse_args(argv)
    if args.report:
        retable(args.report, tables_of)
        return json.loads(pathlib.Path(args.report).read_text(encoding="utf-8"))
    if not args.checkpoint:
        ap.error("--checkpoint is required (or --report FILE)")
    load_start = load_average()
    record, shown, wall = run_fidia_cli(
        lambda w: cli_argv(args.checkpoint, args.traces, w, args.sets),
        "dycon_checkpoint.json", args.workdir,
    )  # fmt: skip
    extra = {**record, "cli": shown, "benchmark_wall_s": wall}
    out = args.out or default_out(NAME)
    path = write_results(NAME, tables_of(record), load_start=load_start, extra=extra, out=out)
    p = record["probe"]
    print(
        f"wrote {path}: layer {p['layer']} R² {p['r2_layer']:.3f}, position-only "
        f"{p['r2_position_baseline']:.3f}, counter {p['r2_counter_baseline']:.3f}; wall {wall:.0f} s "
        f"(load {record['load_s']:.0f} s, probe {p['seconds']:.0f} s)"
    )
    return extra


if __name__ == "__main__":
    main()
