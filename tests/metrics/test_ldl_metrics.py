"""LDL metrics: parity with pyldl.metrics (fixture), closed forms, zeros and bad rows."""

import pathlib

import numpy as np
import pytest

from fidia_jax import metrics

FIXTURE = pathlib.Path(__file__).resolve().parents[1] / "data" / "ldl" / "pyldl_parity.npz"
NAMES = ("chebyshev", "clark", "canberra", "kl_divergence", "cosine", "intersection")


@pytest.fixture(scope="module")
def ref():
    return dict(np.load(FIXTURE))


@pytest.mark.parametrize("case", ["SJAFFE", "Music", "M2B"])
def test_matches_pyldl_with_zeros(ref, case):
    """The fixture's rows 0-5 hold exact zeros (0/0 terms in Clark/Canberra, zero predictions
    under a positive target in KL)."""
    d, p = ref[f"{case}/d"], ref[f"{case}/p_metric"]
    got = metrics.ldl_metrics(d, p, ref[f"{case}/pos"], ref[f"{case}/neg"])
    for name in (*NAMES, "divisiveness_error"):
        np.testing.assert_allclose(
            got[name], ref[f"{case}/metric/{name}"], rtol=1e-6, atol=1e-6, err_msg=name
        )
    assert tuple(metrics.LDL_METRICS) == NAMES


def test_closed_forms():
    u = np.array([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]])
    v = np.array([[0.25, 0.5, 0.25], [0.2, 0.3, 0.5]])
    row0 = {
        "chebyshev": 0.25,
        "clark": np.sqrt((0.25 / 0.75) ** 2 + 0.0 + 1.0),
        "canberra": 0.25 / 0.75 + 0.0 + 1.0,
        "kl_divergence": 0.5 * np.log(2.0),
        "cosine": (0.125 + 0.25) / (np.sqrt(0.5) * np.sqrt(0.375)),
        "intersection": 0.75,
    }
    same = {
        "chebyshev": 0.0,
        "clark": 0.0,
        "canberra": 0.0,
        "kl_divergence": 0.0,
        "cosine": 1.0,
        "intersection": 1.0,
    }
    fns = {
        "chebyshev": metrics.chebyshev,
        "clark": metrics.clark,
        "canberra": metrics.canberra,
        "kl_divergence": metrics.ldl_kl_divergence,
        "cosine": metrics.cosine,
        "intersection": metrics.intersection,
    }
    for name, fn in fns.items():
        vals = np.asarray(fn(u, v, per_sample=True))
        np.testing.assert_allclose(
            vals, [row0[name], same[name]], rtol=1e-5, atol=1e-6, err_msg=name
        )
    # divisiveness: psi(u) = min(0.5, 0.5) = 0.5, psi(v) = min(0.75, 0.75)... by hand:
    pos, neg = np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.0, 1.0])
    # psi(u0) = min(0.5, 0) = 0; psi(v0) = min(0.25, 0.25) = 0.25; row 1 identical -> 0
    np.testing.assert_allclose(
        metrics.divisiveness_error(u, v, pos, neg, per_sample=True), [0.25, 0.0], atol=1e-7
    )


def test_exact_zero_conventions():
    u = np.array([[0.0, 1.0]])
    v = np.array([[0.0, 1.0]])
    assert float(metrics.clark(u, v, eps=0.0)) == 0.0  # 0/0 term counts 0
    assert float(metrics.canberra(u, v, eps=0.0)) == 0.0
    assert float(metrics.ldl_kl_divergence(u, v, eps=0.0)) == 0.0  # 0 log 0 = 0
    w = np.array([[0.5, 0.5]])
    assert np.isinf(float(metrics.ldl_kl_divergence(w, u, eps=0.0)))  # mass on a zero label
    # PyLDL's clipped convention: finite, 0.5 log(0.5 / eps64)
    np.testing.assert_allclose(
        metrics.ldl_kl_divergence(w, u),
        0.5 * np.log(0.5 / np.finfo(np.float64).eps) + 0.5 * np.log(0.5),
        rtol=1e-5,
    )


def test_bad_rows_raise():
    u = np.array([[0.5, 0.5], [0.0, 0.0]])
    v = np.array([[0.5, 0.5], [0.5, 0.5]])
    for fn in (
        metrics.chebyshev,
        metrics.clark,
        metrics.canberra,
        metrics.ldl_kl_divergence,
        metrics.cosine,
        metrics.intersection,
    ):
        with pytest.raises(ValueError, match="row 1 is all zero"):
            fn(u, v)
        with pytest.raises(ValueError, match="row 1 is all zero"):
            fn(v, u)
    with pytest.raises(ValueError, match="NaN"):
        metrics.clark(np.array([[np.nan, 1.0]]), np.array([[0.5, 0.5]]))
    with pytest.raises(ValueError, match="negative"):
        metrics.cosine(np.array([[-0.5, 1.5]]), np.array([[0.5, 0.5]]))
    with pytest.raises(ValueError, match="shape"):
        metrics.chebyshev(np.ones((2, 3)) / 3, np.ones((2, 4)) / 4)
    with pytest.raises(ValueError, match="pos must have shape"):
        metrics.divisiveness_error(v, v, np.ones(3), np.ones(2))
    with pytest.raises(ValueError, match="both pos and neg"):
        metrics.ldl_metrics(v, v, pos=np.ones(2))
