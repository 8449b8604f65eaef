"""SafeSci harness experiment: three models and a constant baseline on the benign fixture, every
scoring switch, and the official scoring code as the peer.

Models (:mod:`fidia_jax.projects.safesci.models`): ``keyword`` (rule-based; its word lists were
written with the fixture in view, so a harness check, not a baseline), ``select_all`` (the quirk
probe), ``llama`` (a word-level Llama trained here with ``fit_llama`` on the fixture's answer
format, every third record held out) and ``constant`` (the strongest simple baseline: one letter
on every choice item, one word on every true/false item, the best of A-D and True/False on these
items and this option order, so an upper bound for a constant answer). For each model:

1. our settings (seeded shuffle, seed 0, every option kept) with the default (strict) scoring:
   choice / true-false accuracy, refusal rate, the official bootstrap (5 x 34 %);
2. the four choice-scoring variants (official parser or lenient x subset credit or strict) and
   the two refusal lists, on the same responses;
3. the official prompt behaviour (unseeded shuffle of four options; ``random.seed(0)`` first so
   that the run is repeatable);
4. shuffle sensitivity: choice accuracy over option orders ``seed = 0, 1000..1003`` (no
   retraining; the Llama trains on the orders of seeds 1..8, never these);
5. accuracy (choice + true/false) on the Llama's trained and held-out records, and the Llama
   minus the constant baseline paired over those items.

The peer is the official scoring code. With ``--official-repo PATH`` (a git directory or
checkout of github.com/yangyangyang127/SafeSci; it needs numpy and pandas, which the project's
environment has, and no model) the benchmark runs ``tools/safesci_official_parity.py`` on it in a
child process: the official ``calc_metrics.py`` scores 429 constructed responses, and the table
reports the agreement of our ``official`` setting with those verdicts and bootstrap, and whether
they equal the stored fixture ``tests/data/safesci/official_parity.json``. Without it the
stored fixture is the peer (the table says so).

The results file ``benchmarks/results/safesci.json`` (:func:`_results.write_results`) holds the
tables ``scores``, ``orders``, ``bootstrap``, ``split``, ``paired``, ``llama`` and ``peer`` that docs/safesci.md
renders, and the raw results they are built from (:func:`tables` is a pure function of them).

Usage: python benchmarks/safesci.py [--smoke] [--llm-steps 300] [--official-repo PATH] [--out PATH]
       python benchmarks/safesci.py --report [--out PATH]   # re-table a finished run's file
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import random
import resource
import sys
import tempfile
import time

import numpy as np

from fidia_jax.projects import safesci
from fidia_jax.projects.safesci.models import parse_prompt
from fidia_jax.projects.safesci.records import load_safesci_jsonl
from fidia_jax.projects.safesci.scoring import (
    safesci_bootstrap,
    safesci_choice_correct,
    safesci_extract_answer,
    safesci_is_refusal,
    safesci_tf_correct,
)

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _peers import run_peer  # noqa: E402
from _results import default_out, load_average, retable, write_results  # noqa: E402
from _stats import paired_tests  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "data" / "safesci" / "benign.jsonl"
PARITY = ROOT / "tests" / "data" / "safesci" / "official_parity.json"
PARITY_TOOL = ROOT / "tools" / "safesci_official_parity.py"
LETTERS = "ABCD"
TF_WORDS = ("True", "False")
BOOT_SEEDS = 500  # seeds of the official bootstrap in the ``bootstrap`` table


def parity(path: pathlib.Path = PARITY) -> dict:
    """Agreement of our official setting with the official code's verdicts and bootstrap in
    ``path`` (a file written by ``tools/safesci_official_parity.py``)."""
    data = json.loads(pathlib.Path(path).read_text())
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


def official_peer(repo: str) -> dict:
    """Runs the official scoring code of ``repo`` (``tools/safesci_official_parity.py`` in a
    child process), then :func:`parity` against its fresh output; ``same_as_stored``: its
    verdicts and bootstrap equal the stored fixture's."""
    with tempfile.TemporaryDirectory(prefix="safesci_peer_") as tmp:
        out = pathlib.Path(tmp) / "official_parity.json"
        t = time.time()
        run_peer(sys.executable, PARITY_TOOL, "--repo", repo, "--out", out,
                 name="the official SafeSci scoring code")  # fmt: skip
        wall = time.time() - t
        fresh = json.loads(out.read_text())
        result = parity(out)
    stored = json.loads(PARITY.read_text())
    same = all(fresh[k] == stored[k] for k in ("commit", "seed", "bootstrap", "cases"))
    return {**result, "source": "run here", "peer_wall_s": wall, "same_as_stored": same}


