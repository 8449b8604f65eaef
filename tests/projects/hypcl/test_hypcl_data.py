"""Hierarchical Gaussian mixture and class-incremental splits."""

import numpy as np
import pytest

from fidia_jax.errors import DataError
from fidia_jax.projects.hypcl import data


def test_hierarchical_mixture_tree_structure():
    x, y, anc = data.hierarchical_gaussian_mixture(
        3, 3, branching=2, dim=32, n_per_class=5, decay=0.5, noise=0.0
    )
    assert x.shape == (40, 32) and x.dtype == np.float32 and y.shape == (40,)
    np.testing.assert_array_equal(np.bincount(y), [5] * 8)
    # noise = 0: every sample is its leaf's mean; leaves 2j, 2j+1 share a parent.
    means = np.stack([x[y == k][0] for k in range(8)])
    np.testing.assert_allclose(x, means[y])
    np.testing.assert_array_equal(anc[:, 0], [0, 0, 0, 0, 1, 1, 1, 1])
    np.testing.assert_array_equal(anc[:, 1], [0, 0, 1, 1, 2, 2, 3, 3])
    np.testing.assert_array_equal(anc[:, 2], np.arange(8))
    d = np.linalg.norm(means[:, None] - means[None], axis=-1)
    sib = np.mean([d[2 * j, 2 * j + 1] for j in range(4)])
    cousins = np.mean([d[i, j] for i in range(4) for j in range(4, 8)])
    # level-2 offsets have scale 0.25 (x sqrt(2 D) apart), level-0 ones scale 1.
    assert sib < 0.5 * cousins
    np.testing.assert_allclose(sib, 0.25 * np.sqrt(2 * 32), rtol=0.3)


def test_split_and_errors():
    assert data.class_incremental_split([3, 1, 0, 2], 2) == [(3, 1), (0, 2)]
    with pytest.raises(DataError, match="repeats"):
        data.class_incremental_split([1, 1], 1)
    with pytest.raises(DataError, match="cannot be cut"):
        data.class_incremental_split([0, 1, 2], 2)
    with pytest.raises(DataError, match="depth >= 1"):
        data.hierarchical_gaussian_mixture(0, 0)
