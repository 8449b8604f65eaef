"""The T-JEPA latent loss and the Var-T-JEPA ELBO (brute force, by hand)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from fidia_jax.projects.varjepa import losses
from fidia_jax.projects.varjepa import model as models


def test_tjepa_latent_loss_brute_force():
    rng = np.random.default_rng(1)
    pred, tgt = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 3, 4)) * 3 + 1
    mask = np.array([[True, False, True], [False, False, True]])
    norm = (tgt - tgt.mean(-1, keepdims=True)) / np.sqrt(tgt.var(-1, keepdims=True) + 1e-6)
    expected = np.mean(
        [np.mean((pred[b, f] - norm[b, f]) ** 2) for b, f in zip(*np.nonzero(mask), strict=True)]
    )
    got = losses.tjepa_latent_loss(
        jnp.asarray(pred), jnp.asarray(tgt), jnp.asarray(mask), normalize=True
    )
    assert float(got) == pytest.approx(expected, rel=1e-5)
    raw = np.mean(
        [np.mean((pred[b, f] - tgt[b, f]) ** 2) for b, f in zip(*np.nonzero(mask), strict=True)]
    )
    got_raw = losses.tjepa_latent_loss(jnp.asarray(pred), jnp.asarray(tgt), jnp.asarray(mask))
    assert float(got_raw) == pytest.approx(raw, rel=1e-5)  # default: raw targets (the authors')
    # the target gets no gradient
    g = jax.grad(lambda t: losses.tjepa_latent_loss(jnp.asarray(pred), t, jnp.asarray(mask)))(
        jnp.asarray(tgt)
    )
    assert float(jnp.abs(g).max()) == 0.0
    with pytest.raises(ValueError, match="disagree"):
        losses.tjepa_latent_loss(jnp.asarray(pred), jnp.asarray(tgt[:, :2]), jnp.asarray(mask))


def test_var_tjepa_elbo_by_hand():
    rng = np.random.default_rng(2)
    b, n_num, n_cat, d, v = 2, 2, 1, 3, 4
    x_num, x_cat = rng.normal(size=(b, n_num)), np.array([[2], [0]])
    f = n_num + n_cat
    g = lambda *s: jnp.asarray(rng.normal(size=s) * 0.5)  # noqa: E731
    rec_c = (g(b, n_num), g(1, n_num), g(b, n_cat, v))
    rec_t = (g(b, n_num), g(1, n_num), g(b, n_cat, v))
    q_c, q_t, prior = (models.GaussianTokens(g(b, f, d), g(b, f, d)) for _ in range(3))
    ctx = jnp.array([[True, False, False], [False, True, True]])
    tgt = jnp.array([[False, True, True], [True, False, False]])
    neg, terms = losses.var_tjepa_elbo(
        jnp.asarray(x_num), jnp.asarray(x_cat), rec_c, rec_t, q_c, q_t, prior, ctx, tgt, beta=0.5
    )

    def nll(rec, i, j):
        if j < n_num:
            m, lv = float(rec[0][i, j]), float(rec[1][0, j])
            return 0.5 * ((x_num[i, j] - m) ** 2 / np.exp(lv) + lv + np.log(2 * np.pi))
        logits = np.asarray(rec[2][i, j - n_num])
        return -(logits[x_cat[i, j - n_num]] - np.log(np.exp(logits).sum()))

    def kl(mq, lq, mp, lp):
        return 0.5 * np.sum(np.exp(lq - lp) + (mq - mp) ** 2 / np.exp(lp) - 1 - lq + lp)

    a = lambda t, i, j: np.asarray(t)[i, j]  # noqa: E731
    for i in range(b):
        rc = sum(nll(rec_c, i, j) for j in range(f) if ctx[i, j])
        rt = sum(nll(rec_t, i, j) for j in range(f) if tgt[i, j])
        kc = sum(
            kl(a(q_c.mean, i, j), a(q_c.log_var, i, j), 0.0, 0.0) for j in range(f) if ctx[i, j]
        )
        kt = sum(
            kl(a(q_t.mean, i, j), a(q_t.log_var, i, j), a(prior.mean, i, j), a(prior.log_var, i, j))
            for j in range(f)
            if tgt[i, j]
        )
        for name, val in zip(
            ("rec_context", "rec_target", "kl_context", "kl_target"), (rc, rt, kc, kt), strict=True
        ):
            assert float(terms[name][i]) == pytest.approx(val, rel=1e-5), name
        assert float(neg[i]) == pytest.approx(rc + rt + 0.5 * (kc + kt), rel=1e-5)


@pytest.mark.slow  # eager transformer calls (~20 s); the tiny driver run covers both objectives
def test_objectives_run_and_differentiate():
    model = models.TabularJepa(2, (3,), dim=8, heads=2, variational=True, rngs=nnx.Rngs(0))
    x_num, x_cat = (
        jnp.asarray(np.random.default_rng(0).normal(size=(4, 2)), jnp.float32),
        jnp.array([[0], [1], [2], [1]]),
    )
    loss, aux = losses.var_tjepa_objective(
        model, x_num, x_cat, jax.random.key(0), n_context=2, n_target=1
    )
    assert np.isfinite(float(loss)) and set(aux) == {
        "rec_context",
        "rec_target",
        "kl_context",
        "kl_target",
    }
    assert float(loss) == pytest.approx(sum(float(v) for v in aux.values()), rel=1e-5)  # beta = 1
    det = models.TabularJepa(2, (3,), dim=8, heads=2, rngs=nnx.Rngs(0))
    # target model == online model: the loss equals the hand-composed latent MSE
    loss_t, _ = losses.tjepa_objective(
        det, det, x_num, x_cat, jax.random.key(1), n_context=1, n_target=2, views="fixed",
        normalize_targets=True,
    )  # fmt: skip
    ctx, tgt = models.random_feature_masks(jax.random.key(1), 4, 3, 1, 2)
    pred = det.predict(det.encode(x_num, x_cat, ctx).mean, ctx, tgt).mean
    ref = losses.tjepa_latent_loss(pred, det.encode(x_num, x_cat).mean, tgt, normalize=True)
    assert float(loss_t) == pytest.approx(float(ref), rel=1e-6)
    # the authors' views: the mean over the 4 target masks of the raw-target MSE
    loss_a, _ = losses.tjepa_objective(det, det, x_num, x_cat, jax.random.key(2))  # defaults
    ctx, tgts = models.multi_target_masks(jax.random.key(2), 4, 3)
    z, full = det.encode(x_num, x_cat, ctx).mean, np.asarray(det.encode(x_num, x_cat).mean)
    ref = []
    for m in range(4):
        pred, mask = np.asarray(det.predict(z, ctx, tgts[m]).mean), np.asarray(tgts[m])
        ref.append(np.mean(((pred - full) ** 2).mean(-1)[mask]))  # raw targets, no LayerNorm
    assert float(loss_a) == pytest.approx(float(np.mean(ref)), rel=1e-5)
    with pytest.raises(ValueError, match="views"):
        losses.tjepa_objective(det, det, x_num, x_cat, jax.random.key(2), views="ijepa")
    with pytest.raises(ValueError, match="variational=True"):
        losses.var_tjepa_objective(det, x_num, x_cat, jax.random.key(0), n_context=1, n_target=1)
