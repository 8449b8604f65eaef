"""Residual-update geometry primitives on constructed matrices (closed forms, brute force)."""

import numpy as np
import pytest

from fidia_jax.projects.residual_geometry import geometry


def _low_rank(rng, n=12, c=10, r=4):
    return rng.normal(size=(n, r)) @ rng.normal(size=(r, c))


def test_erank_closed_forms_and_reuse():
    # equal singular values -> eRank = rank; rank one -> 1; matches effective_rank in float64
    # (all 3x3: one float64 SVD program)
    q, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(3, 3)))
    assert geometry.erank(3.0 * q) == pytest.approx(3.0, abs=1e-10)
    assert geometry.erank(np.outer(np.arange(1, 4), np.ones(3))) == pytest.approx(1.0, abs=1e-10)
    s = np.array([3.0, 1.0, 0.5])
    p = s / s.sum()
    x = np.diag(s)
    assert geometry.erank(x) == pytest.approx(np.exp(-np.sum(p * np.log(p))), abs=1e-12)
    assert geometry.erank(np.zeros((3, 3))) == 0.0


def test_numerical_rank_and_projector():
    rng = np.random.default_rng(1)
    x = _low_rank(rng) + 1e-9 * rng.normal(size=(12, 10))
    assert geometry.numerical_rank(x, rtol=1e-6) == 4
    assert geometry.numerical_rank(x, rank=2) == 2
    p = geometry.subspace_projector(x, rtol=1e-6)
    np.testing.assert_allclose(p, p.T, atol=1e-12)
    np.testing.assert_allclose(p @ p, p, atol=1e-10)
    assert np.trace(p) == pytest.approx(4.0, abs=1e-10)
    # the projector fixes every row of x (x lies in its row space)
    np.testing.assert_allclose(x @ p, x, atol=1e-7)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"rank": 0}, "rank must be"),
        ({"rank": 11}, "rank must be"),
        ({"rank": 2.5}, "rank must be"),
        ({"rank": None, "rtol": 0.0}, "rtol"),
        ({"rank": None, "rtol": 1.5}, "rtol"),
        ({"rank": None, "rtol": True}, "rtol"),
    ],
)
def test_rank_parameter_out_of_range(kwargs, match):
    with pytest.raises(ValueError, match=match):
        geometry.subspace_projector(np.ones((12, 10)), **kwargs)


def test_bad_shapes_raise():
    with pytest.raises(ValueError, match="2-D"):
        geometry.residual_information_dynamics(np.ones(5), np.ones(5))
    with pytest.raises(ValueError, match="same shape"):
        geometry.residual_information_dynamics(np.ones((4, 3)), np.ones((4, 2)))
    with pytest.raises(ValueError, match="non-finite"):
        geometry.subspace_innovation(np.full((3, 3), np.nan), np.ones((3, 3)))
    with pytest.raises(ValueError, match="non-zero"):
        geometry.spectral_change(np.zeros((3, 3)), np.ones((3, 3)))


def test_update_inside_row_space_has_no_innovation():
    rng = np.random.default_rng(2)
    x = _low_rank(rng)
    dx = rng.normal(size=(12, 12)) @ x  # rows are combinations of x's rows
    assert geometry.subspace_innovation(x, dx, form="page", rtol=1e-8) == pytest.approx(
        0.0, abs=1e-12
    )
    r = geometry.residual_information_dynamics(x, dx, form="page", rtol=1e-8)
    assert r["delta_d"] == pytest.approx(0.0, abs=1e-12) and r["rank"] == 4
    assert r["rid"] == pytest.approx(abs(r["delta_s"]), abs=1e-12)


