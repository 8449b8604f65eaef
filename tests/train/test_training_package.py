"""fidia_jax.train: the step against closed forms, the non-finite policy, resume bit for bit,
the mesh against one device, checkpoints, and the files a run leaves."""

from __future__ import annotations

import json
import os
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from fidia_jax import parallel, train
from fidia_jax.errors import TrainingError

_X = np.random.default_rng(0).normal(size=(64, 3)).astype(np.float32)
_Y = _X @ np.array([1.0, -2.0, 0.5], np.float32)


def _loss(p, b):
    return jnp.mean((b["x"] @ p["w"] - b["y"]) ** 2)


def _batch(t):
    i = np.random.default_rng([0, t]).integers(0, 64, 16)
    return {"x": _X[i], "y": _Y[i]}


def _fresh(tx, mesh=None):
    return train.init_train_state({"w": jnp.zeros(3)}, tx, mesh=mesh)


def test_step_is_one_sgd_update_in_closed_form():
    tx = optax.sgd(0.1)
    step = train.make_train_step(_loss, tx, donate=False)
    b = _batch(0)
    state, m = step(_fresh(tx), b)
    grad = 2 * b["x"].T @ (b["x"] @ np.zeros(3) - b["y"]) / len(b["y"])
    np.testing.assert_allclose(state.params["w"], -0.1 * grad, rtol=1e-5)
    np.testing.assert_allclose(m["loss"], np.mean(b["y"] ** 2), rtol=1e-6)
    np.testing.assert_allclose(m["grad_norm"], np.linalg.norm(grad), rtol=1e-5)
    assert int(state.step) == 1 and int(m["nonfinite"]) == 0


def test_aux_and_model_state_are_threaded():
    tx = optax.sgd(1.0)

    def loss(p, count, b):
        return jnp.sum(p * b), (count + 1, {"mean_b": jnp.mean(b)})

    step = train.make_train_step(loss, tx, has_aux=True, has_state=True)
    state = train.init_train_state(jnp.ones(2), tx, model_state=jnp.int32(0))
    state, m = step(state, jnp.array([1.0, 3.0]))
    state, m = step(state, jnp.array([1.0, 3.0]))
    assert state.params.tolist() == [-1.0, -5.0]  # two steps of p -= b
    assert int(state.model_state) == 2 and float(m["mean_b"]) == 2.0


def test_nonfinite_step_is_skipped_and_fit_stops_naming_it(tmp_path):
    tx = optax.sgd(0.1)
    step = train.make_train_step(lambda p, b: jnp.sum(p * b) * jnp.log(b[0]), tx)

    def batches(t):  # step 3 (0-based 2) has log(-1) = nan
        return jnp.array([-1.0 if t == 2 else 2.0, 1.0])

    with pytest.raises(TrainingError, match="at step 3 is not finite"):
        train.fit(_fresh_scalar(tx), step, batches, num_steps=6, workdir=tmp_path, quiet=True)
    records = train.read_metrics(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in records] == [1, 2, 3] and records[-1]["nonfinite"] == 1
    # tolerated: the skipped step leaves the parameters as they were
    res = train.fit(_fresh_scalar(tx), step, batches, num_steps=3, max_nonfinite=1, quiet=True)
    two = train.fit(_fresh_scalar(tx), step, batches, num_steps=2, quiet=True)
    np.testing.assert_array_equal(res.state.params, two.state.params)
    assert int(res.state.step) == 3


def _fresh_scalar(tx):
    return train.init_train_state(jnp.ones(2), tx)


@pytest.mark.parametrize("as_iterable", [False, True])
def test_resume_is_bit_identical(tmp_path, as_iterable):
    tx = optax.adam(0.05)
    step = train.make_train_step(_loss, tx)

    def batches():
        if not as_iterable:
            return _batch

        def stream():  # a sequential stream: resume must replay it
            rng = np.random.default_rng(7)
            while True:
                i = rng.integers(0, 64, 16)
                yield {"x": _X[i], "y": _Y[i]}

        return stream()

    whole = train.fit(_fresh(tx), step, batches(), num_steps=30, workdir=tmp_path / "a", quiet=True)
    train.fit(_fresh(tx), step, batches(), num_steps=12, workdir=tmp_path / "b", quiet=True)
    resumed = train.fit(_fresh(tx), step, batches(), num_steps=30, workdir=tmp_path / "b",
                        quiet=True)  # fmt: skip
    assert resumed.start_step == 12
    np.testing.assert_array_equal(resumed.state.params["w"], whole.state.params["w"])
    lines = lambda d: [  # noqa: E731
        json.loads(s) for s in (d / "metrics.jsonl").read_text().splitlines()
    ]
    assert lines(tmp_path / "a") == lines(tmp_path / "b")
    assert [r["step"] for r in resumed.history if "loss" in r] == list(range(1, 31))


def test_fresh_start_ignores_old_checkpoints(tmp_path):
    tx = optax.sgd(0.1)
    step = train.make_train_step(_loss, tx)
    train.fit(_fresh(tx), step, _batch, num_steps=5, workdir=tmp_path, quiet=True)
    again = train.fit(_fresh(tx), step, _batch, num_steps=5, workdir=tmp_path, resume=False,
                      quiet=True)  # fmt: skip
    assert again.start_step == 0
    assert [r["step"] for r in train.read_metrics(tmp_path / "metrics.jsonl") if "loss" in r] == [
        1, 2, 3, 4, 5
    ]  # fmt: skip


