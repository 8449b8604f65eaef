"""One-way layering of the package (docs/architecture.md), checked on every import statement.

Every ``.py`` file under ``fidia_jax/`` is parsed (imports inside functions included) and each
import of a ``fidia_jax`` module must respect three rules:

1. **Order.** A package imports only packages of a lower level (or its own):
   foundations -> data/protein -> layers/kernels -> models -> losses/metrics/rl -> optim ->
   train -> projects -> cli.
2. **No sibling privates.** ``fidia_jax.<pkg>._x`` is imported only from inside ``<pkg>``;
   top-level private modules (``fidia_jax._io``, ``fidia_jax._checks``) are shared foundations.
3. **Drivers are leaves.** A project (``fidia_jax.projects.<name>``) never imports another
   project, and nothing but the command line reaches a project (the CLI does it by name).
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "fidia_jax"

#: Level of each top-level module or package; an import must not go to a higher level.
LEVELS: dict[str, int] = {
    # foundations: no fidia_jax imports but each other
    "errors": 0, "_io": 0, "_checks": 0, "_disk_cache": 0, "config": 0, "parallel": 0, "launch": 0,
    "data": 1, "protein": 1,
    "layers": 2, "kernels": 2,
    "models": 3,
    "losses": 4, "metrics": 4, "rl": 4,
    "optim": 5,
    "train": 6,
    "projects": 7,
    "cli": 8,
    "__init__": 8,  # fidia_jax/__init__.py imports subpackages lazily, by name
    "__main__": 9,  # python -m fidia_jax: the command line
}  # fmt: skip

#: Pairs of different packages on one level that may not import each other either.
SAME_LEVEL_ALLOWED: set[tuple[str, str]] = set()


def _module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: pathlib.Path) -> list[tuple[int, str]]:
    """``(line, absolute module)`` of every fidia_jax import in the file, nested ones included."""
    tree = ast.parse(path.read_text(), filename=str(path))
    this = _module_name(path).split(".")
    package = this if path.name == "__init__.py" else this[:-1]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("fidia_jax")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1])
                mod = f"{base}.{node.module}" if node.module else base
            else:
                mod = node.module or ""
            if not mod.startswith("fidia_jax"):
                continue
            out.append((node.lineno, mod))
            # ``from fidia_jax import rl`` / ``from fidia_jax.projects import fidia``
            out += [(node.lineno, f"{mod}.{a.name}") for a in node.names if a.name != "*"]
    return out


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _violations(path: pathlib.Path) -> list[str]:
    me = _module_name(path)
    my_parts = me.split(".")
    my_top = _top(me)
    found = []
    for line, target in _imports(path):
        where = f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}"
        parts = target.split(".")
        if len(parts) < 2 or parts[1] not in LEVELS:
            # ``from fidia_jax import X`` where X is a name, not a module: nothing to check
            continue
        top = parts[1]
        # rule 2: a private module is imported only from inside its own package
        for i, part in enumerate(parts[1:], start=1):
            if part.startswith("_"):  # the first private part; the rest lies inside it
                if i > 1 and my_parts[:i] != parts[:i]:
                    found.append(f"{where}: private module of another package")
                break
        # rule 3: projects are leaves
        if top == "projects" and len(parts) > 2:
            if my_top != "projects" and my_top != "cli":
                found.append(f"{where}: only the CLI reaches a driver")
            elif my_top == "projects" and len(my_parts) > 2 and my_parts[2] != parts[2]:
                found.append(f"{where}: a driver imports another driver")
        # rule 1: one-way order
        if top != my_top:
            a, b = LEVELS[my_top], LEVELS[top]
            if b > a or (b == a > 0 and (my_top, top) not in SAME_LEVEL_ALLOWED):
                found.append(f"{where}: {my_top} (level {a}) must not import {top} (level {b})")
    return found


FILES = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_top_level_module_has_a_level():
    tops = {p.stem if p.parent == PACKAGE else p.relative_to(PACKAGE).parts[0] for p in FILES}
    assert tops <= set(LEVELS), f"add a level for {sorted(tops - set(LEVELS))}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_follow_the_layering(path):
    assert not _violations(path), "\n".join(_violations(path))


def test_the_checker_catches_each_rule(tmp_path, monkeypatch):
    """The rules fire on a synthetic tree (so a passing suite is not a checker that sees nothing)."""
    pkg = tmp_path / "fidia_jax"
    for rel, text in {
        "models/_a.py": "def f():\n    from fidia_jax.protein._types import Protein\n",
        "protein/_b.py": "from fidia_jax import models\n",
        "projects/x/train.py": "from fidia_jax.projects.y import train\n",
        "rl/_c.py": "from fidia_jax.projects import fidia\n",
        "projects/x/ok.py": "from fidia_jax.projects.x import _inner\nfrom fidia_jax import rl\n",
    }.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    monkeypatch.setattr(__import__(__name__), "PACKAGE", pkg)
    msgs = {
        rel: _violations(pkg / rel)
        for rel in [
            "models/_a.py",
            "protein/_b.py",
            "projects/x/train.py",
            "rl/_c.py",
            "projects/x/ok.py",
        ]
    }
    assert any("private module" in m for m in msgs["models/_a.py"])
    assert any("must not import models" in m for m in msgs["protein/_b.py"])
    assert any("another driver" in m for m in msgs["projects/x/train.py"])
    assert any("only the CLI" in m for m in msgs["rl/_c.py"])
    assert msgs["projects/x/ok.py"] == []


# ----------------------------------------------------------------------------- gradient steps
#: What writes a gradient step: the gradient and the update of the parameters.
_STEP_NAMES = {"value_and_grad", "apply_updates", "Optimizer"}
#: The marker of an allowed exception, on the flagged line or the comment lines just above it.
STEP_EXCEPTION = "gradient step outside fidia_jax.train:"
#: At most this many marked exceptions in the whole package (issue 23).
MAX_STEP_EXCEPTIONS = 2


def _gradient_steps(path: pathlib.Path) -> tuple[list[str], list[str]]:
    """``(unmarked, marked)`` places of ``path`` that use a step-writing name (AST, so words in
    docstrings and comments do not count)."""
    text = path.read_text()
    lines = text.splitlines()
    unmarked, marked = [], []
    for node in ast.walk(ast.parse(text, filename=str(path))):
        name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)
        if name not in _STEP_NAMES or not isinstance(node, (ast.Attribute, ast.Name)):
            continue
        above = range(node.lineno - 1, max(node.lineno - 8, 0) - 1, -1)
        context = [lines[node.lineno - 1]]
        for i in above:  # the contiguous comment block right above the line
            if i == node.lineno - 1:
                continue
            if not lines[i].strip().startswith("#"):
                break
            context.append(lines[i])
        where = f"{path.relative_to(PACKAGE.parent)}:{node.lineno} uses {name}"
        (marked if any(STEP_EXCEPTION in c for c in context) else unmarked).append(where)
    return unmarked, marked


def test_drivers_take_their_gradient_steps_from_the_training_package():
    """No module under ``projects/`` writes its own gradient step (``value_and_grad``,
    ``optax.apply_updates``, ``nnx.Optimizer``): steps come from ``fidia_jax.train``. At most
    two places are allowed, each marked with a comment naming why (``STEP_EXCEPTION``)."""
    unmarked, marked = [], []
    for path in FILES:
        if path.relative_to(PACKAGE).parts[0] == "projects":
            u, m = _gradient_steps(path)
            unmarked += u
            marked += m
    assert not unmarked, "gradient steps written in drivers:\n" + "\n".join(unmarked)
    files = {m.split(":")[0] for m in marked}
    assert len(files) <= MAX_STEP_EXCEPTIONS, f"too many marked exceptions: {sorted(files)}"


def test_the_step_checker_sees_steps_and_markers(tmp_path, monkeypatch):
    pkg = tmp_path / "fidia_jax"
    (pkg / "projects" / "x").mkdir(parents=True)
    f = pkg / "projects" / "x" / "train.py"
    f.write_text(
        '"""Uses value_and_grad in prose only."""\n'
        "import jax, optax\n"
        "g = jax.value_and_grad(lambda p: p)\n"
        "# gradient step outside fidia_jax.train: a reason\n"
        "# (continued)\n"
        "p = optax.apply_updates(1, 2)\n"
    )
    monkeypatch.setattr(__import__(__name__), "PACKAGE", pkg)
    unmarked, marked = _gradient_steps(f)
    assert [u.split(" uses ")[1] for u in unmarked] == ["value_and_grad"]
    assert [m.split(" uses ")[1] for m in marked] == ["apply_updates"]
