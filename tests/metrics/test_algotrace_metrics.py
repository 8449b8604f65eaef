"""AlgoTrace metrics: purity, transition matrix and rates on constructed labels (closed forms)."""

import numpy as np
import pytest

from fidia_jax import metrics


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


def test_primitive_rates():
    lab = np.array([[-1, 0, 0, 1, 4], [2, 2, -1, -1, 7]])  # -1 and 7 are ignored
    np.testing.assert_allclose(metrics.primitive_rates(lab, 5), [2 / 6, 1 / 6, 2 / 6, 0, 1 / 6])
    np.testing.assert_array_equal(metrics.primitive_rates(np.full(3, -1), 5), np.zeros(5))
    with pytest.raises(ValueError, match="integers"):
        metrics.primitive_rates(np.zeros(3), 5)
