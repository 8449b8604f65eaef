"""Digit questions: token layout, answers recomputed from labels, splits, errors."""

import numpy as np
import pytest

from fidia_jax import data, models
from fidia_jax.errors import DataError
from fidia_jax.projects.residual_geometry import questions

V = questions.DIGIT_QA_VOCAB


@pytest.fixture(scope="module")
def digits():
    return data.load_digit_images()


def test_digits_loaded(digits):
    images, labels = digits
    assert images.shape == (1797, 8, 8) and images.dtype == np.float32
    assert 0.0 == images.min() and images.max() == 1.0
    assert set(np.unique(labels)) == set(range(10))  # the shared loader (data._vision) we use


def test_questions_answers_match_labels(digits):
    images, labels = digits
    q = questions.make_digit_questions(images, labels, 400, seed=0)
    assert q.tokens.shape == (400, 6) and q.patches.shape == (400, 16, 4)
    assert np.all(q.tokens[:, 0] == V["BOS"]) and np.all(q.tokens[:, 4] == V["ASK"])
    np.testing.assert_array_equal(q.weights.sum(1), 1.0)
    assert np.all(q.weights[:, 5] == 1.0)
    n0 = V["N0"]
    for i in range(400):
        kind = questions.DIGIT_QA_KINDS[q.kind[i]]
        tok = q.tokens[i]
        if kind == "add":
            assert not q.visual[i] and q.image_index[i] == -1 and not q.patches[i].any()
            assert tok[5] - n0 == (tok[2] - n0) + (tok[3] - n0)
            continue
        d = labels[q.image_index[i]]
        assert q.visual[i]
        # the patches are the image's 2x2 patches (models.image_patches)
        np.testing.assert_array_equal(
            q.patches[i], np.asarray(models.image_patches(images[q.image_index[i]][None]))[0]
        )
        if kind == "which":
            assert tok[5] == n0 + d and tok[2] == V["PAD"]
        elif kind == "even":
            assert tok[5] == (V["YES"] if d % 2 == 0 else V["NO"])
        else:
            assert tok[5] == n0 + d + (tok[2] - n0)
    assert set(np.unique(q.kind)) == {0, 1, 2, 3}
    assert q.tokens.max() < 32
    # seeded
    q2 = questions.make_digit_questions(images, labels, 400, seed=0)
    np.testing.assert_array_equal(q.tokens, q2.tokens)


def test_kinds_subset_and_tokens(digits):
    images, labels = digits
    q = questions.make_digit_questions(images[:50], labels[:50], 30, seed=1, kinds=("add",))
    assert not q.visual.any()
    assert questions.digit_qa_token("N18") == V["N0"] + 18
    with pytest.raises(KeyError, match="unknown token"):
        questions.digit_qa_token("N19")


@pytest.mark.parametrize(
    "images, labels, n, kinds, match",
    [
        (np.zeros((3, 8, 7)), np.zeros(3, int), 5, ("which",), "images must be"),
        (np.full((3, 8, 8), 16.0), np.zeros(3, int), 5, ("which",), r"\[0, 1\]"),
        (np.zeros((3, 8, 8)), np.array([0, 1, 10]), 5, ("which",), "labels"),
        (np.zeros((3, 8, 8)), np.zeros(3, int), 0, ("which",), "n must be"),
        (np.zeros((3, 8, 8)), np.zeros(3, int), 5, ("count",), "kinds"),
        (np.zeros((3, 8, 8)), np.zeros(3, int), 5, (), "kinds"),
    ],
)
def test_bad_input(images, labels, n, kinds, match):
    with pytest.raises(DataError, match=match):
        questions.make_digit_questions(images, labels, n, seed=0, kinds=kinds)
