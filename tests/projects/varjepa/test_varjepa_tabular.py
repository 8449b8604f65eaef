"""Tabular loaders and the train-fitted encoding (unknown categories, NaN, standardisation)."""

import numpy as np
import pandas as pd
import pytest

from fidia_jax.errors import DataError
from fidia_jax.projects.varjepa import data


@pytest.fixture
def frames():
    train = pd.DataFrame(
        {"a": [1.0, 2.0, 3.0, 6.0], "b": [5.0, 5.0, 5.0, 5.0], "c": ["x", "y", "x", None]}
    )
    test = pd.DataFrame({"a": [0.0, 3.0], "b": [4.0, 5.0], "c": ["z", "y"]})
    return train, test


def test_encoder_is_fitted_on_train_only(frames):
    train, test = frames
    enc = data.fit_tabular_encoder(train, ["a", "b"], ["c"])
    assert enc.schema.categories == (("x", "y"),)
    assert enc.schema.cardinalities == (3,)  # x, y and the UNKNOWN id 0
    x_num, x_cat, n_unknown = enc.encode(test)
    mean, std = 3.0, np.std([1.0, 2.0, 3.0, 6.0])
    np.testing.assert_allclose(x_num[:, 0], (np.array([0.0, 3.0]) - mean) / std, rtol=1e-6)
    np.testing.assert_allclose(x_num[:, 1], [-1.0, 0.0])  # constant column: std 1
    assert x_num.dtype == np.float32 and x_cat.dtype == np.int32


def test_unseen_and_missing_categories_map_to_unknown(frames):
    train, test = frames
    enc = data.fit_tabular_encoder(train, ["a", "b"], ["c"])
    _, x_cat_train, n_train = enc.encode(train)
    np.testing.assert_array_equal(x_cat_train[:, 0], [1, 2, 1, data.UNKNOWN_CATEGORY])
    assert n_train == 1
    _, x_cat, n_unknown = enc.encode(test)  # "z" never seen in training
    np.testing.assert_array_equal(x_cat[:, 0], [data.UNKNOWN_CATEGORY, 2])
    assert n_unknown == 1


def test_bad_frames_raise(frames):
    train, test = frames
    bad = train.copy()
    bad.loc[2, "a"] = np.nan
    with pytest.raises(DataError, match=r"'a' has a NaN/inf value at row 2"):
        data.fit_tabular_encoder(bad, ["a", "b"], ["c"])
    enc = data.fit_tabular_encoder(train, ["a", "b"], ["c"])
    with pytest.raises(DataError, match=r"NaN/inf value at row 1"):
        enc.encode(test.assign(b=[1.0, np.inf]))
    with pytest.raises(DataError, match=r"missing"):
        enc.encode(test.drop(columns=["c"]))
    with pytest.raises(DataError, match="no rows"):
        data.fit_tabular_encoder(train.iloc[:0], ["a"], [])
    with pytest.raises(DataError, match="unknown dataset"):
        data.load_tabular("iris")


def test_sklearn_sets_are_split_and_standardised():
    s = data.load_tabular("breast_cancer", seed=0)
    assert s.train.x_num.shape == (426, 30) and s.test.x_num.shape == (143, 30)
    assert s.train.x_cat.shape == (426, 0) and s.n_classes == 2
    np.testing.assert_allclose(s.train.x_num.mean(axis=0), 0.0, atol=1e-5)
    np.testing.assert_allclose(s.train.x_num.std(axis=0), 1.0, atol=1e-4)
    # stratified: both splits keep the 212/357 class balance
    assert abs(s.train.y.mean() - 357 / 569) < 0.01 and abs(s.test.y.mean() - 357 / 569) < 0.01
    d = data.load_tabular("digits", seed=1, max_train=100)
    assert d.train.x_num.shape == (100, 64) and d.n_classes == 10


def test_adult_standard_split():
    s = data.load_tabular("adult")
    assert len(s.train.y) == 32561 and len(s.test.y) == 16281
    # ">50K." in adult.test is the positive class: 3,846 of 16,281 (7,841 of 32,561 in train)
    assert int(s.test.y.sum()) == 3846 and int(s.train.y.sum()) == 7841
    assert s.schema.numeric[0] == "age" and len(s.schema.categorical) == 8
    # "?" (missing) is the UNKNOWN id; workclass has 1,836 of them in the training file
    assert int((s.train.x_cat[:, 0] == data.UNKNOWN_CATEGORY).sum()) == 1836
    assert s.unknown_in_test > 0
    assert s.train.x_cat.max(axis=0).tolist() == [c - 1 for c in s.schema.cardinalities]
