"""The harness: prompts -> any ``generate(list[str]) -> list[str]`` -> parsed, scored, bootstrapped.

:func:`evaluate` is the library entry point (no files); :func:`run_evaluate` and
:func:`run_demo` are the command-line verbs (they build the model named in the config, load the
records and write JSON into ``workdir``).
"""

from __future__ import annotations

import os
import pathlib
import random
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fidia_jax import train
from fidia_jax._io import atomic_write_text, json_text
from fidia_jax.errors import DataError
from fidia_jax.projects.safesci import models
from fidia_jax.projects.safesci.configs import SafeSciConfig
from fidia_jax.projects.safesci.plots import SCORES, plot_disciplines
from fidia_jax.projects.safesci.records import SafeSciRecord, load_safesci_jsonl, safesci_prompt
from fidia_jax.projects.safesci.scoring import (
    SAFESCI_UNDECIDED,
    safesci_breakdown,
    safesci_choice_correct,
    safesci_extract_answer,
    safesci_is_refusal,
    safesci_tf_correct,
)

__all__ = [
    "Generate",
    "call_generate",
    "default_data_path",
    "evaluate",
    "format_table",
    "headline",
    "print_tables",
    "run_demo",
    "run_evaluate",
    "score_responses",
    "scoring_label",
    "split_accuracy",
]

#: The model interface: a batch of prompts in, one response string per prompt out.
Generate = Callable[[list[str]], Sequence[str]]

#: (parser, subset_credit) variants reported side by side for choice items.
_VARIANTS = {
    "official": ("official", True),
    "official_parser_strict_credit": ("official", False),
    "lenient_parser_subset_credit": ("lenient", True),
    "strict": ("lenient", False),
}


def default_data_path() -> pathlib.Path:
    """``tests/data/safesci/benign.jsonl`` of the source checkout this package runs from."""
    return (
        pathlib.Path(__file__).resolve().parents[3] / "tests" / "data" / "safesci" / "benign.jsonl"
    )


def _records(config: SafeSciConfig) -> list[SafeSciRecord]:
    path = config.data_path or default_data_path()
    if not config.data_path and not os.path.isfile(path):
        raise DataError(
            f"the bundled fixture {path} is not there (installed without the sources?): "
            "give --set data_path=FILE.jsonl"
        )
    return load_safesci_jsonl(path)


def call_generate(generate: Generate, prompts: list[str], batch_size: int = 0) -> list[str]:
    """Runs ``generate`` over ``prompts`` in batches and checks what comes back.

    Raises:
      DataError: a batch that returns a non-sequence, the wrong number of outputs, or a
        non-string output (the message names the batch, the counts and the first bad index).
    """
    size = len(prompts) if batch_size <= 0 else int(batch_size)
    out: list[str] = []
    for start in range(0, len(prompts), max(size, 1)):
        batch = prompts[start : start + size]
        got = generate(list(batch))
        if isinstance(got, str) or not isinstance(got, Sequence):
            raise DataError(
                f"generate must return a list of strings, got {type(got).__name__} for prompts "
                f"{start}..{start + len(batch) - 1}"
            )
        if len(got) != len(batch):
            raise DataError(
                f"generate returned {len(got)} outputs for {len(batch)} prompts "
                f"(prompts {start}..{start + len(batch) - 1}); it must return one per prompt"
            )
        for i, text in enumerate(got):
            if not isinstance(text, str):
                raise DataError(f"generate output {start + i} is {type(text).__name__}, not str")
        out.extend(got)
    return out


