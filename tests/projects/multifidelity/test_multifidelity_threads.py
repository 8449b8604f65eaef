"""The CPU-bound baseline helper (fidia_jax.train._threads) the multifidelity / LDL drivers use."""

import os
import time

import pytest
import threadpoolctl

from fidia_jax.errors import ConfigError
from fidia_jax.projects import multifidelity
from fidia_jax.train import _threads


def test_available_cores_follows_the_affinity():
    n = _threads.available_cores()
    assert 1 <= n <= (os.cpu_count() or n)
    if hasattr(os, "sched_getaffinity"):
        assert n == len(os.sched_getaffinity(0))


def test_limit_threads_sets_the_native_pools_and_restores_them():
    import numpy as np  # noqa: F401  (loads the BLAS pool threadpoolctl reports)

    before = [p["num_threads"] for p in threadpoolctl.threadpool_info()]
    with _threads.limit_threads(1) as n:
        assert n == 1
        assert all(p["num_threads"] == 1 for p in threadpoolctl.threadpool_info())
    assert [p["num_threads"] for p in threadpoolctl.threadpool_info()] == before
    with _threads.limit_threads(0) as n:
        assert n == _threads.available_cores()
    with pytest.raises(ValueError, match="threads must be >= 0"):
        with _threads.limit_threads(-1):
            pass


def test_cpu_stage_prints_a_heartbeat(monkeypatch, capsys):
    monkeypatch.delenv("FIDIA_QUIET", raising=False)
    with _threads.cpu_stage("slow fit", threads=1, every_s=0.05):
        time.sleep(0.3)
    err = capsys.readouterr().err
    assert "slow fit [1 thread(s)]" in err
    assert err.count("slow fit: still running") >= 2
    assert "done in" in err


def test_baseline_threads_is_validated():
    with pytest.raises(ConfigError, match="baseline_threads"):
        multifidelity.get_config("tiny", baseline_threads=-1)
