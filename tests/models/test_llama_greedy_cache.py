"""Greedy decoding with the KV cache equals decoding without it (issue 39, Deliver 5).

The reference is the plainest decoder there is: per prompt (no padding, no cache), the full
causal forward over the sequence so far, the argmax of the last position, appended, repeated;
it stops after the stop token. :func:`fidia_jax.models.sample_llama` decodes a right-padded
batch of prompts of different lengths with ``prefill`` + cached ``decode`` steps under one jit.
Tokens must be identical; logits agree to float32 rounding.

Tolerance: both sides compute the same float32 sums in different orders (the cached step
attends over the stored keys, the full forward over a ``(T, T)`` score matrix; padded rows add
masked terms), so the logits differ by a few float32 ulps per layer: ``atol = 1e-5 * max|logit|``
(about 80 ulps at the largest logit, ``2**-23 ~ 1.2e-7``), far below the top-2 margins asserted
below, so a wrong mask or a wrong cache position (errors of order the logits themselves) fails.
"""

from __future__ import annotations

import json
import os
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from tiny_configs import GEMMA3_LIKE

from fidia_jax import models

N_NEW = 8
LENGTHS = [3, 7, 12, 5]  # ragged: right-padded to 12 in the batch; 12 + 8 <= max_seq_len 32
_forward = nnx.jit(lambda m, t: m(t))


def _randomize(model, seed):
    """Every parameter random (norm scales too), embeddings of unit scale."""
    rng = np.random.default_rng(seed)
    state = nnx.state(model, nnx.Param)

    def draw(x):
        std = 0.3 if x.ndim == 1 else x.shape[0] ** -0.5
        if x.ndim == 2 and x.shape[0] == model.config.vocab_size:
            std = 1.0
        return jnp.asarray(rng.normal(0.0, std, x.shape), x.dtype)

    nnx.update(model, jax.tree.map(draw, state))
    return model


# A plain Llama, and a Gemma-3-like one: local layers of window 4 (the prompts and the generated
# tokens run past it, so the window changes what a query sees) with one global layer every 3rd.
CONFIGS = {
    "llama": dict(),
    "gemma3_sliding": dict(GEMMA3_LIKE),
}


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def setup(request):
    cfg = models.LlamaConfig.tiny(vocab_size=64, max_seq_len=32, **CONFIGS[request.param])
    model = _randomize(models.Llama(cfg, rngs=nnx.Rngs(0)), seed=1)
    rng = np.random.default_rng(2)
    prompts = [rng.integers(0, cfg.vocab_size, n).astype(np.int32) for n in LENGTHS]
    return model, prompts


def _no_cache_greedy(model, prompts, n_new, stop_token=None):
    """Full forward over each growing sequence at every step; argmax of its last position.

    Each step runs the whole batch, every row right-padded to ``max_seq_len`` (one shape, one
    compile; causal attention: the padding after a row's last token cannot reach it). A row
    stops after ``stop_token``. Returns per row (tokens, logits (n, V), top-2 margins)."""
    width = model.config.max_seq_len
    seqs = [[int(t) for t in p] for p in prompts]
    out = [([], [], []) for _ in prompts]
    live = list(range(len(prompts)))
    for _ in range(n_new):
        batch = np.zeros((len(seqs), width), np.int32)
        for b, seq in enumerate(seqs):
            batch[b, : len(seq)] = seq
        logits = np.asarray(_forward(model, jnp.asarray(batch)))
        for b in list(live):
            lg = logits[b, len(seqs[b]) - 1]
            top2 = np.sort(lg)[-2:]
            tok = int(np.argmax(lg))
            toks, lgs, margins = out[b]
            toks.append(tok)
            lgs.append(lg)
            margins.append(float(top2[1] - top2[0]))
            seqs[b].append(tok)
            if tok == stop_token:
                live.remove(b)
    return [(t, np.stack(lg), m) for t, lg, m in out]


