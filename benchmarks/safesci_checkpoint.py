"""SafeSci on a released checkpoint (issue 26, Deliver 4; issue 41): ``model=checkpoint`` on the
benign fixture next to the rule-based rows on the same items, strict and official scoring, the
strict bootstrap, and a paired test of the checkpoint against the best constant letter.

The checkpoint (a GGUF file or a Hugging Face directory, e.g. Gemma 3 270M Q4_K_M: ``python
tools/gemma3_270m_gguf.py`` assembles ``gemma-3-270m-q4_k_m.gguf``) is evaluated by
:func:`fidia_jax.projects.safesci.evaluate.run_evaluate`, the code of ``fidia-jax safesci
evaluate --set model=checkpoint --set checkpoint=PATH`` (the ``default`` preset: seeded
shuffle, seed 0, every option kept, strict scoring; greedy, 16 new tokens, no chat template).
On the same prompts: ``keyword`` (rule-based; written with the fixture in view, a harness
check), ``select_all`` (the quirk probe), the best constant letter of A-D with the best
True/False word on these items (``benchmarks/safesci.py``'s ``best_constant``: an upper bound
for a constant answer) and always ``"D"`` (the letter Gemma 3 270M chose most in the run of
2026-12-01).

Tables (:func:`tables` is a pure function of the raw results the file keeps):

* ``scores``: per model the strict choice / true-false accuracy and refusal rate with the
  official bootstrap (5 x 34 %, seed 0), and choice accuracy and refusal rate of the same
  responses under the official scoring (the project's port, ``variants``);
* ``bootstrap``: the official bootstrap estimate of strict choice accuracy over seeds 0-499;
* ``paired``: the checkpoint minus each constant, per-item strict correctness paired over the
  same items: counts, exact McNemar p (two-sided binomial test on the discordant items) and a
  paired bootstrap 95 % interval of the difference (items resampled, 10 000 draws, seed 0);
* ``peer`` (with ``--official-repo``): every model's responses scored by the official code
  (``calc_metrics.py``, ``evaluation/*.py``, through ``tools/safesci_official_parity.py
  --cases`` in a child process): its per-item verdicts against our port's, and its full-sample
  choice accuracy and refusal rate;
* ``run``: the checkpoint run (batches, widths, tokenizer / weights / generation seconds, whole
  run wall and CPU, peak resident memory) and the checkpoint's most frequent choice answer.

Usage: python benchmarks/safesci_checkpoint.py --checkpoint PATH [--official-repo PATH] [--out PATH]
       python benchmarks/safesci_checkpoint.py --report [--out PATH]   # re-table a finished run
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import math
import os
import pathlib
import resource
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import safesci as bench  # noqa: E402  (benchmarks/safesci.py: scoring helpers and tables)
from _peers import run_peer  # noqa: E402
from _results import default_out, load_average, retable, write_results  # noqa: E402
from _stats import paired_tests  # noqa: E402

from fidia_jax.projects import safesci  # noqa: E402
from fidia_jax.projects.safesci.records import load_safesci_jsonl  # noqa: E402
from fidia_jax.projects.safesci.scoring import (  # noqa: E402
    safesci_choice_correct,
    safesci_extract_answer,
    safesci_is_refusal,
    safesci_tf_correct,
)

NAME = "safesci_checkpoint"
PAIRED_DRAWS = 10_000  # resamples of the paired bootstrap interval
ALWAYS = "D"  # the fixed constant letter of the second constant row


# ---------------------------------------------------------------------------- statistics


def mcnemar_exact(ahead: int, behind: int) -> float:
    """Two-sided exact McNemar p: the binomial test of ``ahead`` successes in ``ahead +
    behind`` discordant pairs at 1/2 (``min(1, 2 P[X <= min])``); 1.0 with no discordant pair."""
    n = ahead + behind
    if n == 0:
        return 1.0
    k = min(ahead, behind)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2.0**n
    return min(1.0, 2.0 * tail)


def paired_bootstrap(d, draws: int = PAIRED_DRAWS, seed: int = 0) -> tuple[float, float]:
    """2.5th and 97.5th percentiles of the mean of ``d`` over ``draws`` resamples of its items
    with replacement (``numpy.random.default_rng(seed)``)."""
    d = np.asarray(d, np.float64)
    if len(d) == 0:
        return (float("nan"), float("nan"))
    idx = np.random.default_rng(seed).integers(0, len(d), size=(draws, len(d)))
    means = d[idx].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


# ---------------------------------------------------------------------------- tables


def label(name: str, row: dict) -> str:
    info = row.get("info", {})
    if name == "checkpoint":
        return f"{info['name']} (greedy, {info['max_new_tokens']} new tokens)"
    if name == "always":
        return f'constant "{info["letter"]}" / "{info["tf_word"]}" (always "{info["letter"]}")'
    if name == "keyword":
        return "keyword (rule-based, harness check)"
    return bench._label(name, row)


def _relabel(record: dict, table: dict) -> dict:
    names = list(record["models"])
    for r, name in zip(table["rows"], names, strict=True):
        r[0] = label(name, record["models"][name])
    return table


def scores_table(record: dict) -> dict:
    """``benchmarks/safesci.py``'s scores table (strict with its bootstrap, then official) with
    this benchmark's labels."""
    return _relabel(record, bench.scores_table(record))


