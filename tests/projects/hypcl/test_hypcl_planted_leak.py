"""Planted leak (issue 41): HypCL's standardisation and NCM baseline see training rows only.

``standardize_like_first_task`` takes its statistics from task 0's training rows, and the
nearest-class-mean baseline (``_ncm``, every ``ncm_features`` option) its means and (for
``"running"``) its statistics from the seen classes' training rows. A feature planted to be 0
on every training row and ``label + 1`` on the test rows adds the same distance to every class
mean, so no accuracy moves (exactly equal; the planted values are small so that float32
rounding of the distances cannot flip an argmin), and the standardised training features are
unchanged. Class means taken over training + test rows (the leak, rebuilt here: a
transductive NCM) move the accuracies, so the test can fail.
"""

import numpy as np
import pytest

from fidia_jax.projects.hypcl._continual import ContinualData, _ncm, standardize_like_first_task

TASKS = [(0, 1), (2, 3)]


def _data(plant: bool) -> ContinualData:
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(4, 6)) * 1.5
    y_tr, y_te = np.repeat(np.arange(4), 20), np.repeat(np.arange(4), 10)
    x_tr = centres[y_tr] + rng.normal(size=(len(y_tr), 6)) * 2.0
    x_te = centres[y_te] + rng.normal(size=(len(y_te), 6)) * 2.0
    col_tr, col_te = np.zeros(len(y_tr)), (1.0 * (y_te + 1) if plant else np.zeros(len(y_te)))
    x_tr, x_te = np.c_[x_tr, col_tr], np.c_[x_te, col_te]
    return standardize_like_first_task(ContinualData(x_tr, y_tr, x_te, y_te, TASKS))


@pytest.mark.parametrize("features", ["raw", "first_task", "running"])
def test_a_feature_planted_in_the_test_rows_moves_no_ncm_accuracy(features):
    clean, planted = _data(False), _data(True)
    np.testing.assert_array_equal(planted.x_tr, clean.x_tr)
    np.testing.assert_array_equal(_ncm(planted, features), _ncm(clean, features))


def test_class_means_over_training_and_test_rows_would_move():
    def transductive_ncm(d):  # the leak: class means of training + test rows, all classes
        x = np.concatenate([d.raw.x_tr, d.raw.x_te])
        y = np.concatenate([d.y_tr, d.y_te])
        means = np.stack([x[y == k].mean(0) for k in range(4)])
        pred = np.argmin(((d.raw.x_te[:, None] - means[None]) ** 2).sum(-1), axis=1)
        return np.mean(pred == d.y_te)

    clean, planted = transductive_ncm(_data(False)), transductive_ncm(_data(True))
    assert planted - clean >= 0.05  # two test rows of 40 or more