def _batch(prompts):
    width = max(len(p) for p in prompts)
    out = np.zeros((len(prompts), width), np.int32)
    for i, p in enumerate(prompts):
        out[i, : len(p)] = p
    return jnp.asarray(out), jnp.asarray([len(p) for p in prompts], jnp.int32)


def test_greedy_with_kv_cache_equals_full_recompute(setup):
    model, prompts = setup
    tokens, lengths = _batch(prompts)
    out = models.sample_llama(model, tokens, lengths=lengths, max_new_tokens=N_NEW, stop_token=-1)
    got_tok, got_lg = np.asarray(out.tokens), np.asarray(out.logits)
    for b, (want_tok, want_lg, margins) in enumerate(_no_cache_greedy(model, prompts, N_NEW)):
        atol = 1e-5 * np.abs(want_lg).max()
        # the argmax is decided: every top-2 margin is far above the tolerance
        assert min(margins) > 10 * atol, (b, min(margins), atol)
        np.testing.assert_array_equal(got_tok[b], want_tok)
        np.testing.assert_allclose(got_lg[b], want_lg, rtol=0, atol=atol)


def test_greedy_with_kv_cache_stops_where_the_recompute_stops(setup):
    model, prompts = setup
    tokens, lengths = _batch(prompts)
    free = np.asarray(
        models.sample_llama(
            model, tokens, lengths=lengths, max_new_tokens=N_NEW, stop_token=-1
        ).tokens
    )
    stop = int(free[1, 2])  # row 1 emits it at step 2 (maybe earlier): every row may stop on it
    out = models.sample_llama(model, tokens, lengths=lengths, max_new_tokens=N_NEW, stop_token=stop)
    got_tok, got_n = np.asarray(out.tokens), np.asarray(out.num_tokens)
    assert got_n[1] <= 3
    want = _no_cache_greedy(model, prompts, N_NEW, stop_token=stop)
    for b, (want_tok, want_lg, _) in enumerate(want):
        n = len(want_tok)
        assert got_n[b] == n
        np.testing.assert_array_equal(got_tok[b, :n], want_tok)
        assert (got_tok[b, n:] == stop).all()  # after the stop: the stop token, as documented
        atol = 1e-5 * np.abs(want_lg).max()
        np.testing.assert_allclose(np.asarray(out.logits)[b, :n], want_lg, rtol=0, atol=atol)


# ------------------------------------------------------------------ the real Gemma 3 270M (slow)
REFERENCE = pathlib.Path(__file__).resolve().parents[1] / "data" / "lm" / "gemma3_270m_greedy.json"


