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
