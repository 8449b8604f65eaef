"""Renders the documentation's tables of measured numbers from the results files (issue 41).

A page marks each such table::

    <!-- results: benchmarks/results/hist_slope.json table=slope -->

    *`python benchmarks/hist.py ...` · 2026-12-04 15:30 UTC · Linux x86_64, 2 CPUs ... · ...*

    | spots | ... |
    |---|---|
    | 1000 | ... |

    <!-- /results -->

The path is relative to the repository root; ``table=<key>`` picks one of the file's
``"tables"`` (it may be left out when the file has one). Everything between the markers is
written by this tool from the file (``benchmarks/_results.py`` documents the format and writes
it): a caption with the command, the date, the machine, the commit and the load average, then
the table. No number in a region is typed by hand.

Usage::

    python tools/render_tables.py --check    # exit 1, listing each page whose region differs
                                             # from its file, or whose file is missing / ignored
    python tools/render_tables.py --write    # rewrite the regions from the files
    python tools/render_tables.py --list     # the regions and their files

Only the standard library is used (it runs before the package is installed).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import pathlib
import re
import subprocess
import sys
from collections.abc import Iterable, Sequence
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
START = re.compile(r"^<!-- results: (?P<path>\S+)(?: table=(?P<table>\S+))? -->\s*$")
END = "<!-- /results -->"


class RenderError(Exception):
    """A region that cannot be rendered (missing file or table, malformed marker or file)."""


@dataclasses.dataclass(frozen=True)
class Region:
    page: pathlib.Path
    start: int  # index of the start-marker line
    end: int  # index of the end-marker line
    path: str
    table: str | None

    def where(self) -> str:
        return f"{self.page}:{self.start + 1}"


def find_regions(page: pathlib.Path, lines: Sequence[str]) -> list[Region]:
    """The marked regions of a page's lines.

    Raises:
      RenderError: a start marker without its end marker, or nested / stray markers.
    """
    regions, open_at, spec = [], None, None
    for i, line in enumerate(lines):
        m = START.match(line)
        if m:
            if open_at is not None:
                raise RenderError(f"{page}:{i + 1}: results region opened inside another")
            open_at, spec = i, (m["path"], m["table"])
        elif line.strip() == END:
            if open_at is None:
                raise RenderError(f"{page}:{i + 1}: '{END}' without a start marker")
            regions.append(Region(page, open_at, i, *spec))
            open_at = None
        elif line.lstrip().startswith("<!-- results"):
            raise RenderError(f"{page}:{i + 1}: malformed results marker: {line.strip()!r}")
    if open_at is not None:
        raise RenderError(f"{page}:{open_at + 1}: results region has no '{END}'")
    return regions


def _cell(value: Any, fmt: str | None) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        if fmt:
            return format(value, fmt)
        return str(value) if isinstance(value, int) else format(value, ".4g")
    if (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
    ):
        return f"{_cell(value[0], fmt)} ± {_cell(value[1], fmt)}"  # [mean, spread]
    if isinstance(value, str):
        return value.replace("\n", " ").replace("|", "\\|")
    raise RenderError(f"cannot render a cell of type {type(value).__name__}: {value!r}")


def _short_commit(commit: str) -> str:
    head, _, rest = str(commit).partition("+")
    return head[:12] + (f"+{rest}" if rest else "")


def render(results: dict[str, Any], path: str, table: str | None) -> list[str]:
    """The lines of a region (between the markers, blank lines around the caption and table).

    Raises:
      RenderError: the file lacks a field, the table, or a row's length is wrong.
    """
    tables = results.get("tables")
    if not isinstance(tables, dict) or not tables:
        raise RenderError(f"{path} has no 'tables'")
    if table is None:
        if len(tables) != 1:
            raise RenderError(f"{path} has tables {sorted(tables)}: name one with table=<key>")
        (table,) = tables
    if table not in tables:
        raise RenderError(f"{path} has no table {table!r} (it has {sorted(tables)})")
    t = tables[table]
    missing = [k for k in ("command", "date", "machine", "commit") if not results.get(k)]
    if missing:
        raise RenderError(f"{path} lacks {missing}")
    columns = list(t["columns"])
    formats = list(t.get("formats") or [None] * len(columns))
    if len(formats) != len(columns):
        raise RenderError(f"{path} table {table!r}: {len(formats)} formats, {len(columns)} columns")
    caption = (
        f"*`{results['command']}` · {results['date']} · {results['machine']} · "
        f"commit `{_short_commit(results['commit'])}`"
    )
    if results.get("load_average") is not None:
        caption += f" · load average {results['load_average']}"
    caption += f" · rendered from `{path}`"
    caption += f" (table `{table}`)*" if len(tables) > 1 else "*"
    out = ["", caption, "", "| " + " | ".join(_cell(c, None) for c in columns) + " |",
           "|" + "---|" * len(columns)]  # fmt: skip
    for i, row in enumerate(t["rows"]):
        if len(row) != len(columns):
            raise RenderError(f"{path} table {table!r} row {i}: {len(row)} cells")
        out.append("| " + " | ".join(_cell(v, f) for v, f in zip(row, formats, strict=True)) + " |")
    return [*out, ""]


def git_commit(root: pathlib.Path) -> str:
    """``git rev-parse HEAD`` in ``root``, with ``+dirty`` when tracked files differ from it;
    ``"unknown"`` outside a git checkout (what ``benchmarks/_results.py`` records)."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                              text=True, check=True).stdout.strip()  # fmt: skip
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=root, capture_output=True, text=True,
                               check=True).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def _ignored(path: pathlib.Path, root: pathlib.Path) -> bool:
    try:
        r = subprocess.run(["git", "check-ignore", "-q", str(path)], cwd=root,
                           capture_output=True, check=False)  # fmt: skip
    except OSError:
        return False
    return r.returncode == 0


