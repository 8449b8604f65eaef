"""Masked cross-entropy and embedding distillation against brute force."""

import jax
import numpy as np

from fidia_jax import layers
from fidia_jax.projects.hypcl import losses


def test_masked_cross_entropy_and_distillation():
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((5, 6)).astype(np.float32)
    labels = np.array([0, 2, 3, 2, 0])
    seen = np.array([True, False, True, True, False, False])
    z1 = (rng.uniform(-0.4, 0.4, (5, 3))).astype(np.float32)
    z2 = (rng.uniform(-0.4, 0.4, (5, 3))).astype(np.float32)

    @jax.jit
    def run(logits, z1, z2):
        ce, g = jax.value_and_grad(losses.masked_cross_entropy)(logits, labels, seen)
        return {
            "ce": ce,
            "g": g,
            "hyp": losses.embedding_distillation(z1, z2, "poincare", 1.0),
            "hyp_self": jax.grad(lambda z: losses.embedding_distillation(z, z, "poincare"))(z1),
            "euc": losses.embedding_distillation(z1, z2, "euclidean"),
            "d": layers.poincare_distance(z1, z2, 1.0),
        }

    r = jax.tree.map(np.asarray, run(logits, z1, z2))
    sub = logits[:, seen]
    col = {0: 0, 2: 1, 3: 2}
    ref = -np.mean([sub[i, col[c]] - np.log(np.exp(sub[i]).sum()) for i, c in enumerate(labels)])
    np.testing.assert_allclose(r["ce"], ref, rtol=1e-5)
    assert np.all(np.isfinite(r["g"])) and np.all(r["g"][:, ~seen] == 0)
    np.testing.assert_allclose(r["hyp"], np.mean(r["d"] ** 2), rtol=1e-5)
    np.testing.assert_allclose(r["euc"], np.mean(np.sum((z1 - z2) ** 2, axis=1)), rtol=1e-5)
    np.testing.assert_allclose(r["hyp_self"], 0.0, atol=1e-6)
