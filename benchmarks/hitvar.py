"""HIT-VAR vs bicubic, a conv SR net and a plain RQ+VAR: x4 SR of held-out photo crops.

Runs :func:`fidia_jax.projects.hitvar.train_and_evaluate` (every model trained in the same run
on degraded crops of the non-held-out bundled photos, scored on crops of the held-out ones) and
writes ``benchmarks/results/hitvar.json`` through :func:`_results.write_results` (the run's
record, less the loss curves, kept as raw results) and the sample figure
``benchmarks/results/hitvar_samples.png``; ``docs/hitvar.md`` renders its tables from the file
(``python tools/render_tables.py --write docs/hitvar.md``). Tables, built from the raw record
only (``--report`` rebuilds them without a run):

* ``top``: PSNR / SSIM / LPIPS-AlexNet at the top scale per method (means over the held-out
  crops) and the ratio of each LPIPS to HIT-VAR's (> 1: HIT-VAR is better);
* ``paired``: per-crop paired comparisons at the top scale, LPIPS and PSNR (mean of ``a - b``,
  crops where ``a`` is better, two-sided Wilcoxon signed-rank p); "a better" = lower mean LPIPS
  and Wilcoxon p < 0.05, the run's own rule (:func:`fidia_jax.projects.hitvar.paired_test`);
* ``run``: inference parameters, token counts, DPO pairs and the goals of the run.

The documented run is the ``reduced`` preset (512 training crops, 400 tokenizer / 250 VAR /
200 conv-SR / 40 DPO steps, 96 held-out crops; ``--out benchmarks/results/hitvar.json``), and
the ``demo`` preset (``--config demo --out benchmarks/results/hitvar_demo.json``). The full
protocol is the ``default`` preset (4096 crops, 3000 steps per phase, 300 DPO steps, 256
held-out crops): ``python benchmarks/hitvar.py --config default``.

Usage: python benchmarks/hitvar.py [--smoke] [--config reduced] [--set key=value ...]
       [--workdir DIR] [--reuse] [--out PATH]
       python benchmarks/hitvar.py --report [--out PATH]   # retabulate a finished run's file
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import sys
import tempfile

from fidia_jax.config import config_to_dict, override_config
from fidia_jax.projects import hitvar

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _results import RESERVED, load_average, retable, write_results  # noqa: E402
from _stats import paired_tests  # noqa: E402

#: The run's method names (``hitvar.METHODS``) -> the page's row labels.
LABELS = {
    "bicubic": "bicubic",
    "conv SR": "conv SR",
    "plain RQ+VAR": "plain RQ+VAR",
    "HIT-VAR (no DPO)": "HIT-VAR (no DPO)",
    "HIT-VAR (DPO on LPIPS-ranked samples)": "HIT-VAR (DPO on LPIPS-ranked samples; ablation)",
    "HIT-VAR": "HIT-VAR (DPO on the (LR, HR) pair)",
    "HIT tokenizer, LR tokens": "diagnostic: HIT tokenizer, LR tokens",
    "oracle: HIT tokenizer, true tokens": "diagnostic (oracle): HIT tokenizer, true HR tokens",
}

#: (label, a, b) of the paired table, in its order; ``a`` and ``b`` are run method names.
COMPARISONS = (
    ("HIT-VAR vs bicubic", "HIT-VAR", "bicubic"),
    ("HIT-VAR vs conv SR", "HIT-VAR", "conv SR"),
    ("HIT-VAR vs plain RQ+VAR", "HIT-VAR", "plain RQ+VAR"),
    ("HIT-VAR (no DPO) vs conv SR", "HIT-VAR (no DPO)", "conv SR"),
    ("HIT-VAR (no DPO) vs plain RQ+VAR", "HIT-VAR (no DPO)", "plain RQ+VAR"),
    ("plain RQ+VAR vs conv SR", "plain RQ+VAR", "conv SR"),
    ("HIT-VAR vs HIT-VAR (no DPO): the (LR, HR) DPO", "HIT-VAR", "HIT-VAR (no DPO)"),
    (
        "HIT-VAR vs the LPIPS-ranked DPO ablation",
        "HIT-VAR",
        "HIT-VAR (DPO on LPIPS-ranked samples)",
    ),
    (
        "token check: oracle vs generated (no DPO)",
        "oracle: HIT tokenizer, true tokens",
        "HIT-VAR (no DPO)",
    ),
    ("token check: oracle vs bicubic", "oracle: HIT tokenizer, true tokens", "bicubic"),
    ("conv SR vs bicubic", "conv SR", "bicubic"),
)

ALPHA = 0.05


def top_scale(record: dict) -> str:
    """``"x<max_scale>"`` of the run's config (``"x4"`` without one)."""
    return f"x{record['config']['max_scale']}" if "config" in record else "x4"


def top_table(record: dict) -> dict:
    """PSNR / SSIM / LPIPS at the top scale per method, in the run's order, and the LPIPS
    ratio method / HIT-VAR (after the (LR, HR) DPO)."""
    top = top_scale(record)
    ref = record["metrics"]["HIT-VAR"][top]["lpips"]
    rows = []
    for name, row in record["metrics"].items():
        c = row[top]
        ratio = c["lpips"] / ref if c["lpips"] is not None and ref else None
        rows.append([LABELS.get(name, name), c["psnr"], c["ssim"], c["lpips"], ratio])
    return {
        "columns": ["method", "PSNR", "SSIM", "LPIPS", "LPIPS / HIT-VAR's"],
        "rows": rows,
        "formats": [None, ".2f", ".3f", ".3f", ".2f"],
    }


