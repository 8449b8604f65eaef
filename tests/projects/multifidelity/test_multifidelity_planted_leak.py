"""Planted leak (issue 41): the multi-fidelity standardisations are fitted on training rows only.

The networks' inputs are standardised with the training rows' mean / std and the labels with
the high-fidelity training labels' (``train._prepare``); the GP baselines standardise their
inputs with the training rows'. So adding 20 held-out rows far outside the data (inputs + 50,
labels 1e4) changes no training array nor the ``(mean, sd)`` the model is fitted in, and the
GP's predictions at the original test rows are unchanged (exactly: the same fit; tolerance
1e-9). The same preprocessing fitted on training + test rows (the leak, rebuilt here) moves the
training inputs, so the test can fail.
"""

import dataclasses

import numpy as np
import pytest

from fidia_jax.projects.multifidelity import baselines, data
from fidia_jax.projects.multifidelity.train import _prepare

TRAINING_KEYS = ("x", "y", "member", "y_mu", "y_sd", "member_low")


def _tasks():
    task = data.analytic_multifidelity_task("currin", 12, 0, 30, 25, seed=0)
    rng = np.random.default_rng(1)
    far_x = rng.uniform(size=(20, task.x_test.shape[1])).astype(np.float32) + 50.0
    planted = dataclasses.replace(
        task,
        x_test=np.concatenate([task.x_test, far_x]),
        y_test=np.concatenate([task.y_test, np.full(20, 1e4, np.float32)]),
        delta_oracle_test=None
        if task.delta_oracle_test is None
        else np.concatenate([task.delta_oracle_test, np.full(20, 1e4, np.float32)]),
    )
    return task, planted


def test_held_out_rows_change_no_training_array():
    task, planted = _tasks()
    a, b = _prepare(task), _prepare(planted)
    for k in TRAINING_KEYS:
        np.testing.assert_array_equal(b[k], a[k], err_msg=k)
    for k in ("x_test", "oracle_test"):
        if k in a:
            np.testing.assert_array_equal(b[k][: len(task.x_test)], a[k], err_msg=k)


def test_gp_baseline_predictions_at_the_original_test_rows_do_not_move():
    pytest.importorskip("sklearn")
    task, planted = _tasks()
    args = (task.x_train, task.y_train, task.fidelity_train)
    clean = baselines.gp_hf_only(*args, task.x_test, restarts=0, seed=0)
    moved = baselines.gp_hf_only(*args, planted.x_test, restarts=0, seed=0)[: len(task.x_test)]
    np.testing.assert_allclose(moved, clean, atol=1e-9)


def test_standardising_with_the_held_out_rows_would_move_the_training_inputs():
    task, planted = _tasks()

    def leaky_x(t):  # the leak: input statistics of training + test rows
        pooled = np.concatenate([t.x_train, t.x_test])
        return (t.x_train - pooled.mean(0)) / pooled.std(0)

    assert np.max(np.abs(leaky_x(planted) - leaky_x(task))) > 0.1