def bootstrap_table(record: dict) -> dict:
    """``benchmarks/safesci.py``'s bootstrap-over-seeds table, with this benchmark's labels."""
    return _relabel(record, bench.bootstrap_table(record))


def _correct(items: list[dict], kinds: tuple[str, ...]) -> list[float | None]:
    return [None if it["type"] not in kinds or it.get("correct") is None else float(it["correct"])
            for it in items]  # fmt: skip


PARTS = (("choice items", ("scq", "mcq")), ("choice + true/false items", ("scq", "mcq", "tf")))


def paired_rows(record: dict, draws: int = PAIRED_DRAWS) -> list[dict]:
    """The checkpoint minus each constant (``constant``, then ``always``), per-item strict
    correctness paired over the items both scored: choice items, then choice + true/false."""
    out = []
    for other in ("constant", "always"):
        if other not in record["models"]:
            continue
        for part, kinds in PARTS:
            if other == "always" and part != "choice items":
                continue  # the letter was fixed for the choice items
            xa = _correct(record["models"]["checkpoint"]["items"], kinds)
            xb = _correct(record["models"][other]["items"], kinds)
            pairs = [(u, v) for u, v in zip(xa, xb, strict=True) if u is not None and v is not None]
            a = [u for u, _ in pairs]
            b = [v for _, v in pairs]
            t = paired_tests(a, b)
            lo, hi = paired_bootstrap(np.subtract(a, b), draws=draws)
            out.append({"other": other, "part": part, "n": t["n"], "a_mean": float(np.mean(a)),
                        "b_mean": float(np.mean(b)), "mean_diff": t["mean_diff"],
                        "a_higher": t["a_higher"], "a_lower": t["a_lower"],
                        "p_mcnemar": mcnemar_exact(t["a_higher"], t["a_lower"]),
                        "lo": lo, "hi": hi})  # fmt: skip
    return out


def paired_table(record: dict) -> dict:
    """:func:`paired_rows` as a table."""
    m = record["models"]
    short = {"constant": f'constant "{m["constant"]["info"]["letter"]}" (best letter)'}
    if "always" in m:
        short["always"] = f'constant "{m["always"]["info"]["letter"]}"'
    rows = [[f"checkpoint − {short[p['other']]}, {p['part']}", p["n"], p["a_mean"], p["b_mean"],
             p["mean_diff"], p["a_higher"], p["a_lower"], p["p_mcnemar"], f"{p['lo']:+.3f} to {p['hi']:+.3f}"]
            for p in paired_rows(record)]  # fmt: skip
    return {
        "columns": [
            "comparison (per-item accuracy, strict)",
            "items",
            "checkpoint acc",
            "constant acc",
            "difference",
            "checkpoint ahead",
            "checkpoint behind",
            "exact McNemar p",
            "paired bootstrap 95 % interval",
        ],  # fmt: skip
        "rows": rows,
        "formats": [None, None, ".3f", ".3f", "+.3f", None, None, ".3g", None],
    }


def official_verdict(item: dict) -> bool | None:
    """Our port's verdict under the official rules (official parser, subset credit, empty
    responses skipped, official refusal markers), as ``benchmarks/safesci.py``'s ``parity``."""
    text = item["response"]
    if item["type"] == "refusal":
        return safesci_is_refusal(text, markers="official")
    if not text:
        return None
    if item["type"] == "tf":
        return safesci_tf_correct(safesci_extract_answer(text, kind="tf"), item["gold"])
    return safesci_choice_correct(safesci_extract_answer(text), item["gold"])


