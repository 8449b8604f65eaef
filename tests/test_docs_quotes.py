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
the same way, against the results files that its page cites (a results marker, a path under
``benchmarks/results/`` or a file name in backticks), their tables and their raw fields alike
(prose quotes fields such as a run's ``wall_s``); a code span may wrap a line. Also exempt in
prose: numbers inside a URL or a link target, a reference (``issue 17.14``, ``Table 2.3``) and
an identifier's version (``LGPL-3.0``). A paragraph typed by hand on purpose (a paper's
number, a dated reading, a comparison with a run whose file is gone) is exempt when the line
before it is ``<!-- typed: <why> -->``. Checking a page against its own files is what keeps
the test from being vacuous: against every results file, 1231 of the 1277 prose decimals of
2026-12-05 matched something.
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
REFERENCE = re.compile(r"\b(?:issues?|table|section|chapter|eq\.?|fig\.?)\s*$", re.IGNORECASE)
LINK = re.compile(r"https?://\S+|\]\([^)]*\)")
HISTORY = ("development_log.md",)
CODE_SPAN = re.compile(r"`(?:[^`\n]|\n(?![ \t]*\n))*`")  # within a paragraph
IDENTIFIER = re.compile(r"\b[A-Z]{2,}[-−]$")  # LGPL-3.0, CC-BY-4.0


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


def _rendered_lines(page: str, lines: list[str]) -> set[int]:
    """The line indices inside the page's rendered results regions (markers included)."""
    inside: set[int] = set()
    for region in rt.find_regions(pathlib.Path(page), lines):
        inside.update(range(region.start, region.end + 1))
    return inside


def unquoted(text: str, known: set[str], page: str = "page") -> list[str]:
    """``page:line [column] number`` for every number of a table cell outside the rendered
    regions that ``known`` does not hold (see the module docstring for the exemptions)."""
    lines = text.split("\n")
    inside = _rendered_lines(page, lines)
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
        if prose and (REFERENCE.search(before) or IDENTIFIER.search(before)):
            continue
        after = free[m.end() : m.end() + 2].strip()
        percent = after.startswith("%") and f"{number}%" in known
        if number not in known and not percent:
            out.append(number)
    return out


def unquoted_prose(text: str, known: set[str], page: str = "page") -> list[str]:
    """``page:line number`` for every number of a prose line (not a table, fenced code, an
    HTML comment or a rendered region) that ``known`` does not hold; a paragraph after
    ``<!-- typed: <why> -->`` is exempt. Code spans may run over a line break."""
    lines = text.split("\n")
    inside = _rendered_lines(page, lines)
    prose, fenced, typed, comment = [], False, False, False
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("```"):
            fenced = not fenced
        elif comment or stripped.startswith("<!--"):
            typed = typed or stripped.startswith(TYPED)
            comment = "-->" not in stripped
        elif not stripped:
            typed = False
        elif not (fenced or typed or i in inside or stripped.startswith("|")):
            prose.append(i)
    # code spans blanked over the whole text (a span may wrap), line breaks kept
    blanked = CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text).split("\n")
    problems = []
    for i in prose:
        for number in _unknown_numbers(blanked[i], known, prose=True):
            problems.append(f"{page}:{i + 1} {number} in: {lines[i].strip()[:100]}")
    return problems


def _results_files() -> dict[str, dict]:
    paths = sorted((ROOT / "benchmarks" / "results").glob("*.json"))
    return {path.name: json.loads(path.read_text(encoding="utf-8")) for path in paths}


CITED = re.compile(r"benchmarks/results/([\w.\-]+\.json)|`([\w.\-]+\.json)`")


def cited_files(text: str, names) -> set[str]:
    """The results files (of ``names``) that a page cites: in a results marker, a path under
    ``benchmarks/results/``, or a file name in backticks."""
    return {m.group(1) or m.group(2) for m in CITED.finditer(text)} & set(names)


def _pages() -> list[pathlib.Path]:
    return [p for p in sorted((ROOT / "docs").glob("*.md")) if p.name not in HISTORY]


def test_every_number_typed_in_a_docs_table_is_in_a_results_file():
    known: set[str] = set()
    for record in _results_files().values():
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


def test_every_number_typed_in_docs_prose_is_in_a_results_file_the_page_cites():
    files = {name: spellings(record) for name, record in _results_files().items()}
    problems = []
    for page in _pages():
        text = page.read_text(encoding="utf-8")
        known = set().union(*(files[name] for name in cited_files(text, files)))
        problems += unquoted_prose(text, known, str(page.relative_to(ROOT)))
    assert not problems, (
        "numbers typed in docs prose that no results file the page cites holds (quote the "
        "results file and name it, move a dated number to docs/notes/, put a version or a "
        "setting in backticks, or mark a paragraph of paper numbers or constants with "
        "<!-- typed: why -->):\n" + "\n".join(problems)
    )


def test_a_page_cites_its_results_files_by_marker_path_or_name():
    text = "\n".join([
        "<!-- results: benchmarks/results/a.json table=t -->",
        "see `b.json` and benchmarks/results/c.json, not `d.json` (no such file) or e.json",
    ])  # fmt: skip
    assert cited_files(text, ["a.json", "b.json", "c.json", "e.json"]) == {
        "a.json", "b.json", "c.json"
    }  # fmt: skip


def test_prose_quotes_are_checked_and_the_prose_exemptions_hold():
    known = spellings({"wall_s": 24.61, "tables": {"t": {"rows": [[0.0034]]}}})
    page = "\n".join([
        "The run took 24.6 s and 0.34 % of it was idle; 12.08x faster.",   # 12.08 caught
        "See <https://doi.org/10.1126/science.add2187> and [a](x/1.5.md), issue 17.14,",
        "Table 2.3, LGPL-3.0+,",
        "`fidia-jax sample --bias-aa",
        "W:1.5` wraps.",
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
        "page:13 77.7 in: After the paragraph 77.7 counts again.",
    ]
