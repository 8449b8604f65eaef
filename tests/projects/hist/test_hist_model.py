"""HiST model: padding never reaches the output, the loss or the gradients; fixed token untrained."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from fidia_jax.projects.hist import data, lattice
from fidia_jax.projects.hist import model as hist_model
from fidia_jax.projects.hist.losses import masked_mse


@pytest.fixture(scope="module")
def case():
    s = data.synthetic_sections(1, shape=(10, 10), n_features=6, n_genes=5, seed=1)[0]
    n, pad = len(s.coords), 7
    c = np.concatenate([s.coords, np.zeros((pad, 2), np.int32)])
    mask = np.arange(n + pad) < n
    plan = lattice.plan_hierarchy(c, mask, levels=2, window=4)
    f = np.concatenate([s.features, np.zeros((pad, 6), np.float32)])
    y = np.concatenate([np.log1p(s.counts), np.zeros((pad, 5), np.float32)])
    model = hist_model.HiST(
        6,
        5,
        dim=8,
        heads=2,
        enc_depths=(1, 1),
        dec_depths=(0,),
        window=4,
        dropout=0.0,
        rngs=nnx.Rngs(0),
    )
    return model, plan, c, mask, jnp.asarray(f), jnp.asarray(y)


def test_masked_mse_ignores_padding_even_if_not_finite():
    pred = jnp.array([[1.0, 2.0], [jnp.nan, 5.0], [3.0, 3.0]])
    y = jnp.array([[0.0, 0.0], [jnp.inf, 1.0], [1.0, 1.0]])
    m = jnp.array([True, False, True])
    loss, g = jax.jit(jax.value_and_grad(lambda p: masked_mse(p, y, m)))(pred)
    assert float(loss) == pytest.approx((1 + 4 + 4 + 4) / 4)
    assert np.all(np.asarray(g)[1] == 0) and np.all(np.isfinite(np.asarray(g)))


def test_padding_sentinels_never_reach_the_outputs(case):
    model, plan, c, mask, f, y = case
    fwd = nnx.jit(lambda m, f, p: m(f, p))
    out1 = fwd(model, f, plan)
    garbage = jnp.where(jnp.asarray(mask)[:, None], f, 1e6)
    out2 = fwd(model, garbage, plan)
    np.testing.assert_allclose(np.asarray(out1), np.asarray(out2), rtol=1e-6, atol=1e-6)
    assert np.all(np.asarray(out1)[~mask] == 0) and np.all(np.isfinite(np.asarray(out1)))


@pytest.mark.slow
def test_padding_sentinels_never_reach_the_gradients(case):
    model, plan, c, mask, f, y = case
    garbage = jnp.where(jnp.asarray(mask)[:, None], f, 1e6)

    @nnx.jit
    def grad_f(m, f, p, y):
        return jax.grad(lambda f: masked_mse(m(f, p), y, jnp.asarray(mask)))(f)

    gf = np.asarray(grad_f(model, garbage, plan, y))
    assert np.all(gf[~mask] == 0) and np.abs(gf[mask]).sum() > 0


def test_fixed_slide_token_is_not_a_trained_parameter(case):
    model = case[0]
    params = nnx.state(model, nnx.Param)
    leaves = jax.tree_util.tree_leaves(params)
    tok = model.fixed_token[...]
    assert tok.shape == (1, 8) and float(jnp.abs(tok).max()) < 1e-3
    assert not any(leaf.shape == tok.shape and np.array_equal(leaf, tok) for leaf in leaves)


@pytest.mark.slow
def test_dense_transformer_ignores_padding():
    model = hist_model.DenseSpotTransformer(
        3, 2, dim=8, heads=2, depth=1, dropout=0.0, rngs=nnx.Rngs(0)
    )
    c = np.array([[0, 0], [1, 0], [5, 5], [0, 0]])
    m = np.array([True, True, True, False])
    f = jnp.asarray(np.random.default_rng(0).normal(size=(4, 3)), jnp.float32)
    fwd = nnx.jit(lambda mod, f: mod(f, c, m))
    a, b = fwd(model, f), fwd(model, f.at[3].set(1e6))
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)
    assert np.all(np.asarray(a)[3] == 0)


def test_sinusoidal_embedding_closed_form():
    e = hist_model.sinusoidal_lattice_embedding(np.array([[2, 3]]), 8)
    want = [
        np.sin(2.0),
        np.sin(0.2),
        np.cos(2.0),
        np.cos(0.2),
        np.sin(3.0),
        np.sin(0.3),
        np.cos(3.0),
        np.cos(0.3),
    ]
    np.testing.assert_allclose(np.asarray(e)[0], want, rtol=1e-6)
