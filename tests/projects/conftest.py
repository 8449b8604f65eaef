"""Fixtures shared by the driver tests under tests/projects."""

import contextlib
from typing import Any, NamedTuple

import pytest


@contextlib.contextmanager
def _recording_lm_batches(module):
    seen = {"tasks": [], "batches": []}
    original = module.make_lm_batch_fn

    def recording_batch_fn(task, mesh):
        batch_fn = original(task, mesh)
        seen["tasks"].append(task)

        def batch(t):
            seen["batches"].append(batch_fn(t))
            return seen["batches"][-1]

        return batch

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(module, "make_lm_batch_fn", recording_batch_fn)
        yield seen


@pytest.fixture(scope="session")
def record_lm_batches():
    """``with record_lm_batches(module) as seen:`` patches ``module.make_lm_batch_fn`` (a
    driver's import of :func:`fidia_jax.train.make_lm_batch_fn`) so that every task it is
    called with lands in ``seen["tasks"]`` and every batch it makes in ``seen["batches"]``."""
    return _recording_lm_batches


class FitCall(NamedTuple):
    """One recorded ``train.fit`` call: its ``run`` name, the size of its mesh, its history."""

    run: str | None
    mesh_size: int
    history: list[dict[str, Any]]

    def losses(self, key: str = "loss") -> list[float]:
        return [r[key] for r in self.history if key in r]


@pytest.fixture
def fit_calls(monkeypatch):
    """Every ``fidia_jax.train.fit`` call of the test, as :class:`FitCall` (the mesh tests check
    that a driver really hands its mesh to ``fit``)."""
    from fidia_jax import train

    calls, fit = [], train.fit

    def spy(*args, **kwargs):
        res = fit(*args, **kwargs)
        calls.append(FitCall(kwargs.get("run"), kwargs["mesh"].size, res.history))
        return res

    monkeypatch.setattr(train, "fit", spy)
    return calls
