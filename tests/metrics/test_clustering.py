"""k-means (k-means++), spectral clustering and ridge probes against scikit-learn / exact cases."""

import jax
import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs, make_moons
from sklearn.linear_model import Ridge
from sklearn.metrics import adjusted_rand_score

from fidia_jax import metrics


def _same_partition(a, b):
    return adjusted_rand_score(np.asarray(a), np.asarray(b)) == 1.0


def _blobs():
    return make_blobs(
        n_samples=300, centers=5, cluster_std=0.6, center_box=(-20, 20), random_state=0
    )


def test_kmeans_matches_sklearn_on_separated_blobs():
    x, y = _blobs()
    res = metrics.kmeans(x, 5, key=jax.random.key(0), n_init=3)
    ref = KMeans(5, n_init=3, random_state=0).fit(x)
    assert _same_partition(res.labels, ref.labels_) and _same_partition(res.labels, y)
    assert float(res.inertia) <= ref.inertia_ * 1.01
    # inertia is the sum of squared distances to the returned centres (recomputed in float64)
    c = np.asarray(res.centers, np.float64)
    d = ((x[:, None] - c[None]) ** 2).sum(-1)
    np.testing.assert_allclose(float(res.inertia), d.min(1).sum(), rtol=1e-4)
    assert np.array_equal(np.asarray(res.labels), d.argmin(1))


def test_kmeans_plus_plus_seeds_are_points_in_distinct_blobs():
    x, y = _blobs()
    c = np.asarray(metrics.kmeans_plus_plus(x, 5, key=jax.random.key(1)), np.float64)
    idx = [int(np.argmin(((x - ci) ** 2).sum(1))) for ci in c]
    np.testing.assert_allclose(c, x[idx], atol=1e-5)  # seeds are data points
    assert sorted(y[idx].tolist()) == [0, 1, 2, 3, 4]  # one per far-apart blob (D² sampling)


def test_kmeans_errors():
    with pytest.raises(ValueError, match="k must be an int"):
        metrics.kmeans(np.zeros((3, 2)), 4, key=jax.random.key(0))
    with pytest.raises(ValueError, match="2-D"):
        metrics.kmeans(np.zeros(3), 1, key=jax.random.key(0))


def test_spectral_clustering_two_moons_and_blocks():
    x, y = make_moons(n_samples=200, noise=0.05, random_state=0)
    a = metrics.knn_affinity(x, 10)
    assert np.array_equal(a, a.T) and set(np.unique(a)) <= {0.0, 0.5, 1.0}
    labels = metrics.spectral_clustering(a, 2, key=jax.random.key(0), n_init=3)
    assert _same_partition(labels, y)
    # block-diagonal affinity (3 blocks of sizes 5, 7, 4, noisy weights, shuffled order)
    rng = np.random.default_rng(0)
    truth = np.repeat([0, 1, 2], [5, 7, 4])
    w = rng.uniform(0.5, 1.0, (16, 16)) * (truth[:, None] == truth[None])
    perm = rng.permutation(16)
    got = metrics.spectral_clustering(w[perm][:, perm], 3, key=jax.random.key(1), n_init=3)
    assert _same_partition(got, truth[perm])
    with pytest.raises(ValueError, match="non-negative"):
        metrics.spectral_clustering(-w, 3, key=jax.random.key(0))


def test_ridge_matches_sklearn_float64():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 8)).astype(np.float32)
    y = x @ rng.normal(size=8) + 3.0 + 0.1 * rng.normal(size=40)
    for alpha, fi in [(0.5, True), (10.0, False)]:
        fit = metrics.ridge_fit(x, y, alpha=alpha, fit_intercept=fi)
        ref = Ridge(alpha=alpha, fit_intercept=fi, solver="svd").fit(x.astype(np.float64), y)
        assert fit.coef.dtype == np.float64
        np.testing.assert_allclose(fit.coef, ref.coef_, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(fit.intercept, ref.intercept_, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(
            metrics.ridge_predict(fit, x), ref.predict(x.astype(np.float64)), rtol=1e-10
        )
    # more features than examples, two targets
    xw, yw = rng.normal(size=(6, 20)), rng.normal(size=(6, 2))
    fit = metrics.ridge_fit(xw, yw, alpha=1.0)
    ref = Ridge(alpha=1.0).fit(xw, yw)
    np.testing.assert_allclose(fit.coef, ref.coef_.T, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(fit.intercept, ref.intercept_, rtol=1e-9, atol=1e-12)


def test_ridge_errors():
    with pytest.raises(ValueError, match="at least 2 examples, got 1"):
        metrics.ridge_fit(np.ones((1, 3)), np.ones(1))
    with pytest.raises(ValueError, match="y must be"):
        metrics.ridge_fit(np.ones((4, 3)), np.ones(5))
    with pytest.raises(ValueError, match="alpha"):
        metrics.ridge_fit(np.ones((4, 3)), np.ones(4), alpha=-1.0)
    fit = metrics.ridge_fit(np.eye(3), np.arange(3.0))
    with pytest.raises(ValueError, match="fitted on 3"):
        metrics.ridge_predict(fit, np.ones((2, 4)))


# cluster agreement and transitions (closed forms)
def test_purity_closed_form():
    true = np.array([0, 0, 0, 1, 1, 2, 2, 2])
    pred = np.array([5, 5, 7, 7, 7, 9, 9, 9])
    # cluster 5: {0,0} -> 2; cluster 7: {0,1,1} -> 2; cluster 9: {2,2,2} -> 3.
    assert metrics.cluster_purity(true, pred) == pytest.approx(7 / 8)
    assert metrics.cluster_purity(true, np.arange(8)) == 1.0  # singletons refine anything
    assert metrics.cluster_purity(true, np.zeros(8, int)) == pytest.approx(3 / 8)
    agree = metrics.cluster_agreement(true, pred)
    assert agree["purity"] == pytest.approx(7 / 8)
    perfect = metrics.cluster_agreement(true, 10 - true)  # relabelled, same partition
    assert perfect == pytest.approx({"purity": 1.0, "nmi": 1.0, "ari": 1.0})


def test_purity_errors():
    with pytest.raises(ValueError, match="lengths differ"):
        metrics.cluster_purity([0, 1], [0, 1, 2])
    with pytest.raises(ValueError, match="integer"):
        metrics.cluster_purity([0.5, 1.0], [0, 1])


def test_transition_matrix_closed_form():
    labels = np.array([0, 1, 1, 2, 0, 2, 2])
    seq = np.array([0, 0, 0, 0, 1, 1, 1])  # the 2 -> 0 between sequences is not a transition
    counts = metrics.cluster_transition_matrix(labels, seq, 3, normalize=False)
    expect = np.zeros((3, 3))
    for a, b in [(0, 1), (1, 1), (1, 2), (0, 2), (2, 2)]:
        expect[a, b] += 1
    np.testing.assert_array_equal(counts, expect)
    probs = metrics.cluster_transition_matrix(labels, seq, 3)
    np.testing.assert_allclose(probs[0], [0, 0.5, 0.5])
    np.testing.assert_allclose(probs[1], [0, 0.5, 0.5])
    np.testing.assert_allclose(probs[2], [0, 0, 1])
    with pytest.raises(ValueError, match=r"\[0, 2\)"):
        metrics.cluster_transition_matrix(labels, seq, 2)
