"""Resuming ``train.fit`` against another config (issue 42): every combination of the newest
checkpoint in a workdir and the new run's config either continues correctly, stops with the
saved state, or refuses with a ``CheckpointError`` saying what differs. A resume never retrains
from scratch, never cuts ``metrics.jsonl`` below the newest checkpoint, and never leaves a
checkpoint newer than its log."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import optax
import pytest

from fidia_jax import train
from fidia_jax.errors import CheckpointError

_X = np.random.default_rng(1).normal(size=(32, 3)).astype(np.float32)
_Y = _X @ np.array([0.5, -1.0, 2.0], np.float32)
TX = optax.sgd(0.05)


def _loss(p, b):
    return jnp.mean((b["x"] @ p["w"] - b["y"]) ** 2)


STEP = train.make_train_step(_loss, TX, donate=False)


def _batch(t):
    i = np.random.default_rng([1, t]).integers(0, 32, 8)
    return {"x": _X[i], "y": _Y[i]}


def _state(width=3):
    return train.init_train_state({"w": jnp.zeros(width)}, TX)


def _fit(workdir, num_steps, *, fingerprint=None, state=None, keep=3):
    return train.fit(
        _state() if state is None else state, STEP, _batch, num_steps=num_steps,
        workdir=workdir, checkpoint_every=2, keep_checkpoints=keep, quiet=True,
        fingerprint={"seed": 0, "preset": "tiny"} if fingerprint is None else fingerprint,
    )  # fmt: skip


def _steps(workdir):
    return [r["step"] for r in train.read_metrics(workdir / "metrics.jsonl") if "loss" in r]


def _snapshot(workdir):
    """metrics.jsonl and the checkpoint steps, to show a refused resume changed nothing."""
    ckpts = sorted(p.name for p in (workdir / "checkpoints" / "train").iterdir() if p.is_dir())
    return (workdir / "metrics.jsonl").read_text(), ckpts


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """Uninterrupted runs of 4 and 6 steps, the references."""
    root = tmp_path_factory.mktemp("straight")
    return {n: np.asarray(_fit(root / str(n), n).state.params["w"]) for n in (4, 6)}


def test_more_steps_continue_from_the_newest_checkpoint(tmp_path, straight):
    _fit(tmp_path, 4)
    res = _fit(tmp_path, 6)
    assert res.start_step == 4
    np.testing.assert_array_equal(res.state.params["w"], straight[6])
    assert _steps(tmp_path) == [1, 2, 3, 4, 5, 6]


def test_the_same_steps_return_the_saved_state_and_train_nothing(tmp_path, straight):
    _fit(tmp_path, 4)
    before = _snapshot(tmp_path)
    res = _fit(tmp_path, 4)
    assert res.start_step == 4 and int(res.state.step) == 4
    np.testing.assert_array_equal(res.state.params["w"], straight[4])
    assert _snapshot(tmp_path) == before


def test_fewer_steps_return_the_kept_checkpoint_and_keep_the_log(tmp_path, straight):
    _fit(tmp_path, 6, keep=3)  # checkpoints 2, 4, 6
    log = (tmp_path / "metrics.jsonl").read_text()
    res = _fit(tmp_path, 4, keep=3)
    assert res.start_step == 4 and int(res.state.step) == 4
    np.testing.assert_array_equal(res.state.params["w"], straight[4])
    assert (tmp_path / "metrics.jsonl").read_text().startswith(log)  # never cut
    assert _steps(tmp_path)[:6] == [1, 2, 3, 4, 5, 6]
    assert [r["step"] for r in res.history if "loss" in r] == [1, 2, 3, 4]


def test_fewer_steps_without_a_kept_checkpoint_are_refused(tmp_path):
    _fit(tmp_path, 6, keep=1)  # only checkpoint 6 is kept
    before = _snapshot(tmp_path)
    with pytest.raises(CheckpointError, match=r"step 6, beyond this run's 3 steps"):
        _fit(tmp_path, 3, keep=1)
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize(
    "fingerprint, needle",
    [
        ({"seed": 1, "preset": "tiny"}, "seed: saved 0, now 1"),
        ({"seed": 0, "preset": "demo"}, "preset: saved 'tiny', now 'demo'"),
        ({"seed": 0, "preset": "tiny", "lr": 0.1}, "lr: saved '(absent)', now 0.1"),
    ],
)
def test_another_seed_or_preset_is_refused_naming_the_keys(tmp_path, fingerprint, needle):
    _fit(tmp_path, 4)
    before = _snapshot(tmp_path)
    with pytest.raises(CheckpointError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        _fit(tmp_path, 6, fingerprint=fingerprint)
    assert _snapshot(tmp_path) == before


def test_another_model_size_is_refused_naming_the_leaves(tmp_path):
    _fit(tmp_path, 4)
    before = _snapshot(tmp_path)
    with pytest.raises(CheckpointError, match=r"leaf 'params/w' was saved as float32\[3\]"):
        _fit(tmp_path, 6, state=_state(width=5))
    deeper = train.init_train_state({"w": jnp.zeros(3), "w2": jnp.zeros(3)}, TX)
    with pytest.raises(CheckpointError, match=r"only in the template \(.*'params/w2'"):
        _fit(tmp_path, 6, state=deeper)
    assert _snapshot(tmp_path) == before


def test_a_fresh_start_replaces_the_fingerprint(tmp_path):
    _fit(tmp_path, 4)
    res = train.fit(_state(), STEP, _batch, num_steps=2, workdir=tmp_path, resume=False,
                    quiet=True, fingerprint={"seed": 5})  # fmt: skip
    assert res.start_step == 0 and _steps(tmp_path) == [1, 2]
    with pytest.raises(CheckpointError, match="seed: saved 5, now 0"):
        _fit(tmp_path, 4)
