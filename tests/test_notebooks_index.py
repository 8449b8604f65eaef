"""notebooks/README.md lists every notebook (issue 30: it had fallen behind, 9 of 15)."""

from __future__ import annotations

import pathlib
import re

NOTEBOOK_DIR = pathlib.Path(__file__).resolve().parents[1] / "notebooks"


def _listed(text: str) -> list[str]:
    """The notebook names in the first column of the README's table rows."""
    return re.findall(r"^\| `([A-Za-z0-9_]+)` \|", text, flags=re.M)


def test_the_index_lists_every_notebook_once():
    listed = _listed((NOTEBOOK_DIR / "README.md").read_text())
    present = sorted(p.stem for p in NOTEBOOK_DIR.glob("*.py"))
    assert len(present) >= 15  # the glob sees the notebooks
    assert sorted(set(present) - set(listed)) == [], "notebooks missing from notebooks/README.md"
    assert sorted(set(listed) - set(present)) == [], "README rows without a notebook"
    assert len(listed) == len(set(listed)), "a notebook is listed twice"


def test_the_index_parser_sees_rows():
    text = "| notebook | x |\n|---|---|\n| `a` | one |\n| `b_2` | two |\nnot a row `c`\n"
    assert _listed(text) == ["a", "b_2"]