def process_page(
    page: pathlib.Path, root: pathlib.Path, *, write: bool, check_ignored: bool = True
) -> list[str]:
    """Checks (or, with ``write``, rewrites) every region of ``page``.

    Returns:
      One problem per line: a region that differs from its rendering (with a diff; none after
      ``write``), a missing or git-ignored results file, a missing table.
    """
    text = page.read_text(encoding="utf-8")
    lines = text.split("\n")
    try:
        regions = find_regions(page, lines)
    except RenderError as e:
        return [str(e)]
    problems: list[str] = []
    new_lines = list(lines)
    for region in reversed(regions):  # from the end, so indices stay valid while writing
        file = root / region.path
        if not file.is_file():
            problems.append(f"{region.where()}: results file {region.path} is missing")
            continue
        if check_ignored and _ignored(file, root):
            problems.append(f"{region.where()}: {region.path} is git-ignored (commit it)")
        try:
            rendered = render(json.loads(file.read_text(encoding="utf-8")), region.path,
                              region.table)  # fmt: skip
        except (RenderError, ValueError, KeyError, TypeError) as e:
            problems.append(f"{region.where()}: {e}")
            continue
        current = lines[region.start + 1 : region.end]
        if current != rendered:
            if write:
                new_lines[region.start + 1 : region.end] = rendered
            else:
                diff = "\n".join(difflib.unified_diff(current, rendered, "page", "rendered",
                                                      lineterm="", n=0))  # fmt: skip
                problems.append(f"{region.where()}: differs from {region.path}\n{diff}")
    if write and new_lines != lines:
        tmp = page.with_name(page.name + ".tmp")
        tmp.write_text("\n".join(new_lines), encoding="utf-8")
        tmp.replace(page)
    return problems


def pages(root: pathlib.Path) -> list[pathlib.Path]:
    """The Markdown pages searched: ``docs/**/*.md``."""
    return sorted((root / "docs").rglob("*.md"))


def run(root: pathlib.Path, *, write: bool, files: Iterable[pathlib.Path] | None = None) -> int:
    problems = []
    for page in files if files is not None else pages(root):
        problems += process_page(page, root, write=write)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"{len(problems)} problem(s): re-render a region from its file with `python "
              "tools/render_tables.py --write`; commit (un-ignore in .gitignore) a cited file",
              file=sys.stderr)  # fmt: skip
    return 1 if problems else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="exit 1 when a page disagrees")
    mode.add_argument("--write", action="store_true", help="rewrite the regions")
    mode.add_argument("--list", action="store_true", help="list the regions")
    parser.add_argument("pages", nargs="*", type=pathlib.Path, help="default: docs/**/*.md")
    args = parser.parse_args(argv)
    files = [p.resolve() for p in args.pages] or None
    if args.list:
        for page in files or pages(ROOT):
            for r in find_regions(page, page.read_text(encoding="utf-8").split("\n")):
                print(f"{r.where()}: {r.path}" + (f" table={r.table}" if r.table else ""))
        return 0
    return run(ROOT, write=args.write, files=files)


if __name__ == "__main__":
    sys.exit(main())
