"""DyCon's control on generation with a released checkpoint (issue 26, Deliver 4): no control vs
DyCon (probe-driven, one-sided) vs a constant penalty on the reflection tokens matched to DyCon's
token budget, on the addition task with checks (:mod:`fidia_jax.projects.dycon.lm_control`).

    python benchmarks/dycon_checkpoint_control.py --checkpoint gemma-3-270m-q4_k_m.gguf \\
        --items 16 --probe-traces 16

Writes ``benchmarks/results/dycon_checkpoint_control.json`` (every arm's per-item tokens,
correctness, checks and text, the probe, the paired tests, timings) and prints the table.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time

from fidia_jax import models
from fidia_jax.projects.dycon import lm_control


def table(res: dict) -> str:
    lines = [
        "| arm | tokens (mean ± SE) | checks / item | accuracy |",
        "|---|---|---|---|",
    ]
    for a in res["arms"]:
        n = len(a["tokens"])
        se = (sum((t - a["mean_tokens"]) ** 2 for t in a["tokens"]) / (n - 1) / n) ** 0.5
        lines.append(
            f"| {a['name']} | {a['mean_tokens']:.1f} ± {se:.1f} | {a['mean_checks']:.2f} | "
            f"{a['accuracy']:.3f} ({sum(a['correct'])}/{n}) |"
        )
    lines += [
        "",
        "| pair | Δ tokens [95% CI], Wilcoxon p | Δ accuracy, McNemar p |",
        "|---|---|---|",
    ]
    for name, p in res["paired"].items():
        t, acc = p["tokens"], p["accuracy"]
        lines.append(
            f"| {name} | {t['mean']:+.1f} [{t['ci95'][0]:+.1f}, {t['ci95'][1]:+.1f}], "
            f"p = {t['wilcoxon_p']:.3g} | {acc['difference']:+.3f}, p = {acc['mcnemar_p']:.3g} |"
        )
    return "\n".join(lines)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", required=True, help="a .gguf file or a HF directory")
    ap.add_argument("--items", type=int, default=16)
    ap.add_argument("--probe-traces", type=int, default=16)
    ap.add_argument("--dycon", default="[[8, 0.5], [8, 1.0]]", help="JSON [[lambda, tau], ...]")
    ap.add_argument("--constants", default="[0.5, 1, 2, 4]", help="JSON list of c")
    ap.add_argument("--max-new-tokens", type=int, default=80)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--out",
        type=pathlib.Path,
        default=pathlib.Path(__file__).parent / "results" / "dycon_checkpoint_control.json",
    )
    args = ap.parse_args(argv)
    t0 = time.time()
    path = args.checkpoint
    if path.endswith(".gguf"):
        model = models.load_gguf(path, max_seq_len=256)
    else:
        model = models.load_hf_checkpoint(path, max_seq_len=256)
    tokenizer = models.load_tokenizer(path)
    load_s = time.time() - t0
    print(f"loaded {path} in {load_s:.0f} s", flush=True)
    res = lm_control.checkpoint_control(
        model,
        tokenizer,
        num_items=args.items,
        num_probe_traces=args.probe_traces,
        dycon_settings=tuple(tuple(map(float, s)) for s in json.loads(args.dycon)),
        const_grid=tuple(map(float, json.loads(args.constants))),
        max_new_tokens=args.max_new_tokens,
        batch_size=args.batch_size,
        seed=args.seed,
    )
    res.update(checkpoint=path, load_seconds=load_s, wall_seconds=time.time() - t0)
    res["command"] = "python benchmarks/dycon_checkpoint_control.py " + " ".join(
        argv if argv is not None else __import__("sys").argv[1:]
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1))
    print(f"probe layer {res['probe']['layer']}, held-out R² {res['probe']['r2_heldout']}")
    print(table(res))
    print(
        f"wall {res['wall_seconds']:.0f} s (load {load_s:.0f} s, probe {res['probe_seconds']:.0f} s)"
    )
    return res


if __name__ == "__main__":
    main()
