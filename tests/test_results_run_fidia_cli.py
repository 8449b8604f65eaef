"""``benchmarks/_results.run_fidia_cli``: the one runner of the checkpoint benchmarks
(algotrace, dycon, residual geometry) refuses a failed run and never reads a reused work
directory's older file as the run's own. ``fidia_jax.cli.main`` is replaced by a stand-in."""

from __future__ import annotations

import json
import os
import time

import pytest
from _scripts import load_script

results = load_script("benchmarks/_results.py")


def _fake_cli(monkeypatch, rc: int, write: bool):
    from fidia_jax import cli

    def main(argv):
        workdir = argv[argv.index("--workdir") + 1]
        if write:
            with open(os.path.join(workdir, "made.json"), "w") as f:
                json.dump({"argv": argv}, f)
        return rc

    monkeypatch.setattr(cli, "main", main)


def test_a_good_run_returns_its_json_and_the_command(monkeypatch):
    _fake_cli(monkeypatch, 0, True)
    record, shown, wall = results.run_fidia_cli(
        lambda w: ["x", "train", "--workdir", w], "made.json"
    )
    assert record["argv"][:2] == ["x", "train"] and shown.startswith("fidia-jax x train --workdir ")
    assert wall >= 0


def test_a_failed_run_and_a_stale_file_are_refused(monkeypatch, tmp_path):
    _fake_cli(monkeypatch, 3, True)
    with pytest.raises(SystemExit, match="exited with 3"):
        results.run_fidia_cli(lambda w: ["x", "--workdir", w], "made.json")
    old = tmp_path / "made.json"
    old.write_text("{}")
    past = time.time() - 3600
    os.utime(old, (past, past))
    _fake_cli(monkeypatch, 0, False)  # exits 0 but writes nothing: the old file is not its own
    with pytest.raises(SystemExit, match="left no new"):
        results.run_fidia_cli(lambda w: ["x", "--workdir", w], "made.json", str(tmp_path))
