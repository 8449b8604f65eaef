"""DyCon experiment: probe R² by layer, and baseline / NoWait / static probe / DyCon decoding.

Runs :func:`fidia_jax.projects.dycon.train_and_evaluate` (training included: the "peers" are the
other decoders of the same model, measured in the same run, on the same test prompts and
sampling keys), prints the driver's tables and one table of ratios to the baseline, and writes
``benchmarks/results/dycon.json`` through :func:`_results.write_results` (the raw results kept
beside the tables, with the per-prompt records of every decoder packed one string per field,
:func:`pack`); ``docs/dycon.md`` renders its
tables from that file (``python tools/render_tables.py --write docs/dycon.md``). Tables:

* ``probe``: held-out R² of the ridge probe per hidden state, true and shuffled targets, and the
  best layer's R² on the first boundaries alone (the static probe's input);
* ``decoding``: accuracy and generated tokens (mean ± one SE) per decoder and difficulty bucket;
* ``reflections``: corrective / redundant reflections, step errors, uncorrected errors, the
  share of erroneous steps followed by a reflection, malformed units, per test example;
* ``goals``: the issue's three goals with DyCon's and the reference's numbers, the paired
  difference (± SE) over the same test prompts, paired Wilcoxon and t-test p-values, met or not;
* ``paired``: DyCon minus every other decoder over the same test prompts (tokens, accuracy,
  redundant and corrective reflections) with paired p-values.

``--compare A B [C ...]`` pairs such files of the same seed (same training, test prompts and
keys: e.g. the one-sided default, ``--set control_form=two_sided`` and its ``end_scale=0.0``)
prompt by prompt, every pair of them, and writes
``benchmarks/results/dycon_forms.json`` (table ``forms``; the per-prompt arrays it pairs are kept
in the file, so ``--report`` re-tables it too).

    python benchmarks/dycon.py                 # the default preset (docs/dycon.md)
    python benchmarks/dycon.py --smoke         # the tiny preset, seconds (numbers mean nothing)
    python benchmarks/dycon.py --set steps=3000 num_test=2000   # overrides (key=value, JSON values)
    python benchmarks/dycon.py --set control_form=two_sided --out benchmarks/results/dycon_two_sided.json
    python benchmarks/dycon.py --report benchmarks/results/dycon.json      # re-table, no run
    python benchmarks/dycon.py --compare benchmarks/results/dycon.json \\
        benchmarks/results/dycon_two_sided.json \\
        benchmarks/results/dycon_end_scale0.json                            # the forms table
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import sys
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np
from _driver_bench import run_driver_benchmark

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _results import ROOT, load_average, retable, write_results  # noqa: E402
from _stats import paired_tests  # noqa: E402

METHODS = ("baseline", "nowait", "static", "dycon")
NAMES = {"baseline": "baseline", "nowait": "NoWait", "static": "static probe", "dycon": "DyCon"}
COMPARED = ("correct", "num_tokens", "redundant", "corrective", "uncorrected", "num_operands")
"""The per-prompt fields ``--compare`` keeps from each file."""


def pack(records: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """Per decoder and field, the per-prompt integers as one space-separated string (what the
    results files keep: a list would take one line per prompt in the indented JSON)."""
    return {
        m: {f: " ".join(str(int(x)) for x in np.asarray(v).ravel()) for f, v in fields.items()}
        for m, fields in records.items()
    }


def unpack(records: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, np.ndarray]]:
    """:func:`pack` undone: per decoder and field an integer array (lists are read as they
    are, so a driver's own results and a results file both work)."""
    return {
        m: {
            f: np.asarray([int(t) for t in v.split()] if isinstance(v, str) else v, dtype=np.int64)
            for f, v in fields.items()
        }
        for m, fields in records.items()
    }


def _num(v) -> float | None:
    """A finite float, else ``None`` (rendered as a dash; the file stores NaN as null)."""
    return float(v) if v is not None and math.isfinite(float(v)) else None


def _pm(mean, se):
    """``[mean, se]`` (rendered ``mean ± se``), or the mean alone when the SE is missing."""
    m, s = _num(mean), _num(se)
    return m if m is None or s is None else [m, s]


def bucket_keys(summary: Mapping[str, Any]) -> list[str]:
    """The difficulty buckets of a summary (``"2-3"``, ..., easiest first), then ``"all"``."""
    cells = next(iter(summary.values()))
    return [b for b in cells if b != "all"] + ["all"]


def bucket_head(b: str) -> str:
    """``"2-3"`` -> ``"k=2-3"``, ``"6-6"`` -> ``"k=6"``, ``"all"`` -> ``"all"``."""
    if b == "all":
        return "all"
    lo, hi = b.split("-")
    return f"k={lo}" if lo == hi else f"k={lo}-{hi}"


def label(record: Mapping[str, Any], method: str) -> str:
    """The decoder's name with its chosen ``(λ, τ)`` (the probe decoders)."""
    c = record.get("control", {}).get(method)
    name = NAMES.get(method, method)
    return name if c is None else f"{name} (λ={c['lam']:g}, τ={c['tau']:g})"


def probe_table(record: Mapping[str, Any]) -> dict:
    """Rows: the probe and the shuffled-label control; columns: hidden states (0: embeddings,
    ``l``: after block ``l - 1``), then the best layer's R² on the first boundaries alone."""
    p = record["probe"]
    heads = ["embeddings" if i == 0 else f"after block {i - 1}" for i in range(len(p["r2"]))]
    best = p["best_layer"]
    return {
        "columns": [
            "hidden state",
            *heads,
            f"{heads[best]} (best), first boundaries only",
        ],
        "rows": [
            ["probe (true targets)", *map(_num, p["r2"]), _num(p["r2_first_boundary"])],
            ["shuffled-label control", *map(_num, p["r2_shuffled"]), None],
        ],
        "formats": [None] + [".3f"] * (len(heads) + 1),
    }


def decoding_table(record: Mapping[str, Any]) -> dict:
    """Per decoder: accuracy then generated tokens (mean ± SE) per bucket, the bucket's number
    of test prompts in the column names."""
    s = record["summary"]
    keys = bucket_keys(s)
    n = {b: s["baseline"][b]["n"] for b in keys}
    cols = [f"{bucket_head(b)} acc (n={n[b]})" for b in keys]
    cols += [f"{bucket_head(b)} tokens" for b in keys]
    rows = []
    for m in (m for m in METHODS if m in s):
        c = s[m]
        rows.append(
            [label(record, m)]
            + [_pm(c[b]["accuracy"], c[b]["accuracy_se"]) for b in keys]
            + [_pm(c[b]["tokens"], c[b]["tokens_se"]) for b in keys]
        )
    return {
        "columns": ["method", *cols],
        "rows": rows,
        "formats": [None] + [".3f"] * len(keys) + [".1f"] * len(keys),
    }


REFLECTION_COLUMNS = (
    ("corrective", "corrective"),
    ("redundant", "redundant"),
    ("errors", "step errors"),
    ("uncorrected", "uncorrected errors"),
    ("correction_rate", "errors followed by a reflection"),
    ("malformed", "malformed units"),
)


def reflections_table(record: Mapping[str, Any]) -> dict:
    """Per decoder, all test prompts: reflections and errors per example, and the share of
    erroneous steps followed by a reflection (``—`` when there were no errors)."""
    s = record["summary"]
    rows = [
        [NAMES.get(m, m)] + [_num(s[m]["all"][k]) for k, _ in REFLECTION_COLUMNS]
        for m in METHODS
        if m in s
    ]
    return {
        "columns": ["method", *(h for _, h in REFLECTION_COLUMNS)],
        "rows": rows,
        "formats": [None] + [".3f"] * len(REFLECTION_COLUMNS),
    }


def _paired(a, b) -> dict:
    """:func:`_stats.paired_tests` of ``a - b`` plus the SE of the mean difference."""
    out = paired_tests(a, b)
    d = np.asarray(a, np.float64) - np.asarray(b, np.float64)
    out["se"] = float(d.std(ddof=1) / np.sqrt(d.size)) if d.size > 1 else None
    return out


def _hard(record: Mapping[str, Any]) -> tuple[str, np.ndarray]:
    """The hardest bucket's key and the mask of its test prompts."""
    key = bucket_keys(record["summary"])[-2]
    lo, hi = (int(v) for v in key.split("-"))
    k = unpack(record["records"])["baseline"]["num_operands"]
    return key, (k >= lo) & (k <= hi)


def goals_table(record: Mapping[str, Any]) -> dict:
    """The issue's goals, each with DyCon's number, the reference's, the threshold (accuracy
    goal: the baseline's accuracy minus one SE), the paired difference DyCon - reference ± SE over
    the same prompts, paired Wilcoxon / t-test p-values and whether the goal is met (the
    driver's rule, :func:`fidia_jax.projects.dycon.train.goals`)."""
    r, g = unpack(record["records"]), record["goals"]
    dyc, base, now = r["dycon"], r["baseline"], r["nowait"]
    hard_key, hard = _hard(record)
    a = g["accuracy_within_1se"]
    specs = [
        (
            "accuracy ≥ baseline − 1 SE (all k)",
            dyc["correct"], base["correct"], a["baseline"] - a["baseline_se"], a["met"],
        ),
        (
            "fewer tokens than the baseline (all k)",
            dyc["num_tokens"], base["num_tokens"], None, g["fewer_tokens"]["met"],
        ),
        (
            f"accuracy above NoWait ({bucket_head(hard_key)})",
            np.asarray(dyc["correct"])[hard], np.asarray(now["correct"])[hard], None,
            g["beats_nowait_hardest"]["met"],
        ),
    ]  # fmt: skip
    rows = []
    for goal, x, y, threshold, met in specs:
        p = _paired(x, y)
        rows.append(
            [
                goal,
                float(np.mean(x)),
                float(np.mean(y)),
                _num(threshold),
                _pm(p["mean_diff"], p["se"]),
                p["p_wilcoxon"],
                p["p_ttest"],
                bool(met),
            ]
        )
    return {
        "columns": [
            "goal",
            "DyCon",
            "reference",
            "threshold",
            "DyCon − reference (paired ± SE)",
            "Wilcoxon p",
            "paired t p",
            "met",
        ],
        "rows": rows,
        "formats": [None, ".3f", ".3f", ".4f", ".3f", ".2g", ".2g", None],
    }


PAIRED_FIELDS = (
    ("num_tokens", "tokens"),
    ("correct", "accuracy"),
    ("redundant", "redundant"),
    ("corrective", "corrective"),
)


def paired_table(record: Mapping[str, Any]) -> dict:
    """DyCon minus each other decoder over the same test prompts: per quantity the mean paired
    difference ± SE and the paired Wilcoxon p-value."""
    r = unpack(record["records"])
    rows = []
    for m in (m for m in METHODS if m != "dycon" and m in r):
        row: list[Any] = [f"DyCon − {NAMES.get(m, m)}", len(r["dycon"]["correct"])]
        for f, _ in PAIRED_FIELDS:
            p = _paired(r["dycon"][f], r[m][f])
            row += [_pm(p["mean_diff"], p["se"]), p["p_wilcoxon"]]
        rows.append(row)
    cols = ["comparison (all test prompts)", "prompts"]
    for _, h in PAIRED_FIELDS:
        cols += [f"Δ {h} (± SE)", f"{h}: Wilcoxon p"]
    return {
        "columns": cols,
        "rows": rows,
        "formats": [None, None] + [".3f", ".2g"] * len(PAIRED_FIELDS),
    }


def tables_of(record: Mapping[str, Any]) -> dict[str, dict]:
    """Every table of a run's record (:func:`fidia_jax.projects.dycon.train_and_evaluate`'s
    results as the file keeps them), or the ``forms`` table of a ``--compare`` file."""
    if "compare" in record:
        return {"forms": forms_table(record["compare"])}
    out = {
        "probe": probe_table(record),
        "decoding": decoding_table(record),
        "reflections": reflections_table(record),
    }
    if "records" in record:
        out["goals"] = goals_table(record)
        out["paired"] = paired_table(record)
    return out


def compare_record(files: Sequence[Mapping[str, Any]], paths: Sequence[str]) -> dict:
    """The raw record of ``--compare``: per file its path, control form and ``end_scale``,
    chosen ``(λ, τ)``, date and commit, and the per-prompt :data:`COMPARED` fields of its probe
    decoders; and whether the files' baseline records agree prompt by prompt (the pairing's check)."""
    runs = []
    for f, path in zip(files, paths, strict=True):
        runs.append(
            {
                "file": str(path),
                "control_form": f["config"]["control_form"],
                "end_scale": f["config"].get("end_scale"),
                "date": f["date"],
                "commit": f["commit"],
                "control": {m: {k: c[k] for k in ("lam", "tau")} for m, c in f["control"].items()},
                "records": pack(
                    {
                        m: {k: unpack(f["records"])[m][k] for k in COMPARED}
                        for m in ("static", "dycon")
                    }
                ),
            }
        )
    base = [unpack(f["records"])["baseline"] for f in files]
    same = all(
        b.keys() == base[0].keys() and all(np.array_equal(b[k], base[0][k]) for k in b)
        for b in base[1:]
    )
    return {"runs": runs, "baselines_identical": bool(same)}


FORMS_FIELDS = (
    ("correct", "accuracy"),
    ("num_tokens", "tokens"),
    ("redundant", "redundant reflections"),
    ("corrective", "corrective reflections"),
    ("uncorrected", "uncorrected errors"),
)


def forms_table(compare: Mapping[str, Any]) -> dict:
    """Per probe decoder and quantity: each run's mean over the same test prompts (runs named
    A, B, ... in file order), then for every pair of runs the paired difference (earlier −
    later) ± SE and its paired Wilcoxon p-value; the hardest bucket's accuracy too."""
    runs = compare["runs"]
    letters = [chr(ord("A") + i) for i in range(len(runs))]
    pairs = [(i, j) for i in range(len(runs)) for j in range(i + 1, len(runs))]
    rows = []
    for m in ("dycon", "static"):
        recs = [unpack(r["records"])[m] for r in runs]
        k = np.asarray(recs[0]["num_operands"])
        hard = k == k.max()
        fields = [(f, h, slice(None)) for f, h in FORMS_FIELDS]
        fields.insert(1, ("correct", f"accuracy, k={int(k.max())}", hard))
        for f, h, sel in fields:
            x = [np.asarray(r[f])[sel] for r in recs]
            row: list[Any] = [f"{NAMES[m]}: {h}", int(x[0].size)]
            row += [float(v.mean()) for v in x]
            for i, j in pairs:
                p = _paired(x[i], x[j])
                row += [_pm(p["mean_diff"], p["se"]), p["p_wilcoxon"]]
            rows.append(row)

    def head(letter, run):
        c, form = run["control"]["dycon"], run["control_form"]
        if form == "two_sided" and run.get("end_scale") is not None:
            form += f", end_scale={run['end_scale']:g}"
        return f"{letter}: {form} (DyCon λ={c['lam']:g}, τ={c['tau']:g})"

    cols = ["decoder: quantity (per test prompt)", "prompts"]
    cols += [head(c, r) for c, r in zip(letters, runs, strict=True)]
    for i, j in pairs:
        cols += [
            f"{letters[i]} − {letters[j]} (paired ± SE)",
            f"{letters[i]} − {letters[j]}: Wilcoxon p",
        ]
    return {
        "columns": cols,
        "rows": rows,
        "formats": [None, None] + [".3f"] * len(runs) + [".3f", ".2g"] * len(pairs),
    }


def ratio_table(results: dict, names) -> str:
    """Console only: tokens ratio and accuracy difference to the baseline per bucket."""
    s = results["summary"]
    lines = [
        "ratio to the baseline: tokens (method / baseline) and accuracy difference (method - baseline)",
        "| method | " + " | ".join(f"{bucket_head(b)} tokens x | {bucket_head(b)} acc diff"
                                   for b in names) + " |",
        "|" + "---|" * (2 * len(names) + 1),
    ]  # fmt: skip
    for method in METHODS:
        cells = []
        for b in names:
            c, r = s[method][b], s["baseline"][b]
            cells += [f"{c['tokens'] / r['tokens']:.3f}", f"{c['accuracy'] - r['accuracy']:+.3f}"]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _run_tables(results: dict, config) -> dict:
    from fidia_jax.config import config_to_dict

    return tables_of({**results, "config": config_to_dict(config)})


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--report", default=None)
    parser.add_argument("--compare", nargs="+", default=None)
    known, rest = parser.parse_known_args(argv)
    if known.report:
        retable(known.report, tables_of)
        return json.loads(pathlib.Path(known.report).read_text(encoding="utf-8"))
    if known.compare:
        load_start = load_average()
        out_parser = argparse.ArgumentParser()
        out_parser.add_argument("--out", default=str(ROOT / "benchmarks/results/dycon_forms.json"))
        out = out_parser.parse_args(rest).out
        if len(known.compare) < 2:
            parser.error("--compare needs at least two results files")
        files = [json.loads(pathlib.Path(p).read_text(encoding="utf-8")) for p in known.compare]
        compare = compare_record(files, known.compare)
        path = write_results(
            pathlib.Path(out).stem,
            {"forms": forms_table(compare)},
            load_start=load_start,
            extra={"compare": compare},
            out=out,
        )
        print(f"wrote {path} (baselines identical: {compare['baselines_identical']})")
        return compare
    from fidia_jax.projects import dycon

    def train_and_evaluate(config, workdir):
        results = dycon.train_and_evaluate(config, workdir)
        return {**results, "records": pack(results["records"])} if "records" in results else results

    driver = SimpleNamespace(get_config=dycon.get_config, train_and_evaluate=train_and_evaluate)
    return run_driver_benchmark(
        "dycon",
        driver,
        lambda r, c: ratio_table(r, bucket_keys(r["summary"])),
        __doc__,
        rest,
        tables=_run_tables,
    )


if __name__ == "__main__":
    main()