def constant_generate(letter: str, tf_word: str):
    """``<ans>{letter}<eoa>`` on every choice prompt, ``<ans>{tf_word}<eoa>`` on every
    true/false prompt, and the letter's reply (not a refusal) on open requests."""

    def generate(prompts: list[str]) -> list[str]:
        return [f"<ans>{tf_word if parse_prompt(p)[0] == 'tf' else letter}<eoa>" for p in prompts]

    return generate


def best_constant(records, config) -> tuple[str, str, dict]:
    """The letter of A-D and the word of True/False with the highest full-sample strict
    accuracy on ``records`` under ``config`` (the first on ties), and every candidate's."""
    scores = {}
    for letter in LETTERS:
        for word in TF_WORDS:
            r = safesci.evaluate(constant_generate(letter, word), records, config)
            scores[f"{letter}/{word}"] = {"choice": r["choice_accuracy"]["Overall"]["mean"],
                                          "tf": r["tf_accuracy"]["Overall"]["mean"]}  # fmt: skip
    letter = max(LETTERS, key=lambda x: (scores[f"{x}/True"]["choice"], -LETTERS.index(x)))
    word = max(TF_WORDS, key=lambda w: (scores[f"A/{w}"]["tf"], -TF_WORDS.index(w)))
    return letter, word, scores


# ---------------------------------------------------------------------------- tables


def _label(name: str, row: dict) -> str:
    info = row.get("info", {})
    if name == "keyword":
        return "keyword (rule-based, harness check)"
    if name == "select_all":
        return "select_all (quirk probe)"
    if name == "llama":
        return f"llama (trained here, {info['params'] / 1000:.0f} k params, {info['steps']} steps)"
    if name == "constant":
        letter, word = info["letter"], info["tf_word"]
        return f'constant "{letter}" / "{word}" (best of A-D, True/False on these items)'
    return name


def _mean(block: dict | None) -> float | None:
    return None if not block or block.get("mean") is None else float(block["mean"])


def _boot(block: dict | None) -> list[float] | None:
    if not block or block.get("boot_mean") is None:
        return None
    return [float(block["boot_mean"]), float(block["boot_std"])]


def _n(record: dict, key: str) -> int:
    return max(int((row[key] or {}).get("n", 0)) for row in record["models"].values())


def scores_table(record: dict) -> dict:
    """Per model, strict (default) scoring: choice / true-false accuracy and refusal rate with
    the official bootstrap; then choice accuracy and refusal rate of the same responses under
    the official scoring."""
    rows = []
    for name, row in record["models"].items():
        v = row["variants"]
        rows.append([_label(name, row),
                     _mean(row["choice_accuracy"]), _boot(row["choice_accuracy"]),
                     _mean(row["tf_accuracy"]),
                     _mean(row["refusal_rate"]), _boot(row["refusal_rate"]),
                     v.get("choice_official"), v.get("refusal_official")])  # fmt: skip
    n_c, n_t, n_r = (_n(record, k) for k in ("choice_accuracy", "tf_accuracy", "refusal_rate"))
    return {
        "columns": [
            "model",
            f"choice acc, strict ({n_c})",
            "boot",
            f"tf acc ({n_t})",
            f"refusal, strict ({n_r})",
            "boot",
            "choice acc, official",
            "refusal, official",
        ],  # fmt: skip
        "rows": rows,
        "formats": [None, ".3f", ".3f", ".3f", ".3f", ".3f", ".3f", ".3f"],
    }