def _kind(item_type: str) -> str:
    return {"scq": "choice", "mcq": "choice"}.get(item_type, item_type)


def peer_rows(record: dict) -> list[dict]:
    """Per model: the official code's verdicts (``record["peer"]["cases"]``, in the order of
    the models and their items) against :func:`official_verdict`, and the official code's
    full-sample choice accuracy and refusal rate (skipped items left out)."""
    cases = collections.defaultdict(list)
    for c in record["peer"]["cases"]:
        cases[c["model"]].append(c)
    out = []
    for name, row in record["models"].items():
        got = sorted(cases[name], key=lambda c: c["index"])
        ours = [official_verdict(it) for it in row["items"]]
        agree = sum(ours[c["index"]] == c["official"] for c in got)

        def mean(kind, got=got):
            v = [
                float(c["official"]) for c in got if c["kind"] == kind and c["official"] is not None
            ]
            return float(np.mean(v)) if v else None

        out.append({"model": name, "n": len(got), "agree": int(agree),
                    "choice": mean("choice"), "tf": mean("tf"), "refusal": mean("refusal")})  # fmt: skip
    return out


def peer_table(record: dict) -> dict:
    """The official scoring code on every model's own responses (:func:`peer_rows`)."""
    commit = record["peer"]["commit"][:7]
    rows = [[label(p["model"], record["models"][p["model"]]), p["n"], p["agree"], p["choice"],
             p["tf"], p["refusal"]] for p in peer_rows(record)]  # fmt: skip
    return {
        "columns": [
            "model",
            "responses",
            f"official code ({commit}) verdicts = our port's",
            "choice acc, official code",
            "tf acc, official code",
            "refusal, official code",
        ],  # fmt: skip
        "rows": rows,
        "formats": [None, None, None, ".3f", ".3f", ".3f"],
    }


def most_frequent(items: list[dict]) -> str:
    """The checkpoint's most frequent strict choice prediction, ``"D (16 of 25)"`` (the first
    in sorted order on ties; the parser's ``"#"``, nothing to read, is ``"no answer"``, its
    ``"?"`` ``"undecided"``)."""
    preds = [str(it.get("prediction")) for it in items if it["type"] in ("scq", "mcq")]
    if not preds:
        return "—"
    counts = collections.Counter(preds)
    top = max(sorted(counts), key=lambda p: counts[p])
    shown = {"#": "no answer", "?": "undecided"}.get(top, top)
    return f"{shown} ({counts[top]} of {len(preds)})"


def run_table(record: dict) -> dict:
    """The checkpoint run: its generation batches and times, the whole benchmark's wall / CPU /
    peak memory, and its most frequent choice answer."""
    row = record["models"]["checkpoint"]
    info = row["info"]
    widths = sorted(set(info.get("widths", [])))
    return {
        "columns": [
            "checkpoint",
            "prompts",
            "batch size",
            "batches (widths)",
            "tokenizer s",
            "weights load s",
            "generation s",
            "whole run wall s",
            "whole run CPU s",
            "peak RSS GB",
            "most frequent choice answer",
        ],  # fmt: skip
        "rows": [
            [
                info["name"],
                len(row["items"]),
                info["batch_size"],
                f"{info['batches']} ({', '.join(map(str, widths))})",
                info["tokenizer_s"],
                info["load_s"],
                info["generate_s"],
                record["wall_s"],
                record["cpu_s"],
                record["peak_rss_gb"],
                most_frequent(row["items"]),
            ]
        ],  # fmt: skip
        "formats": [None, None, None, None, ".1f", ".0f", ".0f", ".0f", ".0f", ".2f", None],
    }


def tables(record: dict) -> dict:
    """Every results-file table, from the raw results alone."""
    out = {"scores": scores_table(record), "bootstrap": bootstrap_table(record),
           "paired": paired_table(record)}  # fmt: skip
    if record.get("peer"):
        out["peer"] = peer_table(record)
    out["run"] = run_table(record)
    return out


# ---------------------------------------------------------------------------- run


def _row(report: dict, info: dict) -> dict:
    keep = ("type", "gold", "correct", "refusal", "prediction", "response")
    return {"info": info,
            "choice_accuracy": report["choice_accuracy"]["Overall"],
            "tf_accuracy": report["tf_accuracy"]["Overall"],
            "refusal_rate": report["refusal_rate"]["Overall"],
            "variants": report["variants"],
            "undecided": report["undecided"],
            "items": [{k: it[k] for k in keep if k in it} for it in report["items"]]}  # fmt: skip


