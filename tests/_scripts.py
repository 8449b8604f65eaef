"""The repository's scripts (``benchmarks/*.py``, ``tools/*.py``) loaded as modules in tests.

They are not a package: a script imports its siblings by name (``from _results import ...``),
so its folder is on ``sys.path`` while it executes; the module is registered in
``sys.modules`` under ``name`` (dataclasses look their module up there).
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys
from types import ModuleType

ROOT = pathlib.Path(__file__).resolve().parent.parent


def load_script(relpath: str, name: str | None = None) -> ModuleType:
    """The script at ``ROOT / relpath`` executed as a module named ``name`` (default
    ``_script_<folder>_<stem>``); a second call with the same name returns the first module."""
    path = ROOT / relpath
    name = name or f"_script_{path.parent.name}_{path.stem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    saved = list(sys.path)
    sys.path.insert(0, str(path.parent))
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    finally:
        sys.path[:] = saved
    return module


def assert_report_retables(main, out: pathlib.Path, tables: dict) -> None:
    """A benchmark's ``--report`` on its results file ``out``: the tables are derived again from
    the file's own record (emptied first, so nothing is kept by accident) to ``tables``, and the
    run's caption (its date and commit) is kept."""
    import json

    doc = json.loads(out.read_text())
    caption = {"date": "2026-12-05 09:00 UTC", "commit": doc["commit"]}
    out.write_text(json.dumps({**doc, **caption, "tables": {}}))
    assert main(["--report", "--out", str(out)]) == 0
    again = json.loads(out.read_text())
    assert {k: again[k] for k in caption} == caption
    assert again["tables"] == json.loads(json.dumps(tables))
