"""continual_metrics against hand-computed values."""

import numpy as np
import pytest

from fidia_jax import metrics


def test_continual_metrics_by_hand():
    acc = np.array([[0.9, np.nan, np.nan], [0.6, 0.8, np.nan], [0.5, 0.7, 1.0]])
    r = metrics.continual_metrics(acc)
    # A_0 = 0.9, A_1 = 0.7, A_2 = (0.5 + 0.7 + 1.0) / 3
    np.testing.assert_allclose(r["step_accuracy"], [0.9, 0.7, 2.2 / 3])
    np.testing.assert_allclose(r["average_accuracy"], (0.9 + 0.7 + 2.2 / 3) / 3)
    np.testing.assert_allclose(r["last_accuracy"], 2.2 / 3)
    # forgetting: task 0: max(0.9, 0.6) - 0.5 = 0.4; task 1: 0.8 - 0.7 = 0.1
    np.testing.assert_allclose(r["average_forgetting"], 0.25)
    # Weighted by test-set sizes: A_1 = (0.6 * 1 + 0.8 * 3) / 4.
    w = metrics.continual_metrics(acc, [1, 3, 2])
    np.testing.assert_allclose(w["step_accuracy"][1], 3.0 / 4)
    assert metrics.continual_metrics([[0.5]])["average_forgetting"] == 0.0


def test_continual_metrics_bad_input():
    with pytest.raises(ValueError, match="square"):
        metrics.continual_metrics(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="task_sizes"):
        metrics.continual_metrics(np.zeros((2, 2)), [1, 0])


def test_continual_metrics_refuses_nan_or_out_of_range_where_it_reads():
    import numpy as np
    import pytest

    from fidia_jax import metrics

    acc = np.array([[0.9, np.nan], [0.8, 0.7]])  # the upper triangle is never read
    assert metrics.continual_metrics(acc)["last_accuracy"] == pytest.approx(0.75)
    for bad in (np.array([[0.9, 0.0], [np.nan, 0.7]]), np.array([[1.5, 0.0], [0.8, 0.7]])):
        with pytest.raises(ValueError, match=r"finite accuracies in \[0, 1\]"):
            metrics.continual_metrics(bad)
