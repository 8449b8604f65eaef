"""No stage of a run sits silent (house rule: at most 10 s): ``train.stage`` prints a ``still
running`` line every ``every_s`` seconds, and a fit's compile phase does too when stderr is a
log or a pipe. Found by ``benchmarks/demo_times.py`` (HiST's demo: 40 s without a line while its
sections' features were prepared, 15 s while the step compiled)."""

from __future__ import annotations

import re
import threading
import time

from fidia_jax import train
from fidia_jax.train._progress import FitProgress


def test_stage_prints_still_running_lines_while_it_runs_and_stops_after(capsys, monkeypatch):
    monkeypatch.delenv("FIDIA_QUIET", raising=False)
    n_threads = threading.active_count()
    with train.stage("preparing [sections]", every_s=0.1):
        assert threading.active_count() == n_threads + 1  # the beat thread
        time.sleep(0.6)
    err = capsys.readouterr().err
    beats = re.findall(r"  preparing \[sections\]: still running, \d+ s", err)
    assert 1 <= len(beats) <= 6, err
    assert err.index("still running") < err.index("done in")
    assert threading.active_count() == n_threads  # joined when the stage ended
    time.sleep(0.25)
    assert capsys.readouterr().err == ""


def test_stage_is_silent_when_quiet_and_can_be_asked_for_no_beat(capsys, monkeypatch):
    monkeypatch.delenv("FIDIA_QUIET", raising=False)
    with train.stage("short", every_s=0):
        time.sleep(0.2)
    assert "still running" not in capsys.readouterr().err
    monkeypatch.setenv("FIDIA_QUIET", "1")
    with train.stage("quiet", every_s=0.05):
        time.sleep(0.2)
    assert capsys.readouterr().err == ""


def test_stage_beat_stops_on_an_exception(capsys, monkeypatch):
    monkeypatch.delenv("FIDIA_QUIET", raising=False)
    try:
        with train.stage("failing", every_s=0.05):
            time.sleep(0.12)
            raise KeyError("x")
    except KeyError:
        pass
    capsys.readouterr()
    time.sleep(0.2)
    assert "still running" not in capsys.readouterr().err


def test_fit_progress_beats_while_compiling_only(capsys, monkeypatch):
    monkeypatch.delenv("FIDIA_QUIET", raising=False)
    monkeypatch.setattr("fidia_jax._io.STILL_RUNNING_EVERY_S", 0.1)
    bar = FitProgress("hist_C2", 10)
    time.sleep(0.35)
    bar.compiled()
    err = capsys.readouterr().err
    assert "hist_C2: compiling …" in err
    assert len(re.findall(r"hist_C2: compiling, still running, \d+ s", err)) >= 2
    time.sleep(0.25)
    bar.update(10, {"loss": 1.0})
    bar.close("final loss 1")
    assert "still running" not in capsys.readouterr().err


def test_only_the_innermost_heartbeat_speaks(capsys, monkeypatch):
    """A stage around a loader's stage, or around a fit's progress display, stays quiet while
    the inner one runs, and speaks again after it."""
    monkeypatch.delenv("FIDIA_QUIET", raising=False)
    monkeypatch.setattr("fidia_jax._io.STILL_RUNNING_EVERY_S", 0.1)
    with train.stage("outer", every_s=0.1):
        with train.stage("inner", every_s=0.1):
            time.sleep(0.45)
        err = capsys.readouterr().err
        assert "inner: still running" in err and "outer: still running" not in err
        bar = FitProgress("fit", 10)  # the display silences "outer" while it lives
        time.sleep(0.35)
        bar.compiled()
        time.sleep(0.35)
        err = capsys.readouterr().err
        assert "fit: compiling, still running" in err and "outer: still running" not in err
        bar.close()
        time.sleep(0.35)
    assert "outer: still running" in capsys.readouterr().err


def test_a_fit_progress_used_as_a_context_manager_releases_its_beats(capsys, monkeypatch):
    import fidia_jax._io as io

    monkeypatch.delenv("FIDIA_QUIET", raising=False)
    before = list(io._BEATS)
    with FitProgress("fit", 3) as bar:
        assert len(io._BEATS) == len(before) + 2  # its quiet token and its compile beat
        bar.compiled()
    assert io._BEATS == before
