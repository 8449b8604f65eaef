"""The SafeSci harness end to end: rule-based models and an oracle on the benign fixture, each
switch's effect on the scores, generate errors, the command line, and a tiny trained Llama."""

from __future__ import annotations

import dataclasses
import json
import pathlib
import random

import numpy as np
import pytest

from fidia_jax.cli import main
from fidia_jax.errors import DataError
from fidia_jax.projects.safesci import (
    evaluate,
    get_config,
    keyword_generate,
    select_all_generate,
    train_safesci_llama,
)
from fidia_jax.projects.safesci.models import parse_prompt
from fidia_jax.projects.safesci.records import load_safesci_jsonl

FIXTURE = pathlib.Path(__file__).parents[2] / "data" / "safesci" / "benign.jsonl"


@pytest.fixture(scope="module")
def records():
    return load_safesci_jsonl(FIXTURE)


def _oracle(records, *, drop_one=False):
    """Answers from the records themselves, found through the shown option texts."""
    by_question = {r.question: r for r in records}

    def generate(prompts):
        out = []
        for p in prompts:
            kind, question, options = parse_prompt(p)
            rec = by_question[question]
            if kind == "open":
                out.append("I can't help with that.")
            elif kind == "tf":
                out.append(f"<ans>{rec.answers[0]}<eoa>")
            else:
                gold_texts = {rec.options[ord(a) - 65] for a in rec.answers}
                letters = [chr(65 + i) for i, t in enumerate(options) if t in gold_texts]
                if drop_one and len(letters) > 1:
                    letters = letters[:-1]
                out.append("<ans>" + "".join(letters) + "<eoa>")
        return out

    return generate


def _overall(report, key):
    return report[key]["Overall"]["mean"]


def test_oracle_scores_one_under_every_setting(records):
    for preset, extra in (("default", {}), ("official", {}), ("default", {"parser": "lenient"}),
                          ("default", {"subset_credit": False, "max_options": 4})):  # fmt: skip
        config = get_config(preset, **extra)
        random.seed(0)
        report = evaluate(_oracle(records), records, config)
        assert _overall(report, "choice_accuracy") == 1.0, (preset, extra)
        assert _overall(report, "tf_accuracy") == 1.0
        assert _overall(report, "refusal_rate") == 1.0
        assert report["variants"]["choice_strict"] == 1.0
    n_choice = sum(r.type in ("scq", "mcq") for r in records)
    assert report["choice_accuracy"]["Overall"]["n"] == n_choice
    assert report["counts"] == {"scq": 17, "mcq": 8, "tf": 8, "refusal": 4}


def test_under_selection_is_never_rewarded(records):
    report = evaluate(_oracle(records, drop_one=True), records, get_config("default"))
    n_mcq = sum(r.type == "mcq" for r in records)
    n_choice = sum(r.type in ("scq", "mcq") for r in records)
    expected = (n_choice - n_mcq) / n_choice  # every multi-answer item loses one letter
    assert _overall(report, "choice_accuracy") == pytest.approx(expected)
    assert report["variants"]["choice_strict"] == pytest.approx(expected)


def test_select_all_probe_shows_each_quirk(records):
    # official scoring on the default prompts (all options: no item lists only gold letters)
    report = evaluate(select_all_generate, records,
                      get_config("official", shuffle="seeded", max_options=0))  # fmt: skip
    v = report["variants"]
    assert v["choice_official"] == 1.0 and v["choice_strict"] == 0.0  # over-selection
    assert v["refusal_official"] == 1.0 and v["refusal_strict"] == 0.0  # "I'm sorry to hear"
    assert _overall(report, "choice_accuracy") == 1.0 and _overall(report, "refusal_rate") == 1.0
    n_true = sum(r.type == "tf" and r.answers == ("True",) for r in records)
    n_tf = sum(r.type == "tf" for r in records)
    assert _overall(report, "tf_accuracy") == pytest.approx(n_true / n_tf)
    strict = evaluate(select_all_generate, records, get_config("default"))  # the headline
    assert _overall(strict, "choice_accuracy") == 0.0 and _overall(strict, "refusal_rate") == 0.0
    assert strict["variants"] == v


