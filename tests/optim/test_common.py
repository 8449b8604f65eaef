"""optax-style common battery over every optimiser in fidia_jax.optim (and PASO around them)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from fidia_jax import optim
from fidia_jax.errors import ConfigError

# name -> factory(learning_rate) -> GradientTransformation
OPTIMIZERS = {
    "scale": lambda lr: optim.scale(lr),
    "column_rms_sgd": lambda lr: optax.chain(
        optim.scale_by_column_rms(), optax.scale_by_learning_rate(lr)
    ),
}
# Mixed 1-D / 2-D pytree for SCALE; the stateless column-RMS transform takes matrices only.
_R = np.random.default_rng(0)
TARGETS = {
    "scale": {
        "hidden": {"kernel": _R.standard_normal((3, 4)), "bias": _R.standard_normal(4)},
        "norm": {"scale": _R.standard_normal(4)},
        "lm_head": {"kernel": _R.standard_normal((4, 2))},
    },
    "column_rms_sgd": {
        "hidden": {"kernel": _R.standard_normal((3, 4))},
        "lm_head": {"kernel": _R.standard_normal((4, 2))},
    },
}


def parabola(params, target):
    return sum(
        jnp.sum((p.astype(jnp.float32) - t) ** 2)
        for p, t in zip(jax.tree.leaves(params), jax.tree.leaves(target), strict=True)
    )


def run(opt, params, loss, num_steps):
    def body(c, _):
        p, s = c
        g = jax.grad(loss)(p)
        u, s = opt.update(g, s, p)
        return (optax.apply_updates(p, u), s), None

    (p, _), _ = jax.lax.scan(body, (params, opt.init(params)), None, length=num_steps)
    return p


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_parabola_with_decaying_schedule(name):
    target = jax.tree.map(lambda t: jnp.asarray(t, jnp.float32), TARGETS[name])
    params = jax.tree.map(jnp.zeros_like, target)
    # Normalised updates have a fixed size, so the step size must decay to converge.
    opt = OPTIMIZERS[name](optax.exponential_decay(0.1, 400, 1e-3))
    loss = functools.partial(parabola, target=target)
    final = jax.jit(run, static_argnums=(0, 2, 3))(opt, params, loss, 400)
    assert float(loss(final)) < 1e-3 * float(loss(params))


@pytest.mark.parametrize(
    "name,lr0,steps,tol", [("scale", 0.02, 2000, 1e-3), ("column_rms_sgd", 0.05, 3000, 0.05)]
)
def test_rosenbrock(name, lr0, steps, tol):
    def rosen(p):
        w = p["lm_head"]["kernel"]
        return (1 - w[0, 0]) ** 2 + 100 * (w[1, 0] - w[0, 0] ** 2) ** 2

    opt = OPTIMIZERS[name](optax.exponential_decay(lr0, steps, 1e-3))
    p0 = {"lm_head": {"kernel": jnp.array([[-1.0], [1.0]])}}
    final = jax.jit(run, static_argnums=(0, 2, 3))(opt, p0, rosen, steps)
    np.testing.assert_allclose(final["lm_head"]["kernel"].ravel(), [1.0, 1.0], atol=tol)


def test_column_rms_rejects_vectors_clearly():
    opt = OPTIMIZERS["column_rms_sgd"](0.1)
    params = {"w": jnp.ones((2, 3)), "b": jnp.ones(3)}
    with pytest.raises(ConfigError, match="'b'"):
        opt.update(params, opt.init(params), params)


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_no_recompilation_on_second_call(name):
    target = jax.tree.map(lambda t: jnp.asarray(t, jnp.float32), TARGETS[name])
    opt = OPTIMIZERS[name](optax.cosine_decay_schedule(0.1, 10))
    traces = []

    @jax.jit
    def step(p, s, g):
        traces.append(1)
        u, s = opt.update(g, s, p)
        return optax.apply_updates(p, u), s

    p, s = target, opt.init(target)
    for _ in range(3):  # the state returned by the first call must have the same types
        p, s = step(p, s, jax.tree.map(lambda x: x * 0.5, target))
    assert len(traces) == 1


@pytest.mark.parametrize("name", list(OPTIMIZERS))
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_dtype_preserved(name, dtype):
    params = jax.tree.map(lambda t: jnp.asarray(t, dtype), TARGETS[name])
    opt = OPTIMIZERS[name](0.1)
    state = opt.init(params)
    updates, state2 = opt.update(params, state, params)
    for u, p in zip(jax.tree.leaves(updates), jax.tree.leaves(params), strict=True):
        assert u.dtype == dtype and u.shape == p.shape
    for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(state2), strict=True):
        assert a.dtype == b.dtype
    new = optax.apply_updates(params, updates)
    assert all(x.dtype == dtype for x in jax.tree.leaves(new))


def test_scale_inject_hyperparams():
    target = jax.tree.map(lambda t: jnp.asarray(t, jnp.float32), TARGETS["scale"])
    grads = jax.tree.map(lambda x: x + 1.0, target)
    opt = optax.inject_hyperparams(optim.scale)(learning_rate=0.1, momentum=0.5)
    state = opt.init(target)
    u1, _ = opt.update(grads, state, target)
    ref, _ = optim.scale(0.1, momentum=0.5).update(
        grads, optim.scale(0.1, momentum=0.5).init(target), target
    )
    # rtol 1e-4: inject_hyperparams stores b2 = 0.999 as a float32 array (1 - b2 differs 1e-5).
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4), u1, ref)
    state.hyperparams["learning_rate"] = jnp.asarray(0.05)
    u2, _ = opt.update(grads, state, target)
    # Matrices scale with the learning rate; the 1-D AdamW follows it too (adam lr = lr).
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, 0.5 * b, rtol=1e-5), u2, u1)


def test_paso_preserves_bf16_and_no_retrace():
    target = jax.tree.map(lambda t: jnp.asarray(t, jnp.bfloat16), TARGETS["scale"])
    params = jax.tree.map(jnp.zeros_like, target)
    traces = []

    def loss(p, t):
        traces.append(1)
        return parabola(p, jax.tree.map(lambda x: x.astype(jnp.float32) * (1.0 + 0.0 * t), target))

    run_paso = jax.jit(
        functools.partial(
            optim.paso,
            loss,
            # bf16 params: keep hyperparameters in f32 (b2 = 0.999 rounds to 1 in bf16).
            optax.inject_hyperparams(optax.adam, hyperparam_dtype=jnp.float32)(learning_rate=0.05),
            batch_fn=lambda t: t.astype(jnp.float32),
            num_steps=30,
            window=4,
            tol=1e-2,
        )
    )
    res = run_paso(params)
    n = len(traces)
    res2 = run_paso(jax.tree.map(lambda x: x + 1, params))
    assert len(traces) == n  # second call: no retrace
    assert all(x.dtype == jnp.bfloat16 for x in jax.tree.leaves(res.params))
    assert float(parabola(res.params, target)) < 0.5 * float(parabola(params, target))
    assert int(res2.num_iterations) >= 30 // 4


def test_public_api():
    for name in optim.__all__:
        assert hasattr(optim, name), name
    assert {"scale", "scale_by_column_rms", "paso", "exponential_horizon_schedule"} <= set(
        optim.__all__
    )
