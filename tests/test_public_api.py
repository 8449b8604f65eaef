"""The public API (DESIGN.md #1): every package re-exports its names explicitly, and the set of
names is pinned by a snapshot (``tests/public_api.json``), so a name that appears or disappears
fails here and the change is made on purpose.

After an intended API change, rewrite the snapshot and review its diff::

    FIDIA_UPDATE_API_SNAPSHOT=1 .venv/bin/python -m pytest -q tests/test_public_api.py
"""

import importlib
import json
import os
import pathlib
import pkgutil
import types

import pytest

import fidia_jax

SNAPSHOT = pathlib.Path(__file__).with_name("public_api.json")


def _public_packages() -> list[str]:
    """fidia_jax, every public package under it and its public top-level modules (``config``)."""
    names = ["fidia_jax"]
    for info in pkgutil.walk_packages(fidia_jax.__path__, "fidia_jax."):
        public = not any(p.startswith("_") for p in info.name.split("."))
        if public and (info.ispkg or info.name.count(".") == 1) and info.name != "fidia_jax.cli":
            names.append(info.name)
    return sorted(names)


PACKAGES = _public_packages()


def _exports(name: str) -> list[str]:
    module = importlib.import_module(name)
    assert hasattr(module, "__all__"), f"{name} has no __all__"
    return sorted(module.__all__)


def test_snapshot_of_every_all():
    current = {name: _exports(name) for name in PACKAGES}
    if os.environ.get("FIDIA_UPDATE_API_SNAPSHOT") == "1":
        SNAPSHOT.write_text(json.dumps(current, indent=1, sort_keys=True) + "\n")
    pinned = json.loads(SNAPSHOT.read_text())
    problems = []
    for name in sorted(set(current) | set(pinned)):
        now, then = set(current.get(name, [])), set(pinned.get(name, []))
        if name not in current:
            problems.append(f"package {name} disappeared")
        elif name not in pinned:
            problems.append(f"new package {name}: {sorted(now)}")
        else:
            if now - then:
                problems.append(f"{name}: new names {sorted(now - then)}")
            if then - now:
                problems.append(f"{name}: names gone {sorted(then - now)}")
    assert not problems, "public API changed (see this file's docstring):\n" + "\n".join(problems)


@pytest.mark.parametrize("name", PACKAGES)
def test_every_export_resolves_and_is_public(name):
    module = importlib.import_module(name)
    exported = module.__all__
    assert len(set(exported)) == len(exported), f"duplicate names in {name}.__all__"
    for symbol in exported:
        obj = getattr(module, symbol)  # AttributeError names the missing export
        if symbol != "__version__":
            assert not symbol.startswith("_"), f"private name {symbol} exported from {name}"
        if isinstance(obj, types.ModuleType):  # public subpackages (kernels.santa) are fine
            private = [part for part in obj.__name__.split(".") if part.startswith("_")]
            assert not private, f"{name}.{symbol} leaks the private module {obj.__name__}"


def test_lazy_top_level_subpackages():
    for name in fidia_jax.__all__:
        if name != "__version__":
            assert getattr(fidia_jax, name) is importlib.import_module(f"fidia_jax.{name}")


def test_version_is_pep440():
    from packaging.version import Version

    assert Version(fidia_jax.__version__) >= Version("0.1.0")
