"""HIT-VAR's reports: the console table, the sample figure and the files of a run."""

from __future__ import annotations

import pathlib
from typing import Any

import numpy as np

from fidia_jax import train
from fidia_jax.projects.hitvar.configs import HitVarConfig

__all__ = [
    "METHODS",
    "PNG_FILE",
    "SUMMARY_FILE",
    "format_table",
    "write_report",
    "write_samples_png",
]

SUMMARY_FILE = "hitvar.json"
PNG_FILE = "hitvar_samples.png"
#: Rows of the results table. The last two are diagnostics, not methods: the HIT tokenizer
#: decoding the tokens of the bicubic-upsampled LR crop (DPO's rejected sequence) and the true
#: tokens of the HR crop (the oracle: it reads the HR image, an upper bound for the VAR).
METHODS = (
    "bicubic",
    "conv SR",
    "plain RQ+VAR",
    "HIT-VAR (no DPO)",
    "HIT-VAR (DPO on LPIPS-ranked samples)",
    "HIT-VAR",
    "HIT tokenizer, LR tokens",
    "oracle: HIT tokenizer, true tokens",
)


def format_table(results: dict[str, Any]) -> str:
    """Markdown table: PSNR / SSIM / LPIPS per method and scale (LPIPS ratio to bicubic at x4)."""
    scales = list(next(iter(results["metrics"].values())))
    head = "| method | " + " | ".join(f"{s} PSNR / SSIM / LPIPS" for s in scales) + " |"
    lines = [head, "|" + "---|" * (len(scales) + 1)]
    for name, row in results["metrics"].items():
        cells = []
        for s in scales:
            c = row[s]
            lp = "n/a" if c["lpips"] is None else f"{c['lpips']:.3f}"
            cells.append(f"{c['psnr']:.2f} / {c['ssim']:.3f} / {lp}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_samples_png(path, config, d, preds, n_show: int = 4) -> None:
    """Super-resolved held-out crops at the top scale next to the LR input, bicubic and the HR
    crop, and one crop decoded from each HIT-VAR token prefix (x1 .. xM)."""
    from fidia_jax._io import atomic_path

    plt = train.pyplot()
    top = config.max_scale
    cols = ["LR", "bicubic", "conv SR", "plain RQ+VAR", "HIT-VAR (no DPO)", "HIT-VAR",
            METHODS[-1], "HR"]  # fmt: skip
    titles = cols[:-2] + ["true tokens (oracle)", "HR"]
    n_show = min(n_show, len(d["hr_eval"]))
    fig, axes = plt.subplots(n_show + 1, len(cols), figsize=(1.4 * len(cols), 1.4 * (n_show + 1)))
    for r in range(n_show):
        ims = [d["lr_eval"][r]] + [preds[c][top][r] for c in cols[1:-1]] + [d["hr_eval"][r]]
        for c, im in enumerate(ims):
            axes[r, c].imshow(np.clip(im, 0, 1), interpolation="nearest")
            if r == 0:
                axes[r, c].set_title(titles[c], fontsize=6)
    for c in range(len(cols)):
        axes[n_show, c].axis("off")
        if c < top:
            axes[n_show, c].imshow(preds["HIT-VAR"][c + 1][0], interpolation="nearest")
            axes[n_show, c].set_title(f"HIT-VAR x{c + 1} (prefix)", fontsize=6)
    for ax in axes.ravel():
        ax.set_xticks([])
        ax.set_yticks([])
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=80, format="png")
    plt.close(fig)


def write_report(results: dict[str, Any], config: HitVarConfig, workdir: pathlib.Path) -> None:
    """The console table, ``summary.json`` and ``hitvar_table.png`` (the table at the top
    scale as bar charts)."""
    top = f"x{config.max_scale}"
    rows = []
    for name, row in results["metrics"].items():
        for scale, c in row.items():
            lp = "n/a" if c["lpips"] is None else f"{c['lpips']:.3f}"
            rows.append([name, scale, f"{c['psnr']:.2f}", f"{c['ssim']:.3f}", lp])
    goals = results["goals"]
    train.print_table(
        f"HIT-VAR: x1..{top} SR of held-out crops (PSNR, SSIM higher is better; LPIPS lower)",
        ["method", "scale", "PSNR (dB)", "SSIM", "LPIPS"],
        rows,
    )
    tests = results.get("paired_tests", {})
    train.print_table(
        f"LPIPS at {top} per held-out crop, paired (Wilcoxon signed-rank, two-sided; "
        f"'better' needs p < 0.05)",
        ["comparison (a vs b)", "LPIPS a", "LPIPS b", "mean a - b", "p", "a better"],
        [
            [
                k,
                f"{t['mean_a']:.4f}",
                f"{t['mean_b']:.4f}",
                f"{t['mean_diff']:+.4f}",
                f"{t['p']:.2g}",
                "yes" if t["a_better"] else "no",
            ]
            for k, t in tests.items()
        ],  # fmt: skip
    )
    print(
        f"goal (HIT-VAR LPIPS at {top} below bicubic and below plain RQ+VAR, each p < 0.05): "
        f"{'met' if goals['met'] else 'NOT met'}; tokens matter (oracle beats generated and "
        f"bicubic): {'yes' if goals.get('tokens_matter') else 'no'}; DPO on (LR, HR) helps: "
        f"{'yes' if goals.get('dpo_helps') else 'no'}",
        flush=True,
    )
    at_top = {k: v[top] for k, v in results["metrics"].items()}
    train.plot_bars(
        [
            {
                "method": k,
                f"PSNR {top}": v["psnr"],
                f"SSIM {top}": v["ssim"],
                f"LPIPS {top}": v["lpips"],
            }
            for k, v in at_top.items()
        ],  # fmt: skip
        workdir / "hitvar_table.png",
        label="method",
        values=[f"PSNR {top}", f"SSIM {top}", f"LPIPS {top}"],
        higher_is_better={f"PSNR {top}": True, f"SSIM {top}": True},
        title=f"HIT-VAR: {top} SR of {config.n_eval} held-out crops",
    )
    train.write_summary(
        workdir,
        {
            "scale": top,
            **{
                f"{m}_{top}": {k: v[m] for k, v in at_top.items()}
                for m in ("psnr", "ssim", "lpips")
            },
            "goals": goals,
            "params": results["params"],
            "dpo_valid_frac": results["dpo_valid_frac"],
            "paired_tests": tests,
            "final_losses": results["final_losses"],
            "wall_s": results["wall_s"]["total"],
        },
    )
