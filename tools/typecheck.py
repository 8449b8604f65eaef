"""Type-checks what a user writes against fidia_jax: every ```python snippet of README.md and
docs/*.md, and ``tests/typing/*.py``, with mypy on the installed package (``py.typed``).

Usage (from the repository root; ``make lint`` runs it)::

  python tools/typecheck.py

Each snippet becomes a module of its own in a temporary folder. A snippet marked
``<!-- not-run: ... -->`` is a fragment that continues the page's story, so names it does not
define are allowed there (``name-defined`` is off for those files only). In
``tests/typing/misuse.py`` every line ending in ``# type error`` must be reported and no other
line may be: that file shows that the annotations catch a wrong call
(``optim.scale(learning_rate="oops")``). Exit code 1 on any unexpected report.
"""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
MARKER = re.compile(r"^<!--\s*(not-run|slow):(.*?)-->\s*$")
REPORT = re.compile(r"^(?P<file>[^:]+\.py):(?P<line>\d+): error: (?P<msg>.*)$")


def snippets() -> list[tuple[str, str, bool]]:
    """``(name, code, fragment)`` of every ```python block of the README and docs/."""
    out = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text()
        for m in FENCE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
            marker = MARKER.match(before)
            name = f"{path.stem}_{line}"
            out.append((name, m.group(1), bool(marker and marker.group(1) == "not-run")))
    return out


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp)
        files, fragments = [], []
        for name, code, fragment in snippets():
            f = folder / f"snippet_{name.replace('-', '_')}.py"
            f.write_text(code)
            files.append(str(f))
            if fragment:
                fragments.append(f.stem)
        config = folder / "mypy.ini"
        lines = ["[mypy]", "ignore_missing_imports = True", "follow_imports = silent",
                 "check_untyped_defs = False"]  # fmt: skip
        for stem in fragments:
            lines += [f"[mypy-{stem}]", "disable_error_code = name-defined"]
        config.write_text("\n".join(lines) + "\n")
        typing_dir = ROOT / "tests" / "typing"
        files += [str(p) for p in sorted(typing_dir.glob("*.py"))]
        run = subprocess.run(
            [sys.executable, "-m", "mypy", "--config-file", str(config), "--no-error-summary",
             "--show-absolute-path", *files],
            capture_output=True, text=True, cwd=folder,
        )  # fmt: skip
    misuse = typing_dir / "misuse.py"
    want = {
        i + 1
        for i, line in enumerate(misuse.read_text().splitlines())
        if line.endswith("# type error")
    }
    got_misuse, unexpected = set(), []
    for line in run.stdout.splitlines():
        m = REPORT.match(line)
        if m is None:
            continue
        if pathlib.Path(m["file"]).resolve() == misuse.resolve():
            got_misuse.add(int(m["line"]))
            if int(m["line"]) not in want:
                unexpected.append(line)
        else:
            unexpected.append(line)
    missed = sorted(want - got_misuse)
    for line in unexpected:
        print(line)
    for n in missed:
        print(f"{misuse}:{n}: expected a type error, mypy reported none")
    print(f"typecheck: {len(files)} files, {len(unexpected)} unexpected errors, "
          f"{len(missed)} expected errors missing")  # fmt: skip
    if run.returncode not in (0, 1):
        print(run.stderr)
        return 1
    return 1 if unexpected or missed else 0


if __name__ == "__main__":
    sys.exit(main())