def test_mesh_step_matches_one_device():
    assert jax.device_count() == 4  # tests/conftest.py forces 4 host devices
    tx = optax.adam(0.05)
    mesh = parallel.data_mesh(16)
    a = train.fit(_fresh(tx), train.make_train_step(_loss, tx), _batch, num_steps=20, quiet=True)
    b = train.fit(_fresh(tx, mesh), train.make_train_step(_loss, tx, mesh=mesh), _batch,
                  num_steps=20, quiet=True)  # fmt: skip
    assert b.state.params["w"].sharding.is_fully_replicated
    np.testing.assert_allclose(b.state.params["w"], a.state.params["w"], atol=1e-6)


def test_fsdp_state_is_split():
    tx = optax.sgd(0.1)
    mesh = parallel.data_mesh(8)
    state = train.init_train_state({"w": jnp.zeros((8, 3))}, tx, mesh=mesh, param_sharding="fsdp")
    step = train.make_train_step(lambda p, b: jnp.sum((p["w"] - b) ** 2), tx, mesh=mesh,
                                 param_sharding="fsdp")  # fmt: skip
    state, _ = step(state, jnp.ones((8, 3)))
    assert not state.params["w"].sharding.is_fully_replicated
    np.testing.assert_allclose(state.params["w"], 0.2)


def test_nnx_module_round_trip_with_dropout_state():
    model = nnx.Sequential(nnx.Linear(3, 4, rngs=nnx.Rngs(0)), nnx.Dropout(0.5, rngs=nnx.Rngs(1)))
    graphdef, params, rest = train.split_model(model)
    tx = optax.sgd(0.0)

    def loss(p, ms, x):
        m = train.merge_model(graphdef, p, ms)
        out = m(x)
        return jnp.sum(out), train.split_model(m)[2]

    step = train.make_train_step(loss, tx, has_state=True)
    state = train.init_train_state(params, tx, model_state=rest)
    x = jnp.ones((2, 3))
    s1, m1 = step(state, x)
    _, m2 = step(s1, x)
    assert float(m1["loss"]) != float(m2["loss"])  # the dropout key advanced between steps


def test_checkpointer_skips_an_incomplete_step(tmp_path):
    ckpt = train.Checkpointer(tmp_path)
    ckpt.save(1, {"w": jnp.ones(2)})
    (tmp_path / "2").mkdir()  # a save killed before it wrote anything
    ckpt = train.Checkpointer(tmp_path)
    with pytest.warns(UserWarning, match="incomplete checkpoint .*2.* removed; using step 1"):
        assert ckpt.latest_step(remove_incomplete=True) == 1
    assert not (tmp_path / "2").exists()
    assert ckpt.restore(1, {"w": jnp.zeros(2)})["w"].tolist() == [1.0, 1.0]


def test_fit_writes_metrics_eval_curves_and_checkpoints(tmp_path):
    tx = optax.sgd(0.1)
    res = train.fit(_fresh(tx), train.make_train_step(_loss, tx), _batch, num_steps=8,
                    workdir=tmp_path, run="ridge", checkpoint_every=4, eval_every=4,
                    eval_fn=lambda s: {"w0": s.params["w"][0]}, quiet=True)  # fmt: skip
    records = train.read_metrics(tmp_path / "metrics.jsonl")
    assert {r["run"] for r in records} == {"ridge"}
    evals = [(r["step"], r["eval/w0"]) for r in records if "eval/w0" in r]
    assert [s for s, _ in evals] == [4, 8]
    assert evals[-1][1] == pytest.approx(float(res.state.params["w"][0]))
    assert sorted(os.listdir(tmp_path / "checkpoints" / "ridge")) == ["4", "8"]
    png = (tmp_path / "curves.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_progress_prints_compile_phase_and_steps(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("FIDIA_QUIET", raising=False)
    tx = optax.sgd(0.1)
    train.fit(_fresh(tx), train.make_train_step(_loss, tx), _batch, num_steps=3, run="demo")
    err = capsys.readouterr().err
    assert "demo: compiling" in err and "demo: compiled in" in err and "step 3/3" in err


def test_plot_bars_and_summary(tmp_path):
    rows = [{"method": "ridge", "rmse": 1.0, "sd": 0.1}, {"method": "ours", "rmse": float("nan")}]
    train.plot_bars(
        rows, tmp_path / "t.png", label="method", values=["rmse"], errors={"rmse": "sd"}
    )
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"
    train.write_summary(tmp_path, {"rmse": float("nan"), "n": 3})
    assert json.loads((tmp_path / "summary.json").read_text()) == {
        "rmse": None, "n": 3, "non_finite": {"rmse": "nan"}
    }  # fmt: skip


def test_bad_arguments_are_refused():
    tx = optax.sgd(0.1)
    with pytest.raises(ValueError, match="must be >= 0"):
        train.fit(_fresh(tx), train.make_train_step(_loss, tx), _batch, num_steps=-1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = train.fit(_fresh(tx), train.make_train_step(_loss, tx), _batch, num_steps=0,
                        quiet=True)  # fmt: skip
    assert res.history == [] and int(res.state.step) == 0
