"""Low-precision parameters (bf16, float16): hyperparameters and optimiser state stay float32.

Issue 17 item 9: ``optax.inject_hyperparams(optim.scale)`` on bf16 parameters stored
``adam_b2 = 0.999`` as bf16 ``1.0``; the AdamW second moment of the vectors, kept in bf16,
drifted ~30 % high in 300 steps; a float16 vector with a zero gradient got a NaN update
(``eps = 1e-8`` underflows to 0 in float16) and ``-inf`` at gradient ``1e-4`` (``g**2``
underflows).
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from fidia_jax import optim
from fidia_jax.errors import ConfigError

LOW = [jnp.bfloat16, jnp.float16]
_R = np.random.default_rng(0)
PARAMS = {
    "hidden": {"kernel": _R.standard_normal((3, 4)), "bias": _R.standard_normal(4)},
    "norm": {"scale": _R.standard_normal(4)},
    "lm_head": {"kernel": _R.standard_normal((4, 2))},
}
# Every float hyperparameter of optim.scale with its default (learning_rate given below).
HYPERPARAMS = {
    "learning_rate": 0.1,
    "momentum": 0.9,
    "weight_decay": 0.0,
    "eps": 1e-8,
    "adam_b1": 0.9,
    "adam_b2": 0.999,
    "adam_eps": 1e-8,
}


def cast(tree, dtype):
    return jax.tree.map(lambda x: jnp.asarray(x, dtype), tree)


def float_leaves(tree):
    return [x for x in jax.tree.leaves(tree) if jnp.issubdtype(x.dtype, jnp.floating)]


@pytest.mark.parametrize("dtype", LOW)
def test_inject_hyperparams_with_low_precision_dtype_raises_clearly(dtype):
    # optax stores the hyperparameters in the parameters' dtype: 0.999 -> 1.0 in bf16,
    # eps 1e-8 -> 0 in float16. A clear error instead of a silently different optimiser.
    opt = optax.inject_hyperparams(optim.scale)(learning_rate=0.1)
    with pytest.raises(ConfigError, match="hyperparam_dtype=jnp.float32"):
        opt.init(cast(PARAMS, dtype))
    with pytest.raises(ConfigError, match="'adam_b2'"):
        optim.scale(0.1, adam_b2=jnp.asarray(0.999, dtype))
    with pytest.raises(ConfigError, match="'eps'"):
        optim.scale_by_column_rms(eps=jnp.asarray(1e-8, dtype))


@pytest.mark.parametrize("dtype", LOW)
def test_inject_hyperparams_stay_float32_and_exact(dtype):
    params = cast(PARAMS, dtype)
    opt = optax.inject_hyperparams(optim.scale, hyperparam_dtype=jnp.float32)(learning_rate=0.1)
    state = opt.init(params)
    grads = cast(jax.tree.map(lambda x: x + 1.0, PARAMS), dtype)
    step = jax.jit(opt.update)
    for _ in range(3):
        updates, state = step(grads, state, params)
        params = optax.apply_updates(params, updates)
        assert set(state.hyperparams) == set(HYPERPARAMS)
        for name, value in HYPERPARAMS.items():
            h = state.hyperparams[name]
            assert h.dtype == jnp.float32, name
            assert float(h) == float(np.float32(value)), name
        # every moment: the head's momentum, AdamW's mu and nu of the two vectors
        inner = float_leaves(state.inner_state)
        assert len(inner) == 5 and all(x.dtype == jnp.float32 for x in inner)
        assert all(u.dtype == dtype for u in jax.tree.leaves(updates))
        assert all(p.dtype == dtype for p in jax.tree.leaves(params))


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("inject", [False, True])
def test_state_matches_float32_run_after_300_steps(dtype, inject):
    """Same gradient sequence (values exact in ``dtype``) for a low-precision and a float32 run.

    With weight decay 0 the state and the updates do not depend on the parameters, so the
    low-precision run must reproduce the float32 state, and its updates must be the float32
    updates rounded to ``dtype``.
    """
    n = 300
    rng = np.random.default_rng(1)
    grads_seq = [
        cast(jax.tree.map(lambda x: rng.standard_normal(x.shape) * 0.1, PARAMS), dtype)
        for _ in range(n)
    ]

    def make():
        if inject:
            return optax.inject_hyperparams(optim.scale, hyperparam_dtype=jnp.float32)(
                learning_rate=1e-2
            )
        return optim.scale(1e-2)

    def run(params, dt):
        opt = make()
        state = opt.init(params)
        step = jax.jit(opt.update)
        updates = []
        for g in grads_seq:
            u, state = step(cast(g, dt), state, params)
            params = optax.apply_updates(params, u)
            updates.append(u)
        return state, updates

    low_state, low_updates = run(cast(PARAMS, dtype), dtype)
    ref_state, ref_updates = run(cast(cast(PARAMS, dtype), jnp.float32), jnp.float32)
    low, ref = float_leaves(low_state), float_leaves(ref_state)
    assert len(low) == len(ref) >= 3
    for a, b in zip(low, ref, strict=True):
        assert a.dtype == b.dtype == jnp.float32
        # "within bf16 rounding" (it is in fact the same float32 computation)
        np.testing.assert_allclose(a, b, rtol=2.0**-8, atol=0)
    for ul, ur in zip(low_updates[-5:], ref_updates[-5:], strict=True):
        for a, b in zip(jax.tree.leaves(ul), jax.tree.leaves(ur), strict=True):
            assert a.dtype == dtype
            np.testing.assert_allclose(
                np.asarray(a, np.float32), np.asarray(b.astype(dtype), np.float32), rtol=1e-3
            )


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("g", [0.0, 1e-6, 1e-4, -1e-4])
def test_zero_and_tiny_gradients_give_finite_updates(dtype, g):
    params = cast(PARAMS, dtype)
    grads = jax.tree.map(lambda x: jnp.full_like(x, g), params)
    for opt in (
        optim.scale(0.1),
        optax.inject_hyperparams(optim.scale, hyperparam_dtype=jnp.float32)(learning_rate=0.1),
    ):
        state = opt.init(params)
        for _ in range(3):
            updates, state = opt.update(grads, state, params)
            for u in jax.tree.leaves(updates):
                assert u.dtype == dtype
                assert np.all(np.isfinite(np.asarray(u, np.float32)))
            assert all(np.all(np.isfinite(x)) for x in float_leaves(state))
        gd = float(jnp.asarray(g, dtype))  # the gradient as stored in `dtype`
        for u in jax.tree.leaves(updates):
            u = np.asarray(u, np.float32)
            # constant gradients: the normalised matrices and the head's normalised momentum
            # are sign(g); AdamW with the authors' eps placement (eps added to sqrt(v) before
            # the bias correction) is g / (|g| + 1e-8 / sqrt(1 - 0.999**3)) at step 3; times lr.
            eps_t = 1e-8 / np.sqrt(1 - 0.999**3)
            want = -0.1 * (gd / (abs(gd) + eps_t) if u.ndim == 1 else np.sign(gd))
            want = float(jnp.asarray(want, dtype))  # the update is rounded to `dtype`
            np.testing.assert_allclose(u, np.full(u.shape, want, np.float32), rtol=2e-3, atol=0)


@pytest.mark.parametrize("dtype", LOW)
def test_column_rms_zero_gradient_float16(dtype):
    tx = optim.scale_by_column_rms()
    u, _ = tx.update({"w": jnp.zeros((3, 2), dtype)}, tx.init(None))
    assert u["w"].dtype == dtype
    np.testing.assert_array_equal(np.asarray(u["w"], np.float32), 0.0)
