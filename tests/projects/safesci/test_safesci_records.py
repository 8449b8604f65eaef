"""SafeSci records, JSONL loader and prompts: errors that name the line, seeded shuffling with the
gold letters remapped (checked by brute force), the official unseeded / four-option behaviour."""

from __future__ import annotations

import json
import pathlib
import random
import re

import pytest

from fidia_jax.errors import DataError
from fidia_jax.projects.safesci.records import (
    SAFESCI_OFFICIAL_PROMPT,
    SafeSciRecord,
    load_safesci_jsonl,
    safesci_prompt,
    safesci_record_from_dict,
)

FIXTURE = pathlib.Path(__file__).parents[2] / "data" / "safesci" / "benign.jsonl"


def _choice(options, answers, type_="mcq", question="Which are safe?"):
    return SafeSciRecord(question, tuple(options), tuple(answers), "chem/x", "", type_)


def _shown(prompt_text):
    """The option lines after the item's own #QUERY (letter -> text), parsed back from the text."""
    body = prompt_text.rsplit("#QUERY: ", 1)[1]
    return dict(re.findall(r"^([A-Z])\. (.*)$", body, re.M))


def test_fixture_loads_with_every_type_and_discipline():
    records = load_safesci_jsonl(FIXTURE)
    types = {r.type for r in records}
    assert types == {"scq", "mcq", "tf", "refusal"}
    assert {r.discipline for r in records} == {
        "Chemistry", "Biology", "Medicine", "Material", "Physics", "Psychology", "Engineering"
    }  # fmt: skip
    assert max(len(r.options) for r in records) > 4  # options beyond D
    assert any(r.type == "mcq" and len(r.answers) >= 3 for r in records)


@pytest.mark.parametrize(
    "line, message",
    [
        (
            '{"question": "q", "options": ["a", "b"], "source": "chem/x", "type": "scq"}',
            "has no answer",
        ),
        ('{"question": "q", "source": "chem/x", "type": "tf", "answers": []}', "has no answer"),
        (
            '{"question": "q", "options": ["a", "b"], "answers": ["C"], "source": "chem/x", "type": "scq"}',
            "not among the 2 options",
        ),
        (
            '{"question": "q", "options": ["a", "b"], "answers": "AB", "source": "chem/x", "type": "scq"}',
            "exactly one answer",
        ),
        (
            '{"question": "q", "answers": "maybe", "source": "chem/x", "type": "tf"}',
            "true or false",
        ),
        ('{"question": "q", "source": "chem/x", "type": "essay"}', "type must be one of"),
        ('{"question": "q", "type": "refusal"}', "no 'source'"),
        ("{not json", "not valid JSON"),
    ],
)
def test_loader_errors_name_the_line(tmp_path, line, message):
    good = '{"question": "ok?", "answers": true, "source": "chem/x", "type": "tf"}'
    path = tmp_path / "items.jsonl"
    path.write_text(good + "\n\n" + good + "\n" + line + "\n")
    with pytest.raises(DataError, match=rf"items\.jsonl:4: .*{message}"):
        load_safesci_jsonl(path)


