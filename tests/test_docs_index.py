"""Every page of docs/ is reachable: docs/index.md lists each one, the README links the index
and every method's page from its methods table (issue 43, Deliver 8)."""

from __future__ import annotations

import pathlib
import re

from fidia_jax.projects import PROJECTS

REPO = pathlib.Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"


def _links(path: pathlib.Path) -> set[str]:
    return set(re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", path.read_text()))


def test_the_index_lists_every_page_and_each_link_exists():
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")} - {"index.md"}
    linked = _links(DOCS / "index.md")
    assert pages - linked == set()
    for target in linked:
        assert (DOCS / target).resolve().exists(), target


def test_every_relative_link_in_docs_resolves():
    """Pages moved into docs/notes/ keep working links (relative to their own folder)."""
    for page in DOCS.rglob("*.md"):
        for target in _links(page):
            if "://" in target or target.startswith("mailto:"):
                continue
            assert (page.parent / target).resolve().exists(), f"{page.relative_to(REPO)}: {target}"


def test_the_readme_links_the_index_and_every_projects_page():
    readme = REPO / "README.md"
    links = _links(readme)
    assert "docs/index.md" in links
    rows = [
        line for line in readme.read_text().splitlines() if re.match(r"^\| \[.*\]\(docs/", line)
    ]
    in_table = {re.search(r"\| `([a-z_]+)`", row).group(1) for row in rows}
    assert set(PROJECTS) - in_table == set()  # every project has a row with its page
    for row in rows:
        page = re.search(r"\]\((docs/[^)]+)\)", row).group(1)
        assert (REPO / page).exists(), page
