"""Every project's `train` (or `evaluate`) on its tiny config, as a user runs it: a first line on
stderr at once, then metrics.jsonl (where it trains), summary.json and at least one PNG."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from fidia_jax.projects import PROJECTS


def _verb(name: str) -> str | None:
    module = PROJECTS[name].module
    if importlib.util.find_spec(f"{module}.configs") is None:
        return None  # proteinmpnn: sample/score verbs, no config presets
    if importlib.util.find_spec(f"{module}.train") is not None:
        return "train"
    return "evaluate"


CASES = [(n, _verb(n)) for n in sorted(PROJECTS) if _verb(n) is not None]


@pytest.mark.integration
@pytest.mark.parametrize(("project", "verb"), CASES, ids=[c[0] for c in CASES])
def test_tiny_run_leaves_metrics_summary_and_a_picture(project, verb, tmp_path, shared_data_dir):
    workdir = tmp_path / "run"
    env = {**os.environ, "FIDIA_DATA_DIR": str(shared_data_dir), "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "fidia_jax.cli", project, verb, "--config", "tiny",
           "--workdir", str(workdir), "--data-dir", str(shared_data_dir)]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    head = out.stderr.splitlines()[:3]  # the first line (after at most a note or a warning)
    assert any(h.startswith(f"fidia-jax {project} {verb}: config tiny") for h in head), head
    summary = json.loads((workdir / "summary.json").read_text())
    assert isinstance(summary, dict) and summary
    pngs = sorted(workdir.rglob("*.png"))
    assert pngs and all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs), pngs
    if verb == "train":
        records = [
            json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()
        ]
        assert records and all("step" in r for r in records)
    assert out.stdout.strip(), "no console table on stdout"