def orders_table(record: dict) -> dict:
    """Per model: choice accuracy under the official preset (prompt and scoring), and mean ± std (ddof 1)
    over the option orders of ``record["order_seeds"]``."""
    seeds = record["order_seeds"]
    rows = []
    for name, row in record["models"].items():
        s = np.asarray(row["choice_accuracy_by_shuffle_seed"], dtype=float)
        spread = float(s.std(ddof=1)) if len(s) > 1 else 0.0
        rows.append([_label(name, row), row["official_prompt_choice_accuracy"],
                     [float(s.mean()), spread]])  # fmt: skip
    return {
        "columns": [
            "model",
            "choice acc, official preset (4 options, unseeded shuffle, official scoring)",
            f"choice acc over {len(seeds)} option orders (seeds {', '.join(map(str, seeds))})",
        ],  # fmt: skip
        "rows": rows,
        "formats": [None, ".3f", ".3f"],
    }


def _split_cells(split: dict) -> list:
    return [split["train"]["mean"], split["heldout"]["mean"]]


def split_table(record: dict) -> dict:
    """Accuracy (choice + true/false, strict) on the records the Llama trained on and on the
    held-out ones, per model (the rule-based models trained on nothing: the same split)."""
    rows, n = [], None
    for name, row in record["models"].items():
        if "split_accuracy" not in row:
            continue
        s = row["split_accuracy"]
        n = (s["train"]["n"], s["heldout"]["n"])
        rows.append([_label(name, row), *_split_cells(s)])
    return {
        "columns": [
            "model",
            f"acc, the Llama's trained records ({n[0]} items)",
            f"acc, held-out records ({n[1]} items)",
        ],  # fmt: skip
        "rows": rows,
        "formats": [None, ".3f", ".3f"],
    }


def _scored(items: list[dict], keep) -> list[float | None]:
    return [None if it.get("correct") is None or not keep(i) else float(it["correct"])
            for i, it in enumerate(items)]  # fmt: skip


def paired_rows(record: dict, a: str = "llama", b: str = "constant") -> list[dict]:
    """``a`` minus ``b``, per-item strict correctness (choice + true/false items both scored)
    paired over all items, the Llama's trained records and its held-out ones."""
    held = set(record["models"]["llama"]["info"]["heldout"])
    out = []
    for part, keep in (("all", lambda i: True), ("trained records", lambda i: i not in held),
                       ("held-out records", lambda i: i in held)):  # fmt: skip
        xa = _scored(record["models"][a]["items"], keep)
        xb = _scored(record["models"][b]["items"], keep)
        pairs = [(u, v) for u, v in zip(xa, xb, strict=True) if u is not None and v is not None]
        t = paired_tests([u for u, _ in pairs], [v for _, v in pairs])
        out.append({"part": part, **t})
    return out


def paired_table(record: dict) -> dict:
    """The Llama minus the constant baseline, paired over items (:func:`paired_rows`)."""
    rows = [[f"llama − constant, {p['part']}", p["n"], p["mean_diff"], p["a_higher"],
             p["a_lower"], p["p_wilcoxon"], p["p_ttest"]] for p in paired_rows(record)]  # fmt: skip
    return {
        "columns": [
            "comparison (per-item accuracy, strict)",
            "items",
            "mean difference",
            "llama ahead",
            "llama behind",
            "Wilcoxon p",
            "paired t-test p",
        ],  # fmt: skip
        "rows": rows,
        "formats": [None, None, "+.3f", None, None, ".3g", ".3g"],
    }