def test_orthogonal_update_is_pure_innovation_and_partial_mix():
    rng = np.random.default_rng(3)
    basis, _ = np.linalg.qr(rng.normal(size=(10, 10)))
    x = rng.normal(size=(12, 4)) @ basis[:, :4].T
    dx_orth = rng.normal(size=(12, 3)) @ basis[:, 4:7].T
    page = {"form": "page", "rtol": 1e-8}
    assert geometry.subspace_innovation(x, dx_orth, **page) == pytest.approx(1.0, abs=1e-12)
    # energy split brute force: a known share of the update lies outside
    dx_in = rng.normal(size=(12, 4)) @ basis[:, :4].T
    share = np.sum(dx_orth**2) / np.sum((dx_in + dx_orth) ** 2)
    assert geometry.subspace_innovation(x, dx_in + dx_orth, **page) == pytest.approx(
        share, abs=1e-10
    )
    # a new direction raises the effective rank: ΔS > 0
    assert geometry.spectral_change(x, dx_orth) > 0
    assert geometry.subspace_innovation(x, np.zeros_like(x), form="page") == 0.0


def test_spectral_change_closed_form():
    x = np.diag([2.0, 1.0, 0.0])
    dx = np.diag([0.0, 1.0, 2.0])  # -> diag(2, 2, 2): eRank 3; before: p = (2/3, 1/3)
    p = np.array([2 / 3, 1 / 3])
    expected = np.log(3.0) + np.sum(p * np.log(p))
    assert geometry.spectral_change(x, dx) == pytest.approx(expected, abs=1e-12)


def test_rank_threshold_sensitivity():
    # a residual with a spectral tail: a generic update's ΔD falls as the threshold admits more
    # directions (the sensitivity the docs report), and equals the brute-force projection share
    rng = np.random.default_rng(4)
    u, _ = np.linalg.qr(rng.normal(size=(16, 8)))
    v, _ = np.linalg.qr(rng.normal(size=(12, 8)))
    s = 10.0 ** -np.arange(8)
    x = (u * s) @ v.T
    dx = rng.normal(size=(16, 12))
    dds = [
        geometry.subspace_innovation(x, dx, form="page", rtol=t) for t in (0.5, 0.05, 5e-4, 5e-8)
    ]
    assert all(a > b for a, b in zip(dds, dds[1:], strict=False))
    for r in (1, 3, 8):
        vr = v[:, :r]
        brute = np.sum((dx - dx @ vr @ vr.T) ** 2) / np.sum(dx**2)
        got = geometry.subspace_innovation(x, dx, form="page", rank=r)
        assert got == pytest.approx(brute, abs=1e-10)
        # the authors' form at the same rank: both subspaces, new residual, norms then l2
        ur = u[:, :r]
        xn = x + dx
        col = np.linalg.norm(xn - ur @ ur.T @ xn) / np.linalg.norm(xn)
        row = np.linalg.norm(xn - xn @ vr @ vr.T) / np.linalg.norm(xn)
        # (the SVD's subspaces are accurate to eps · σ_1 / σ_r <= 2.2e-16 / 1e-7 ~ 2e-9)
        assert geometry.subspace_innovation(x, dx, rank=r) == pytest.approx(
            np.hypot(col, row), abs=1e-8
        )
    # the default rank rule (max(N, C) · eps · σ_1) keeps all 8 directions down to 1e-7 σ_1
    assert geometry.numerical_rank(x) == 8


def _causal_softmax(scores):
    t = scores.shape[0]
    s = np.where(np.tril(np.ones((t, t), bool)), scores, -np.inf)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_token_permutation_changes_tme_not_rid():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(10, 6))
    wv = rng.normal(size=(6, 6))
    w = _causal_softmax(x @ x.T / np.sqrt(6))
    dx = w @ x @ wv
    perm = rng.permutation(10)
    xp, dxp = x[perm], dx[perm]
    wp = _causal_softmax(xp @ xp.T / np.sqrt(6))  # causal attention recomputed on the new order
    r0 = geometry.residual_information_dynamics(x, dx)
    r1 = geometry.residual_information_dynamics(xp, dxp)
    for k in ("rid", "delta_s", "delta_d"):
        assert r1[k] == pytest.approx(r0[k], abs=1e-10)
    assert abs(geometry.token_mixing_entropy(wp) - geometry.token_mixing_entropy(w)) > 1e-2


