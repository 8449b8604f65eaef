"""Residual geometry against the authors' code (issue 38) and its scale invariance (issue 42).

The fixture ``tests/data/residual_geometry/authors_fixture.npz`` holds the outputs of the
authors' ``utils/interp_utils.py`` (Lrbomchz/vlms_lost_in_attn @ 2ca01fdd, run in torch 2.13.0
by ``tools/residual_geometry_make_fixture.py``) on seeded layers ``(X_in, X_attn, X_ffn)`` of
six shapes (three rank-deficient), in float32 and float64. Ours computes in float64 from the same
values; the tolerances below follow from the dtype's rounding and from the authors' additive
``1e-12`` guards (which ours leaves out by default), not from one measurement.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from fidia_jax.projects.residual_geometry import geometry as g

DATA = pathlib.Path(__file__).resolve().parents[2] / "data" / "residual_geometry"
FIX = np.load(DATA / "authors_fixture.npz")
META = json.loads((DATA / "authors_fixture.json").read_text())
CASES = [(c["name"], c["rank"], dt) for c in META["cases"] for dt in META["dtypes"]]
GUARD = 1e-12  # the authors' additive guard (eps=1e-12 throughout interp_utils.py)


def _eps(dtype) -> float:
    return float(np.finfo(dtype).eps)


def erank_rtol(dtype, shape) -> float:
    """Relative tolerance of eRank: ``exp(H)`` with ``H`` over ``k = min(S, H)`` shares ``p_i``.

    A singular value moves by at most ``δ = max(S, H) · eps · σ_1`` (SVD backward error), so
    each ``p_i log p_i`` by at most ``δ (1 + |log δ|)``; the authors' ``log(p + 1e-12)`` lowers
    ``H`` by at most ``k · 1e-12``. ``erank`` is ``exp(H)``: its relative error is ``|ΔH|``.
    """
    k, n = min(shape), max(shape)
    delta = n * _eps(dtype)
    return k * delta * (1.0 + abs(np.log(delta))) + k * GUARD


def share_tol(dtype, shape) -> float:
    """Absolute tolerance of one squared residual share ``‖(I − P) X'‖² / ‖X'‖²``.

    The authors form it as ``‖X'‖² − ‖P X'‖²`` in the input's dtype: sums of ``S · H`` squares
    (relative error ``~ max(S, H) · eps``) that cancel, so ``4 · max(S, H) · eps``.
    """
    return 4.0 * max(shape) * _eps(dtype)


def tme_tol(dtype, shape, alpha=8.0, normalize=True) -> float:
    """Absolute tolerance of TME: cosines are off by ``≤ H · eps``, the weights ``w^alpha`` by a
    relative ``≤ 2 alpha · max(S, H) · eps`` and the entropy by about as much (``8 alpha ·
    max(S, H) · eps`` with room); the authors' guards move each ``p_j`` by ``≤ 1e-12`` (the
    last token's own weight is 1), the entropy by ``≤ S · 1e-12 (|log 1e-12| + 2)``; divided by
    ``log S`` when normalised."""
    s, n = shape
    guard = s * GUARD * (abs(np.log(GUARD)) + 2.0)
    tol = 8.0 * alpha * max(s, n) * _eps(dtype) + guard / (np.log(s) if normalize else 1.0)
    return tol * (1.0 if normalize else np.log(s))


def _layer(name, dtype):
    return [FIX[f"{name}/{p}"].astype(dtype) for p in ("x_in", "x_attn", "x_ffn")]


def _dx(x_new, x):
    """``X' − X`` in float64 (exact for float32 values; ``x + dx`` gives ``X'`` back)."""
    return np.asarray(x_new, np.float64) - np.asarray(x, np.float64)


@pytest.mark.parametrize("name, rank, dtype", CASES)
def test_rank_cutoff_and_erank_match_the_authors(name, rank, dtype):
    x_in, x_attn, x_ffn = _layer(name, dtype)
    want_rank = FIX[f"{name}/{dtype}/matrix_rank_x_in"]
    # the authors' tol=None cutoff (torch.linalg.matrix_rank's rule), in the input's dtype
    np.testing.assert_array_equal(g.numerical_rank(x_in), want_rank)
    assert want_rank == (rank or min(x_in.shape))
    ours = np.array([g.erank(a) for a in (x_in, x_attn, x_ffn)])
    np.testing.assert_allclose(
        ours, FIX[f"{name}/{dtype}/erank"], rtol=erank_rtol(dtype, x_in.shape), atol=0
    )


@pytest.mark.parametrize("name, rank, dtype", CASES)
def test_delta_d_matches_the_authors_novelty(name, rank, dtype):
    x_in, x_attn, x_ffn = _layer(name, dtype)
    tau = share_tol(dtype, x_in.shape)
    fro2 = [float(np.sum(np.asarray(a, np.float64) ** 2)) for a in (x_attn, x_ffn)]
    # the authors' layer call: attention and FFN outputs both against X_in's subspaces
    pairs = [(x_in, _dx(x_attn, x_in)), (x_in, _dx(x_ffn, x_in))]
    l2 = FIX[f"{name}/{dtype}/novelty_l2"]
    for i, (x, dx) in enumerate(pairs):
        # default (eps=0): the authors' guards add ≤ 1e-12 / ‖X'‖² to each share, 1e-12 in the end
        guard = 2.0 * GUARD / fro2[i] + GUARD
        ours = g.subspace_innovation(x, dx)
        np.testing.assert_allclose(
            ours**2, l2[i] ** 2, rtol=0, atol=2 * tau + guard, err_msg=f"{i}"
        )
        with_guard = g.subspace_innovation(x, dx, eps=GUARD)  # the authors' guards restored
        np.testing.assert_allclose(with_guard**2, l2[i] ** 2, rtol=0, atol=2 * tau, err_msg=f"{i}")
        # combine="sum": |a - b| <= sqrt(|a² - b²|) per term
        s_ours = g.subspace_innovation(x, dx, combine="sum")
        s_want = FIX[f"{name}/{dtype}/novelty_sum"][i]
        np.testing.assert_allclose(
            s_ours, s_want, rtol=0, atol=2 * np.sqrt(tau + guard), err_msg=f"{i}"
        )
        # RID's ΔD is the same number; the note's ΔD is half the authors' "sum"
        assert g.residual_information_dynamics(x, dx)["delta_d"] == pytest.approx(ours, abs=1e-15)
        note = g.note_residual_information_dynamics(x, dx)["delta_d"]
        np.testing.assert_allclose(2 * note, s_want, rtol=0, atol=2 * np.sqrt(tau + guard))
    assert 0.0 <= min(l2) and max(l2) <= np.sqrt(2.0)


def test_delta_d_of_a_rescaled_residual_is_cancellation_noise_for_the_authors():
    # X_attn = 1.5 X_in lies in both subspaces: ours gives 0 to rounding; the authors' float32
    # value is the square root of their cancellation noise (recorded, not a property of ΔD)
    x_in, x_attn, _ = _layer("rescale", "float32")
    ours = g.subspace_innovation(x_in, _dx(x_attn, x_in))
    assert ours <= 1e-6
    assert FIX["rescale/float32/novelty_l2"][0] <= np.sqrt(2 * share_tol(np.float32, x_in.shape))


@pytest.mark.parametrize("name, rank, dtype", CASES)
def test_tme_matches_the_authors(name, rank, dtype):
    x_in, x_attn, x_ffn = _layer(name, dtype)
    shape = x_in.shape
    tol = tme_tol(dtype, shape)
    # tme_delta_2xnlayer: the updates, differenced in the input's dtype as the authors do
    d_attn, d_ffn = x_attn - x_in, x_ffn - x_attn
    ours = [g.cosine_mixing_entropy(d) for d in (d_attn, d_ffn)]
    np.testing.assert_allclose(ours, FIX[f"{name}/{dtype}/tme_delta"], rtol=0, atol=tol)
    ours = [g.cosine_mixing_entropy(a) for a in (x_in, x_attn, x_ffn)]
    np.testing.assert_allclose(ours, FIX[f"{name}/{dtype}/tme_state"], rtol=0, atol=tol)
    variants = {
        "mean": ({"agg": "mean"}, tol),
        "relu": ({"mode": "relu"}, tol),
        "alpha1": ({"alpha": 1.0}, tme_tol(dtype, shape, alpha=1.0)),
        "mean_alpha1_raw": (
            {"agg": "mean", "alpha": 1.0, "normalize": False},
            tme_tol(dtype, shape, alpha=1.0, normalize=False),
        ),
    }
    for label, (kw, t) in variants.items():
        want = FIX[f"{name}/{dtype}/tme_attn_{label}"]
        np.testing.assert_allclose(
            g.cosine_mixing_entropy(d_attn, **kw), want, rtol=0, atol=t, err_msg=label
        )
    # the third-party note's TME is the authors' with agg="mean", alpha=1, unnormalised
    note = g.similarity_mixing_entropy(d_attn)
    np.testing.assert_allclose(
        note,
        FIX[f"{name}/{dtype}/tme_attn_mean_alpha1_raw"],
        rtol=0,
        atol=variants["mean_alpha1_raw"][1],
    )


def test_zero_residual_deviation_is_recorded():
    # the authors' rank-0 branch returns the unnormalised sqrt(2) ‖X'‖_F (a dimension-ful number
    # where every other case is a ratio); ours returns the normalised limit sqrt(2)
    x_in, x_attn, x_ffn = (FIX[f"zero_input/{p}"] for p in ("x_in", "x_attn", "x_ffn"))
    want = FIX["zero_input/float64/novelty_l2"]
    np.testing.assert_allclose(
        want, [np.sqrt(2.0) * np.linalg.norm(a) for a in (x_attn, x_ffn)], rtol=1e-12
    )
    assert g.subspace_innovation(x_in, x_attn - x_in) == pytest.approx(np.sqrt(2.0), abs=1e-15)
    assert g.subspace_innovation(x_in, x_attn, combine="sum") == pytest.approx(2.0, abs=1e-15)
    with pytest.raises(ValueError, match="zero matrix"):
        g.subspace_innovation(x_attn, -x_attn)


def test_rank_cutoff_follows_the_dtype():
    # a singular value at 1e-9 σ_1: above float64's cutoff (4 · 2.2e-16), below float32's
    rng = np.random.default_rng(0)
    u, _ = np.linalg.qr(rng.normal(size=(4, 3)))
    v, _ = np.linalg.qr(rng.normal(size=(5, 3)))
    x = (u * [1.0, 0.5, 1e-9]) @ v.T
    assert g.numerical_rank(x) == 3
    assert g.numerical_rank(x.astype(np.float32)) == 2
    assert g.numerical_rank(x.tolist()) == 3  # a list is read as float64
    assert g.rank_cutoff_eps(x.astype(np.float32)) == _eps(np.float32)


# --- issue 42: no result may change with the scale of the data ----------------------------------


SCALES = (1e-3, 1e4)


def _scaled(name, c):
    """The layer of ``name`` multiplied by ``c`` in float64, then stored as float32."""
    return [(c * FIX[f"{name}/{p}"]).astype(np.float32) for p in ("x_in", "x_attn", "x_ffn")]


@pytest.mark.parametrize("name", ["rank4", "wide_rank2", "tall_full"])
def test_rank_erank_and_delta_d_do_not_change_with_scale(name):
    base = _scaled(name, 1.0)
    shape = base[0].shape
    tau = share_tol(np.float32, shape)

    def measures(x_in, x_attn, x_ffn):
        dx = _dx(x_attn, x_in)
        out = {
            "rank": g.numerical_rank(x_in),
            "erank": np.array([g.erank(a) for a in (x_in, x_attn, x_ffn)]),
            "dd2": g.subspace_innovation(x_in, dx) ** 2,
            "dd2_ffn": g.subspace_innovation(x_in, _dx(x_ffn, x_in)) ** 2,
            "dd_page": g.subspace_innovation(x_in, dx, form="page"),
            "rid": g.residual_information_dynamics(x_in, dx),
            "note": g.note_residual_information_dynamics(x_in, dx),
        }
        return out

    ref = measures(*base)
    for c in SCALES:
        got = measures(*_scaled(name, c))
        assert got["rank"] == ref["rank"] == g.numerical_rank(FIX[f"{name}/x_in"])
        np.testing.assert_allclose(got["erank"], ref["erank"], rtol=erank_rtol(np.float32, shape))
        assert abs(got["dd2"] - ref["dd2"]) <= 2 * tau
        assert abs(got["dd2_ffn"] - ref["dd2_ffn"]) <= 2 * tau
        assert abs(got["dd_page"] - ref["dd_page"]) <= 2 * tau
        assert got["rid"]["rank"] == ref["rid"]["rank"]
        assert abs(got["rid"]["delta_s"] - ref["rid"]["delta_s"]) <= 2 * erank_rtol(
            np.float32, shape
        )
        assert abs(got["note"]["delta_d"] - ref["note"]["delta_d"]) <= 2 * np.sqrt(tau)


@pytest.mark.parametrize("name", ["rank4", "wide_rank2"])
def test_entropies_do_not_change_with_scale(name):
    base = _scaled(name, 1.0)
    d_ref = base[1] - base[0]
    tol = tme_tol(np.float32, d_ref.shape)
    raw = tme_tol(np.float32, d_ref.shape, alpha=1.0, normalize=False)
    for c in SCALES:
        x_in, x_attn, _ = _scaled(name, c)
        d = x_attn - x_in
        assert abs(g.cosine_mixing_entropy(d) - g.cosine_mixing_entropy(d_ref)) <= tol
        assert (
            abs(g.cosine_mixing_entropy(d, agg="mean") - g.cosine_mixing_entropy(d_ref, agg="mean"))
            <= tol
        )
        assert abs(g.similarity_mixing_entropy(d) - g.similarity_mixing_entropy(d_ref)) <= raw


def test_mixig_does_not_change_with_scale():
    rng = np.random.default_rng(7)
    b, t, c = 12, 6, 5
    x = rng.normal(size=(b, t, c))
    w = np.tril(rng.uniform(0.1, 1.0, (b, 1, t, t)))
    w /= w.sum(-1, keepdims=True)
    dx = np.einsum("bhts,bsc->btc", w, x) @ rng.normal(size=(c, c)) + 0.1 * rng.normal(size=x.shape)
    ref = g.mixing_information_gain(x.astype(np.float32), dx.astype(np.float32), w)
    for s in SCALES:
        got = g.mixing_information_gain((s * x).astype(np.float32), (s * dx).astype(np.float32), w)
        # float32 inputs: each entry rounded to eps32 / 2; the ridge fit is well conditioned
        # (unit-RMS features, penalty 1e-2 per token), so the gain moves by ~1e3 · eps32
        assert got["mixig"] == pytest.approx(ref["mixig"], abs=1e3 * _eps(np.float32))


def test_the_authors_absolute_guard_is_what_breaks_scale_invariance():
    # why eps=0 is our default: at activations ~1e-6 the authors' 1e-12 guard is no longer
    # negligible against ‖X'‖², and their ΔD moves; ours does not
    x_in, x_attn, _ = _scaled("rank4", 1.0)
    tiny_in, tiny_attn, _ = _scaled("rank4", 1e-6)
    ref = g.subspace_innovation(x_in, _dx(x_attn, x_in))
    ours = g.subspace_innovation(tiny_in, _dx(tiny_attn, tiny_in))
    assert abs(ours**2 - ref**2) <= 2 * share_tol(np.float32, x_in.shape)
    guarded = g.subspace_innovation(tiny_in, _dx(tiny_attn, tiny_in), eps=GUARD)
    assert abs(guarded - ref) > 1e-3
