"""LDL-DVS losses: parity with the authors' code (PyLDL fixture), brute force, limits, errors."""

import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax.projects.ldl import losses

FIXTURE = pathlib.Path(__file__).resolve().parents[2] / "data" / "ldl" / "pyldl_parity.npz"
CASES = ("SJAFFE", "Music", "M2B")
EPS32 = float(np.finfo(np.float32).eps)


@pytest.fixture(scope="module")
def ref():
    return dict(np.load(FIXTURE))


def _brute_psi(d, p, n, k):
    a, b = d @ p, d @ n
    ea, eb = np.exp(-k * a), np.exp(-k * b)
    return (a * ea + b * eb) / (ea + eb)


def _brute_ovo(d, q, pos, neg, k, symmetric):
    c = d.shape[1]
    total = 0.0
    for i in range(c):
        for j in range(c):
            if i == j:
                continue
            pi, nj = np.eye(c)[i] * pos, np.eye(c)[j] * neg
            t = _brute_psi(d, pi, nj, k) if symmetric else _brute_psi(d, pos, neg, k)
            total += np.mean(np.sqrt((t - _brute_psi(q, pi, nj, k)) ** 2 + EPS32**2))
    return total / (c * (c - 1))


@pytest.mark.parametrize("name", CASES)
def test_matches_pyldl(ref, name):
    d, p = ref[f"{name}/d"], ref[f"{name}/p"]
    pos, neg = ref[f"{name}/pos"], ref[f"{name}/neg"]
    for k in (10.0, 3.0):
        key = f"{name}/k{k:g}"
        np.testing.assert_allclose(
            losses.soft_divisiveness(d, pos, neg, k), ref[f"{key}/psi_d"], rtol=1e-6, atol=1e-6
        )
        for mode in losses.DIVISIVENESS_MODES:
            got = losses.divisiveness_loss(d, p, pos, neg, k=k, mode=mode)
            np.testing.assert_allclose(
                got, ref[f"{key}/{mode}"], rtol=1e-6, atol=1e-6, err_msg=f"{name} k={k} {mode}"
            )
    np.testing.assert_allclose(
        losses.ldl_kl_loss(d, p), ref[f"{name}/kl_loss"], rtol=1e-6, atol=1e-6
    )

    def total(z):
        return losses.ldl_dvs_loss(d, jax.nn.softmax(z, axis=1), pos, neg, alpha=0.1)

    z = jnp.asarray(ref[f"{name}/logits"])
    value, grad = jax.jit(jax.value_and_grad(total))(z)
    np.testing.assert_allclose(value, ref[f"{name}/total_loss"], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(grad, ref[f"{name}/total_grad_logits"], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("symmetric", [False, True])
def test_ovo_matches_brute_force_loops(ref, symmetric):
    d, p = ref["Music/d"].astype(np.float64), ref["Music/p"].astype(np.float64)
    pos, neg = ref["Music/pos"], ref["Music/neg"]
    want = _brute_ovo(d, p, pos, neg, 5.0, symmetric)
    mode = "ovo_symmetric" if symmetric else "ovo"
    np.testing.assert_allclose(
        losses.divisiveness_loss(d, p, pos, neg, k=5.0, mode=mode), want, rtol=1e-5
    )


def test_soft_divisiveness_tends_to_min_and_bounds_it():
    rng = np.random.default_rng(0)
    d = rng.dirichlet(np.ones(6), size=50)
    pos = np.array([1, 0, 1, 0, 0, 0.0])
    neg = 1 - pos
    hard = np.minimum(d @ pos, d @ neg)
    np.testing.assert_allclose(losses.divisiveness(d, pos, neg), hard, rtol=1e-6)
    np.testing.assert_allclose(losses.soft_divisiveness(d, pos, neg, k=1e5), hard, atol=1e-5)
    soft = np.asarray(losses.soft_divisiveness(d, pos, neg, k=10.0))
    gap = np.abs(d @ pos - d @ neg)
    assert np.all(soft >= hard - 1e-7)
    assert np.all(soft - hard <= gap / (1 + np.exp(10.0 * gap)) + 1e-6)
    # no overflow at huge k (the raw exponential form would give 0/0 for a, b > 0)
    assert np.all(np.isfinite(losses.soft_divisiveness(d, pos, neg, k=1e9)))


def test_code_variant_is_not_minimised_at_the_target_but_symmetric_is(ref):
    """The authors' "ovo" compares a full-mask target with per-pair predictions, so a perfect
    prediction still pays; the symmetric variant is exactly the Charbonnier floor there."""
    d, pos, neg = ref["SJAFFE/d"], ref["SJAFFE/pos"], ref["SJAFFE/neg"]  # shapes compiled above
    sym = losses.divisiveness_loss(d, d, pos, neg, mode="ovo_symmetric")
    full = losses.divisiveness_loss(d, d, pos, neg, mode="full")
    ovo = losses.divisiveness_loss(d, d, pos, neg, mode="ovo")
    np.testing.assert_allclose(sym, EPS32, rtol=1e-3)
    np.testing.assert_allclose(full, EPS32, rtol=1e-3)
    assert float(ovo) > 0.05
    assert np.isclose(float(losses.ldl_dvs_loss(d, d, pos, neg, alpha=0.0)), 0.0, atol=1e-6)


def test_zeros_keep_losses_finite():
    d = np.array([[0.0, 0.5, 0.5, 0.0], [1.0, 0.0, 0.0, 0.0]])
    p = np.array([[0.0, 1.0, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25]])
    pos, neg = np.array([1, 1, 0, 0.0]), np.array([0, 0, 1, 1.0])
    kl = losses.ldl_kl_loss(d, p)
    # row 0: 0.5 log(0.5/1) + 0.5 log(0.5/1e-7), zeros of d contribute ~1e-7 log(...) only
    want0 = 0.5 * np.log(0.5) + 0.5 * np.log(0.5 / 1e-7)
    want1 = np.log(4.0)
    np.testing.assert_allclose(kl, (want0 + want1) / 2, rtol=1e-4)
    g = jax.jit(jax.grad(lambda q: losses.ldl_dvs_loss(d, q, pos, neg, alpha=1.0)))(p)
    assert np.all(np.isfinite(g))


def test_bad_inputs_raise():
    d = np.full((3, 4), 0.25)
    pos, neg = np.array([1, 1, 0, 0.0]), np.array([0, 0, 1, 1.0])
    with pytest.raises(ValueError, match="shape"):
        losses.divisiveness_loss(d, d[:2], pos, neg)
    with pytest.raises(ValueError, match="pos must have shape"):
        losses.divisiveness_loss(d, d, pos[:3], neg)
    with pytest.raises(ValueError, match="mode"):
        losses.divisiveness_loss(d, d, pos, neg, mode="ova")
    with pytest.raises(ValueError, match="rank 2"):
        losses.soft_divisiveness(d[0], pos, neg)
    with pytest.raises(ValueError, match="at least 2 labels"):
        losses.divisiveness_loss(d[:, :1], d[:, :1], pos[:1], neg[:1])


def test_sample_weight_mask_equals_subset(ref):
    d, p = ref["SJAFFE/d"], ref["SJAFFE/p"]
    pos, neg = ref["SJAFFE/pos"], ref["SJAFFE/neg"]
    w = np.zeros(len(d), np.float32)
    w[::3] = 1.0
    for mode in ("full", "ovo_symmetric"):  # both row-mean branches
        np.testing.assert_allclose(
            losses.ldl_dvs_loss(d, p, pos, neg, alpha=0.5, mode=mode, sample_weight=w),
            losses.ldl_dvs_loss(d[::3], p[::3], pos, neg, alpha=0.5, mode=mode),
            rtol=1e-6,
        )
    with pytest.raises(ValueError, match="sample_weight must have shape"):
        losses.ldl_kl_loss(d, p, sample_weight=w[:5])
