"""PrototypeAdapter: embeddings in the ball, logits = -d^2 / tau by brute force."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from fidia_jax import layers
from fidia_jax.projects.hypcl import model as models


def test_prototype_adapter_both_geometries():
    x = jnp.asarray(np.random.default_rng(0).standard_normal((6, 10)) * 5, jnp.float32)
    hyp = models.PrototypeAdapter(
        10, 4, 3, geometry="poincare", c=0.5, clip_r=1.5, temperature=2.0, rngs=nnx.Rngs(0)
    )
    euc = models.PrototypeAdapter(10, 4, 3, geometry="euclidean", temperature=2.0, rngs=nnx.Rngs(0))
    assert isinstance(hyp.prototypes, models.BallParam)
    assert not isinstance(euc.prototypes, models.BallParam)

    @jax.jit
    def run(x):
        zh, ze = hyp.embed(x), euc.embed(x)
        p = hyp.prototypes[...]
        brute = layers.poincare_distance(zh[:, None, :], p[None, :, :], 0.5)
        return zh, hyp(x), brute, ze, euc(x), hyp.proj(x)

    zh, lh, brute, ze, le, h = map(np.asarray, run(x))
    # clip_r = 1.5 before exp_0: the ball point is at most tanh(sqrt(c) 1.5)/sqrt(c) from 0
    # before the Möbius layer; after it, still strictly inside the ball.
    assert np.all(np.sqrt(0.5) * np.linalg.norm(zh, axis=1) < 1.0)
    np.testing.assert_allclose(lh, -(brute**2) / 2.0, rtol=1e-4, atol=1e-5)
    pe = np.asarray(euc.prototypes[...])
    np.testing.assert_allclose(
        le, -((ze[:, None] - pe[None]) ** 2).sum(-1) / 2.0, rtol=1e-4, atol=1e-4
    )
    # Same parameter count in both geometries.
    count = lambda m: sum(a.size for a in jax.tree.leaves(nnx.state(m, nnx.Param)))  # noqa: E731
    assert count(hyp) == count(euc)


def test_prototype_adapter_bad_arguments():
    with pytest.raises(ValueError, match="geometry"):
        models.PrototypeAdapter(4, 2, 2, geometry="sphere", rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="curvature"):
        models.PrototypeAdapter(4, 2, 2, c=0.0, rngs=nnx.Rngs(0))


def test_points_outside_the_ball_are_errors_or_nan_never_clamped():
    # Before: a prototype of norm 2 gave a finite logit (-1385) and a point of norm 1.5 the
    # distance of a boundary point. Now: concrete -> ValueError naming the norm; traced -> NaN.
    c = 0.5  # radius 1/sqrt(c) = 1.414
    m = models.PrototypeAdapter(8, 4, 3, c=c, rngs=nnx.Rngs(0))
    z = m.embed(jnp.ones((2, 8)))
    p = jnp.array([[2.0, 0, 0, 0], [0.1, 0, 0, 0], [0, 0.5, 0, 0]])
    with pytest.raises(ValueError, match=r"prototypes_KxD: 1 row\(s\).*largest norm 2\b"):
        m.logits_from_embedding(z, p)
    with pytest.raises(ValueError, match="z1"):
        models.embedding_distance(jnp.array([[1.5, 0.0]]), jnp.zeros((1, 2)), "poincare", c)
    with pytest.raises(ValueError, match="non-finite"):
        models.nan_outside_ball(jnp.array([[jnp.nan, 0.0]]), c)
    with pytest.raises(ValueError, match="on or outside"):  # norm exactly 1/sqrt(c) = 1
        models.nan_outside_ball(jnp.array([[0.6, 0.8]], jnp.float32), 1.0)

    logits = np.asarray(nnx.jit(lambda m, z, p: m.logits_from_embedding(z, p))(m, z, p))
    assert np.all(np.isnan(logits[:, 0]))
    ok = np.asarray(m.logits_from_embedding(z, p[1:]))
    np.testing.assert_allclose(logits[:, 1:], ok, rtol=1e-6)  # the other columns untouched
    d = jax.jit(lambda a, b: models.embedding_distance(a, b, "poincare", c))(
        jnp.array([[1.5, 0.0], [0.5, 0.0]]), jnp.zeros((2, 2))
    )
    assert np.isnan(d[0]) and np.isclose(d[1], 2 / np.sqrt(c) * np.arctanh(np.sqrt(c) * 0.5))


def test_exp_log_round_trip_warns_when_it_clips():
    y = jnp.array([[0.999, 0.0]], jnp.float32)  # between 0.996 (float32 radius) and 1
    with pytest.warns(UserWarning, match=r"0\.996.*round trip"):
        t = layers.logmap0(y, 1.0)
    np.testing.assert_allclose(np.linalg.norm(layers.expmap0(t, 1.0)), 0.996, rtol=1e-6)
    inside = jnp.array([[0.99, 0.0]], jnp.float32)  # inside the radius: exact, no warning
    np.testing.assert_allclose(layers.expmap0(layers.logmap0(inside, 1.0), 1.0), inside, rtol=1e-5)