def bootstrap_rows(record: dict, seeds: int = BOOT_SEEDS) -> list[dict]:
    """Per model, the choice items' strict correctness: the full-sample mean and the official
    bootstrap estimate (5 subsamples of 34 %) at seeds ``0 .. seeds - 1`` (seed 0: the estimate
    of the ``scores`` table)."""
    out = []
    for name, row in record["models"].items():
        v = [float(it["correct"]) for it in row["items"]
             if it["type"] in ("scq", "mcq") and it.get("correct") is not None]  # fmt: skip
        # the seed string of safesci_breakdown's pooled row: seed 0 is the scores table's boot
        est = np.asarray([safesci_bootstrap(v, seed=f"{s}:Overall")[0] for s in range(seeds)])
        out.append({"model": name, "n": len(v), "mean": float(np.mean(v)), "seed0": float(est[0]),
                    "boot_mean": float(est.mean()), "boot_std": float(est.std(ddof=1)),
                    "lo": float(np.percentile(est, 2.5)), "hi": float(np.percentile(est, 97.5))})  # fmt: skip
    return out


def bootstrap_table(record: dict) -> dict:
    """How far the official bootstrap estimate of choice accuracy moves with its seed."""
    rows = [[_label(r["model"], record["models"][r["model"]]), r["n"], r["mean"], r["seed0"],
             r["boot_mean"], r["boot_std"], r["lo"], r["hi"]] for r in bootstrap_rows(record)]  # fmt: skip
    return {
        "columns": [
            "model",
            "choice items",
            "full-sample acc, strict",
            "official estimate, seed 0 (= boot above)",
            f"estimate: mean over seeds 0-{BOOT_SEEDS - 1}",
            "std over seeds",
            "2.5th percentile",
            "97.5th percentile",
        ],  # fmt: skip
        "rows": rows,
        "formats": [None, None, ".3f", ".3f", ".3f", ".3f", ".3f", ".3f"],
    }


def llama_table(record: dict) -> dict:
    """The Llama's training run and the whole benchmark's wall and CPU time."""
    info = record["models"]["llama"]["info"]
    return {
        "columns": [
            "parameters",
            "vocabulary",
            "training rows",
            "steps",
            "loss, first step (nats/target token)",
            "loss, mean of last 10 steps",
            "training wall s",
            "whole run wall s",
            "whole run CPU s",
        ],  # fmt: skip
        "rows": [
            [
                info["params"],
                info["vocab"],
                info["rows"],
                info["steps"],
                info["first_loss"],
                info["final_loss"],
                info["train_s"],
                record["wall_s"],
                record["cpu_s"],
            ]
        ],  # fmt: skip
        "formats": [None, None, None, None, ".3g", ".2g", ".0f", ".0f", ".0f"],
    }


def peer_table(record: dict) -> dict:
    """Agreement of our ``official`` setting with the official scoring code."""
    p = record["parity"]
    how = {"run here": "run here (official calc_metrics.py, in a child process)",
           "stored": "stored fixture tests/data/safesci/official_parity.json (not run here)"}[p["source"]]  # fmt: skip
    same = p.get("same_as_stored")
    return {
        "columns": [
            "peer",
            "official commit",
            "responses",
            "verdicts agree",
            "agreement",
            "bootstrap max abs diff",
            "peer output = stored fixture",
        ],  # fmt: skip
        "rows": [
            [
                how,
                p["commit"][:7],
                p["cases"],
                p["agree"],
                p["agree"] / p["cases"],
                p["max_bootstrap_abs_diff"],
                same,
            ]
        ],  # fmt: skip
        "formats": [None, None, None, None, ".3f", ".1e", None],
    }


def tables(record: dict) -> dict:
    """Every results-file table, from the raw results alone."""
    out = {"scores": scores_table(record), "orders": orders_table(record),
           "bootstrap": bootstrap_table(record)}  # fmt: skip
    if "llama" in record["models"] and "split_accuracy" in record["models"]["llama"]:
        out["split"] = split_table(record)
        if "constant" in record["models"]:
            out["paired"] = paired_table(record)
        out["llama"] = llama_table(record)
    out["peer"] = peer_table(record)
    return out


# ---------------------------------------------------------------------------- run