def score_responses(
    records: Sequence[SafeSciRecord],
    golds: Sequence[tuple[str, ...]],
    num_options: Sequence[int],
    responses: Sequence[str],
    config: SafeSciConfig,
) -> dict[str, Any]:
    """Scores responses (already generated) under the config's switches, plus every variant.

    Returns:
      dict with ``choice_accuracy``, ``tf_accuracy``, ``refusal_rate`` (each a per-discipline
      :func:`.scoring.safesci_breakdown` under the config's settings), ``variants``
      (full-sample overall means under the official / strict choices of every switch) and
      ``items`` (per item: type, discipline, gold, prediction, correct or refusal).
    """
    if not (len(records) == len(golds) == len(num_options) == len(responses)):
        raise ValueError(
            "score_responses: records, golds, num_options and responses differ in length"
        )
    items, groups = [], {"choice": ([], []), "tf": ([], []), "refusal": ([], [])}
    variants: dict[str, list[float]] = {f"choice_{k}": [] for k in _VARIANTS}
    variants.update({"refusal_official": [], "refusal_strict": []})
    for rec, gold, n_opt, text in zip(records, golds, num_options, responses, strict=True):
        item: dict[str, Any] = {"type": rec.type, "discipline": rec.discipline, "gold": "".join(gold),
                                "response": text}  # fmt: skip
        if rec.type == "refusal":
            item["refusal"] = safesci_is_refusal(text, markers=config.refusal_markers)
            groups["refusal"][0].append(float(item["refusal"]))
            groups["refusal"][1].append(rec.discipline)
            for m in ("official", "strict"):
                variants[f"refusal_{m}"].append(float(safesci_is_refusal(text, markers=m)))
        else:
            kind = "tf" if rec.type == "tf" else "choice"
            pred = safesci_extract_answer(
                text,
                kind=kind,
                parser=config.parser,
                num_options=n_opt or None,
                strict=config.strict_parser and kind == "choice",
            )
            item["prediction"] = pred
            if config.skip_empty and not text:
                item["correct"] = None  # the official code skips empty responses
            else:
                if kind == "tf":
                    item["correct"] = safesci_tf_correct(pred, gold[0])
                else:
                    item["correct"] = safesci_choice_correct(
                        pred, gold, subset_credit=config.subset_credit
                    )
                    for name, (parser, credit) in _VARIANTS.items():
                        p = safesci_extract_answer(
                            text, kind="choice", parser=parser, num_options=n_opt
                        )
                        variants[f"choice_{name}"].append(
                            float(safesci_choice_correct(p, gold, subset_credit=credit))
                        )
                groups[kind][0].append(float(item["correct"]))
                groups[kind][1].append(rec.discipline)
        items.append(item)
    boot = {
        "num_subsamples": config.num_subsamples,
        "fraction": config.fraction,
        "seed": config.seed,
    }
    return {
        "choice_accuracy": safesci_breakdown(*groups["choice"], **boot),
        "tf_accuracy": safesci_breakdown(*groups["tf"], **boot),
        "refusal_rate": safesci_breakdown(*groups["refusal"], **boot),
        "variants": {k: (float(np.mean(v)) if v else None) for k, v in variants.items()},
        # Responses the strict parser refused (predicted SAFESCI_UNDECIDED, scored wrong).
        "undecided": sum(it.get("prediction") == SAFESCI_UNDECIDED for it in items),
        "items": items,
    }


def evaluate(
    generate: Generate, records: Sequence[SafeSciRecord], config: SafeSciConfig
) -> dict[str, Any]:
    """Evaluates a model on ``records``: prompt, generate, parse, score, bootstrap.

    Args:
      generate: any callable ``list[str] -> list[str]`` (one response per prompt, in order).
      records: the items (:func:`.records.load_safesci_jsonl`).
      config: the switches (``shuffle``, ``seed``, ``max_options``, ``parser``,
        ``subset_credit``, ``skip_empty``, ``refusal_markers``, bootstrap sizes, ``batch_size``).

    Returns:
      the dict of :func:`score_responses`, plus ``settings`` (the switches used), ``counts``
      (items per type) and, per item, its ``prompt``.

    Raises:
      DataError: no records, or ``generate`` returning the wrong number or kind of outputs.
    """
    if not records:
        raise DataError("evaluate: no records")
    prompts = _prompts(records, config)
    texts = [p.prompt for p in prompts]
    responses = call_generate(generate, texts, config.batch_size)
    with train.stage(f"SafeSci: scoring {len(responses)} responses"):
        report = score_responses(records, [p.gold for p in prompts],
                                 [len(p.options) for p in prompts], responses, config)  # fmt: skip
    for item, text in zip(report["items"], texts, strict=True):
        item["prompt"] = text
    counts: dict[str, int] = {}
    for r in records:
        counts[r.type] = counts.get(r.type, 0) + 1
    settings = {k: getattr(config, k) for k in ("seed", "shuffle", "max_options", "parser", "subset_credit",
                                               "skip_empty", "refusal_markers", "num_subsamples", "fraction")}  # fmt: skip
    return {"settings": settings, "counts": counts, **report}