@pytest.mark.slow
@pytest.mark.skipif(not REFERENCE.exists(), reason="tools/lm_greedy_make_fixture.py")
def test_gemma3_270m_greedy_with_and_without_cache_matches_transformers():
    """Ours (``sample_llama`` with the KV cache, and the no-cache recompute) against
    transformers' greedy ``generate`` on the same GGUF (``tools/lm_greedy_make_fixture.py``):
    the same token ids, the same greedy tokens up to the reference's stop, and the chosen
    token's logit within ``1e-5 * max|logit|`` (the tolerance of the prompt-logit comparison in
    ``test_gemma3_270m.py``: float32 on both sides, different summation orders)."""
    path = os.environ.get("FIDIA_GEMMA3_GGUF")
    if not path:
        pytest.skip("set FIDIA_GEMMA3_GGUF to the gemma-3-270m-q4_k_m.gguf file")
    pytest.importorskip("gguf")
    ref = json.loads(REFERENCE.read_text())
    n_new = ref["max_new_tokens"]
    rows = ref["prompts"]
    longest = max(len(r["ids"]) for r in rows)
    width = -(-(longest + n_new) // 32) * 32
    model = models.load_gguf(path, max_seq_len=width)
    tok = models.load_tokenizer(path)
    for r in rows:
        assert tok.encode(r["prompt"]) == r["ids"]
    prompts = [np.asarray(r["ids"], np.int32) for r in rows]
    tokens, lengths = _batch(prompts)
    out = models.sample_llama(
        model, tokens, lengths=lengths, max_new_tokens=n_new, stop_token=tok.eos_id
    )
    cached = np.asarray(out.tokens)
    recompute = _no_cache_greedy(model, prompts, n_new, stop_token=tok.eos_id)
    for b, r in enumerate(rows):
        want = np.asarray(r["greedy"])
        n = int((want >= 0).sum())
        margins = np.asarray(r["margins"])
        for name, got in (("cache", cached[b, :n]), ("no cache", recompute[b][0][:n])):
            diff = np.flatnonzero(np.asarray(got) != want[:n])
            assert not diff.size, (
                f"prompt {b} ({name}): first different token at step {diff[0]}, "
                f"reference top-2 margin there {margins[diff[0]]:.4g}"
            )
        top1 = np.asarray([t[0] for t in r["top2_logits"]])[:n]
        atol = 1e-5 * np.abs(np.asarray(r["top2_logits"])).max()
        np.testing.assert_allclose(np.asarray(out.logits)[b, np.arange(n), want[:n]], top1,
                                   rtol=0, atol=atol)  # fmt: skip
        np.testing.assert_allclose(recompute[b][1][np.arange(n), want[:n]], top1, rtol=0, atol=atol)


# ------------------------------------------------ batched, padded, last-position head (issue 39)
def test_padded_batch_with_last_position_head_equals_the_prompts_decoded_alone(setup):
    """SafeSci's memory settings: the batch right-padded to a width past its longest prompt (one
    width for every batch: one compiled program) and ``prefill_logits="last"`` (the head on each
    row's last prompt token only) give the tokens of a prompt decoded alone (no padding, the
    all-position head), and logits within the module's tolerance."""
    model, prompts = setup
    width = max(LENGTHS) + 4  # padding the real rows never see (causal, masked by lengths)
    tokens = np.full((len(prompts), width), 7, np.int32)  # a real token id as the pad value
    for i, p in enumerate(prompts):
        tokens[i, : len(p)] = p
    lengths = jnp.asarray(LENGTHS, jnp.int32)
    out = models.sample_llama(
        model, jnp.asarray(tokens), lengths=lengths, max_new_tokens=N_NEW, stop_token=-1,
        prefill_logits="last",
    )  # fmt: skip
    for b in (0, 2):  # the shortest prompt (most padding) and the longest: one compile each
        alone = models.sample_llama(model, jnp.asarray(prompts[b][None]), max_new_tokens=N_NEW)
        want_lg = np.asarray(alone.logits)[0]
        np.testing.assert_array_equal(np.asarray(out.tokens)[b], np.asarray(alone.tokens)[0])
        atol = 1e-5 * np.abs(want_lg).max()
        np.testing.assert_allclose(np.asarray(out.logits)[b], want_lg, rtol=0, atol=atol)


def test_last_position_head_equals_the_all_position_head(setup):
    """``prefill_logits="last"`` against the default ``"all"`` on the same ragged batch: the
    same tokens, the first step's logits (the only ones the option touches) to rounding, the
    later ones bit for bit (the same decode program)."""
    model, prompts = setup
    tokens, lengths = _batch(prompts)
    kw = dict(lengths=lengths, max_new_tokens=N_NEW, stop_token=-1)
    full = models.sample_llama(model, tokens, **kw)
    last = models.sample_llama(model, tokens, prefill_logits="last", **kw)
    np.testing.assert_array_equal(np.asarray(last.tokens), np.asarray(full.tokens))
    lg_full, lg_last = np.asarray(full.logits), np.asarray(last.logits)
    atol = 1e-5 * np.abs(lg_full).max()
    np.testing.assert_allclose(lg_last[:, 0], lg_full[:, 0], rtol=0, atol=atol)
    np.testing.assert_array_equal(lg_last[:, 1:], lg_full[:, 1:])
    with pytest.raises(ValueError, match="prefill_logits must be one of"):
        models.sample_llama(model, tokens, prefill_logits="first", **kw)