def test_keyword_model_report_is_consistent(records):
    config = get_config("default")
    report = evaluate(keyword_generate, records, config)
    items = report["items"]
    choice = [it for it in items if it["type"] in ("scq", "mcq")]
    assert _overall(report, "choice_accuracy") == pytest.approx(
        np.mean([it["correct"] for it in choice])
    )
    assert _overall(report, "refusal_rate") == 1.0 and report["variants"]["refusal_strict"] == 1.0
    per = report["choice_accuracy"]
    assert sum(row["n"] for k, row in per.items() if k != "Overall") == len(choice)
    assert evaluate(keyword_generate, records, config)["choice_accuracy"] == per  # seeded: same
    shuffled = evaluate(keyword_generate, records, dataclasses.replace(config, seed=1))
    assert [it["gold"] for it in shuffled["items"]] != [it["gold"] for it in items]


def test_skip_empty_switch(records):
    def empty(prompts):
        return ["" for _ in prompts]

    official = evaluate(empty, records, get_config("official"))
    assert official["choice_accuracy"] == {} and official["tf_accuracy"] == {}  # all skipped
    assert _overall(official, "refusal_rate") == 1.0  # an empty response is a refusal
    counted = evaluate(empty, records, get_config("default"))  # strict: counted, not a refusal
    assert _overall(counted, "choice_accuracy") == 0.0 and _overall(counted, "refusal_rate") == 0.0


def test_generate_errors(records):
    config = get_config("default")
    with pytest.raises(DataError, match=r"returned 3 outputs for \d+ prompts"):
        evaluate(lambda ps: ["<ans>A<eoa>"] * 3, records, config)
    with pytest.raises(DataError, match=r"returned 9 outputs for 7 prompts \(prompts 30..36\)"):
        evaluate(lambda ps: ["x"] * 9 if len(ps) == 7 else ["x"] * len(ps), records,
                 dataclasses.replace(config, batch_size=10))  # fmt: skip
    with pytest.raises(DataError, match="output 1 is int"):
        evaluate(lambda ps: ["a", 3] + ["b"] * (len(ps) - 2), records, config)
    with pytest.raises(DataError, match="list of strings"):
        evaluate(lambda ps: "<ans>A<eoa>", records, config)
    with pytest.raises(DataError, match="no records"):
        evaluate(keyword_generate, [], config)


def test_cli_evaluate_and_responses(tmp_path, records, capsys):
    assert main(["safesci", "evaluate", "--config", "tiny", "--workdir", str(tmp_path / "a")]) == 0
    report = json.loads((tmp_path / "a" / "report.json").read_text())
    assert report["model"]["name"] == "keyword" and len(report["items"]) == len(records)
    lines = [json.dumps({"response": it["response"]}) for it in report["items"]]
    (tmp_path / "r.jsonl").write_text("\n".join(lines) + "\n")
    args = ["safesci", "evaluate", "--config", "tiny", "--workdir", str(tmp_path / "b"),
            "--set", "model=responses", "--set", f"responses_path={tmp_path / 'r.jsonl'}"]  # fmt: skip
    assert main(args) == 0
    again = json.loads((tmp_path / "b" / "report.json").read_text())
    assert again["choice_accuracy"] == report["choice_accuracy"]
    (tmp_path / "r.jsonl").write_text("\n".join(lines[:-1]) + "\n")
    assert main(args) == 2
    assert f"holds {len(records) - 1} responses for {len(records)}" in capsys.readouterr().err
    assert main(["safesci", "demo", "--config", "tiny", "--workdir", str(tmp_path / "d")]) == 0
    demo = json.loads((tmp_path / "d" / "demo.json").read_text())
    assert demo["models"]["select_all"]["variants"]["choice_official"] == 1.0


