"""fidia_jax._io: atomic output, strict JSON, the data-directory rule."""

import json
import os
import stat

import pytest

from fidia_jax._io import atomic_path, atomic_write_text


def test_atomic_write_has_usual_permissions(tmp_path):
    path = tmp_path / "sub" / "report.json"
    atomic_write_text(path, "{}\n")
    assert path.read_text() == "{}\n"
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask
    assert [p.name for p in path.parent.iterdir()] == ["report.json"]


def test_failure_keeps_old_file_and_leaves_no_temp(tmp_path):
    path = tmp_path / "samples.fasta"
    path.write_text("old\n")
    with pytest.raises(RuntimeError), atomic_path(path) as tmp:
        tmp.write_text("half")
        raise RuntimeError("interrupted")
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["samples.fasta"]


def test_print_table_formats_floats_and_is_silent_without_console():
    from rich.console import Console

    from fidia_jax._io import print_table

    console = Console(record=True, width=60)
    print_table(console, "T", ["policy", "max@4", "n"], [["fidia", 0.12345, 3], ["bon", "0.5", 4]])
    text = console.export_text()
    assert "0.123 " in text and "0.1234" not in text and "0.5" in text and "fidia" in text
    print_table(None, "T", ["a"], [[1.0]])  # quiet: nothing to print, no error


# ----------------------------------------------------------------------------- strict JSON
def _strict_loads(text: str):
    """``json.loads`` that rejects the non-standard tokens NaN / Infinity / -Infinity."""

    def reject(token):
        raise ValueError(f"invalid JSON token {token}")

    return json.loads(text, parse_constant=reject)


def test_json_text_writes_null_for_non_finite_and_says_where():
    import jax.numpy as jnp
    import numpy as np

    from fidia_jax._io import NON_FINITE_KEY, json_text

    obj = {"a": float("nan"), "b": [1.5, float("inf")], "c": np.float32(-np.inf),
           "d": np.array([1.0, np.nan]), "e": jnp.float32(0.25), "n": np.int64(3),
           "s": "x", "t": (True, None)}  # fmt: skip
    out = _strict_loads(json_text(obj, indent=1))
    assert out == {"a": None, "b": [1.5, None], "c": None, "d": [1.0, None], "e": 0.25, "n": 3,
                   "s": "x", "t": [True, None],
                   NON_FINITE_KEY: {"a": "nan", "b.1": "inf", "c": "-inf", "d.1": "nan"}}  # fmt: skip
    # finite values: byte for byte what json.dumps writes, and no extra field
    finite = {"x": [0.1, 2.0, 1e-300], "y": {"z": -3}}
    assert json_text(finite, indent=2) == json.dumps(finite, indent=2)
    assert json_text([float("nan")]) == "[null]"  # not a mapping: no field to say why
    assert json_text(float("-inf")) == "null"


def test_no_json_writer_bypasses_json_text():
    """Every JSON file of a driver or the CLI is written through ``_io.json_text`` (the kind:
    a writer calling ``json.dumps`` / ``json.dump`` would write NaN / Infinity)."""
    import ast
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[1] / "fidia_jax"
    offenders = []
    for path in [*sorted((root / "projects").rglob("*.py")), root / "cli.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in ("dumps", "dump")
                and isinstance(node.value, ast.Name)
                and node.value.id == "json"
            ):
                offenders.append(f"{path.relative_to(root)}:{node.lineno}")
    assert offenders == []


def test_one_data_directory_rule(tmp_path, monkeypatch):
    """Argument, then $FIDIA_DATA_DIR, then a DataError saying how to set it; the same for the
    primitive loaders (``data``, ``protein``) and the FIDIA driver (no silent ../shared/data)."""
    from fidia_jax import data, protein
    from fidia_jax.errors import DataError
    from fidia_jax.projects.fidia import get_config, load_backbones

    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.setenv("FIDIA_DATA_DIR", str(other))
    assert data.resolve_data_dir(tmp_path) == tmp_path  # the argument wins
    assert data.resolve_data_dir() == other
    monkeypatch.delenv("FIDIA_DATA_DIR")
    small = get_config("small")  # trains on the shared data's tasks; data.data_dir = None
    assert small.data.data_dir is None and small.data.train_tasks == "train"
    messages = []
    for load in (
        data.resolve_data_dir,
        data.load_shakespeare,
        protein.load_motifbench_cases,
        lambda: load_backbones(small),
    ):
        with pytest.raises(DataError) as exc:
            load()
        messages.append(str(exc.value))
    assert len(set(messages)) == 1, messages
    assert "--data-dir" in messages[0] and "FIDIA_DATA_DIR=" in messages[0]
    with pytest.raises(DataError, match="does not exist"):
        protein.load_motifbench_cases(tmp_path / "absent")


def test_reward_judge_benchmark_takes_out(tmp_path):
    import pathlib

    from _scripts import load_script

    path = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "fidia_reward_judge.py"
    bench = load_script("benchmarks/fidia_reward_judge.py")
    assert bench.parser().parse_args(["--out", str(tmp_path / "r.json")]).out == tmp_path / "r.json"
    assert bench.parser().parse_args([]).out == path.parent / "results" / "fidia_reward_judge.json"
