"""Every ```python snippet of README.md and docs/*.md runs as written (issue 17, item 18).

Each snippet runs in a fresh namespace, in a temporary working directory, with
``FIDIA_DATA_DIR`` pointing at the shared data (``../shared/data`` next to the checkout; the test
skips with a reason when it is absent). Snippets read data paths the way a reader would:
``os.environ.get("FIDIA_DATA_DIR", "../shared/data")``.

Two documented markers, on the line right before a snippet's fence, each with a reason:

* ``<!-- slow: REASON -->``: the snippet runs only in the slow suite (``make test-slow``,
  ``pytest -m slow``), e.g. it compiles the ProteinMPNN sampler or trains a tiny model; the
  default suite stays under ~20 s.
* ``<!-- not-run: REASON -->``: the snippet never runs here (it trains for minutes, needs an
  accelerator, ...); the test only compiles it (a syntax check).

Some snippets have value checks below (``CHECKS``), keyed by a line of their text.
"""

from __future__ import annotations

import contextlib
import io
import pathlib
import re

import jax
import numpy as np
import optax
import pytest

from fidia_jax import optim

REPO = pathlib.Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
MARKER = re.compile(r"^<!--\s*(not-run|slow):(.*?)-->\s*$")


def _snippets():
    out = []
    for path in DOCS:
        text = path.read_text()
        for m in FENCE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
            marker = MARKER.match(before)
            kind, reason = (marker.group(1), marker.group(2).strip()) if marker else ("run", None)
            out.append((f"{path.relative_to(REPO)}:{line}", m.group(1), kind, reason))
    return out


SNIPPETS = _snippets()
PARAMS = [
    pytest.param(
        sid, code, kind, reason, id=sid, marks=[pytest.mark.slow] if kind == "slow" else []
    )
    for sid, code, kind, reason in SNIPPETS
]


# ---- value checks of particular snippets (namespace, captured stdout) ---------------------------


def _check_readme_paso(ns, stdout):
    """README: PASO ends in fewer than 256 rounds and equals sequential training; SCALE updates
    have the parameters' shapes (from the former tests/test_readme.py)."""
    res = ns["res"]
    assert int(res.num_iterations) < 256
    seq_params, _, _ = optim.sequential_optimize(
        ns["loss_fn"], optax.adam(1e-2), {"w": np.zeros(8, np.float32)}, ns["batch_fn"], 256
    )
    np.testing.assert_allclose(res.params["w"], seq_params["w"], rtol=1e-5, atol=1e-6)
    updates, _ = ns["tx"].update(ns["params"], ns["opt_state"], ns["params"])
    assert jax.tree.map(np.shape, updates) == jax.tree.map(np.shape, ns["params"])


def _check_readme_mpnn(ns, stdout):
    """README: 16 designs of chain B (1YCR), chain A kept; rewards and max@k are finite."""
    assert ns["out"].sequences.shape == (16, ns["prot"].length)
    assert ns["nll"].shape == (16,) and np.isfinite(np.asarray(ns["nll"])).all()
    assert float(ns["rl"].max_at_k(ns["rewards_n"], k=8)) >= float(np.mean(ns["rewards_n"]))


def _check_variance_table(ns, stdout):
    """docs/fidia_rewards.md: the printed variance is the table's (6, 3, loo-1) entry, 0.2034."""
    assert float(stdout.split()[-1]) == pytest.approx(0.2034, abs=5e-5)


CHECKS = {
    "res = optim.paso(loss_fn, optax.adam(1e-2)": _check_readme_paso,
    "rl.max_at_k(rewards_n, k=8)": _check_readme_mpnn,
    'print(float(jnp.sum(jnp.var(grads(6, 3, "loo-1"), 0))))': _check_variance_table,
}


def test_snippets_found_and_markers_have_reasons():
    ids = [s[0] for s in SNIPPETS]
    assert len(ids) >= 10, ids
    assert any(i.startswith("README.md") for i in ids)
    marked = [(sid, kind, reason) for sid, _, kind, reason in SNIPPETS if kind != "run"]
    for sid, kind, reason in marked:
        assert reason, f"{sid}: a {kind} marker needs a reason"
    not_run = [m for m in marked if m[1] == "not-run"]
    assert len(not_run) <= len(SNIPPETS) // 4, f"most snippets must run: {not_run}"
    assert sum(kind == "run" for *_, kind, _ in SNIPPETS) >= 3
    for key in CHECKS:  # every check still finds its snippet
        assert sum(key in code for _, code, _, _ in SNIPPETS) == 1, key


@pytest.mark.parametrize("sid,code,kind,reason", PARAMS)
def test_snippet_runs_as_written(sid, code, kind, reason, request, tmp_path, monkeypatch):
    compiled = compile(code, sid, "exec")
    if kind == "not-run":
        pytest.skip(f"not run ({sid}): {reason}")
    monkeypatch.chdir(tmp_path)
    if "FIDIA_DATA_DIR" in code:  # skips with a reason when the shared data is absent
        monkeypatch.setenv("FIDIA_DATA_DIR", str(request.getfixturevalue("shared_data_dir")))
    namespace: dict = {"__name__": "__snippet__"}
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        exec(compiled, namespace)
    for key, check in CHECKS.items():
        if key in code:
            check(namespace, stdout.getvalue())


def test_rfdiffusion_benchmark_row_count_quoted_in_docs(shared_data_dir):
    """Figures quoted from the data match it: rows of ``motif_problems/benchmark.csv``."""
    import csv

    with open(shared_data_dir / "protein" / "motif_problems" / "benchmark.csv", newline="") as f:
        n = sum(1 for _ in csv.DictReader(f))
    assert f"{n} `RFDiffusionProblem` rows" in (REPO / "docs" / "protein_io.md").read_text()
    assert f"({n} rows; length variants merged)" in (REPO / "docs" / "fidia_rewards.md").read_text()
