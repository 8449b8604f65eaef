"""Planted leak (issue 41): the language-model driver trains on the training text only.

:func:`~fidia_jax.projects.optimizers.make_task` builds the model from ``config.seed`` and
every training batch from the training stream (``sample_windows(fold_in(data_key, t), train)``);
the validation text only gives the fixed validation windows that
:func:`~fidia_jax.projects.optimizers.evaluate` scores. Nothing is fitted on text besides the
parameters (bytes are the vocabulary: no tokenizer is learnt). The test trains the tiny model
(:func:`~fidia_jax.projects.optimizers.train_interleaved`) on ``(train, val)`` and on
``(train, val')``, ``val'`` a planted validation text (the training stream itself, so a model
that had seen it would score far better on it): the initial parameters, every batch, every
training loss and the final parameters are identical (exactly, bit for bit), while the
validation loss moves (it reads ``val'``). Training on the training + held-out text (the leak,
rebuilt here) moves the training losses, so the test can fail. The split of
:func:`fidia_jax.data.load_shakespeare` (with the shared data: skipped without it) gives the
training stream the head of each play and the validation stream its tail: no 256-byte piece
of any play's tail occurs in the training stream, while pieces of its head do (the search can
find a leak).
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax.data import encode_bytes, load_shakespeare
from fidia_jax.projects import optimizers as lm

STEPS = 3


def _streams():
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, 3000).astype(np.int32), rng.integers(0, 256, 1000).astype(np.int32)


def _run(tokens):
    config = dataclasses.replace(lm.get_config("tiny"), steps=STEPS)
    task = lm.make_task(config, tokens=tokens)
    result = lm.train_interleaved(task, {"scale": lm.make_optimizer(config)}, STEPS)["scale"]
    return task, result, lm.evaluate(task, result.params)


@pytest.fixture(scope="module")
def clean_run():
    return _run(_streams())


@pytest.mark.integration  # two tiny 3-step trainings (jit compiles, ~5 s each on 2 cores)
def test_planted_validation_text_moves_no_training_number(clean_run):
    train, _ = _streams()
    task, result, val_loss = clean_run
    p_task, planted, p_val_loss = _run((train, train.copy()))  # val' = the training text
    for a, b in zip(jax.tree.leaves(task.params), jax.tree.leaves(p_task.params), strict=True):
        np.testing.assert_array_equal(a, b)  # the initialisation
    for t in range(STEPS):
        np.testing.assert_array_equal(task.batch_fn(jnp.int32(t)), p_task.batch_fn(jnp.int32(t)))
    np.testing.assert_array_equal(planted.losses, result.losses)
    for a, b in zip(jax.tree.leaves(result.params), jax.tree.leaves(planted.params), strict=True):
        np.testing.assert_array_equal(a, b)
    # the validation loss does read the planted text
    assert not np.array_equal(task.val_tokens, p_task.val_tokens)
    assert abs(p_val_loss - val_loss) > 1e-2


@pytest.mark.integration  # a third tiny 3-step training (jit compiles, ~5 s on 2 cores)
def test_training_on_the_held_out_text_would_move_the_losses(clean_run):
    train, val = _streams()
    _, result, _ = clean_run
    _, leaky, _ = _run((np.concatenate([train, val]), val))  # the leak: val in the training text
    assert np.max(np.abs(leaky.losses - result.losses)) > 1e-2


def test_shakespeare_split_keeps_each_plays_tail_out_of_training(shared_data_dir):
    splits = load_shakespeare(shared_data_dir, max_files=2)
    folder = shared_data_dir / "text" / "shakespeare"
    train = splits.train.astype(np.uint8).tobytes()
    val = splits.val.astype(np.uint8).tobytes()
    assert len(splits.files) == 2
    for name in splits.files:
        text = (folder / name).read_bytes().decode("utf-8", errors="replace")
        ids = encode_bytes(text.replace("\r\n", "\n"))
        cut = int(round(0.9 * len(ids)))
        head, tail = ids[:cut].astype(np.uint8).tobytes(), ids[cut:].astype(np.uint8).tobytes()
        assert tail in val and head in train
        for start in np.linspace(0, len(tail) - 256, 8).astype(int):
            assert tail[start : start + 256] not in train, (name, start)
        for start in np.linspace(0, len(head) - 256, 8).astype(int):
            assert head[start : start + 256] in train  # a leaked piece would be found
