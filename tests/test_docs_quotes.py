"""Numbers typed into docs/ tables and prose must come from a run (issue 41).

Tables of measured numbers are rendered from results files (``tests/test_docs_tables.py``).
The other tables of docs/*.md (claims and goals, fidelity, configuration) may quote those
numbers by hand; this test fails when a table cell outside a rendered region holds a decimal
number that no committed results file's tables (what the pages render) contain at any rounding
(0-6 decimals; a share also as a percentage when the quote has ``%``; or in 1-3
significant-digit scientific notation): a number from
no run, a stale quote of an older run, or a typo. A quote is matched against every file's
tables, not the one it means, so a wrong number can pass by coincidence; what it catches is a
quote that matches nothing.

Exempt, because they are not measurements: columns about the paper, the claim, tolerances,
formulas and literature searches; numbers in backticks (code); versions (``5.25.0``); arXiv
identifiers;
``rel``/``rtol``/``atol`` tolerances. A table still typed by hand from a dated run is exempt
when the line before it (blank lines aside) is ``<!-- typed: <why> -->``, which also makes
every such table easy to list (``grep -rn "<!-- typed:" docs``). docs/notes/ and
docs/development_log.md hold dated history and are not checked.

Prose (every line outside tables, fenced code, HTML comments and rendered regions) is checked
the same way against every number a committed results file holds, its tables and its raw
fields alike (prose quotes fields such as a run's ``wall_s``), with two more exemptions:
numbers inside a URL or a link target, and an issue's item (``issue 17.14``). A paragraph
typed by hand on purpose (a paper's number, a constant) is exempt when the line before it is
``<!-- typed: <why> -->``.
"""

from __future__ import annotations

import json
import pathlib
import re

from _scripts import load_script

ROOT = pathlib.Path(__file__).resolve().parents[1]
rt = load_script("tools/render_tables.py")

NUMBER = re.compile(r"(?<![\w.])[-−+]?(\d+\.\d+(?:e[-+]?\d+)?)")
EXEMPT_COLUMNS = ("paper", "claim", "toleran", "search", "formula")
ARXIV = re.compile(r"^\d{4}\.\d{4,5}$")
TYPED = "<!-- typed:"
TOLERANCE = re.compile(r"\b(?:rel|rtol|atol)\s*[=:]?\s*$")
ISSUE_ITEM = re.compile(r"\bissues?\s*$")
LINK = re.compile(r"https?://\S+|\]\([^)]*\)")
HISTORY = ("development_log.md",)


def _sci(x: float, digits: int) -> set[str]:
    text = f"{x:.{digits}e}"
    mantissa, exp = text.split("e")
    return {text, f"{mantissa}e{int(exp)}"}


def spellings(value) -> set[str]:
    """Every way a table might quote ``value`` (numbers nested in lists and dicts too)."""
    out: set[str] = set()
    if isinstance(value, bool) or value is None:
        return out
    if isinstance(value, int | float):
        x = abs(float(value))
        if x != x or x == float("inf"):
            return out
        for d in range(7):
            out |= {f"{x:.{d}f}", f"{100 * x:.{d}f}%"}  # a share quoted as a percentage
        for d in range(3):
            out |= _sci(x, d)
    elif isinstance(value, dict):
        for v in value.values():
            out |= spellings(v)
    elif isinstance(value, list | tuple):
        for v in value:
            out |= spellings(v)
    elif isinstance(value, str):
        out |= {m.group(1) for m in NUMBER.finditer(value)}
    return out


def unquoted(text: str, known: set[str], page: str = "page") -> list[str]:
    """``page:line [column] number`` for every number of a table cell outside the rendered
    regions that ``known`` does not hold (see the module docstring for the exemptions)."""
    lines = text.split("\n")
    inside: set[int] = set()
    for region in rt.find_regions(pathlib.Path(page), lines):
        inside.update(range(region.start, region.end + 1))
    problems, header, typed, skip = [], None, False, False
    for i, line in enumerate(lines):
        if i in inside or not line.startswith("|"):
            header = None
            if line.strip().startswith(TYPED):
                typed = True
            elif line.strip():
                typed = False
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header, skip, typed = [c.lower() for c in cells], typed, False
            continue
        if skip:
            continue
        if set(line) <= set("|-: "):
            continue
        for column, cell in zip(header, cells, strict=False):
            if any(word in column for word in EXEMPT_COLUMNS):
                continue
            for number in _unknown_numbers(cell, known):
                problems.append(f"{page}:{i + 1} [{column[:30]}] {number} in: {cell[:100]}")
    return problems


def _unknown_numbers(text: str, known: set[str], prose: bool = False) -> list[str]:
    """The decimal numbers of ``text`` that ``known`` does not hold, exemptions aside."""
    free = re.sub(r"`[^`]*`", " ", text)
    if prose:
        free = LINK.sub(" ", free)
    out = []
    for m in NUMBER.finditer(free):
        number, before = m.group(1), free[: m.start()]
        dotted = re.match(r"\.\d", free[m.end() : m.end() + 2])  # a version 5.25.0
        if ARXIV.match(number) or dotted or TOLERANCE.search(before):
            continue
        if prose and ISSUE_ITEM.search(before):
            continue
        after = free[m.end() : m.end() + 2].strip()
        percent = after.startswith("%") and f"{number}%" in known
        if number not in known and not percent:
            out.append(number)
    return out