def test_tme_closed_forms_and_errors():
    t = 5
    uniform = np.tril(np.ones((t, t))) / np.arange(1, t + 1)[:, None]
    assert geometry.token_mixing_entropy(uniform) == pytest.approx(1.0, abs=1e-12)
    # unnormalised: mean of log(n) over rows with n >= 2
    assert geometry.token_mixing_entropy(uniform, normalize=False) == pytest.approx(
        np.mean(np.log(np.arange(2, t + 1))), abs=1e-12
    )
    assert geometry.token_mixing_entropy(np.eye(t)) == pytest.approx(0.0, abs=1e-12)
    # stacked (L, B, H, T, S) weights are averaged
    both = np.stack([uniform, np.eye(t)])[None]
    assert geometry.token_mixing_entropy(both) == pytest.approx(0.5, abs=1e-12)
    with pytest.raises(ValueError, match="row-stochastic"):
        geometry.token_mixing_entropy(0.5 * uniform)
    with pytest.raises(ValueError, match="outside the mask"):
        geometry.token_mixing_entropy(np.full((t, t), 1.0 / t))
    with pytest.raises(ValueError, match="non-negative"):
        geometry.token_mixing_entropy(-uniform)


def test_mixig_attention_vs_tokenwise_vs_noise():
    rng = np.random.default_rng(6)
    b, t, c = 40, 8, 6
    x = rng.normal(size=(b, t, c))
    xh = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True))
    w = np.stack([_causal_softmax(xi @ xi.T) for xi in x])  # (B, T, T)
    m = rng.normal(size=(c, c))
    attn = np.einsum("bts,bsc->btc", w, xh) @ m  # exactly linear in the mixed features
    tokenwise = np.tanh(xh @ m)  # a function of the token alone
    noise = rng.normal(size=(b, t, c))
    g_attn = geometry.mixing_information_gain(x, attn, w)
    g_tok = geometry.mixing_information_gain(x, tokenwise, w)
    g_noise = geometry.mixing_information_gain(x, noise, w)
    assert g_attn["r2_mix"] > 0.95 and g_attn["mixig"] > 1.0
    assert abs(g_tok["mixig"]) < 0.1 and g_tok["r2_self"] > 0.8
    assert abs(g_noise["mixig"]) < 0.1 and g_noise["r2_mix"] < 0.1
    # brute-force check of the definition on the attention case
    assert g_attn["mixig"] == pytest.approx(
        0.5 * np.log((1 - g_attn["r2_self"]) / (1 - g_attn["r2_mix"])), rel=1e-9
    )
    with pytest.raises(ValueError, match="weights must be"):
        geometry.mixing_information_gain(x, attn, w[:, :4])
    with pytest.raises(ValueError, match=">= 2 sequences"):
        geometry.mixing_information_gain(x[:3], attn[:3], w[:3])


def test_mixing_information_gain_refuses_weights_that_are_not_causal_row_stochastic():
    rng = np.random.default_rng(0)
    x, dx = rng.normal(size=(4, 6, 8)), rng.normal(size=(4, 6, 8))
    full = np.full((4, 1, 6, 6), 1 / 6)  # rows sum to 1 but read future keys
    with pytest.raises(ValueError, match="outside the mask"):
        geometry.mixing_information_gain(x, dx, full)
    causal = np.tril(np.ones((6, 6))) * 2.0  # causal but rows sum to 2..12
    with pytest.raises(ValueError, match="row-stochastic"):
        geometry.mixing_information_gain(x, dx, np.broadcast_to(causal, (4, 1, 6, 6)))