def _items(report: dict) -> list[dict]:
    keep = ("type", "correct", "refusal", "prediction", "response")
    return [{k: it[k] for k in keep if k in it} for it in report["items"]]


def run(args) -> dict:
    t0, c0 = time.time(), resource.getrusage(resource.RUSAGE_SELF)
    records = load_safesci_jsonl(FIXTURE)
    config = safesci.get_config("demo", llm_steps=5 if args.smoke else args.llm_steps)
    # option orders never used to train the Llama (it trains on seeds seed + 1 .. seed + llm_augment)
    seeds = [0] if args.smoke else [0, 1000, 1001, 1002, 1003]
    if args.official_repo:
        peer = official_peer(args.official_repo)
    else:
        peer = {**parity(), "source": "stored", "same_as_stored": None}
    letter, word, candidates = best_constant(records, config)
    results = {"config": dataclasses.asdict(config), "order_seeds": seeds, "models": {},
               "parity": peer, "constant_candidates": candidates}  # fmt: skip
    generators = {
        "keyword": (safesci.keyword_generate, {}),
        "select_all": (safesci.select_all_generate, {}),
    }
    t = time.time()
    trained = safesci.train_safesci_llama(records, config)
    generators["llama"] = (trained.generate, {**trained.info, "train_s": time.time() - t})
    generators["constant"] = (constant_generate(letter, word), {"letter": letter, "tf_word": word})
    heldout = trained.info["heldout"]
    for name, (generate, info) in generators.items():
        report = safesci.evaluate(generate, records, config)
        row = {"info": info,
               "choice_accuracy": report["choice_accuracy"]["Overall"],
               "tf_accuracy": report["tf_accuracy"]["Overall"],
               "refusal_rate": report["refusal_rate"]["Overall"],
               "per_discipline": {k: v["mean"] for k, v in report["choice_accuracy"].items()},
               "variants": report["variants"],
               "undecided": report["undecided"],
               "split_accuracy": safesci.split_accuracy(report["items"], heldout),
               "items": _items(report)}  # fmt: skip
        random.seed(0)
        official = safesci.evaluate(generate, records, safesci.get_config("official"))
        row["official_prompt_choice_accuracy"] = official["choice_accuracy"]["Overall"]["mean"]
        by_seed = [safesci.evaluate(generate, records, dataclasses.replace(config, seed=s))
                   ["choice_accuracy"]["Overall"]["mean"] for s in seeds]  # fmt: skip
        row["choice_accuracy_by_shuffle_seed"] = by_seed
        results["models"][name] = row
    c1 = resource.getrusage(resource.RUSAGE_SELF)
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    results["wall_s"] = time.time() - t0
    results["cpu_s"] = (c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime
                        + ch.ru_utime + ch.ru_stime)  # fmt: skip
    return results


def _print(tabs: dict) -> None:
    for key, t in tabs.items():
        print(f"\n[{key}]  " + " | ".join(t["columns"]))
        for r in t["rows"]:
            print("  " + " | ".join(json.dumps(c) if not isinstance(c, str) else c for c in r))


def main(argv=None) -> int:
    load_start = load_average()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="a seconds-long run (Llama of 5 steps)")
    ap.add_argument("--llm-steps", type=int, default=300)
    ap.add_argument("--official-repo", default=None,
                    help="git directory or checkout of the official SafeSci code: run it as the peer")  # fmt: skip
    ap.add_argument("--out", default=None,
                    help="results file (default benchmarks/results/safesci.json; --smoke: a temp file)")  # fmt: skip
    ap.add_argument("--report", action="store_true", help="no run: re-table --out")
    args = ap.parse_args(argv)
    out = args.out or default_out("safesci", args.smoke)
    if args.report:
        retable(out, tables)
        return 0
    results = run(args)
    tabs = tables(results)
    _print(tabs)
    path = write_results("safesci", tabs, load_start=load_start, extra=results, out=out)
    print(f"\nwrote {path} ({results['wall_s']:.0f} s wall, {results['cpu_s']:.0f} s CPU)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
