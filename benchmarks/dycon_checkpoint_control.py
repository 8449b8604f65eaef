"""DyCon's control on generation with a released checkpoint (issue 26, Deliver 4): no control vs
DyCon (probe-driven, one-sided) vs a constant penalty on the reflection tokens matched to DyCon's
token budget, on the addition task with checks (:mod:`fidia_jax.projects.dycon.lm_control`).

    python benchmarks/dycon_checkpoint_control.py --checkpoint gemma-3-270m-q4_k_m.gguf \\
        --items 16 --probe-traces 16
    python benchmarks/dycon_checkpoint_control.py --report \\
        benchmarks/results/dycon_checkpoint_control.json          # re-table, no run

Writes ``benchmarks/results/dycon_checkpoint_control.json`` through
:func:`_results.write_results`: the raw record (every arm's per-item tokens, correctness, checks
and text, the items, the probe, the paired tests, timings) beside the tables that
``docs/dycon.md`` renders (``python tools/render_tables.py --write docs/dycon.md``):

* ``arms``: per arm, tokens (mean ± SE over the items), checks per item, accuracy, and which
  DyCon setting a constant arm is budget-matched to (the constant whose mean tokens are
  closest to that setting's, on the same items);
* ``paired``: every DyCon setting minus no control and minus its matched constant, over the
  same items: tokens and checks (mean difference, bootstrap 95 % CI, Wilcoxon signed-rank p),
  accuracy (difference, exact McNemar p);
* ``probe``: the control's probe (the layer with the best R² on the held-out half of the probe
  traces, that R² and the shuffled-label control's there, traces and boundaries).

The GGUF file: ``python tools/gemma3_270m_gguf.py`` assembles it.
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _results import default_out, load_average, retable, write_results  # noqa: E402

NAME = "dycon_checkpoint_control"


def arm_label(name: str) -> str:
    """``"none"`` -> ``"no control"``, ``"dycon lam=8 tau=1"`` -> ``"DyCon λ = 8, τ = 1"``,
    ``"constant c=0.5"`` -> ``"constant c = 0.5"``."""
    if name == "none":
        return "no control"
    if name.startswith("dycon "):
        lam, tau = (p.split("=", 1)[1] for p in name.split()[1:3])
        return f"DyCon λ = {lam}, τ = {tau}"
    if name.startswith("constant "):
        return "constant c = " + name.split("=", 1)[1]
    return name


def _se(values: Sequence[float]) -> float | None:
    """The standard error of the mean (``None`` for fewer than two values)."""
    n = len(values)
    if n < 2:
        return None
    m = sum(values) / n
    return math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1) / n)


def _pairs(record: Mapping[str, Any]) -> list[tuple[str, str, Mapping[str, Any]]]:
    """``(arm a, arm b, tests)`` per paired comparison (keys ``"<a> - <b>"``)."""
    names = [a["name"] for a in record["arms"]]
    out = []
    for key, tests in record["paired"].items():
        a = next(n for n in names if key.startswith(n + " - "))
        out.append((a, key[len(a) + 3 :], tests))
    return out


def matches(record: Mapping[str, Any]) -> dict[str, list[str]]:
    """Constant arm -> the DyCon settings it is budget-matched to (from the paired keys)."""
    const = {a["name"] for a in record["arms"] if a["name"].startswith("constant ")}
    out: dict[str, list[str]] = {}
    for a, b, _ in _pairs(record):
        if b in const:
            out.setdefault(b, []).append(a)
    return out


def arms_table(record: Mapping[str, Any]) -> dict:
    """Per arm: tokens (mean ± SE), checks per item, accuracy, correct / items, budget match."""
    matched = matches(record)
    rows = []
    for a in record["arms"]:
        n = len(a["tokens"])
        mean = sum(a["tokens"]) / n
        se = _se(a["tokens"])
        to = matched.get(a["name"])
        rows.append(
            [
                arm_label(a["name"]),
                [mean, se] if se is not None else mean,
                sum(a["checks"]) / n,
                sum(bool(c) for c in a["correct"]) / n,
                f"{sum(bool(c) for c in a['correct'])}/{n}",
                ", ".join(arm_label(t) for t in to) if to else None,
            ]
        )
    return {
        "columns": [
            "arm",
            "tokens (mean ± SE)",
            "checks per item",
            "accuracy",
            "correct / items",
            "budget-matched to",
        ],
        "rows": rows,
        "formats": [None, ".1f", ".2f", ".3f", None, None],
    }


def paired_table(record: Mapping[str, Any]) -> dict:
    """Per comparison over the same items: Δ tokens [CI] and Wilcoxon p, Δ checks [CI] and
    Wilcoxon p, Δ accuracy and exact McNemar p."""
    rows = []
    for a, b, t in _pairs(record):
        tok, chk, acc = t["tokens"], t["checks"], t["accuracy"]
        rows.append(
            [
                f"{arm_label(a)} − {arm_label(b)}",
                tok["mean"], tok["ci95"][0], tok["ci95"][1], tok["wilcoxon_p"],
                chk["mean"], chk["ci95"][0], chk["ci95"][1], chk["wilcoxon_p"],
                acc["difference"], acc["mcnemar_p"],
            ]
        )  # fmt: skip
    return {
        "columns": [
            "comparison (same items)",
            "Δ tokens",
            "95 % CI low",
            "95 % CI high",
            "Wilcoxon p",
            "Δ checks",
            "95 % CI low",
            "95 % CI high",
            "Wilcoxon p",
            "Δ accuracy",
            "McNemar p",
        ],
        "rows": rows,
        "formats": [None, *["+.1f"] * 3, ".3g", *["+.2f"] * 3, ".3g", "+.3f", ".3g"],
    }


def probe_table(record: Mapping[str, Any]) -> dict:
    """The control's probe: the layer with the best R² on the held-out half of the probe traces
    (chosen on those same traces, so its R² is the best of the layers, not an unseen test), its
    R² and the shuffled control's there."""
    p = record["probe"]
    layer = p["layer"]
    return {
        "columns": [
            "probe (format with checks, few-shot prefix)",
            "hidden states",
            "held-out R²",
            "shuffled-label control",
            "probe traces (half fit, half held out)",
            "boundaries",
        ],
        "rows": [
            [
                (
                    f"hidden state {layer} (after block {layer - 1})"
                    if layer
                    else "hidden state 0 (embeddings)"
                )
                + ", the best on the held-out half",
                len(p["r2_heldout"]),
                p["r2_heldout"][layer],
                p["r2_shuffled"][layer],
                p["num_traces"],
                p["num_boundaries"],
            ]
        ],
        "formats": [None, None, ".3f", ".3f", None, None],
    }


