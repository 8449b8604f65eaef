"""HIT-VAR vs bicubic, a conv SR net and a plain RQ+VAR: x1..x4 SR of held-out photo crops.

Runs :func:`fidia_jax.projects.hitvar.train_and_evaluate` (all models trained in the same run on
degraded 64x64 crops of the non-held-out bundled photos) and prints PSNR / SSIM / LPIPS-AlexNet
at x4 with the ratio of every method's LPIPS to HIT-VAR's (> 1: HIT-VAR is better), then the
full per-scale table. Writes ``benchmarks/results/hitvar.json`` and the sample figure
``benchmarks/results/hitvar_samples.png``.

Declared reduced protocol of the documented run (2-core CPU shared with seven other jobs): the
``reduced`` preset (512 training crops, 300 tokenizer / 200 VAR / 300 conv-SR / 20 DPO steps, 48
held-out crops). The full protocol is the ``default`` preset (4096 crops, 3000 steps per phase,
300 DPO steps, 256 held-out crops): ``python benchmarks/hitvar.py --config default``.

Usage: python benchmarks/hitvar.py [--smoke] [--config reduced] [--set key=value ...]
       [--workdir DIR] [--reuse]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import sys
import tempfile

from fidia_jax._io import atomic_write_text, json_text
from fidia_jax.config import config_to_dict, override_config
from fidia_jax.projects import hitvar


def ratio_table(results: dict) -> str:
    top = f"x{results['config']['max_scale']}" if "config" in results else "x4"
    ref = results["metrics"]["HIT-VAR"][top]["lpips"]
    lines = [
        f"{top} on held-out crops (LPIPS ratio = method / HIT-VAR; > 1 means HIT-VAR is better)",
        "| method | PSNR | SSIM | LPIPS | LPIPS ratio |",
        "|---|---|---|---|---|",
    ]
    for name, row in results["metrics"].items():
        c = row[top]
        lines.append(
            f"| {name} | {c['psnr']:.2f} | {c['ssim']:.3f} | {c['lpips']:.3f} | "
            f"{c['lpips'] / ref:.2f} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="the tiny preset (seconds of training)")
    ap.add_argument("--config", default="reduced")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--workdir", default=None, help="run directory (default: a temp dir)")
    ap.add_argument(
        "--reuse",
        action="store_true",
        help="format WORKDIR/hitvar.json if it holds a run of the same config",
    )
    ap.add_argument("--out", default="benchmarks/results/hitvar.json")
    args = ap.parse_args(argv)
    config = override_config(hitvar.load_config("tiny" if args.smoke else args.config), args.set)
    workdir = pathlib.Path(args.workdir or tempfile.mkdtemp(prefix="hitvar_"))
    summary = workdir / "hitvar.json"
    if args.reuse and summary.exists():
        results = json.loads(summary.read_text())
        if results["config"] != config_to_dict(config):
            print(f"--reuse: {summary} holds another config", file=sys.stderr)
            return 2
    else:
        hitvar.train_and_evaluate(config, workdir)
        results = json.loads(summary.read_text())
    print(ratio_table(results))
    print()
    print(hitvar.format_table(results))
    g = results["goals"]
    print(
        f"goal (HIT-VAR LPIPS at x{config.max_scale} below bicubic and plain RQ+VAR): "
        f"{'met' if g['met'] else 'NOT met'} (vs bicubic: {g['lpips_top_beats_bicubic']}, "
        f"vs plain RQ+VAR: {g['lpips_top_beats_plain_var']})"
    )
    if not args.smoke:
        out = pathlib.Path(args.out)
        results["command"] = "python benchmarks/hitvar.py " + " ".join(argv or sys.argv[1:])
        results["machine"] = "2-core CPU sandbox, shared with other jobs, no GPU"
        results["date"] = "2026-11-30"
        results.pop("curves", None)
        atomic_write_text(out, json_text(results, indent=2))
        png = workdir / "hitvar_samples.png"
        if png.exists():
            shutil.copyfile(png, out.with_name("hitvar_samples.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