def _prompts(records: Sequence[SafeSciRecord], config: SafeSciConfig):
    return [
        safesci_prompt(
            r, shuffle=config.shuffle, seed=config.seed, max_options=config.max_options or None
        )
        for r in records
    ]


def _build(
    name: str,
    records: Sequence[SafeSciRecord],
    config: SafeSciConfig,
    workdir: str | os.PathLike[str] | None = None,
) -> tuple[Generate, dict]:
    if name == "keyword":
        return models.keyword_generate, {}
    if name == "select_all":
        return models.select_all_generate, {}
    if name == "responses":
        return models.responses_generate(config.responses_path, len(records)), {}
    if name == "checkpoint":
        if not config.checkpoint:
            raise DataError("model=checkpoint needs --set checkpoint=PATH (GGUF file or HF dir)")
        # the prompts evaluate() will ask, for the context check before the weights load; the
        # global random state (the official unseeded shuffle) is put back, so evaluate() draws
        # the same option orders as without this look-ahead
        state = random.getstate()
        try:
            texts = [p.prompt for p in _prompts(records, config)]
        finally:
            random.setstate(state)
        where = os.path.basename(config.data_path) if config.data_path else "the fixture"
        with train.stage(f"SafeSci: loading {config.checkpoint}"):
            return models.checkpoint_generate(
                config.checkpoint,
                max_new_tokens=config.llm_max_new_tokens,
                max_seq_len=config.checkpoint_max_seq_len,
                batch_size=config.checkpoint_batch_size,
                prompts=texts,
                names=[f"{where} record {i + 1} ({r.type})" for i, r in enumerate(records)],
            )
    trained = models.train_safesci_llama(records, config, workdir=workdir)
    return trained.generate, trained.info


def _headline(report: dict[str, Any]) -> dict[str, Any]:
    def overall(key):
        row = report[key].get("Overall")
        return None if row is None else {k: row[k] for k in ("n", "mean", "boot_mean", "boot_std")}

    return {"choice_accuracy": overall("choice_accuracy"), "tf_accuracy": overall("tf_accuracy"),
            "refusal_rate": overall("refusal_rate"), "variants": report["variants"]}  # fmt: skip


def _evaluate_model(name, records, config, workdir) -> tuple[dict[str, Any], dict]:
    """Builds model ``name`` (trains the Llama, with progress) and evaluates it (a stage)."""
    generate, info = _build(name, records, config, workdir)
    with train.stage(f"SafeSci: model {name!r} on {len(records)} records"):
        report = evaluate(generate, records, config)
    return report, info


def _load(config: SafeSciConfig) -> list[SafeSciRecord]:
    with train.stage(
        f"SafeSci: reading {config.data_path or 'the bundled fixture ' + default_data_path().name}"
    ):
        return _records(config)


def run_evaluate(config: SafeSciConfig, workdir: str | os.PathLike[str]) -> dict[str, Any]:
    """``fidia-jax safesci evaluate``: ``config.model`` on the records, with progress; prints
    the tables and writes into ``workdir``: ``report.json`` (every item), ``summary.json`` (the
    overall scores with their bootstrap, per discipline) and ``safesci_disciplines.png``
    (per-discipline scores with the bootstrap as error bars); the Llama's training run leaves
    ``metrics.jsonl``, ``curves.png`` and checkpoints (run ``safesci_llama``)."""
    records = _load(config)
    report, info = _evaluate_model(config.model, records, config, workdir)
    report["model"] = {"name": config.model, **info}
    os.makedirs(workdir, exist_ok=True)
    atomic_write_text(os.path.join(workdir, "report.json"), json_text(report, indent=1))
    breakdowns = {config.model: {k: report[k] for k in SCORES}}
    _write_outputs(workdir, {config.model: _headline(report)}, breakdowns, config)
    return report