def official_peer(repo: str, models: dict) -> dict:
    """Every model's responses scored by the official code of ``repo`` in a child process
    (``tools/safesci_official_parity.py --cases``)."""
    cases = [{"model": name, "index": i, "kind": _kind(it["type"]), "gold": it["gold"],
              "response": it["response"]}
             for name, row in models.items() for i, it in enumerate(row["items"])]  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="safesci_ckpt_peer_") as tmp:
        src, out = pathlib.Path(tmp) / "cases.json", pathlib.Path(tmp) / "official.json"
        src.write_text(json.dumps(cases))
        t = time.time()
        run_peer(sys.executable, bench.PARITY_TOOL, "--repo", repo, "--cases", src, "--out", out,
                 name="the official SafeSci scoring code")  # fmt: skip
        fresh = json.loads(out.read_text())
    return {"commit": fresh["commit"], "peer_wall_s": time.time() - t, "cases": fresh["cases"]}


def run(args) -> dict:
    t0, c0 = time.time(), resource.getrusage(resource.RUSAGE_SELF)
    records = load_safesci_jsonl(bench.FIXTURE)
    config = safesci.get_config("default", model="checkpoint", checkpoint=args.checkpoint,
                                checkpoint_batch_size=args.batch_size,
                                checkpoint_max_seq_len=args.max_seq_len)  # fmt: skip
    from fidia_jax.projects.safesci.evaluate import run_evaluate

    with tempfile.TemporaryDirectory(prefix="safesci_ckpt_") as workdir:
        report = run_evaluate(config, workdir)  # = fidia-jax safesci evaluate, model=checkpoint
    info = {k: v for k, v in report["model"].items() if k != "name"}
    info.update(name=os.path.basename(os.path.normpath(args.checkpoint)),
                max_new_tokens=config.llm_max_new_tokens)  # fmt: skip
    models = {"checkpoint": _row(report, info)}
    letter, word, candidates = bench.best_constant(records, config)
    for name, generate, extra in (
        ("keyword", safesci.keyword_generate, {}),
        ("select_all", safesci.select_all_generate, {}),
        ("constant", bench.constant_generate(letter, word), {"letter": letter, "tf_word": word}),
        ("always", bench.constant_generate(ALWAYS, word), {"letter": ALWAYS, "tf_word": word}),
    ):
        models[name] = _row(safesci.evaluate(generate, records, config), extra)
    results = {"config": dataclasses.asdict(config), "models": models,
               "constant_candidates": candidates, "peer": None}  # fmt: skip
    if args.official_repo:
        results["peer"] = official_peer(args.official_repo, models)
    c1 = resource.getrusage(resource.RUSAGE_SELF)
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    results["wall_s"] = time.time() - t0
    results["cpu_s"] = (c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime
                        + ch.ru_utime + ch.ru_stime)  # fmt: skip
    results["peak_rss_gb"] = c1.ru_maxrss * 1024 / 1e9  # Linux: KiB
    return results


def main(argv=None) -> int:
    load_start = load_average()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default=None, help="GGUF file or Hugging Face directory")
    ap.add_argument("--batch-size", type=int, default=1, help="checkpoint_batch_size (default 1)")
    ap.add_argument("--max-seq-len", type=int, default=512,
                    help="checkpoint_max_seq_len (default 512, the preset's)")  # fmt: skip
    ap.add_argument("--official-repo", default=None,
                    help="git directory or checkout of the official SafeSci code: score every "
                         "model's responses with it")  # fmt: skip
    ap.add_argument(
        "--out", default=None, help=f"results file (default benchmarks/results/{NAME}.json)"
    )
    ap.add_argument("--report", action="store_true", help="no run: re-table --out")
    args = ap.parse_args(argv)
    out = args.out or default_out(NAME)
    if args.report:
        retable(out, tables)
        return 0
    if not args.checkpoint:
        ap.error("--checkpoint PATH is required (or --report)")
    results = run(args)
    tabs = tables(results)
    bench._print(tabs)
    path = write_results(NAME, tabs, load_start=load_start, extra=results, out=out)
    print(f"\nwrote {path} ({results['wall_s']:.0f} s wall, {results['cpu_s']:.0f} s CPU)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
