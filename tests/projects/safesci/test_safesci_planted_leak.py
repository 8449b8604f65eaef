"""Planted leak (issue 41): the SafeSci Llama's vocabulary is built from its training records only.

``train_safesci_llama`` holds out every ``llm_holdout_every``-th record and builds its word
vocabulary (and its training rows) from the others. A word planted only in the held-out
records' questions never enters the vocabulary (it encodes as ``<unk>``), and the vocabulary and
training rows are the same as without it. A vocabulary built from every record (the leak,
rebuilt here) contains it. The model and its training loop are replaced by stubs (this checks
the data preparation, not the optimiser; SafeSci has no fitted threshold: its scoring is by
rule).
"""

import numpy as np
from flax import nnx

from fidia_jax.projects import safesci
from fidia_jax.projects.safesci import models
from fidia_jax.projects.safesci.records import safesci_record_from_dict

PLANTED = "zyxwvplanted"


def _records(plant: bool):
    out = []
    for i in range(9):
        q = f"Is reagent {i} safe to mix with water"
        if plant and i % 3 == 2:  # the held-out records (llm_holdout_every = 3)
            q += f" {PLANTED}"
        out.append(safesci_record_from_dict(
            {"question": q, "type": "tf", "source": "chem/x", "answers": i % 2 == 0}))  # fmt: skip
    return out


def _train(records, monkeypatch):
    seen = {}

    def stub(model, tokens, **kw):
        seen["tokens"] = np.asarray(tokens)
        return model, [1.0] * 10

    class TinyModel(nnx.Module):  # records the vocabulary size, holds one parameter
        def __init__(self, cfg, rngs):
            self.w = nnx.Param(np.zeros(cfg.vocab_size, np.float32))

    monkeypatch.setattr(models, "fit_llama", stub)
    monkeypatch.setattr(models, "Llama", TinyModel)
    config = safesci.get_config("tiny", llm_holdout_every=3)
    return models.train_safesci_llama(records, config), seen["tokens"]


def test_a_word_planted_in_the_held_out_records_never_enters_the_vocabulary(monkeypatch):
    clean, tok_clean = _train(_records(False), monkeypatch)
    planted, tok_planted = _train(_records(True), monkeypatch)
    assert planted.info["heldout"] == [2, 5, 8]
    assert PLANTED not in planted.vocab.stoi
    assert planted.vocab.stoi == clean.vocab.stoi
    np.testing.assert_array_equal(tok_planted, tok_clean)
    assert planted.vocab.encode(PLANTED) == [planted.vocab.stoi["<unk>"]]


def test_a_vocabulary_of_every_record_would_hold_it():
    leaky = models.WordVocab([r.question for r in _records(True)])  # the leak: held-out too
    assert PLANTED in leaky.stoi
