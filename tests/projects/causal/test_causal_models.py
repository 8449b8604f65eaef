"""TARNet, CausalEGM (package structure and losses), the W2 arm embedding."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from fidia_jax.projects.causal import losses
from fidia_jax.projects.causal import model as models


def test_tarnet_heads_and_errors():
    m = models.TARNet(5, 4, rep_hidden=(8, 6), head_hidden=(4,), rngs=nnx.Rngs(0))
    mu, phi = m(jnp.ones((3, 5)))
    assert mu.shape == (3, 4) and phi.shape == (3, 6)
    # Head k only reads phi: its column equals the k-th head applied to phi.
    np.testing.assert_allclose(mu[:, 2], m.heads[2](phi)[:, 0], rtol=1e-6)
    with pytest.raises(ValueError, match="num_arms"):
        models.TARNet(5, 0, rngs=nnx.Rngs(0))


def test_causalegm_package_structure():
    m = models.CausalEGM(25, rngs=nnx.Rngs(0))
    # Package defaults: z_dims (3,6,3,6); g/e five 64-wide layers + output; f/h (64,32,8).
    assert [layer.kernel.shape for layer in m.e_net.layers] == [
        (25, 64),
        (64, 64),
        (64, 64),
        (64, 64),
        (64, 64),
        (64, 18),
    ]
    assert [layer.kernel.shape for layer in m.f_net.layers] == [
        (3 + 6 + 1, 64),
        (64, 32),
        (32, 8),
        (8, 1),
    ]
    assert m.h_net.layers[0].kernel.shape == (3 + 3, 64)
    po = m.potential_outcomes(jnp.ones((4, 25)))
    assert po.shape == (4, 2) and np.all(np.isfinite(po))
    with pytest.raises(ValueError, match="num_arms >= 2"):
        models.CausalEGM(25, 1, rngs=nnx.Rngs(0))
    multi = models.CausalEGM(25, 5, embed_dim=2, rngs=nnx.Rngs(0))
    assert multi.f_net.layers[0].kernel.shape == (3 + 6 + 5 + 2, 64)
    assert multi.treatment_logits(jnp.zeros((4, 18))).shape == (4, 5)


def test_critic_loss_closed_form_with_linear_critics():
    m = models.CausalEGM(
        4,
        z_dims=(1, 1, 1, 1),
        g_units=(8,),
        e_units=(8,),
        dz_units=(),
        dv_units=(),
        rngs=nnx.Rngs(1),
    )
    key = jax.random.key(0)
    z = jax.random.normal(key, (16, 4))
    v = jax.random.normal(jax.random.key(1), (16, 4))
    wz, bz = m.dz_net.layers[0].kernel[...][:, 0], m.dz_net.layers[0].bias[...][0]
    wv = m.dv_net.layers[0].kernel[...][:, 0]
    loss, aux = losses.causalegm_critic_loss(m, z, v, 0.3, 0.6)
    dz = -jnp.mean(z @ wz + bz) + jnp.mean(m.e_net(v) @ wz + bz)
    dv = -jnp.mean(v @ wv) + jnp.mean(m.g_net(z) @ wv)
    gp_z = (jnp.linalg.norm(wz) - 1) ** 2  # a linear critic's gradient is its weight vector
    gp_v = (jnp.linalg.norm(wv) - 1) ** 2
    np.testing.assert_allclose(aux["dz_loss"], dz, rtol=1e-5)
    np.testing.assert_allclose(aux["dv_loss"], dv, rtol=1e-5)
    np.testing.assert_allclose(loss, dv + dz + 10 * (gp_z + gp_v), rtol=1e-5)
    gen, gaux = losses.causalegm_generator_loss(m, z, v, jnp.zeros(16, jnp.int32), jnp.ones(16))
    np.testing.assert_allclose(gaux["g_adv"], -jnp.mean(m.g_net(z) @ wv), rtol=1e-5, atol=1e-6)
    want = gaux["g_adv"] + gaux["e_adv"] + gaux["l2_v"] + gaux["l2_z"] + gaux["l2_x"] + gaux["l2_y"]
    np.testing.assert_allclose(gen, want, rtol=1e-6)


def test_w2_embedding_preserves_gaussian_distances():
    # 1-D Gaussians: W2^2 = (m1 - m2)^2 + (s1 - s2)^2.
    d = models.gaussian_w2_distances(np.array([[0.0], [3.0]]), np.array([[[1.0]], [[4.0]]]))
    np.testing.assert_allclose(d[0, 1], np.sqrt(9 + 1))
    rng = np.random.default_rng(0)
    t = np.repeat(np.arange(3), 200)
    z = rng.normal(size=(600, 2)) + np.array([[0, 0], [4, 0], [0, 3]])[t]
    emb = models.arm_embedding_w2(z, t, 3, 2)
    covs = [np.cov(z[t == k].T) + 1e-3 * np.eye(2) for k in range(3)]
    means = [z[t == k].mean(0) for k in range(3)]
    want = models.gaussian_w2_distances(np.stack(means), np.stack(covs))
    got = np.linalg.norm(emb[:, None] - emb[None], axis=-1)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)
    # Alignment to a rotated copy recovers it.
    rot = np.array([[0.0, -1.0], [1.0, 0.0]])
    np.testing.assert_allclose(
        models.arm_embedding_w2(z, t, 3, 2, previous=emb @ rot), emb @ rot, atol=1e-4
    )
    with pytest.raises(ValueError, match="without units"):
        models.arm_embedding_w2(z, np.where(t == 2, 1, t), 3, 2)
