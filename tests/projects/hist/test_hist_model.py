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
    # the authors' global_strategy 'proj': the fixed token has the input width (6 features)
    assert tok.shape == (1, 6) and float(jnp.abs(tok).max()) < 1e-3
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


def test_non_finite_features_are_a_named_data_error(case):
    # One NaN feature in one spot used to turn every prediction of the section into NaN.
    from fidia_jax.errors import DataError
    from fidia_jax.projects.hist import train as hist_train

    model, plan, c, mask, f, y = case
    bad = np.asarray(f).copy()
    bad[3, 2] = np.nan
    with pytest.raises(DataError, match=r"HiST: non-finite features .* 1 spot\(s\), first \[3\]"):
        model(jnp.asarray(bad), plan)
    pad_nan = np.asarray(f).copy()
    pad_nan[~mask] = np.inf  # padding rows may hold anything (the padding test shows they
    hist_model.check_finite_features(pad_nan, mask)  # never reach an output): no error
    prep = hist_train.Prepared(
        ("a", "b"), (c[mask], c[mask]), (np.asarray(f)[mask], bad[mask]), (y[mask], y[mask]), ()
    )
    cfg = hist_train.HistConfig(data="synthetic", syn_sections=2, num_genes=5, eval_genes=2)
    with pytest.raises(DataError, match=r"section b: non-finite features"):
        hist_train.fit_predict("ridge", prep, [0], 1, cfg)


def test_head_bias_starts_at_the_training_mean_and_input_projection_is_the_authors(case):
    model, plan, c, mask, f, y = case
    mean = np.asarray(y)[mask].mean(axis=0)
    m2 = hist_model.HiST(
        6, 5, dim=8, heads=2, enc_depths=(1, 1), dec_depths=(0,), window=4, rngs=nnx.Rngs(3)
    )
    m2.init_head_bias(mean)
    m2.head.kernel[...] = jnp.zeros_like(m2.head.kernel[...])
    out = np.asarray(nnx.jit(lambda m, f, p: m(f, p))(m2, f, plan))
    np.testing.assert_allclose(out[mask], np.broadcast_to(mean, out[mask].shape), rtol=1e-6)
    with pytest.raises(ValueError, match="init_head_bias"):
        m2.init_head_bias(mean[:3])
    # authors' hist.yaml (activation: null): one bias-free Linear, then dropout
    assert m2.inp.bias is None and m2.inp.kernel.shape == (6, 8)
    mlp = hist_model.HiST(
        6, 5, dim=8, heads=2, enc_depths=(1, 1), dec_depths=(0,), window=4,
        input_proj="mlp", input_mlp_ratio=0.5, rngs=nnx.Rngs(4),
    )  # fmt: skip
    assert mlp.inp_hidden.kernel.shape == (6, 3) and mlp.inp_hidden.bias is None
    want = np.maximum(np.asarray(f) @ np.asarray(mlp.inp_hidden.kernel[...]), 0) @ np.asarray(
        mlp.inp.kernel[...]
    )
    np.testing.assert_allclose(np.asarray(mlp._project(f, True)), want, rtol=1e-5, atol=1e-6)


def test_neighbour_features_brute_force():
    from fidia_jax.projects.hist.train import neighbour_features

    rng = np.random.default_rng(0)
    grid = np.stack(np.meshgrid(np.arange(7), np.arange(5), indexing="ij"), -1).reshape(-1, 2)
    coords = grid[rng.permutation(len(grid))[:20]] + 3
    feats = rng.standard_normal((20, 4)).astype(np.float32)
    got = neighbour_features(coords, feats)
    for i, ci in enumerate(coords):
        nb = [
            j
            for j, cj in enumerate(coords)
            if j != i and np.max(np.abs(cj - ci)) == 1  # the 8-neighbourhood
        ]
        want = feats[nb].mean(axis=0) if nb else feats[i]
        np.testing.assert_allclose(got[i, 4:], want, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(got[:, :4], feats)


def test_optimiser_is_the_authors_adamw_without_clipping():
    import optax

    from fidia_jax.projects.hist.train import _adamw, paired_gene_test

    g = {"w": jnp.full((3,), 100.0)}  # a gradient far above any clipping norm
    p = {"w": jnp.ones((3,))}
    ours = _adamw(1e-4, 1e-5, 10)
    ref = optax.adamw(optax.cosine_decay_schedule(1e-4, 10), weight_decay=1e-5)
    u1, _ = ours.update(g, ours.init(p), p)
    u2, _ = ref.update(g, ref.init(p), p)
    np.testing.assert_allclose(u1["w"], u2["w"], rtol=1e-7)
    clipped = _adamw(1e-4, 1e-5, 10, clip_norm=1.0)
    assert len(clipped.init(p)) == 2  # chain(clip, adamw) only when asked
    folds = [{"a": {"gene_pcc": [0.5, 0.6, np.nan]}, "b": {"gene_pcc": [0.4, 0.7, 0.1]}}]
    t = paired_gene_test(folds, "a", "b")
    assert t["n"] == 2 and t["a_wins"] == 0.5 and t["mean_diff"] == pytest.approx(0.0)


def test_gene_head_starts_as_a_default_torch_linear():
    # the authors' head is nn.Linear(2 dim, G) (it reads the last skip concatenation,
    # skip_first: 1) left at PyTorch's default: weight and bias U(-1/sqrt(fan_in),
    # 1/sqrt(fan_in)), weight variance 1/(3 fan_in) (Flax's lecun_normal: 1/fan_in)
    fan_in, genes = 64, 400
    m = hist_model.HiST(
        6, genes, dim=fan_in // 2, heads=2, enc_depths=(1, 1), dec_depths=(0,), window=4,
        rngs=nnx.Rngs(5),
    )  # fmt: skip
    assert m.head.kernel.shape == (fan_in, genes)
    dim = fan_in
    w, b = np.asarray(m.head.kernel[...]), np.asarray(m.head.bias[...])
    bound = 1.0 / np.sqrt(dim)
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    # 25 600 uniform draws: the sample variance is within 3 % of 1/(3 dim)
    np.testing.assert_allclose(w.var(), 1.0 / (3 * dim), rtol=0.03)
    np.testing.assert_allclose(b.var(), 1.0 / (3 * dim), rtol=0.25)
    assert np.abs(w).max() > 0.95 * bound  # uniform up to the bound, not a narrower law
    with pytest.raises(ValueError, match="fan_in"):
        hist_model.torch_linear_init(0)
