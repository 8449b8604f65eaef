"""``train.fit(mesh=)``: the same losses on a 4-device mesh as on one device, a resume on the
mesh bit for bit, checkpoints restored onto the mesh, and a clear error for a batch the mesh
cannot split.

Tolerance: the loss is a float32 mean over 16 rows; on the mesh it is 4 partial sums of 4 rows
added across devices instead of one sum of 16, so each step's loss and gradient differ by a
few float32 ulps (relative ~16 * 2**-24 ~ 1e-6), and Adam carries such differences forward
without amplifying them over 10 steps of this convex problem: ``rtol=1e-5`` on every loss.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import PartitionSpec as P

from fidia_jax import parallel, train

_X = np.random.default_rng(0).normal(size=(64, 3)).astype(np.float32)
_Y = _X @ np.array([1.0, -2.0, 0.5], np.float32)
_TX = optax.adam(0.05)


def _loss(p, b):
    return jnp.mean((b["x"] @ p["w"] - b["y"]) ** 2)


def _batch(t):
    i = np.random.default_rng([0, t]).integers(0, 64, 16)
    return {"x": _X[i], "y": _Y[i]}


def _losses(res):
    return np.array([r["loss"] for r in res.history if "loss" in r])


def test_mesh_losses_match_one_device():
    assert jax.device_count() == 4  # tests/conftest.py forces 4 host devices
    mesh = parallel.data_mesh(16)
    assert mesh.size == 4
    state = train.init_train_state({"w": jnp.zeros(3)}, _TX)  # fit places it on the mesh
    one = train.fit(state, train.make_train_step(_loss, _TX), _batch, num_steps=10, quiet=True)
    state = train.init_train_state({"w": jnp.zeros(3)}, _TX)
    four = train.fit(state, train.make_train_step(_loss, _TX, mesh=mesh), _batch,
                     num_steps=10, quiet=True, mesh=mesh)  # fmt: skip
    assert four.state.params["w"].sharding.mesh.devices.size == 4
    assert four.state.params["w"].sharding.is_fully_replicated
    np.testing.assert_allclose(_losses(four), _losses(one), rtol=1e-5)
    assert not np.allclose(_losses(one)[0], _losses(one)[-1])  # it trained


def test_iterable_batches_and_plain_pytree_state_on_the_mesh():
    # a custom step (not make_train_step) on a plain dict state: fit places both
    mesh = parallel.data_mesh(16)

    @jax.jit
    def step(p, b):
        loss, g = jax.value_and_grad(_loss)(p, b)
        return jax.tree.map(lambda w, d: w - 0.1 * d, p, g), {"loss": loss}

    def stream():
        for t in range(5):
            yield _batch(t)

    one = train.fit({"w": jnp.zeros(3)}, step, stream(), num_steps=5, quiet=True)
    seen = []

    def spy(p, b):
        seen.append(b["x"].sharding)
        return step(p, b)

    four = train.fit({"w": jnp.zeros(3)}, spy, stream(), num_steps=5, quiet=True, mesh=mesh)
    assert all(s.spec == jax.sharding.PartitionSpec("data") for s in seen)
    np.testing.assert_allclose(_losses(four), _losses(one), rtol=1e-5)


@pytest.mark.parametrize("mode", ["replicated", "fsdp"])
def test_resume_on_the_mesh_is_bit_identical(tmp_path, mode):
    mesh = parallel.data_mesh(16)

    def fresh():
        return train.init_train_state({"w": jnp.zeros((4, 3))}, _TX)

    def loss4(p, b):  # four copies of the problem: a (4, 3) parameter that FSDP splits
        return sum(_loss({"w": p["w"][k]}, b) for k in range(4))

    step = train.make_train_step(loss4, _TX, mesh=mesh, param_sharding=mode)
    kw = dict(quiet=True, mesh=mesh, param_sharding=mode, checkpoint_every=3)
    whole = train.fit(fresh(), step, _batch, num_steps=8, workdir=tmp_path / "a", **kw)
    train.fit(fresh(), step, _batch, num_steps=5, workdir=tmp_path / "b", **kw)
    resumed = train.fit(fresh(), step, _batch, num_steps=8, workdir=tmp_path / "b", **kw)
    assert resumed.start_step == 5
    w = resumed.state.params["w"]
    assert w.sharding.mesh.devices.size == 4
    assert w.sharding.is_fully_replicated == (mode == "replicated")
    np.testing.assert_array_equal(np.asarray(w), np.asarray(whole.state.params["w"]))
    np.testing.assert_array_equal(_losses(resumed), _losses(whole))


def test_batch_the_mesh_cannot_split_names_the_leaf():
    mesh = parallel.data_mesh(16)
    step = train.make_train_step(_loss, _TX, mesh=mesh)
    bad = {"x": _X[:6], "y": _Y[:6]}  # 6 rows over 4 devices
    with pytest.raises(ValueError, match=r"\['x'\].*\(6, 3\).*multiple of 4"):
        train.fit(train.init_train_state({"w": jnp.zeros(3)}, _TX), step, lambda _t: bad,
                  num_steps=1, quiet=True, mesh=mesh)  # fmt: skip
    with pytest.raises(ValueError, match=r"\['s'\].*\(\)"):
        train.fit(train.init_train_state({"w": jnp.zeros(3)}, _TX), step,
                  lambda _t: {"s": np.float32(1.0)}, num_steps=1, quiet=True, mesh=mesh)  # fmt: skip


def test_batch_spec_replicates_shared_leaves_and_passes_python_values():
    # (step index: a Python int left as is, {rows split, a shared scale replicated})
    mesh = parallel.data_mesh(16)
    spec = (None, {"rows": P("data"), "scale": P()})

    def loss(p, b):
        return b["scale"] * _loss(p, b["rows"])

    inner = train.make_train_step(loss, _TX, mesh=mesh, batch_spec=spec[1])
    seen = []

    def step(state, item):
        t, b = item
        seen.append((type(t), b["rows"]["x"].sharding.spec, b["scale"].sharding.spec))
        return inner(state, b)

    def batches(t):
        return t, {"rows": _batch(t), "scale": np.float32(2.0)}

    four = train.fit(train.init_train_state({"w": jnp.zeros(3)}, _TX), step, batches,
                     num_steps=4, quiet=True, mesh=mesh, batch_spec=spec)  # fmt: skip
    one_step = train.make_train_step(loss, _TX)
    one = train.fit(train.init_train_state({"w": jnp.zeros(3)}, _TX),
                    lambda s, item: one_step(s, item[1]), batches, num_steps=4, quiet=True)  # fmt: skip
    assert seen[0] == (int, P("data"), P())
    np.testing.assert_allclose(_losses(four), _losses(one), rtol=1e-5)