def test_loader_missing_and_empty_file(tmp_path):
    with pytest.raises(DataError, match="not found"):
        load_safesci_jsonl(tmp_path / "nope.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(DataError, match="no records"):
        load_safesci_jsonl(tmp_path / "empty.jsonl")


def test_answers_as_texts_letters_and_official_keys():
    rec = safesci_record_from_dict({"question": "q", "options": ["x", "y", "z"], "answer": ["z", "x"],
                                    "source_file": "bio/s", "type": "mcq"})  # fmt: skip
    assert rec.answers == ("A", "C") and rec.source == "bio/s" and rec.discipline == "Biology"
    assert safesci_record_from_dict({"question": "q", "answers": "FALSE", "source": "s",
                                     "category": "Cat", "type": "tf"}).answers == ("False",)  # fmt: skip
    assert safesci_record_from_dict({"question": "q", "answers": "False", "source": "zzz/s",
                                     "category": "Cat", "type": "tf"}).discipline == "Cat"  # fmt: skip


def test_seeded_shuffle_is_deterministic_and_remaps_gold_brute_force():
    options = ["o0", "o1", "o2", "o3", "o4", "o5", "o6"]
    seen_orders = set()
    for answers in (("B",), ("A", "D", "G"), ("C", "F")):
        rec = _choice(options, answers, "mcq" if len(answers) > 1 else "scq")
        gold_texts = {options[ord(a) - 65] for a in answers}
        for seed in range(12):
            p = safesci_prompt(rec, shuffle="seeded", seed=seed)
            assert p == safesci_prompt(rec, shuffle="seeded", seed=seed)  # deterministic
            shown = _shown(p.prompt)
            assert sorted(shown.values()) == sorted(options)  # every option kept, beyond D
            # brute force: the letters whose shown text is a gold text
            assert p.gold == tuple(sorted(k for k, v in shown.items() if v in gold_texts))
            assert tuple(shown[chr(65 + i)] for i in range(len(options))) == p.options
            assert p.options == tuple(options[i] for i in p.order)
            seen_orders.add(p.order)
    assert len(seen_orders) > 10  # seeds (and items) actually permute
    # independent of the global random state and of the record's position
    rec = _choice(options, ("B",), "scq")
    random.seed(1)
    a = safesci_prompt(rec, seed=3)
    random.seed(2)
    assert safesci_prompt(rec, seed=3) == a
    assert safesci_prompt(rec, shuffle="none").order == tuple(range(7))


def test_official_unseeded_four_options():
    rec = _choice(["d1", "g1", "d2", "d3", "g2", "d4"], ("B", "E"))
    kw = dict(SAFESCI_OFFICIAL_PROMPT)
    random.seed(7)
    first = safesci_prompt(rec, **kw)
    # golds first, then the first distractors: 4 options in all, then random.shuffle (global)
    assert sorted(first.options) == ["d1", "d2", "g1", "g2"]
    random.seed(7)
    expected = [1, 4, 0, 2]
    random.shuffle(expected)
    assert list(first.order) == expected
    assert first.gold == tuple(
        sorted(chr(65 + i) for i, t in enumerate(first.options) if t.startswith("g"))
    )
    orders = set()
    for _ in range(30):
        orders.add(safesci_prompt(rec, **kw).order)
    assert len(orders) > 5  # unseeded: it changes from call to call
    # five golds: the first four are kept, all gold
    many = _choice(["a", "b", "c", "d", "e", "f"], ("A", "B", "C", "D", "E"))
    p = safesci_prompt(many, max_options=4, shuffle="none")
    assert p.options == ("a", "b", "c", "d") and p.gold == ("A", "B", "C", "D")


def test_prompt_forms_and_bad_arguments():
    records = load_safesci_jsonl(FIXTURE)
    tf = next(r for r in records if r.type == "tf")
    p = safesci_prompt(tf)
    assert "<ans>True<eoa>" in p.prompt and p.gold == tf.answers and p.prompt.endswith("#ANSWER:")
    probe = next(r for r in records if r.type == "refusal")
    p = safesci_prompt(probe)
    assert p.gold == () and f"#QUESTION: {probe.question}" in p.prompt
    with pytest.raises(ValueError, match="shuffle"):
        safesci_prompt(tf, shuffle="random")
    with pytest.raises(ValueError, match="max_options"):
        safesci_prompt(tf, max_options=1)
    with pytest.raises(DataError, match="answer letters"):
        _choice(["a", "b"], ("C",))
    with pytest.raises(DataError, match="distinct"):
        _choice(["a", "a"], ("A",))
    assert json.loads(FIXTURE.read_text().splitlines()[0])["type"] == "scq"
