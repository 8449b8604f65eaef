"""AlgoTrace's checkpoint mode (issue 39): stages announced in order with progress, the synthetic
run's two figures written, and a document or prompt over the limit refused before any weight is
read."""

from __future__ import annotations

import json

import pytest

from fidia_jax import models
from fidia_jax.errors import DataError
from fidia_jax.projects import algotrace
from fidia_jax.projects.algotrace import checkpoint as ckpt
from fidia_jax.projects.algotrace import traces

PNG = b"\x89PNG\r\n\x1a\n"
PRIMS = traces.ALGOTRACE_PRIMITIVES


def _no_weights(*args, **kwargs):
    raise AssertionError("the weights were read")


def _config(path, **kw):
    base = dict(checkpoint=str(path), checkpoint_max_seq_len=512, checkpoint_docs=6,
                checkpoint_shots=1, checkpoint_prompts=4, checkpoint_new_tokens=8,
                checkpoint_ie_docs=2, checkpoint_batch=3, n_clusters=6, top_k_heads=2)  # fmt: skip
    return algotrace.get_config("tiny", **{**base, **kw})


def test_checkpoint_texts_are_the_encoded_documents_and_prompts(tiny_gemma3_checkpoint):
    cfg = _config(tiny_gemma3_checkpoint)
    docs, doc_texts, prompt_texts = ckpt.checkpoint_texts(cfg)
    assert len(doc_texts) == 6 and len(prompt_texts) == 4 and len(docs) == 10
    tok = models.load_tokenizer(tiny_gemma3_checkpoint)
    for doc, text in zip(docs, doc_texts, strict=False):  # what the run feeds, token for token
        assert ckpt._encode_doc(tok, doc)[0] == tok.encode(text)
    assert prompt_texts[0].startswith(docs[6][0][0]) and prompt_texts[0].endswith(docs[6][-1][0])


def test_a_prompt_over_the_limit_fails_before_the_weights(
    tmp_path, tiny_gemma3_checkpoint, monkeypatch
):
    for name in ("load_hf_checkpoint", "load_gguf", "load_lm_checkpoint"):
        monkeypatch.setattr(models, name, _no_weights)
    tok = models.load_tokenizer(tiny_gemma3_checkpoint)
    _, doc_texts, prompt_texts = ckpt.checkpoint_texts(_config(tiny_gemma3_checkpoint))
    longest_doc = max(len(tok.encode(t)) for t in doc_texts)
    plen = [len(tok.encode(t)) for t in prompt_texts]
    # every document fits; the longest prompt plus the new tokens does not, by one
    limit = max(longest_doc, max(plen))
    new = limit - max(plen) + 1
    cfg = _config(tiny_gemma3_checkpoint, checkpoint_max_seq_len=limit, checkpoint_new_tokens=new)
    first = next(i for i, n in enumerate(plen) if n + new > limit)
    with pytest.raises(
        DataError,
        match=rf"prompt {first} is {plen[first]} tokens; with "
        rf"max_new_tokens {new} .*> the limit {limit} .*checkpoint_new_tokens",
    ):
        algotrace.train_and_evaluate(cfg, tmp_path / "run")  # fmt: skip
    cfg = _config(tiny_gemma3_checkpoint, checkpoint_max_seq_len=64)
    with pytest.raises(DataError, match=r"document 0 is \d+ tokens.*> the limit 64"):
        algotrace.train_and_evaluate(cfg, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def _canned(model, tok, config):
    """What checkpoint_algotrace returns (values made up)."""
    agree = {"purity": 0.5, "nmi": 0.2, "ari": 0.1}
    cell = {"delta": 0.1, "ci95": [0.0, 0.2]}
    return {
        "clustering": {"n_points": 100, "layer": 1, "kmeans": agree, "random": agree,
                       "token_identity": agree, "per_layer": [agree] * 3},
        "vectors": {p: {"norm": 1.0} for p in PRIMS}, "mean_vector_norm": 1.0,
        "injection": {"layer": 1, "scale": 1.0, "n_prompts": 4, "new_tokens": 8,
                      "baseline_rates": [0.2] * 5,
                      "table": {n: [cell] * 5 for n in (*PRIMS, "random")},
                      "diagonal_vs_random": {p: {"diff": 0.0, "ci95": [0.0, 0.0],
                                                 "p_not_above": 1.0} for p in PRIMS},
                      "solved": {"none": 0.0}},
        "doc_tokens": 100, "prompt_tokens": 50,
    }  # fmt: skip


def test_checkpoint_run_announces_its_stages_and_writes_the_figures(
    tmp_path, tiny_gemma3_checkpoint, monkeypatch, capsys
):
    monkeypatch.delenv("FIDIA_QUIET", raising=False)
    monkeypatch.setattr(ckpt, "checkpoint_algotrace", _canned)
    res = algotrace.train_and_evaluate(_config(tiny_gemma3_checkpoint), tmp_path / "run")
    err = " ".join(capsys.readouterr().err.split())  # rich wraps long lines (long tmp paths)
    stages = ("loading the tokenizer", "checking 10 text(s) against the context",
              "loading the weights")  # fmt: skip
    at = [err.index(f"AlgoTrace: {s}") for s in stages]
    assert at == sorted(at)
    want = [
        str(tmp_path / "run" / f) for f in ("algotrace_clusters.png", "algotrace_injection.png")
    ]
    assert res["figures"] == want
    for f in want:
        assert open(f, "rb").read(8) == PNG
    saved = json.loads((tmp_path / "run" / "algotrace_checkpoint.json").read_text())
    assert saved["figures"] == want


@pytest.mark.integration
def test_checkpoint_run_shows_progress_in_every_loop(
    tmp_path, tiny_gemma3_checkpoint, monkeypatch, capsys
):
    monkeypatch.delenv("FIDIA_QUIET", raising=False)
    algotrace.train_and_evaluate(_config(tiny_gemma3_checkpoint), tmp_path / "run")
    err = " ".join(capsys.readouterr().err.split())  # rich wraps long lines (long tmp paths)
    for line in ("residual stream and head outputs of 6 documents: 2/2 batch(s) done in",
                 "k-means (k = 6) of", "3/3 layer(s) done in", "5/5 primitive(s) done in",
                 "7/7 injection(s) done in"):  # fmt: skip
        assert line in err
    assert err.index("AlgoTrace: loading the weights") < err.index("AlgoTrace: residual stream")
    assert (tmp_path / "run" / "algotrace_injection.png").read_bytes()[:8] == PNG
