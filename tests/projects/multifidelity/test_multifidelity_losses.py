"""Trusted-subset losses against brute-force numpy loops; masked slots are never read."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax.projects.multifidelity import losses

RNG = np.random.default_rng(0)
N, K = 12, 3
PRED = RNG.normal(size=N).astype(np.float32)
Y = RNG.normal(size=N).astype(np.float32)
FID = np.array([0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 2])
MEMBER = FID[:, None] == np.arange(K)[None, :]
CAL = losses.TrustedSubsetCalibration(
    jnp.array([1.0, 0.7, 1.3]), jnp.array([0.0, 0.2, -0.4]), jnp.array([0.0, -1.0, 0.5])
)


# Jitted once per weights (eager dispatch of every small op is slow on a loaded CPU).
_loss = jax.jit(losses.trusted_subset_loss, static_argnames="weights")
_interval = jax.jit(losses.interval_trust_loss)
_rank = jax.jit(losses.pairwise_ranking_loss, static_argnames="temperature")
_hinge = jax.jit(losses.pairwise_hinge_ranking_loss, static_argnames="margin_scale")


def _softplus(z):
    return np.log1p(np.exp(z))


def _brute(pred, y, fid, cal, w):
    """The documented formula, written as plain loops."""
    a, b, rho = (np.asarray(v, np.float64) for v in cal)
    hf = [i for i in range(len(y)) if fid[i] == 0]
    total = w.absolute * np.mean([(pred[i] - y[i]) ** 2 for i in hf])
    for k in (1, 2):
        rows = [i for i in range(len(y)) if fid[i] == k]
        res = [abs(a[k] * pred[i] + b[k] - y[i]) for i in rows]
        r = (
            np.log1p(np.exp(rho[k]))
            if w.radius_mode == "learnable"
            else np.quantile(res, w.radius_quantile)
        )
        total += w.interval * np.mean([max(e - r, 0.0) ** 2 for e in res])
        if w.radius_mode == "learnable":
            total += w.radius_penalty * r
    for k in (0, 1, 2):
        rows = [i for i in range(len(y)) if fid[i] == k]
        if w.ranking_form == "logistic":
            pairs = [
                _softplus(-(pred[i] - pred[j]) / w.temperature)
                for i in rows
                for j in rows
                if y[i] > y[j]
            ]
        else:  # squared hinge on the calibrated prediction (identity for the HF)
            g = {i: (a[k] * pred[i] + b[k]) if k > 0 else pred[i] for i in rows}
            pairs = [
                max(w.margin_scale * (y[i] - y[j]) - (g[i] - g[j]), 0.0) ** 2
                for i in rows
                for j in rows
                if y[i] > y[j]
            ]
        total += w.ranking * np.mean(pairs)
    return total


@pytest.mark.parametrize(
    "mode, form, gamma",
    [("quantile", "hinge", 0.0), ("learnable", "hinge", 0.4), ("quantile", "logistic", 0.0)],
)
def test_total_matches_brute_force(mode, form, gamma):
    w = losses.TrustedSubsetWeights(
        absolute=1.0,
        interval=0.7,
        ranking=0.3,
        radius_mode=mode,
        radius_quantile=0.6,
        radius_penalty=0.2,
        temperature=0.5,
        ranking_form=form,
        margin_scale=gamma,
    )
    total, terms = _loss(jnp.asarray(PRED), jnp.asarray(Y), jnp.asarray(MEMBER), CAL, weights=w)
    np.testing.assert_allclose(
        float(total), _brute(PRED.astype(np.float64), Y, FID, CAL, w), rtol=1e-5
    )
    assert terms["radius_K"].shape == (3,) and float(terms["radius_K"][0]) == 0.0
    if mode == "learnable":
        np.testing.assert_allclose(terms["radius_K"][1:], np.log1p(np.exp([-1.0, 0.5])), rtol=1e-6)


def test_terms_switch_off_and_are_not_computed():
    w = losses.TrustedSubsetWeights(absolute=1.0, interval=0.0, ranking=0.0)
    total, terms = _loss(jnp.asarray(PRED), jnp.asarray(Y), jnp.asarray(MEMBER), CAL, weights=w)
    np.testing.assert_allclose(float(total), np.mean((PRED[:3] - Y[:3]) ** 2), rtol=1e-6)
    assert float(terms["interval"]) == 0.0 and float(terms["ranking"]) == 0.0
    with pytest.raises(ValueError, match="every term is switched off"):
        losses.TrustedSubsetWeights(absolute=0.0, interval=0.0, ranking=0.0)
    with pytest.raises(ValueError, match="radius_mode"):
        losses.TrustedSubsetWeights(radius_mode="fixed")
    with pytest.raises(ValueError, match="ranking_form must be one of"):
        losses.TrustedSubsetWeights(ranking_form="listwise")
    with pytest.raises(ValueError, match=r"margin_scale must be in \[0, 1\]"):
        losses.TrustedSubsetWeights(margin_scale=1.5)


def test_masked_slots_are_never_read():
    """NaN / inf in labels and predictions outside every mask change neither loss nor gradient."""
    pad = 3
    pred = np.concatenate([PRED, np.full(pad, np.nan, np.float32)])
    y = np.concatenate([Y, np.array([np.nan, np.inf, -np.inf], np.float32)])
    member = np.concatenate([MEMBER, np.zeros((pad, K), bool)])
    w = losses.TrustedSubsetWeights(radius_mode="quantile")

    def f(p, yy, m):
        return losses.trusted_subset_loss(p, yy, m, CAL, w)[0]

    vg = jax.jit(jax.value_and_grad(f))
    clean, g_clean = vg(jnp.asarray(PRED), jnp.asarray(Y), jnp.asarray(MEMBER))
    padded, g_pad = vg(jnp.asarray(np.nan_to_num(pred)), jnp.asarray(y), jnp.asarray(member))
    np.testing.assert_allclose(float(padded), float(clean), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(g_pad[:N]), np.asarray(g_clean), rtol=1e-5, atol=1e-7)
    assert np.all(np.asarray(g_pad[N:]) == 0.0)
    # a NaN prediction in a padded slot
    out, g_nan = vg(jnp.asarray(pred), jnp.asarray(y), jnp.asarray(member))
    np.testing.assert_allclose(float(out), float(clean), rtol=1e-6)
    assert np.all(np.isfinite(np.asarray(g_nan)))


def test_pieces_match_brute_force():
    mask = FID == 1
    a, b, r = 0.8, 0.1, 0.3
    res = np.abs(a * PRED[mask] + b - Y[mask])
    np.testing.assert_allclose(
        float(_interval(jnp.asarray(PRED), jnp.asarray(Y), jnp.asarray(mask),
                                         jnp.float32(a), jnp.float32(b), jnp.float32(r))),
        np.mean(np.maximum(res - r, 0) ** 2), rtol=1e-5)  # fmt: skip
    # an interval wide enough for every residual costs nothing
    assert (
        float(
            _interval(
                jnp.asarray(PRED),
                jnp.asarray(Y),
                jnp.asarray(mask),
                jnp.float32(a),
                jnp.float32(b),
                jnp.float32(res.max()),
            )
        )
        == 0.0
    )
    # ranking: perfectly ordered predictions far apart -> ~0; reversed -> ~|dp| / tau per pair
    y = np.array([0.0, 1.0, 2.0], np.float32)
    ones = jnp.ones(3, bool)
    assert float(_rank(jnp.asarray(10 * y), jnp.asarray(y), ones)) < 1e-3
    rev = float(_rank(jnp.asarray(-y), jnp.asarray(y), ones, temperature=0.5))
    np.testing.assert_allclose(rev, np.mean(_softplus(np.array([2.0, 4.0, 2.0]))), rtol=1e-6)
    # ties give no pair
    assert float(_rank(jnp.arange(3.0), jnp.zeros(3), ones)) == 0.0
    # hinge: saturates at exactly 0 once ordered with the margin (gamma = 0: any order-keeping
    # prediction, however compressed); reversed: (gamma dy + |dp|)^2 per pair
    assert float(_hinge(jnp.asarray(1e-3 * y), jnp.asarray(y), ones)) == 0.0
    assert float(_hinge(jnp.asarray(0.5 * y), jnp.asarray(y), ones, margin_scale=0.5)) == 0.0
    assert float(_hinge(jnp.asarray(0.4 * y), jnp.asarray(y), ones, margin_scale=0.5)) > 0.0
    rev = float(_hinge(jnp.asarray(-y), jnp.asarray(y), ones, margin_scale=0.5))
    np.testing.assert_allclose(rev, np.mean(np.square([1.5, 3.0, 1.5])), rtol=1e-6)
    assert float(_hinge(jnp.arange(3.0), jnp.zeros(3), ones)) == 0.0


def test_hinge_ranking_never_moves_the_calibration():
    """The calibration belongs to the interval term: the ranking term's gradient w.r.t. (a, b)
    is exactly 0 (through a_k a misordered pair would shrink a_k instead of fixing f)."""
    w = losses.TrustedSubsetWeights(absolute=0.0, interval=0.0, ranking=1.0, margin_scale=0.5)
    grad = jax.grad(
        lambda c: losses.trusted_subset_loss(jnp.asarray(-Y), jnp.asarray(Y), MEMBER, c, w)[0]
    )(CAL)
    assert float(losses.trusted_subset_loss(jnp.asarray(-Y), jnp.asarray(Y), MEMBER, CAL, w)[0]) > 0
    for leaf in grad:
        np.testing.assert_array_equal(np.asarray(leaf), 0.0)


def test_masked_quantile_matches_numpy():
    v = RNG.normal(size=9).astype(np.float32)
    m = np.array([1, 0, 1, 1, 0, 1, 1, 1, 0], bool)
    quantile = jax.jit(jax.vmap(losses.masked_quantile, in_axes=(None, None, 0)))
    qs = np.array([0.0, 0.25, 0.6, 0.8, 1.0], np.float32)
    np.testing.assert_allclose(np.asarray(quantile(jnp.asarray(v), jnp.asarray(m), jnp.asarray(qs))),
                               np.quantile(v[m], qs), rtol=1e-6)  # fmt: skip
    np.testing.assert_array_equal(
        np.asarray(quantile(jnp.asarray(v), jnp.zeros(9, bool), jnp.asarray(qs))), 0.0
    )


def test_bad_input_is_named():
    p, y, m = jnp.asarray(PRED), jnp.asarray(Y), jnp.asarray(MEMBER)
    with pytest.raises(ValueError, match="fidelity 1 has no samples"):
        losses.trusted_subset_loss(p, y, m.at[:, 1].set(False), CAL)
    with pytest.raises(ValueError, match="fidelity 0 has no samples"):
        losses.trusted_subset_loss(p, y, m.at[:, 0].set(False), CAL)
    with pytest.raises(ValueError, match="1 NaN label"):
        losses.trusted_subset_loss(p, y.at[4].set(jnp.nan), m, CAL)
    with pytest.raises(ValueError, match=r"pred_N and y_N must be \(12,\)"):
        losses.trusted_subset_loss(p[:5], y, m, CAL)
    with pytest.raises(ValueError, match="member_NxK must have rank 2"):
        losses.trusted_subset_loss(p, y, m[:, 0], CAL)
    with pytest.raises(ValueError, match="member_NxK must be bool"):
        losses.trusted_subset_loss(p, y, m.astype(jnp.float32), CAL)
    with pytest.raises(ValueError, match=r"calibration.scale_K must be \(3,\)"):
        losses.trusted_subset_loss(p, y, m, CAL._replace(scale_K=jnp.ones(2)))
    with pytest.raises(ValueError, match="temperature must be > 0"):
        losses.pairwise_ranking_loss(p, y, m[:, 0], temperature=0.0)
    with pytest.raises(ValueError, match="one shape"):
        losses.absolute_label_loss(p, y[:4], m[:, 0])


@pytest.mark.slow
def test_learned_calibration_recovers_an_affine_low_fidelity():
    """With the HF prediction fixed at the truth, gradient descent on (a, b) of the interval term
    (learnable radius) finds y_L = 2 f - 1."""
    f = jnp.linspace(-1, 1, 40)
    y = jnp.concatenate([f[:10], 2 * f[10:] - 1])
    member = jnp.stack([jnp.arange(40) < 10, jnp.arange(40) >= 10], axis=1)
    w = losses.TrustedSubsetWeights(ranking=0.0, radius_mode="learnable", radius_penalty=1.0)
    cal = losses.init_trusted_subset_calibration(2)
    grad = jax.grad(lambda c: losses.trusted_subset_loss(f, y, member, c, w)[0])

    @jax.jit
    def descend(cal):
        step = lambda _, c: jax.tree.map(lambda p, d: p - 0.05 * d, c, grad(c))  # noqa: E731
        return jax.lax.fori_loop(0, 3000, step, cal)

    cal = descend(cal)
    np.testing.assert_allclose(
        [float(cal.scale_K[1]), float(cal.shift_K[1])], [2.0, -1.0], atol=2e-2
    )