def paired_row(label: str, a: str, b: str, per_crop: dict) -> list:
    """One comparison: LPIPS means of ``a`` and ``b``, mean ``a - b``, crops where ``a`` has
    the lower LPIPS, Wilcoxon p; PSNR mean ``a - b``, crops where ``a`` has the higher PSNR,
    Wilcoxon p; and the verdict on LPIPS."""
    lp = paired_tests(per_crop[a]["lpips"], per_crop[b]["lpips"])
    ps = paired_tests(per_crop[a]["psnr"], per_crop[b]["psnr"])
    mean_a = sum(per_crop[a]["lpips"]) / len(per_crop[a]["lpips"])
    mean_b = sum(per_crop[b]["lpips"]) / len(per_crop[b]["lpips"])
    p = lp["p_wilcoxon"]
    if p is None or p >= ALPHA:
        verdict = "tie (p ≥ 0.05)"
    else:
        verdict = "a better" if lp["mean_diff"] < 0 else "b better"
    return [
        label,
        lp["n"],
        mean_a,
        mean_b,
        lp["mean_diff"],
        lp["a_lower"],
        p,
        ps["mean_diff"],
        ps["a_higher"],
        ps["p_wilcoxon"],
        verdict,
    ]


def paired_table(record: dict) -> dict:
    """The comparisons of :data:`COMPARISONS` over the held-out crops at the top scale."""
    per_crop = record["per_crop"]
    return {
        "columns": [
            "comparison (a vs b)",
            "crops",
            "LPIPS a",
            "LPIPS b",
            "LPIPS a − b",
            "crops a lower",
            "p (LPIPS)",
            "PSNR a − b (dB)",
            "crops a higher",
            "p (PSNR)",
            "LPIPS verdict",
        ],
        "rows": [paired_row(label, a, b, per_crop) for label, a, b in COMPARISONS],
        "formats": [None, None, ".3f", ".3f", "+.4f", None, ".2g", "+.2f", None, ".2g", None],
    }


def run_table(record: dict) -> dict:
    """Inference parameters, tokens, DPO pairs and the run's goals."""
    params = record["params"]
    top = top_scale(record)
    rows = [[f"parameters: {k}", v] for k, v in params.items()]
    rows.append(["tokens (all scales)", record["num_tokens"]])
    rows.append([f"token scales read by the {top} prefix", record["prefix_lengths"][top]])
    rows.append(["held-out crops", len(next(iter(record["per_crop"].values()))["lpips"])])
    for key, label in (
        ("dpo_valid_frac", "(LR, HR) DPO pairs with different sequences (fraction)"),
        ("dpo_lpips_valid_frac", "LPIPS-ranked DPO pairs valid (fraction)"),
    ):
        if record.get(key) is not None:
            rows.append([label, record[key]])
    g = record["goals"]
    for key, label in (
        ("tokens_matter", "token check passed (oracle beats generated and bicubic)"),
        ("lpips_top_beats_bicubic", "HIT-VAR beats bicubic (LPIPS, p < 0.05)"),
        ("lpips_top_beats_plain_var", "HIT-VAR beats plain RQ+VAR (LPIPS, p < 0.05)"),
        ("dpo_helps", "(LR, HR) DPO helps (LPIPS, p < 0.05)"),
        ("met", "goal met (beats bicubic and plain RQ+VAR)"),
    ):
        rows.append([label, "yes" if g.get(key) else "no"])
    if "wall_s" in record:
        rows.append(["training + scoring wall time (s)", round(record["wall_s"]["total"])])
    return {"columns": ["quantity", "value"], "rows": rows, "formats": [None, ".6g"]}


def tables(record: dict) -> dict:
    """Every table of the page, from a run's raw record alone."""
    return {"top": top_table(record), "paired": paired_table(record), "run": run_table(record)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="the tiny preset (seconds of training)")
    ap.add_argument("--config", default="reduced")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--workdir", default=None, help="run directory (default: a temp dir)")
    ap.add_argument(
        "--reuse",
        action="store_true",
        help="table WORKDIR/hitvar.json if it holds a run of the same config",
    )
    ap.add_argument("--report", action="store_true", help="retabulate --out without a run")
    ap.add_argument("--out", default=None, help="default benchmarks/results/hitvar.json")
    args = ap.parse_args(argv)
    out = pathlib.Path(args.out or "benchmarks/results/hitvar.json")
    if args.report:
        retable(out, tables)
        return 0
    load_start = load_average()
    config = override_config(hitvar.load_config("tiny" if args.smoke else args.config), args.set)
    workdir = pathlib.Path(args.workdir or tempfile.mkdtemp(prefix="hitvar_"))
    summary = workdir / "hitvar.json"
    if args.reuse and summary.exists():
        record = json.loads(summary.read_text())
        if record["config"] != config_to_dict(config):
            print(f"--reuse: {summary} holds another config", file=sys.stderr)
            return 2
    else:
        hitvar.train_and_evaluate(config, workdir)
        record = json.loads(summary.read_text())
    record.pop("curves", None)
    built = tables(record)
    for key, t in built.items():
        print(f"[{key}]", *t["columns"], sep=" | ")
        for r in t["rows"]:
            print("   ", *r, sep=" | ")
    if args.smoke and args.out is None:
        return 0
    extra = {k: v for k, v in record.items() if k not in RESERVED}
    path = write_results(out.stem, built, load_start=load_start, extra=extra, out=out)
    print(f"wrote {path}")
    png = workdir / "hitvar_samples.png"
    if png.exists() and not args.smoke:
        shutil.copyfile(png, out.with_name(out.stem + "_samples.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
