"""Issue 41: a feature constant in task 1 no longer blows up; NCM on raw features by default."""

import numpy as np
import pytest

from fidia_jax.errors import ConfigError
from fidia_jax.projects import hypcl
from fidia_jax.projects.hypcl import _continual, train


def _stream():
    # 4 classes, tasks (0, 1), (2, 3); feature 0 separates classes, feature 1 is constant (0)
    # in task 1 and large, class-independent noise in task 2.
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(4), 20)
    x = np.stack([3.0 * y + rng.normal(0, 0.3, y.size), np.zeros(y.size)], axis=1)
    late = y >= 2
    x[late, 1] = rng.normal(0, 1.0, late.sum())
    tr, te = _continual.stratified_split(y, 0.25, 0)
    return _continual.ContinualData(x[tr], y[tr], x[te], y[te], [(0, 1), (2, 3)])


def test_constant_in_first_task_feature_is_floored_not_blown_up():
    data = _stream()
    std = _continual.standardize_like_first_task(data)
    first = np.isin(data.y_tr, (0, 1))
    sd0 = data.x_tr[first].std(0)  # [sd of feature 0, 0.0]
    # the constant feature is divided by STD_FLOOR_FRACTION * mean std, not by ~0
    floor = _continual.STD_FLOOR_FRACTION * sd0.mean()
    np.testing.assert_allclose(std.x_tr[:, 1], data.x_tr[:, 1] / floor, rtol=1e-5)
    blow_up = np.abs(std.x_tr[~first, 1]).max() / np.abs(std.x_tr[~first, 0]).max()
    assert blow_up < 10.0  # with the old 1e-3 floor this ratio was > 100
    assert std.raw is data


def test_ncm_ignores_the_late_noise_feature():
    data = _continual.standardize_like_first_task(_stream())
    acc = _continual._ncm(data, "raw")
    assert acc[1, 0] == 1.0 and acc[1, 1] == 1.0  # class means 3 apart, noise sd 0.3
    # any standardisation gives the late noise feature the weight of the separating one and
    # loses accuracy here (why raw is the default)
    for other in ("first_task", "running"):
        assert _continual._ncm(data, other)[1, 1] < acc[1, 1]


def test_one_order_prints_one_run_not_a_zero_spread():
    row = {"orders": [{}], "average_accuracy": 0.5, "average_accuracy_std": 0.0}
    assert train._fmt(row, "average_accuracy") == "0.500 (one run)"
    row["orders"] = [{}, {}, {}]
    row["average_accuracy_std"] = 0.01
    assert train._fmt(row, "average_accuracy") == "0.500 ± 0.010"
    with pytest.raises(ConfigError, match="ncm_features"):
        hypcl.get_config("tiny", ncm_features="scaled")
