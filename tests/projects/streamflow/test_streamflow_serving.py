"""StreamFlow serving: the stream batcher equals the sequential Euler sampler, edge cases, errors."""

import jax
import numpy as np
import pytest
from flax import nnx

from fidia_jax import models
from fidia_jax.projects.streamflow import serving
from fidia_jax.projects.streamflow.model import StreamFlowUNet, timestep_embedding

SHAPE = (8, 8, 1)


@pytest.fixture(scope="module")
def net():
    """A one-level net (short compiles; the two-level one runs in tests/projects) with random
    weights drawn by numpy into the abstract model (no per-shape initialiser compiles)."""
    model = models.init_without_compile(
        lambda: StreamFlowUNet(1, (8,), time_dim=16, groups=4, rngs=nnx.Rngs(0)),
        lambda names, shape, rng: rng.normal(0.0, 0.3, shape),
        seed=0,
    )
    return serving.velocity_apply(model)


@pytest.fixture(scope="module")
def batcher_factory(net):
    """One AOT-compiled batcher per (buckets, refill), reused across tests (compiles once)."""
    made = {}

    def make(buckets=(1, 2, 4), refill="continuous", aot=True):
        key = (buckets, refill, aot)
        if key not in made:
            made[key] = serving.StreamBatcher(*net, SHAPE, buckets=buckets, refill=refill, aot=aot)
        assert made[key].idle
        return made[key]

    return make


def _noise(n, seed=0):
    return np.random.default_rng(seed).standard_normal((n, *SHAPE)).astype(np.float32)


def test_timestep_embedding_closed_form():
    t = np.asarray([0.0, 0.25], np.float32)
    e = np.asarray(timestep_embedding(t, 4, max_period=100.0))
    w = np.asarray([1.0, 0.1])  # 100^(-k/2), k = 0, 1
    want = np.concatenate([np.cos(1000 * t[:, None] * w), np.sin(1000 * t[:, None] * w)], -1)
    np.testing.assert_allclose(e, want, atol=2e-5)


def test_unet_shapes_batch_independence_and_errors(net):
    apply_fn, params = net
    x = _noise(3)
    t = np.asarray([0.9, 0.5, 0.1], np.float32)
    apply_jit = jax.jit(apply_fn)
    v = np.asarray(apply_jit(params, x, t))
    assert v.shape == x.shape and np.all(np.isfinite(v)) and np.abs(v).max() > 1e-3
    # no batch statistics: each image's velocity is the same alone as in the batch
    v1 = np.asarray(apply_jit(params, x[1:2], t[1:2]))
    np.testing.assert_allclose(v1[0], v[1], atol=1e-5)
    with pytest.raises(ValueError, match="rank 4"):
        apply_fn(params, x[0], t[:1])
    with pytest.raises(ValueError, match=r"t must have shape \(B,\)"):
        apply_fn(params, x, t[:2])


def test_stream_batch_equals_sequential_sampler(net, batcher_factory):
    apply_fn, params = net
    # per-request schedules: one step (t=1 -> 0 alone), Python floats, 2/3/5 uniform steps
    schedules = [
        [1.0, 0.0],
        [1.0, 0.55, 0.2, 0.0],
        serving.linear_timesteps(3),
        serving.linear_timesteps(5),
        [1.0, 0.0],
        serving.linear_timesteps(2),
        np.asarray([0.9, 0.3, 0.0], np.float64),
    ]
    noise = _noise(len(schedules))
    b = batcher_factory()
    for i, ts in enumerate(schedules):
        b.submit(noise[i], ts, request_id=f"r{i}")
    assert b.queued == 7 and b.active == 0
    first = b.step()
    # warm-up: the first call already returns the one-step requests, as real images
    assert [rid for rid, _ in first] == ["r0"]
    got = dict(first)
    while not b.idle:  # drain: nothing new arrives, the last requests still finish
        got.update(b.step())
    assert sorted(got) == sorted(f"r{i}" for i in range(7))
    for i, ts in enumerate(schedules):
        ref = serving.sample_euler(apply_fn, params, noise[i : i + 1], ts)[0]
        assert np.abs(ref - noise[i]).max() > 1e-2  # the sampler moved the latent
        assert np.abs(got[f"r{i}"] - ref).max() <= 1e-5, i
    # slots were refilled: 7 requests through 4 slots, the batch never idle while work queued
    assert sum(b.bucket_calls.values()) == b.calls


