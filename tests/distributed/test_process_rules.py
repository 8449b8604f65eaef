"""In one process, with a launcher's environment naming it process 1 of 2 (no runtime joined):
``fit`` leaves at once without training or writing, tables and progress stay silent."""

import jax.numpy as jnp
import pytest

from fidia_jax import train


@pytest.fixture
def process_one(monkeypatch):
    for var in ("SLURM_JOB_ID", "OMPI_COMM_WORLD_SIZE", "TPU_WORKER_HOSTNAMES",
                "TPU_PROCESS_ADDRESSES", "FIDIA_QUIET"):  # fmt: skip
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("JAX_COORDINATOR_ADDRESS", "localhost:1")
    monkeypatch.setenv("JAX_NUM_PROCESSES", "2")
    monkeypatch.setenv("JAX_PROCESS_ID", "1")


def test_fit_exits_on_a_process_that_cannot_share_the_work(process_one, tmp_path, capsys):
    calls = []

    def step(state, batch):
        calls.append(batch)
        return state + 1, {"loss": state}

    with pytest.raises(SystemExit) as info:
        train.fit(jnp.float32(0), step, lambda t: t, num_steps=3, workdir=tmp_path / "w")
    assert info.value.code == 0 and calls == []
    assert not (tmp_path / "w").exists()
    assert "process 1/2: this driver runs on process 0 only" in capsys.readouterr().err


def test_tables_and_progress_print_only_on_process_0(process_one, capsys, monkeypatch):
    train.print_table("t", ["a"], [[1.0]])
    progress = train.FitProgress("run", 2)
    progress.update(2, {"loss": 1.0})
    progress.close("final loss 1")
    out = capsys.readouterr()
    assert out.out == "" and "final loss" not in out.err and "run: process 1/2 done" in out.err
    monkeypatch.setenv("JAX_PROCESS_ID", "0")
    train.print_table("t", ["a"], [[1.0]])
    assert "1.000" in capsys.readouterr().out