def unquoted_prose(text: str, known: set[str], page: str = "page") -> list[str]:
    """``page:line number`` for every number of a prose line (not a table, fenced code, an
    HTML comment or a rendered region) that ``known`` does not hold; a paragraph after
    ``<!-- typed: <why> -->`` is exempt."""
    lines = text.split("\n")
    inside: set[int] = set()
    for region in rt.find_regions(pathlib.Path(page), lines):
        inside.update(range(region.start, region.end + 1))
    problems, fenced, typed, comment = [], False, False, False
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("```"):
            fenced = not fenced
            continue
        if comment or stripped.startswith("<!--"):
            typed = typed or stripped.startswith(TYPED)
            comment = "-->" not in stripped
            continue
        if not stripped:
            typed = False
            continue
        if fenced or typed or i in inside or stripped.startswith("|"):
            continue
        for number in _unknown_numbers(line, known, prose=True):
            problems.append(f"{page}:{i + 1} {number} in: {stripped[:100]}")
    return problems


def _results_files() -> list[dict]:
    paths = sorted((ROOT / "benchmarks" / "results").glob("*.json"))
    return [json.loads(path.read_text(encoding="utf-8")) for path in paths]


def _pages() -> list[pathlib.Path]:
    return [p for p in sorted((ROOT / "docs").glob("*.md")) if p.name not in HISTORY]


def test_every_number_typed_in_a_docs_table_is_in_a_results_file():
    known: set[str] = set()
    for record in _results_files():
        known |= spellings(record.get("tables", {}))
    problems = []
    for page in _pages():
        problems += unquoted(page.read_text(encoding="utf-8"), known, str(page.relative_to(ROOT)))
    assert not problems, (
        "numbers typed in docs tables that no results file holds (render the table from its "
        "run, quote the results file, or move a dated number to docs/notes/):\n"
        + "\n".join(problems)
    )


def test_a_stale_quote_is_caught_and_the_exemptions_hold():
    known = spellings({"tables": {"t": {"rows": [[16.0312, 0.00341, "p = 2.4e-07"]]}}})
    assert {"16.03", "16.0", "0.0034", "0.34%", "3.4e-3", "3.41e-03", "2.4e-07"} <= known
    assert "0.34" not in known  # x 100 only as a percentage
    page = "\n".join([
        "| claim | paper | ours |",
        "|---|---|---|",
        "| fast | 52.4 % | 16.03x (3.4e-3) |",      # quotes the file: fine
        "| fast | 1.5 | 12.08x |",                  # a stale quote: caught
        "",
        "| method | tolerance | ours |",
        "|---|---|---|",
        "| a | 2.5e-5 | `torch==2.13.1`, rel 4.5e-16, arXiv 2603.02577, transformers 5.25.0 |",
        "<!-- typed: a dated run, no results file -->",
        "",
        "| run | ours |",
        "|---|---|",
        "| old | 77.77 |",
        "",
        "| run | ours |",
        "|---|---|",
        "| new | 88.88 |",
        "<!-- results: benchmarks/results/x.json table=t -->",
        "| rendered | 99.99 |",
        "<!-- /results -->",
    ])  # fmt: skip
    assert unquoted(page, known) == [
        "page:4 [ours] 12.08 in: 12.08x",
        "page:17 [ours] 88.88 in: 88.88",  # the marker exempts one table only
    ]


def test_every_number_typed_in_docs_prose_is_in_a_results_file():
    known: set[str] = set()
    for record in _results_files():
        known |= spellings(record)
    problems = []
    for page in _pages():
        text = page.read_text(encoding="utf-8")
        problems += unquoted_prose(text, known, str(page.relative_to(ROOT)))
    assert not problems, (
        "numbers typed in docs prose that no results file holds (quote the results file, "
        "move a dated number to docs/notes/, or mark a paper's number or a constant with "
        "<!-- typed: why -->):\n" + "\n".join(problems)
    )


def test_prose_quotes_are_checked_and_the_prose_exemptions_hold():
    known = spellings({"wall_s": 24.61, "tables": {"t": {"rows": [[0.0034]]}}})
    page = "\n".join([
        "The run took 24.6 s and 0.34 % of it was idle; 12.08x faster.",   # 12.08 caught
        "See <https://doi.org/10.1126/science.add2187> and [a](x/1.5.md), issue 17.14.",
        "```",
        "speed = 31.6",
        "```",
        "<!-- typed: the paper's own number -->",
        "The paper reports 52.4 % recovery",
        "over 2.5 lines.",
        "",
        "After the paragraph 77.7 counts again.",
        "<!-- results: benchmarks/results/x.json table=t -->",
        "rendered 99.99",
        "<!-- /results -->",
        "| a | b |",
        "|---|---|",
        "| 1 | 88.8 |",
    ])  # fmt: skip
    assert unquoted_prose(page, known) == [
        "page:1 12.08 in: The run took 24.6 s and 0.34 % of it was idle; 12.08x faster.",
        "page:10 77.7 in: After the paragraph 77.7 counts again.",
    ]