def test_straight_flow_oracle_hits_the_point_with_any_schedule():
    """Data = one point x*: the exact velocity is (x_t - x*)/t and Euler lands on x* at t=0.

    v is never evaluated at t = 0, so no 0/0, also for the one-step schedule."""
    target = np.linspace(-1, 1, 8 * 8).reshape(SHAPE).astype(np.float32)

    def oracle(params, x, t):
        return (x - target[None]) / t[:, None, None, None]

    noise = _noise(3, seed=1)
    b = serving.StreamBatcher(oracle, {}, SHAPE, buckets=(1, 2, 4))
    for i, ts in enumerate([[1.0, 0.0], [1.0, 1 / 3, 0.0], serving.linear_timesteps(7)]):
        b.submit(noise[i], ts, request_id=i)
        seq = serving.sample_euler(oracle, {}, noise[i : i + 1], ts)[0]
        np.testing.assert_allclose(seq, target, atol=1e-5)
    out = b.drain()
    for i in range(3):
        np.testing.assert_allclose(out[i], target, atol=1e-5)


def test_static_refill_is_the_naive_baseline(batcher_factory):
    """Same outputs; call counts by hand for requests of 1, 3 and 2 steps:

    continuous: [r0 r1 r2] -> r0 done; [r1 r2] -> r2 done; [r1] -> r1 done: 3 calls.
    static: r0 alone (1 call), r1 alone (3), r2 alone (2): 6 calls (different schedules)."""
    noise = _noise(3, seed=2)
    steps = [1, 3, 2]
    outs, calls = {}, {}
    for refill in ("continuous", "static"):
        b = batcher_factory(refill=refill)
        calls_before = b.calls
        for i, n in enumerate(steps):
            b.submit(noise[i], serving.linear_timesteps(n), request_id=i)
        outs[refill], calls[refill] = b.drain(), b.calls - calls_before
    assert calls == {"continuous": 3, "static": 6}
    for i in range(3):
        np.testing.assert_allclose(outs["static"][i], outs["continuous"][i], atol=1e-5)
    # static batching takes every queued request with the head's schedule
    b = batcher_factory(refill="static")
    for i in range(3):
        b.submit(noise[i], serving.linear_timesteps(2), request_id=i)
    b.submit(noise[0], serving.linear_timesteps(1), request_id="other")
    assert b.step() == [] and b.active == 3 and b.queued == 1 and b.last_batch_size == 3
    b.drain()


def test_without_aot_same_images(net, batcher_factory):
    """A fresh jit compiles on first use (one request: only bucket 1 is compiled)."""
    noise = _noise(1, seed=3)
    outs = []
    for aot in (True, False):
        b = batcher_factory(aot=aot)
        b.submit(noise[0], serving.linear_timesteps(3), request_id=0)
        outs.append(b.drain())
    assert b.compile_seconds == 0.0 and b.bucket_calls == {1: 3, 2: 0, 4: 0}
    np.testing.assert_allclose(outs[1][0], outs[0][0], atol=1e-6)


def test_errors_name_the_problem(net, batcher_factory):
    apply_fn, params = net
    b = batcher_factory()
    with pytest.raises(ValueError, match=r"rank 3.*got shape \(8, 8\) \(rank 2\)"):
        b.submit(np.zeros((8, 8), np.float32), [1.0, 0.0])
    with pytest.raises(ValueError, match="step count of 0"):
        b.submit(np.zeros(SHAPE, np.float32), [1.0])
    with pytest.raises(ValueError, match="num_steps"):
        serving.linear_timesteps(0)
    with pytest.raises(ValueError, match="strictly decrease"):
        serving.check_timesteps([1.0, 0.5, 0.5, 0.0])
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        serving.check_timesteps([1.5, 0.0])
    with pytest.raises(ValueError, match="larger than the largest bucket"):
        serving.bucket_size(17)
    with pytest.raises(
        ValueError, match=r"batch of 5 images is larger than the largest bucket \(4\)"
    ):
        serving.StreamBatcher(apply_fn, params, SHAPE, buckets=(1, 2, 4), slots=5)
    with pytest.raises(ValueError, match="rank 4"):
        serving.sample_euler(apply_fn, params, np.zeros(SHAPE, np.float32), [1.0, 0.0])
    rid = b.submit(np.zeros(SHAPE, np.float32), [1.0, 0.0], request_id="x")
    with pytest.raises(ValueError, match="already in flight"):
        b.submit(np.zeros(SHAPE, np.float32), [1.0, 0.0], request_id=rid)
    assert list(b.drain()) == ["x"] and b.idle
    assert [serving.bucket_size(n) for n in (1, 2, 3, 5, 16)] == [1, 2, 4, 8, 16]
