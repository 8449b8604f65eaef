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