def tables_of(record: Mapping[str, Any]) -> dict[str, dict]:
    return {
        "arms": arms_table(record),
        "paired": paired_table(record),
        "probe": probe_table(record),
    }


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", help="a .gguf file or a HF directory")
    ap.add_argument("--items", type=int, default=16)
    ap.add_argument("--probe-traces", type=int, default=16)
    ap.add_argument("--dycon", default="[[8, 0.5], [8, 1.0]]", help="JSON [[lambda, tau], ...]")
    ap.add_argument("--constants", default="[0.5, 1, 2, 4]", help="JSON list of c")
    ap.add_argument("--max-new-tokens", type=int, default=80)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help=f"default benchmarks/results/{NAME}.json")
    ap.add_argument("--report", default=None, help="re-table this results file (no run)")
    args = ap.parse_args(argv)
    if args.report:
        retable(args.report, tables_of)
        return json.loads(pathlib.Path(args.report).read_text(encoding="utf-8"))
    if not args.checkpoint:
        ap.error("--checkpoint is required (or --report FILE)")
    from fidia_jax import models
    from fidia_jax.projects.dycon import lm_control

    load_start = load_average()
    t0 = time.time()
    path = args.checkpoint
    # model and tokenizer from one path (a GGUF file is parsed once for both)
    model, tokenizer = models.load_lm_checkpoint(path, max_seq_len=256)
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
    res["config"] = {k: v for k, v in vars(args).items() if k not in ("out", "report")}
    out = args.out or default_out(NAME)
    written = write_results(NAME, tables_of(res), load_start=load_start, extra=res, out=out)
    print(f"probe layer {res['probe']['layer']}, held-out R² {res['probe']['r2_heldout']}")
    for t in tables_of(res).values():
        print(" | ".join(t["columns"]))
        for r in t["rows"]:
            print(" | ".join(str(c) for c in r))
    print(
        f"wrote {written}; wall {res['wall_seconds']:.0f} s (load {load_s:.0f} s, probe "
        f"{res['probe_seconds']:.0f} s)"
    )
    return res


if __name__ == "__main__":
    main()