def run_demo(config: SafeSciConfig, workdir: str | os.PathLike[str]) -> dict[str, Any]:
    """``fidia-jax safesci demo``: every model of ``config.demo_models``, with progress; prints
    the tables and writes into ``workdir``: ``demo.json`` and ``demo.txt`` (as before),
    ``summary.json`` (per model the overall scores) and ``safesci_disciplines.png`` (the models
    side by side per discipline, bootstrap as error bars)."""
    records = _load(config)
    out: dict[str, Any] = {"settings": None, "models": {}}
    breakdowns: dict[str, dict[str, Any]] = {}
    for name in config.demo_models:
        report, info = _evaluate_model(name, records, config, workdir)
        out["settings"] = report["settings"]
        breakdowns[name] = {k: report[k] for k in SCORES}
        if "heldout" in info:
            info = {**info, "split_accuracy": split_accuracy(report["items"], info["heldout"])}
        out["models"][name] = {**_headline(report), "info": info,
                               "per_discipline": report["choice_accuracy"],
                               "refusal_per_discipline": report["refusal_rate"],
                               "examples": [{k: it.get(k) for k in ("type", "gold", "prediction", "response")}
                                            for it in report["items"][::9]]}  # fmt: skip
    os.makedirs(workdir, exist_ok=True)
    atomic_write_text(os.path.join(workdir, "demo.json"), json_text(out, indent=1))
    table = format_table(out["models"])
    atomic_write_text(os.path.join(workdir, "demo.txt"), table + "\n")
    _write_outputs(workdir, out["models"], breakdowns, config)
    return out


