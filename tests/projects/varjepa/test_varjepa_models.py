"""Feature tokens, masked transformer and the T-JEPA / Var-T-JEPA modules."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from fidia_jax.projects.varjepa import model as models

CARDS = (3, 5)  # two categorical columns: 2 and 4 training values + the UNKNOWN id 0


@pytest.fixture(scope="module")
def tok():
    return models.FeatureTokenizer(2, CARDS, 4, rngs=nnx.Rngs(0))


def test_tokens_are_linear_numerics_and_table_rows(tok):
    x_num = jnp.array([[0.5, -2.0], [1.0, 0.0]])
    x_cat = jnp.array([[0, 4], [2, 1]])
    t = np.asarray(tok(x_num, x_cat))
    w, b, table = map(np.asarray, (tok.num_weight[...], tok.num_bias[...], tok.cat_table[...]))
    np.testing.assert_allclose(t[0, 1], -2.0 * w[1] + b[1], rtol=1e-6)
    np.testing.assert_allclose(t[1, 0], 1.0 * w[0] + b[0], rtol=1e-6)
    np.testing.assert_allclose(t[0, 2], table[0])  # column 0, UNKNOWN id
    np.testing.assert_allclose(t[0, 3], table[3 + 4])  # column 1 starts after column 0's 3 rows
    np.testing.assert_allclose(t[1, 3], table[3 + 1])


def test_unseen_category_ids_never_clamp(tok):
    x_num = jnp.zeros((1, 2))
    with pytest.raises(
        ValueError, match=r"x_cat id 3 at row 0, feature 0 is outside \[0, 3\).*UNKNOWN"
    ):
        tok(x_num, jnp.array([[3, 0]]))
    with pytest.raises(ValueError, match="outside"):
        tok(x_num, jnp.array([[0, -1]]))
    # traced: an out-of-range id gives a NaN token (visible), not column 1's first row
    t = jax.jit(tok)(x_num, jnp.array([[3, 0]]))
    assert np.isnan(np.asarray(t[0, 2])).all() and np.isfinite(np.asarray(t[0, 3])).all()


def test_bad_inputs_raise(tok):
    with pytest.raises(ValueError, match=r"x_num must be \(B, 2\)"):
        tok(jnp.zeros((1, 3)), jnp.zeros((1, 2), jnp.int32))
    with pytest.raises(ValueError, match=r"x_cat must be \(B, 2\)"):
        tok(jnp.zeros((1, 2)), jnp.zeros((1,), jnp.int32))
    with pytest.raises(ValueError, match="disagree on the batch"):
        tok(jnp.zeros((2, 2)), jnp.zeros((1, 2), jnp.int32))
    with pytest.raises(ValueError, match="integer category ids"):
        tok(jnp.zeros((1, 2)), jnp.zeros((1, 2)))
    with pytest.raises(ValueError, match=r"NaN/inf value at row 1, feature 0"):
        tok(jnp.array([[0.0, 1.0], [jnp.nan, 0.0]]), jnp.zeros((2, 2), jnp.int32))


def test_feature_masks_are_disjoint_with_exact_counts():
    ctx, tgt = models.random_feature_masks(jax.random.key(0), 64, 7, 3, 2)
    assert (np.asarray(ctx).sum(1) == 3).all() and (np.asarray(tgt).sum(1) == 2).all()
    assert not np.any(np.asarray(ctx) & np.asarray(tgt))
    # every feature lands in the context sometimes (uniform split): 64 * 3/7 ~ 27 per feature
    assert np.asarray(ctx).sum(0).min() > 10
    with pytest.raises(ValueError, match="n_context"):
        models.random_feature_masks(jax.random.key(0), 2, 4, 3, 2)


def test_multi_target_masks_follow_the_authors_sampling():
    """T-JEPA's MaskCollator: per batch one context size and one target size in
    [round(0.2 F), round(0.4 F)]; per row 4 target masks among the non-context features."""
    f, sizes_c, sizes_t = 30, set(), set()
    for seed in range(40):
        ctx, tgts = models.multi_target_masks(jax.random.key(seed), 16, f)
        ctx, tgts = np.asarray(ctx), np.asarray(tgts)
        assert tgts.shape == (4, 16, f)
        n_c, n_t = set(ctx.sum(1)), set(tgts.sum(2).ravel())
        assert len(n_c) == 1 and len(n_t) == 1  # one size per batch
        sizes_c |= n_c
        sizes_t |= n_t
        assert not np.any(ctx[None] & tgts)  # a target never overlaps the context
        assert np.any(tgts[0] != tgts[1])  # the target masks are separate draws
    assert sizes_c <= set(range(6, 13)) and sizes_t <= set(range(6, 13))
    assert len(sizes_c) >= 4 and len(sizes_t) >= 4  # the sizes vary over batches
    # tiny tables: the authors' bounds fail for F=2 (round(0.4) = 0); our earlier "uniform"
    # rule clamps the sizes to >= 1 and to F // 2
    with pytest.raises(ValueError, match="F=2"):
        models.multi_target_masks(jax.random.key(0), 3, 2)
    ctx, tgts = models.multi_target_masks(jax.random.key(0), 3, 2, size_rule="uniform")
    assert (np.asarray(ctx).sum(1) == 1).all() and (np.asarray(tgts).sum(2) == 1).all()
    with pytest.raises(ValueError, match="F=1"):
        models.multi_target_masks(jax.random.key(0), 3, 1, size_rule="uniform")


@pytest.fixture(scope="module")
def var_model():
    return models.TabularJepa(2, CARDS, dim=8, heads=2, n_reg=1, variational=True, rngs=nnx.Rngs(1))


def test_masked_tokens_are_invisible(var_model):
    x_num = jnp.array([[0.3, -1.0]])
    keep = jnp.array([[True, False, True, True]])
    a = var_model.encode(x_num, jnp.array([[1, 2]]), keep)
    b = var_model.encode(x_num.at[0, 1].set(5.0), jnp.array([[1, 2]]), keep)  # change a hidden one
    kept = np.asarray(keep[0])
    np.testing.assert_allclose(np.asarray(a.mean)[0, kept], np.asarray(b.mean)[0, kept], rtol=1e-5)
    assert not np.allclose(np.asarray(a.mean)[0, 1], np.asarray(b.mean)[0, 1])
    full = var_model.encode(x_num, jnp.array([[1, 2]]))
    assert not np.allclose(np.asarray(full.mean)[0, 0], np.asarray(a.mean)[0, 0])


def test_variational_heads_and_decoder(var_model):
    x_num, x_cat = jnp.zeros((3, 2)), jnp.array([[0, 1], [1, 4], [2, 0]])
    q = var_model.encode(x_num, x_cat)
    assert q.mean.shape == (3, 4, 8) and q.log_var.shape == (3, 4, 8)
    assert float(jnp.max(jnp.abs(q.log_var))) < 8.0
    num, log_var, logits = var_model.decode(q.mean)
    assert num.shape == (3, 2) and log_var.shape == (1, 2) and logits.shape == (3, 2, 5)
    probs = jax.nn.softmax(logits, axis=-1)
    np.testing.assert_allclose(np.asarray(probs[:, 0, 3:]), 0.0)  # column 0 has 3 ids only
    np.testing.assert_allclose(np.asarray(probs.sum(-1)), 1.0, rtol=1e-6)
    ctx, tgt = (
        jnp.array([[True, True, False, False]] * 3),
        jnp.array([[False, False, True, True]] * 3),
    )
    prior = var_model.predict(q.mean, ctx, tgt)
    assert prior.mean.shape == (3, 4, 8) and prior.log_var.shape == (3, 4, 8)
    assert var_model.embed(x_num, x_cat).shape == (3, 8)
    det = models.TabularJepa(2, CARDS, dim=8, heads=2, rngs=nnx.Rngs(1))
    assert det.encode(x_num, x_cat).log_var is None
    with pytest.raises(ValueError, match="only the variational model"):
        det.decode(q.mean)