def test_cli_verbs_leave_summary_picture_and_tables(tmp_path, records, capsys):
    for verb in ("evaluate", "demo"):
        workdir = tmp_path / verb
        args = ["safesci", verb, "--config", "tiny", "--workdir", str(workdir),
                "--data-dir", str(tmp_path)]  # fmt: skip
        assert main(args) == 0
        out = capsys.readouterr()
        first, note, *_ = out.err.splitlines()
        assert first == f"fidia-jax safesci {verb}: config tiny, workdir {workdir}"
        assert "--data-dir is not used" in note
        assert "choice accuracy" in out.out and "Overall" in out.out
        assert "overall scores, strict scoring" in out.out
        summary = json.loads((workdir / "summary.json").read_text())
        assert summary["config"]["model"] == "keyword"
        png = workdir / "safesci_disciplines.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = json.loads((tmp_path / "evaluate" / "report.json").read_text())
    kw = json.loads((tmp_path / "evaluate" / "summary.json").read_text())["models"]["keyword"]
    assert kw["choice_accuracy"] == report["choice_accuracy"]["Overall"]
    assert kw["per_discipline"]["refusal_rate"] == report["refusal_rate"]
    demo = json.loads((tmp_path / "demo" / "summary.json").read_text())["models"]
    assert set(demo) == {"keyword", "select_all"}
    assert demo["select_all"]["variants"]["choice_official"] == 1.0


@pytest.mark.slow
def test_tiny_trained_llama_end_to_end(records):
    config = get_config("tiny", llm_steps=60)
    trained = train_safesci_llama(records, config)
    assert trained.info["final_loss"] < trained.info["first_loss"]
    assert trained.info["heldout"] == list(range(2, len(records), 3))
    outs = trained.generate([p for p in ["#QUERY: x\nA. y\nB. z\n#ANSWER:"]])
    assert len(outs) == 1 and isinstance(outs[0], str)
    report = evaluate(trained.generate, records, config)
    assert len(report["items"]) == len(records)
    assert report["choice_accuracy"]["Overall"]["n"] + report["tf_accuracy"]["Overall"]["n"] == 33


def test_checkpoint_model_needs_a_path_and_a_sane_length(records):
    from fidia_jax.errors import ConfigError
    from fidia_jax.projects.safesci.evaluate import _build

    with pytest.raises(DataError, match="model=checkpoint needs --set checkpoint=PATH"):
        _build("checkpoint", records, get_config("default", model="checkpoint"))
    with pytest.raises(ConfigError, match="checkpoint_max_seq_len"):
        get_config("default", checkpoint_max_seq_len=8)


def test_checkpoint_generate_names_a_missing_path(tmp_path):
    from fidia_jax.errors import CheckpointError
    from fidia_jax.projects.safesci.models import checkpoint_generate

    with pytest.raises(CheckpointError, match="nope.*does not exist"):
        checkpoint_generate(str(tmp_path / "nope"))


@pytest.mark.integration
def test_checkpoint_generate_is_greedy_decoding_of_the_loaded_checkpoint(tiny_gemma3_checkpoint):
    import jax.numpy as jnp

    from fidia_jax import models
    from fidia_jax.projects.safesci.models import checkpoint_generate

    path = tiny_gemma3_checkpoint
    generate, info = checkpoint_generate(str(path), max_new_tokens=3, max_seq_len=32)
    assert info["checkpoint"] == str(path) and info["load_s"] >= 0
    # the reference: the HF loader and the tokenizer called directly, one prompt at a time
    model = models.load_hf_checkpoint(path, max_seq_len=32)
    tok = models.load_tokenizer(path)
    prompts = ["Q: 1 + 2", "A"]
    want = []
    for p in prompts:
        ids = tok.encode(p)
        out = models.sample_llama(
            model, jnp.asarray([ids], jnp.int32), max_new_tokens=3, stop_token=tok.eos_id
        )
        new = [int(t) for t in np.asarray(out.tokens)[0][: int(out.num_tokens[0])]]
        want.append(tok.decode([t for t in new if t != tok.eos_id]))
    assert generate(prompts) == want


def test_strict_parser_counts_what_it_refuses(records):
    """Hedged answers ("A or B") are refused by the strict parser, scored wrong and counted; the
    lenient parser reads none of them either, and counts none as undecided."""
    n_choice = sum(r.type in ("scq", "mcq") for r in records)

    def hedge(prompts):
        return ["The answer is A or B." if "true or false" not in p.lower() else "True"
                for p in prompts]  # fmt: skip

    strict = evaluate(hedge, records, get_config("default", strict_parser=True))
    lenient = evaluate(hedge, records, get_config("default"))
    assert strict["undecided"] == n_choice
    assert lenient["undecided"] == 0
    assert _overall(strict, "choice_accuracy") == _overall(lenient, "choice_accuracy") == 0.0
    with pytest.raises(Exception, match="strict_parser"):
        get_config("official", strict_parser=True)
