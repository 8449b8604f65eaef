"""The TD driver has nothing to split: on a launcher's process 1 of 2 (no runtime joined) it
leaves at once, computing and writing nothing; process 0 runs it as one process would."""

import pytest

from fidia_jax.projects import td
from fidia_jax.projects.td import train as td_train


@pytest.fixture
def launcher(monkeypatch):
    for var in ("SLURM_JOB_ID", "OMPI_COMM_WORLD_SIZE", "TPU_WORKER_HOSTNAMES",
                "TPU_PROCESS_ADDRESSES", "FIDIA_QUIET"):  # fmt: skip
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("JAX_COORDINATOR_ADDRESS", "localhost:1")
    monkeypatch.setenv("JAX_NUM_PROCESSES", "2")
    return monkeypatch


class _Ran(Exception):
    pass


def _refuse(config):
    raise _Ran


def test_process_one_leaves_without_work_or_files(launcher, tmp_path, capsys):
    launcher.setenv("JAX_PROCESS_ID", "1")
    launcher.setattr(td_train, "compare_schedules", _refuse)
    with pytest.raises(SystemExit) as info:
        td.train_and_evaluate(td.get_config("tiny"), tmp_path / "w")
    assert info.value.code == 0
    assert not (tmp_path / "w").exists()
    assert "td: process 1/2: this driver runs on process 0 only" in capsys.readouterr().err


def test_process_zero_does_the_work(launcher, tmp_path):
    launcher.setenv("JAX_PROCESS_ID", "0")
    launcher.setattr(td_train, "compare_schedules", _refuse)
    with pytest.raises(_Ran):  # reached the computation instead of leaving
        td.train_and_evaluate(td.get_config("tiny"), tmp_path / "w")