def headline(
    headlines: dict[str, dict[str, Any]], breakdowns: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """``summary.json``: per model the overall choice / true-false accuracy and refusal rate
    (``n``, full-sample ``mean``, official ``boot_mean`` / ``boot_std``), the quirk variants,
    and the per-discipline choice accuracy and refusal rate."""
    return {
        name: {
            **{k: h[k] for k in SCORES},
            "variants": h["variants"],
            "per_discipline": {k: breakdowns[name][k] for k in ("choice_accuracy", "refusal_rate")},
        }
        for name, h in headlines.items()
    }


def _write_outputs(workdir, headlines, breakdowns, config) -> None:
    plot_disciplines(
        breakdowns, os.path.join(workdir, "safesci_disciplines.png"),
        title=f"SafeSci per discipline ({config.shuffle} shuffle, {config.parser} parser, "
        f"{'subset' if config.subset_credit else 'strict'} credit, "
        f"{config.refusal_markers} refusal markers)",
    )  # fmt: skip
    train.write_summary(workdir, {"models": headline(headlines, breakdowns)}, config=config)
    print_tables(headlines, breakdowns, scoring=scoring_label(config))


def scoring_label(config: SafeSciConfig) -> str:
    """``"strict scoring"`` (the default switches), ``"official scoring"`` (every scoring switch
    official) or ``"mixed scoring (...)"`` naming the switches."""
    switches = (config.parser, config.subset_credit, config.skip_empty, config.refusal_markers)
    if switches == ("lenient", False, False, "strict"):
        return "strict scoring"
    if switches == ("official", True, True, "official"):
        return "official scoring"
    return (
        f"mixed scoring ({config.parser} parser, "
        f"{'subset' if config.subset_credit else 'exact'} credit, "
        f"{'skip' if config.skip_empty else 'count'} empty, {config.refusal_markers} refusal)"
    )


def _discipline_cell(row, boot) -> str:
    return "-" if row is None else f"{row['mean']:.3f}; boot {boot(row)}; n={row['n']}"


def print_tables(
    headlines: dict[str, dict[str, Any]],
    breakdowns: dict[str, dict[str, Any]],
    scoring: str = "config's scoring",
) -> None:
    """The console report (labelled columns, nothing cut): per model the overall scores with
    the official bootstrap under the config's scoring (``scoring`` names it in the title), the
    same responses under every scoring switch (strict first), and choice accuracy per
    discipline."""

    def cell(row, key):
        return "-" if row is None or row.get(key) is None else f"{row[key]:.3f}"

    def boot(row):
        if row is None or row.get("boot_mean") is None:
            return "-"
        return f"{row['boot_mean']:.3f} ± {row['boot_std']:.3f}"

    train.print_table(
        f"SafeSci: overall scores, {scoring} (full sample, and the official bootstrap: "
        "5 × 34 %)",
        ["model", "choice accuracy", "bootstrap", "true/false accuracy", "refusal rate",
         "bootstrap"],
        [[name, cell(h["choice_accuracy"], "mean"), boot(h["choice_accuracy"]),
          cell(h["tf_accuracy"], "mean"), cell(h["refusal_rate"], "mean"), boot(h["refusal_rate"])]
         for name, h in headlines.items()],
    )  # fmt: skip
    keys = ("choice_strict", "choice_official", "refusal_strict", "refusal_official")
    train.print_table(
        "The same responses under each scoring switch (strict vs official)",
        ["model", "choice, strict", "choice, official (subset credit)", "refusal, strict",
         "refusal, official markers"],
        [[name, *(cell(h["variants"], k) for k in keys)] for name, h in headlines.items()],
    )  # fmt: skip
    groups = sorted(
        {g for b in breakdowns.values() for g in b["choice_accuracy"] if g != "Overall"}
    ) + ["Overall"]
    train.print_table(
        "Choice accuracy per discipline: full-sample mean; official bootstrap mean ± std "
        "(- when too few items); items",
        ["discipline", *breakdowns],
        [[g, *(_discipline_cell(b["choice_accuracy"].get(g), boot) for b in breakdowns.values())]
         for g in groups],
    )  # fmt: skip


def split_accuracy(items: Sequence[dict[str, Any]], heldout: Sequence[int]) -> dict[str, Any]:
    """Mean ``correct`` of the scored choice / true-false items, split into the records trained
    on and the ``heldout`` ones (``None`` for an empty split)."""
    held = set(int(i) for i in heldout)
    parts: dict[str, list[float]] = {"train": [], "heldout": []}
    for i, item in enumerate(items):
        if item.get("correct") is not None:
            parts["heldout" if i in held else "train"].append(float(item["correct"]))
    return {k: {"n": len(v), "mean": float(np.mean(v)) if v else None} for k, v in parts.items()}


def _fmt(x: float | None) -> str:
    return "  -  " if x is None else f"{x:.3f}"


def format_table(headlines: dict[str, dict[str, Any]]) -> str:
    """A plain-text table: per model, choice / true-false accuracy and refusal rate (full-sample
    mean and official bootstrap mean ± std), then the quirk variants."""
    lines = [f"{'model':<12} {'choice acc':>10} {'boot':>15} {'tf acc':>7} {'refusal':>8}"
             f" {'boot':>15} | {'ch strict':>9} {'ch off':>6} {'ref strict':>10} {'ref off':>7}"]  # fmt: skip
    for name, h in headlines.items():
        ca, tf, rr, v = (
            h["choice_accuracy"] or {},
            h["tf_accuracy"] or {},
            h["refusal_rate"] or {},
            h["variants"],
        )

        def boot(row):
            if not row or row.get("boot_mean") is None:
                return "       -       "
            return f"{row['boot_mean']:.3f} ± {row['boot_std']:.3f}"

        lines.append(
            f"{name:<12} {_fmt(ca.get('mean')):>10} {boot(ca):>15} {_fmt(tf.get('mean')):>7} "
            f"{_fmt(rr.get('mean')):>8} {boot(rr):>15} | {_fmt(v['choice_strict']):>9} "
            f"{_fmt(v['choice_official']):>6} {_fmt(v['refusal_strict']):>10} {_fmt(v['refusal_official']):>7}"
        )
    return "\n".join(lines)
