"""SafeSci harness experiment: three models on the benign fixture, every switch, official parity.

Models (:mod:`fidia_jax.projects.safesci.models`): ``keyword`` (rule-based), ``select_all`` (the
quirk probe) and ``llama`` (a word-level Llama trained here with ``fit_llama`` on the fixture's
answer format, every third record held out). For each model:

1. our settings (seeded shuffle, seed 0, every option kept) with the default (strict) scoring:
   choice / true-false accuracy, refusal rate, the official bootstrap (5 x 34 %);
2. the four choice-scoring variants (official parser or lenient x subset credit or strict) and
   the two refusal lists, on the same responses;
3. the official prompt behaviour (unseeded shuffle of four options; ``random.seed(0)`` first so
   that the run is repeatable);
4. shuffle sensitivity: choice accuracy over option orders ``seed = 0, 1000..1003`` (no
   retraining; the Llama trains on the orders of seeds 1..8, never these).

The peer is the official scoring code: ``tests/data/safesci/official_parity.json`` holds its
verdicts on 429 constructed responses and its bootstrap (made by
``tools/safesci_official_parity.py`` from the official repository); the table reports the
agreement of our ``official`` setting with it.

Usage: python benchmarks/safesci.py [--smoke] [--llm-steps 300] [--out benchmarks/results/safesci.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import random
import time

import numpy as np

from fidia_jax._io import atomic_write_text, json_text
from fidia_jax.projects import safesci
from fidia_jax.projects.safesci.records import load_safesci_jsonl
from fidia_jax.projects.safesci.scoring import (
    safesci_bootstrap,
    safesci_choice_correct,
    safesci_extract_answer,
    safesci_is_refusal,
    safesci_tf_correct,
)

ROOT = pathlib.Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "data" / "safesci" / "benign.jsonl"
PARITY = ROOT / "tests" / "data" / "safesci" / "official_parity.json"


def parity() -> dict:
    """Agreement of our official setting with the official code's verdicts and bootstrap."""
    data = json.loads(PARITY.read_text())
    agree, values = 0, {"choice": [], "tf": [], "refusal": []}
    for c in data["cases"]:
        text = c["response"]
        if c["kind"] == "refusal":
            ours = safesci_is_refusal(text)
        elif not text:
            ours = None
        elif c["kind"] == "tf":
            ours = safesci_tf_correct(safesci_extract_answer(text, kind="tf"), c["gold"])
        else:
            ours = safesci_choice_correct(safesci_extract_answer(text), c["gold"])
        agree += ours == c["official"]
        if ours is not None:
            values[c["kind"]].append(float(ours))
    boot = {k: np.abs(np.subtract(safesci_bootstrap(v, seed=data["seed"]), data["bootstrap"][k])).max()
            for k, v in values.items()}  # fmt: skip
    return {"cases": len(data["cases"]), "agree": int(agree), "commit": data["commit"],
            "max_bootstrap_abs_diff": float(max(boot.values()))}  # fmt: skip


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true", help="a seconds-long run (Llama of 5 steps)")
    ap.add_argument("--llm-steps", type=int, default=300)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "safesci.json"))
    args = ap.parse_args()
    t0 = time.time()
    records = load_safesci_jsonl(FIXTURE)
    config = safesci.get_config("demo", llm_steps=5 if args.smoke else args.llm_steps)
    # option orders never used to train the Llama (it trains on seeds seed + 1 .. seed + llm_augment)
    seeds = (0,) if args.smoke else (0, 1000, 1001, 1002, 1003)
    results = {"config": dataclasses.asdict(config), "models": {}, "parity": parity()}
    generators = {
        "keyword": (safesci.keyword_generate, {}),
        "select_all": (safesci.select_all_generate, {}),
    }
    t = time.time()
    trained = safesci.train_safesci_llama(records, config)
    generators["llama"] = (trained.generate, {**trained.info, "train_s": time.time() - t})
    headlines = {}
    for name, (generate, info) in generators.items():
        report = safesci.evaluate(generate, records, config)
        row = {"info": info,
               "choice_accuracy": report["choice_accuracy"]["Overall"],
               "tf_accuracy": report["tf_accuracy"]["Overall"],
               "refusal_rate": report["refusal_rate"]["Overall"],
               "per_discipline": {k: v["mean"] for k, v in report["choice_accuracy"].items()},
               "variants": report["variants"]}  # fmt: skip
        if "heldout" in info:
            row["split_accuracy"] = safesci.split_accuracy(report["items"], info["heldout"])
        random.seed(0)
        official = safesci.evaluate(generate, records, safesci.get_config("official"))
        row["official_prompt_choice_accuracy"] = official["choice_accuracy"]["Overall"]["mean"]
        by_seed = [safesci.evaluate(generate, records, dataclasses.replace(config, seed=s))
                   ["choice_accuracy"]["Overall"]["mean"] for s in seeds]  # fmt: skip
        row["choice_accuracy_by_shuffle_seed"] = by_seed
        results["models"][name] = row
        headlines[name] = {"choice_accuracy": row["choice_accuracy"], "tf_accuracy": row["tf_accuracy"],
                           "refusal_rate": row["refusal_rate"], "variants": row["variants"]}  # fmt: skip
    print(safesci.format_table(headlines))
    print(f"\n{'model':<12} {'official prompt':>15} {'acc over 5 option orders':>26}")
    for name, row in results["models"].items():
        s = row["choice_accuracy_by_shuffle_seed"]
        print(f"{name:<12} {row['official_prompt_choice_accuracy']:>15.3f} "
              f"{np.mean(s):>14.3f} ± {np.std(s, ddof=1) if len(s) > 1 else 0.0:.3f}")  # fmt: skip
    if "split_accuracy" in results["models"]["llama"]:
        print(
            f"\nllama accuracy (choice + tf) train/held-out: {results['models']['llama']['split_accuracy']}"
        )
    p = results["parity"]
    print(
        f"\nofficial code (peer): our official setting agrees on {p['agree']}/{p['cases']} verdicts "
        f"(ratio {p['agree'] / p['cases']:.3f}); bootstrap max |diff| {p['max_bootstrap_abs_diff']:.1e}"
    )
    results["wall_s"] = time.time() - t0
    out = pathlib.Path(args.out)
    if args.smoke:
        out = out.with_name(out.stem + "_smoke.json")
    atomic_write_text(out, json_text(results, indent=1))
    print(f"wrote {out} ({results['wall_s']:.0f} s)")


if __name__ == "__main__":
    main()
