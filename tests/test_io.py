"""fidia_jax._io: atomic output."""

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