def test_authors_delta_d_closed_forms():
    e = np.eye(4)
    x = np.outer(e[0], e[0])  # column and row subspaces span(e1)
    # X' = e2 e3ᵀ lies outside both: each share is 1
    assert geometry.subspace_innovation(x, np.outer(e[1], e[2]) - x) == pytest.approx(
        np.sqrt(2.0), abs=1e-12
    )
    assert geometry.subspace_innovation(
        x, np.outer(e[1], e[2]) - x, combine="sum"
    ) == pytest.approx(2.0, abs=1e-12)
    # X' = I: (I - P_C) I = diag(0, 1, 1, 1), the same on the right: shares sqrt(3) / 2 each
    assert geometry.subspace_innovation(x, e - x) == pytest.approx(np.sqrt(1.5), abs=1e-12)
    assert geometry.subspace_innovation(x, e - x, combine="sum") == pytest.approx(
        np.sqrt(3.0), abs=1e-12
    )
    # X' = 3X: inside both subspaces
    assert geometry.subspace_innovation(x, 2 * x) == pytest.approx(0.0, abs=1e-12)
    # the authors' guards: with eps the same X' = I, guarded as theirs
    guarded = geometry.subspace_innovation(x, e - x, eps=1e-12)
    eps = 1e-12
    want = np.sqrt(2 * (3 + eps) / (np.sqrt(4 + eps) + eps) ** 2 + eps)
    assert guarded == pytest.approx(want, abs=1e-15)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"form": "paper"}, "form must be"),
        ({"combine": "max"}, "combine must be"),
        ({"eps": -1.0}, "eps must be"),
        ({"eps": np.nan}, "eps must be"),
    ],
)
def test_subspace_innovation_bad_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        geometry.subspace_innovation(np.eye(3), np.ones((3, 3)), **kwargs)


def test_cosine_mixing_entropy_closed_forms_and_errors():
    # identical tokens: uniform weights, TME = 1 (normalised), log S (raw)
    same = np.ones((5, 3))
    assert geometry.cosine_mixing_entropy(same) == pytest.approx(1.0, abs=1e-12)
    assert geometry.cosine_mixing_entropy(same, normalize=False) == pytest.approx(np.log(5.0))
    # orthonormal tokens: the last token weighs itself 1 and each other (1/2)^alpha
    s = 6
    for alpha in (8.0, 1.0):
        w = np.array([0.5**alpha] * (s - 1) + [1.0])
        p = w / w.sum()
        want = -np.sum(p * np.log(p)) / np.log(s)
        got = geometry.cosine_mixing_entropy(np.eye(s), alpha=alpha)
        assert got == pytest.approx(want, abs=1e-12)
    # relu: orthogonal tokens get zero weight, the last token reads only itself
    assert geometry.cosine_mixing_entropy(np.eye(s), mode="relu") == pytest.approx(0.0, abs=0)
    # two opposite tokens (shift): the other gets weight 0 -> entropy 0
    assert geometry.cosine_mixing_entropy(np.array([[1.0, 0.0], [-2.0, 0.0]])) == 0.0
    # agg="mean" averages the rows; one token gives 0 (as the authors')
    assert geometry.cosine_mixing_entropy(np.ones((1, 4))) == 0.0
    x = np.random.default_rng(0).normal(size=(4, 3))
    rows = [geometry.cosine_mixing_entropy(np.roll(x, -i - 1, axis=0)) for i in range(4)]
    assert geometry.cosine_mixing_entropy(x, agg="mean") == pytest.approx(np.mean(rows), abs=1e-12)
    for kw, match in (
        ({"agg": "all"}, "agg"),
        ({"mode": "exp"}, "mode"),
        ({"alpha": 0.0}, "alpha"),
    ):
        with pytest.raises(ValueError, match=match):
            geometry.cosine_mixing_entropy(x, **kw)
    with pytest.raises(ValueError, match="non-finite"):
        geometry.cosine_mixing_entropy(np.full((3, 3), np.inf))
