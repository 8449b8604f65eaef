"""Planted leak (issue 41): Attn-QAT training never reads the validation bytes.

Nothing in the attention driver is a fitted preprocessing step: the byte vocabulary is fixed
(0..255), there is no normalisation, the FP4 quantisation scales of ``attn_qat`` are computed per
tile from the attention inputs of the current batch (no calibration state), and there is no
early stopping or best-checkpoint selection (:func:`~fidia_jax.projects.attention.train.train_qat`
trains ``qat.steps`` steps, then scores the final parameters once on the validation windows;
SANTA decodes validation windows with the ``bf16`` model as trained). The only fitted numbers
are the model parameters, fitted on the training stream.

Planted: the validation stream replaced by a single byte repeated (predictable only there).
The task the step trains on (initial parameters, the training windows of every step) is
unchanged and only its validation windows carry the planted bytes (fast); a real fit gives the
same training loss curve and parameters bit for bit while the validation loss moves (the planted
bytes do reach the score). Control: the same bytes planted in the second half of the training
stream move the training windows, the curve and the parameters, so the tests can fail.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from fidia_jax.layers import register_attention_impl
from fidia_jax.projects import attention
from fidia_jax.projects.attention import train as attention_train


def _config():
    config = attention.get_config("tiny")
    return dataclasses.replace(config, qat=dataclasses.replace(config.qat, steps=4))


def _streams():
    rng = np.random.default_rng(0)
    text = np.frombuffer(b"to be or not to be, that is the question. ", np.uint8)
    train = np.tile(text, 40).astype(np.int32)
    train[rng.random(train.size) < 0.1] = ord("#")
    val = np.tile(text[::-1], 8).astype(np.int32)
    planted = np.full_like(val, ord("z"))  # predictable only in the held-out stream
    leaky = train.copy()
    leaky[leaky.size // 2 :] = ord("z")  # the control: the same bytes in the training stream
    return train, val, planted, leaky


def _task(train, val):
    register_attention_impl("bf16", attention_train.bf16_attention)
    task = attention_train._make_task(_config(), "bf16", jnp.asarray(train), jnp.asarray(val))
    batches = np.stack([np.asarray(task.batch_fn(jnp.int32(t))) for t in range(4)])
    return task, batches


def test_planted_validation_bytes_reach_only_the_validation_windows():
    train, val, planted, leaky = _streams()
    clean, b_clean = _task(train, val)
    moved, b_moved = _task(train, planted)
    np.testing.assert_array_equal(b_moved, b_clean)  # every training window of every step
    for a, b in zip(jax.tree.leaves(clean.params), jax.tree.leaves(moved.params), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert np.all(np.asarray(moved.val_tokens) == ord("z"))
    assert not np.any(np.asarray(clean.val_tokens) == ord("z"))
    _, b_leaky = _task(leaky, val)  # control: planted in the training stream
    assert np.mean(b_leaky != b_clean) > 0.1


@pytest.fixture(scope="module")
def clean_fit():
    train, val, _, _ = _streams()
    return _fit(train, val)


def _fit(train, val):
    register_attention_impl("bf16", attention_train.bf16_attention)
    model, res = attention_train.train_qat(_config(), "bf16", train, val, mesh=None, workdir=None)
    return res, [np.asarray(p) for p in jax.tree.leaves(nnx.state(model, nnx.Param))]


@pytest.mark.integration  # two 4-step fits of the tiny model (~7 s of compiles each)
def test_planted_validation_bytes_move_no_training_number_but_the_score(clean_fit):
    train, _, planted, _ = _streams()
    (clean, p_clean), (moved, p_moved) = clean_fit, _fit(train, planted)
    assert clean["curve"] == moved["curve"]  # every logged training loss, bit for bit
    for a, b in zip(p_clean, p_moved, strict=True):
        np.testing.assert_array_equal(a, b)
    assert abs(moved["val_loss"] - clean["val_loss"]) > 0.1  # the planted bytes are scored


@pytest.mark.integration  # two 4-step fits of the tiny model (~7 s of compiles each)
def test_the_same_bytes_planted_in_the_training_stream_move_the_fit(clean_fit):
    _, val, _, leaky = _streams()
    (clean, p_clean), (moved, p_moved) = clean_fit, _fit(leaky, val)
    diffs = [abs(a[1] - b[1]) for a, b in zip(clean["curve"][1:], moved["curve"][1:], strict=True)]
    assert max(diffs) > 1e-3
    assert max(float(np.max(np.abs(a - b))) for a, b in zip(p_clean, p_moved, strict=True)) > 1e-4
    assert moved["val_loss"] != pytest.approx(clean["val_loss"], abs=1e-4)
