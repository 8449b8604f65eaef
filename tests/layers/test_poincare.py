"""Poincaré-ball ops against closed forms, float64, identities and the edge cases of issue 12.

Each test evaluates its expressions inside one ``jax.jit`` (one compilation instead of hundreds
of eagerly dispatched ops) and compares with numpy closed forms.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from fidia_jax import layers

C = 0.7  # a curvature that is not 1, so a missing sqrt(c) shows


def _in_ball(seed, n, d, c=C, max_r=0.9):
    v = np.random.default_rng(seed).standard_normal((n, d))
    r = np.random.default_rng(seed + 1).uniform(0.0, max_r, (n, 1)) / np.sqrt(c)
    return v / np.linalg.norm(v, axis=1, keepdims=True) * r


def _f64(fn, *args):
    """Runs ``fn`` jitted in float64 and returns numpy outputs."""
    with jax.enable_x64(True):
        out = jax.jit(fn)(*[jnp.asarray(a, jnp.float64) for a in args])
        return jax.tree.map(np.asarray, out)


def test_closed_forms_and_identities_float64():
    x, y, w = _in_ball(1, 8, 4), _in_ball(2, 8, 4), _in_ball(3, 8, 4)
    t = np.random.default_rng(8).uniform(-1, 1, (8, 4))

    def fn(x, y, w, t):
        z = jnp.zeros_like(x)
        v = layers.logmap(x, y, C)
        return {
            "d0": layers.poincare_distance(z, x, C),
            "dm": layers.poincare_distance_matrix(x, y, C),
            "pair": layers.poincare_distance(x[:, None, :], y[None, :, :], C),
            "dxy": layers.poincare_distance(x, y, C),
            "diam": layers.poincare_distance(jnp.array([[0.3, 0.0]]), jnp.array([[-0.6, 0.0]]), C),
            "0+x": layers.mobius_add(z, x, C),
            "x+0": layers.mobius_add(x, z, C),
            "-x+x": layers.mobius_add(-x, x, C),
            "cancel": layers.mobius_add(-x, layers.mobius_add(x, y, C), C),
            "gyr": layers.gyration(x, y, w, C),
            "gyr_def": layers.mobius_add(
                -layers.mobius_add(x, y, C),
                layers.mobius_add(x, layers.mobius_add(y, w, C), C),
                C,
            ),
            "2x": layers.mobius_scalar_mul(2.0, x, C),
            "x+x": layers.mobius_add(x, x, C),
            "d_half": layers.poincare_distance(z, layers.mobius_scalar_mul(0.5, x, C), C),
            "mv_eye": layers.mobius_matvec(jnp.eye(4), x, C),
            "mv_04": layers.mobius_matvec(0.4 * jnp.eye(4), x, C),
            "sm_04": layers.mobius_scalar_mul(0.4, x, C),
            "mv_0": layers.mobius_matvec(jnp.zeros((4, 2)), x, C),
            "v": v,
            "exp_log": layers.expmap(x, v, C),
            "lam": layers.conformal_factor(x, C),
            "exp0_log0": layers.expmap0(layers.logmap0(y, C), C),
            "exp_at_0": layers.expmap(z, t, C),
            "exp0": layers.expmap0(t, C),
            "pt": layers.parallel_transport(x, y, t, C),
            "lam_y": layers.conformal_factor(y, C),
        }

    r = _f64(fn, x, y, w, t)
    sc = np.sqrt(C)
    # d(0, x) = (2/sqrt c) artanh(sqrt c ||x||); the arccosh matrix form is the same distance.
    np.testing.assert_allclose(
        r["d0"], 2 / sc * np.arctanh(sc * np.linalg.norm(x, axis=1)), rtol=1e-12
    )
    np.testing.assert_allclose(r["dm"], r["pair"], rtol=1e-9, atol=1e-9)
    # On a diameter: |2/sqrt(c) (artanh(sqrt(c) b) - artanh(sqrt(c) a))|.
    ref = abs(2 / sc * (np.arctanh(sc * -0.6) - np.arctanh(sc * 0.3)))
    np.testing.assert_allclose(r["diam"], [ref], rtol=1e-12)
    np.testing.assert_allclose(r["0+x"], x, atol=1e-14)
    np.testing.assert_allclose(r["x+0"], x, atol=1e-14)
    np.testing.assert_allclose(r["-x+x"], 0.0, atol=1e-14)
    np.testing.assert_allclose(r["cancel"], y, atol=1e-12)  # left cancellation
    np.testing.assert_allclose(r["gyr"], r["gyr_def"], atol=1e-12)
    np.testing.assert_allclose(r["2x"], r["x+x"], atol=1e-12)  # 2 (x) x = x (+) x
    np.testing.assert_allclose(r["d_half"], 0.5 * r["d0"], rtol=1e-10)
    np.testing.assert_allclose(r["mv_eye"], x, atol=1e-12)
    np.testing.assert_allclose(r["mv_04"], r["sm_04"], atol=1e-12)
    np.testing.assert_array_equal(r["mv_0"], 0.0)
    # exp_x(log_x(y)) = y and d(x, y) = lambda_x ||log_x(y)||.
    np.testing.assert_allclose(r["exp_log"], y, atol=1e-10)
    np.testing.assert_allclose(r["lam"][:, 0] * np.linalg.norm(r["v"], axis=1), r["dxy"], rtol=1e-9)
    np.testing.assert_allclose(r["exp0_log0"], y, atol=1e-12)
    np.testing.assert_allclose(r["exp_at_0"], r["exp0"], atol=1e-12)
    # exp_0 closed form
    nt = np.linalg.norm(t, axis=1, keepdims=True)
    np.testing.assert_allclose(r["exp0"], np.tanh(sc * nt) * t / (sc * nt), rtol=1e-12)
    # Parallel transport preserves the Riemannian norm lambda ||v||.
    np.testing.assert_allclose(
        r["lam_y"][:, 0] * np.linalg.norm(r["pt"], axis=1),
        r["lam"][:, 0] * np.linalg.norm(t, axis=1),
        rtol=1e-10,
    )


def test_small_curvature_is_euclidean():
    rng = np.random.default_rng(12)
    x, y = rng.uniform(-1, 1, (5, 3)), rng.uniform(-1, 1, (5, 3))
    c = 1e-9
    r = _f64(
        lambda x, y: (
            layers.mobius_add(x, y, c),
            layers.expmap(x, y, c),
            layers.logmap(x, y, c),
            layers.poincare_distance(x, y, c),
        ),
        x,
        y,
    )
    np.testing.assert_allclose(r[0], x + y, atol=1e-7)
    np.testing.assert_allclose(r[1], x + y, atol=1e-7)
    np.testing.assert_allclose(r[2], y - x, atol=1e-7)
    # lambda -> 2 as c -> 0, so d -> 2 ||x - y||.
    np.testing.assert_allclose(r[3], 2 * np.linalg.norm(x - y, axis=1), rtol=1e-6)


def test_float32_edge_cases_finite_values_and_grads():
    """Boundary points, arccosh arguments below 1, coincident points and zero tangent vectors."""
    # Points that round onto (or past) the unit sphere in float32.
    edge = jnp.array([[1.0, 0.0], [0.6, 0.8], [0.99999994, 0.0], [2.0, 0.0]], jnp.float32)
    near = jnp.array([[0.7, 0.69], [0.3, 0.2]], jnp.float32)
    zero = jnp.zeros((1, 3), jnp.float32)
    x3 = jnp.array([[0.2, -0.1, 0.3]], jnp.float32)

    def edge_loss(x):
        y = jnp.array([[0.0, 0.5]], jnp.float32)
        return (
            jnp.sum(layers.poincare_distance(x, y, 1.0))
            + jnp.sum(layers.poincare_distance_matrix(x, y, 1.0))
            + jnp.sum(layers.logmap0(x, 1.0))
            + jnp.sum(layers.conformal_factor(x, 1.0))
        )

    zero_fns = (
        lambda v: jnp.sum(layers.expmap(x3, v, 1.0)),
        lambda v: jnp.sum(layers.logmap0(v, 1.0)),
        lambda v: jnp.sum(layers.poincare_distance(v, jnp.zeros_like(v), 1.0)),
        lambda v: jnp.sum(layers.mobius_matvec(jnp.eye(3), v, 1.0)),
        lambda v: jnp.sum(layers.mobius_scalar_mul(2.0, v, 1.0)),
    )

    @jax.jit
    def run(edge, near, zero, x3):
        z = jnp.array([1.0 - 1e-6, 1.0, 0.5], jnp.float32)
        return {
            "proj": layers.project_to_ball(edge, 1.0),
            "exp_huge": layers.expmap0(jnp.array([[1e4, 0.0]], jnp.float32), 1.0),
            "edge": jax.value_and_grad(edge_loss)(edge),
            "acosh": layers.safe_arccosh(z),
            "acosh_g": jax.grad(lambda z: jnp.sum(layers.safe_arccosh(z)))(z),
            "dm_self": layers.poincare_distance_matrix(near, near, 1.0),
            "dm_self_g": jax.grad(
                lambda x: jnp.sum(layers.poincare_distance_matrix(x, x, 1.0) ** 2)
            )(near),
            "exp0_zero": layers.expmap0(zero, 1.0),
            "exp_zero": layers.expmap(x3, zero, 1.0),
            "log_self": layers.logmap(x3, x3, 1.0),
            "jac0": jax.jacobian(lambda v: layers.expmap0(v, 1.0)[0])(zero),
            # One gradient of the sum: a NaN/inf in any term would make it non-finite.
            "zero_grads": [jax.grad(lambda v: sum(f(v) for f in zero_fns))(zero)],
        }

    r = jax.tree.map(np.asarray, run(edge, near, zero, x3))
    assert r["proj"].dtype == np.float32
    assert np.all(np.linalg.norm(r["proj"], axis=1) <= 1 - 4e-3 + 1e-6)
    np.testing.assert_allclose(r["proj"][1], [0.6 * 0.996, 0.8 * 0.996], rtol=1e-6)
    # exp of a huge tangent vector saturates tanh to 1: still strictly inside the ball.
    assert np.linalg.norm(r["exp_huge"]) < 1.0
    val, g = r["edge"]
    assert np.isfinite(val) and np.all(np.isfinite(g))
    assert np.all(np.isfinite(r["acosh"])) and np.all(np.isfinite(r["acosh_g"]))
    np.testing.assert_allclose(r["acosh"][2], 0.0, atol=1e-3)  # 0.5 -> clamped to ~0
    np.testing.assert_allclose(np.diag(r["dm_self"]), 0.0, atol=2e-3)
    assert np.all(np.isfinite(r["dm_self_g"]))
    np.testing.assert_array_equal(r["exp0_zero"], 0.0)
    np.testing.assert_allclose(r["exp_zero"], np.asarray(x3), atol=1e-7)
    np.testing.assert_allclose(r["log_self"], 0.0, atol=1e-6)
    # exp_0 has Jacobian I at 0 (the clamp makes tanh(s)/s -> 1, not 0/0).
    np.testing.assert_allclose(r["jac0"][:, 0, :], np.eye(3), atol=1e-6)
    for g in r["zero_grads"]:
        assert np.all(np.isfinite(g))


@pytest.mark.parametrize("c", [0.0, -1.0, float("nan")])
def test_nonpositive_curvature_is_a_clear_error(c):
    with pytest.raises(ValueError, match="curvature c must be > 0"):
        layers.expmap0(jnp.ones((1, 2)), c)
    with pytest.raises(ValueError, match="curvature"):
        layers.HypLinear(2, 2, c=c, rngs=nnx.Rngs(0))


def test_hyp_linear_closed_form():
    layer = layers.HypLinear(3, 2, c=C, rngs=nnx.Rngs(0))
    layer.bias[...] = jnp.array([0.1, -0.2], jnp.float32)
    x = jnp.asarray(_in_ball(14, 4, 3), jnp.float32)
    w = layer.kernel[...]

    @jax.jit
    def run(x, w):
        ref = layers.mobius_add(
            layers.mobius_matvec(w, x, C),
            jnp.broadcast_to(layers.expmap0(jnp.array([0.1, -0.2]), C), (4, 2)),
            C,
        )
        y = layer(x)
        return y, ref, layers.prototype_logits(y, y[:2], C, temperature=2.0)

    y, ref, logits = map(np.asarray, run(x, w))
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)
    assert np.all(np.sqrt(C) * np.linalg.norm(y, axis=1) < 1)
    np.testing.assert_allclose(np.diag(logits[:2]), 0.0, atol=1e-5)
    assert np.all(logits <= 0)
