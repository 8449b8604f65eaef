"""LLaMA capture and interventions (issue 14, shared primitive): brute force, GQA, sampler, VL.

Tiny model: 2 layers, d = 32, 4 query heads over 2 key/value heads (grouped-query attention,
query head h reads kv head h // 2), so every per-head check exercises the head grouping.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from fidia_jax import models

CFG = models.LlamaConfig.tiny()  # dim 32, 2 layers, 4 q heads, 2 kv heads


@pytest.fixture(scope="module")
def vl():
    """One tiny vision-language model; its ``llm`` is the text model of every test here."""
    assert (CFG.n_heads, CFG.n_kv_heads, CFG.n_layers) == (4, 2, 2)
    return models.LlamaVL(CFG, patch_dim=4, rngs=nnx.Rngs(0))


@pytest.fixture(scope="module")
def model(vl):
    return vl.llm


@pytest.fixture(scope="module")
def tokens():
    return jnp.asarray(np.random.default_rng(1).integers(0, 256, (2, 10)), jnp.int32)


inspect = nnx.jit(lambda m, t, hooks: m.inspect(t, capture="all", hooks=hooks))

VAL = jnp.asarray(np.random.default_rng(2).normal(size=(4, CFG.head_dim)), jnp.float32)
VEC = jnp.asarray(np.random.default_rng(4).normal(size=(CFG.dim,)), jnp.float32)


def _all_hooks(on=True, vec=VEC):
    """Every intervention at once (one compiled structure); ``on=False``: same structure, no-ops.

    Layer 0: attention update replaced by noise at positions 0 and 3, ``vec`` added between the
    blocks. Layer 1: query head 3 (kv head 1) no longer reads key 1 (renormalised); query head 1
    (kv head 0) output replaced by ``VAL[1]`` at per-row positions (row 0: 2, 4; row 1: 7).
    """
    nothing = jnp.array([-1])
    return (
        models.ReplaceUpdate(
            layer=0, key=jax.random.key(3), positions=jnp.array([0, 3]) if on else nothing
        ),
        models.AddToResidual(layer=0, vector=vec if on else jnp.zeros_like(vec), site="mid"),
        models.PatchAttention(
            layer=1,
            keys=jnp.array([1]) if on else nothing,
            value=0.0,
            heads=jnp.array([False, False, False, True]),
            renormalize=True,
        ),
        models.PatchHeads(
            layer=1,
            value=VAL,
            heads=jnp.array([False, True, False, False]),
            positions=jnp.array([[2, 4], [7, -1]]) if on else jnp.full((2, 2), -1),
        ),
    )


@pytest.fixture(scope="module")
def plain(model, tokens):
    return inspect(model, tokens, ())


@pytest.fixture(scope="module")
def hooked(model, tokens):
    return inspect(model, tokens, _all_hooks())


def _np(x):
    return np.asarray(x, np.float64)


# Float64 numpy reference of the blocks (independent of the model code; reads its parameters).
def _w(lin):
    return _np(lin.kernel[...])


def _rms(x, scale):
    return x / np.sqrt(np.mean(x * x, -1, keepdims=True) + CFG.norm_eps) * _np(scale[...])


def _rope(x_BxTxHxD):
    d = x_BxTxHxD.shape[-1]
    inv = CFG.rope_theta ** (-np.arange(d // 2) * 2.0 / d)
    ang = np.arange(x_BxTxHxD.shape[1])[:, None] * inv[None]
    cos, sin = np.cos(ang)[None, :, None], np.sin(ang)[None, :, None]
    x1, x2 = x_BxTxHxD[..., : d // 2], x_BxTxHxD[..., d // 2 :]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


def _softmax_causal(s_TxS):
    t = s_TxS.shape[0]
    s = np.where(np.tril(np.ones((t, t), bool)), s_TxS, -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _brute_heads(model, layer, resid_pre_BxTxC):
    """Per-query-head weights (B, Hq, T, T), outputs (B, T, Hq, D) and values, by explicit loops."""
    blk = model.layers[layer]
    att = blk.attention
    x = _rms(_np(resid_pre_BxTxC), blk.attention_norm.scale)
    b, t, _ = x.shape
    hq, hkv, d = CFG.n_heads, CFG.n_kv_heads, CFG.head_dim
    q = _rope((x @ _w(att.wq)).reshape(b, t, hq, d))
    k = _rope((x @ _w(att.wk)).reshape(b, t, hkv, d))
    v = (x @ _w(att.wv)).reshape(b, t, hkv, d)
    w = np.zeros((b, hq, t, t))
    o = np.zeros((b, t, hq, d))
    for bi in range(b):
        for h in range(hq):
            kvh = h // (hq // hkv)  # GQA: the kv head this query head reads
            w[bi, h] = _softmax_causal(q[bi, :, h] @ k[bi, :, kvh].T / np.sqrt(d))
            o[bi, :, h] = w[bi, h] @ v[bi, :, kvh]
    return w, o, v


def _finish_last_layer(model, resid_pre, o_BxTxHxD):
    """Completes the last block from its head outputs: logits (float64 reference)."""
    blk = model.layers[CFG.n_layers - 1]
    b, t = o_BxTxHxD.shape[:2]
    h = _np(resid_pre) + _np(o_BxTxHxD).reshape(b, t, -1) @ _w(blk.attention.wo)
    x = _rms(h, blk.ffn_norm.scale)
    ff = blk.feed_forward
    a = x @ _w(ff.w1)
    h = h + ((a / (1.0 + np.exp(-a))) * (x @ _w(ff.w3))) @ _w(ff.w2)
    return _rms(h, model.norm.scale) @ _w(model.lm_head)


def test_capture_shapes_and_brute_force_gqa(model, tokens, plain):
    logits, cap = plain
    b, t, c = 2, 10, CFG.dim
    assert cap["resid_pre"].shape == (2, b, t, c) and cap["head_out"].shape == (2, b, t, 4, 8)
    assert cap["attn_weights"].shape == (2, b, 4, t, t) and cap["final_hidden"].shape == (b, t, c)
    # Capture changes nothing: logits equal the plain forward bit for bit.
    np.testing.assert_array_equal(logits, nnx.jit(lambda m, x: m(x))(model, tokens))
    for layer in range(2):
        w, o, _ = _brute_heads(model, layer, cap["resid_pre"][layer])
        np.testing.assert_allclose(cap["attn_weights"][layer], w, atol=1e-5)
        np.testing.assert_allclose(cap["head_out"][layer], o, atol=1e-5)
        wo = _w(model.layers[layer].attention.wo)
        np.testing.assert_allclose(cap["attn_out"][layer], o.reshape(b, t, -1) @ wo, atol=1e-4)
        np.testing.assert_allclose(
            cap["resid_mid"][layer],
            _np(cap["resid_pre"][layer]) + _np(cap["attn_out"][layer]),
            atol=1e-5,
        )
        np.testing.assert_allclose(
            cap["resid_post"][layer],
            _np(cap["resid_mid"][layer]) + _np(cap["ffn_out"][layer]),
            atol=1e-5,
        )
    np.testing.assert_array_equal(cap["resid_pre"][1], cap["resid_post"][0])
    np.testing.assert_allclose(
        cap["resid_pre"][0], _np(model.tok_embeddings.embedding[...])[np.asarray(tokens)]
    )
    np.testing.assert_allclose(
        logits, _finish_last_layer(model, cap["resid_pre"][1], cap["head_out"][1]), atol=1e-4
    )


def test_patch_heads_gqa_brute_force(model, hooked):
    logits, got = hooked
    w, o, v = _brute_heads(model, 1, got["resid_pre"][1])
    w[:, 3, :, 1] = 0.0  # PatchAttention: head 3 does not read key 1 (renormalised rows)
    w[:, 3] /= w[:, 3].sum(-1, keepdims=True)
    o[:, :, 3] = np.einsum("bts,bsd->btd", w[:, 3], v[:, :, 1])  # head 3 reads kv head 1
    for b, ts in enumerate([(2, 4), (7,)]):  # PatchHeads: head 1 at per-row positions
        for t in ts:
            o[b, t, 1] = np.asarray(VAL[1])
    np.testing.assert_allclose(got["head_out"][1], o, atol=1e-5)
    np.testing.assert_allclose(logits, _finish_last_layer(model, got["resid_pre"][1], o), atol=1e-4)


def test_patch_attention_knockout_one_head(model, plain, hooked):
    _, got = hooked
    w, _, _ = _brute_heads(model, 1, got["resid_pre"][1])
    w[:, 3, :, 1] = 0.0
    w[:, 3] /= w[:, 3].sum(-1, keepdims=True)
    np.testing.assert_allclose(got["attn_weights"][1], w, atol=1e-5)
    # Query 0 sees only key 0 (key 1 is invisible to it): its row keeps weight 1 on key 0.
    np.testing.assert_allclose(got["attn_weights"][1][:, 3, 0, 0], 1.0)
    np.testing.assert_array_equal(got["attn_weights"][0], plain[1]["attn_weights"][0])


def test_replace_update_matched_rms_noise(plain, hooked):
    _, cap = plain
    _, got = hooked
    new, old = _np(got["attn_out"][0]), _np(cap["attn_out"][0])
    rms = lambda x: np.sqrt(np.mean(x * x, -1))  # noqa: E731
    np.testing.assert_allclose(rms(new[:, [0, 3]]), rms(old[:, [0, 3]]), rtol=1e-5)
    cos = np.sum(new[:, 3] * old[:, 3], -1) / (rms(new[:, 3]) * rms(old[:, 3]) * CFG.dim)
    assert np.all(np.abs(cos) < 0.9)  # a different direction, not the update itself
    keep = [1, 2, 4, 5, 6, 7, 8, 9]
    np.testing.assert_array_equal(new[:, keep], old[:, keep])


def test_add_to_residual_and_noop_hooks_are_bit_identical(model, tokens, plain, hooked):
    logits0, cap = plain
    _, got = hooked
    # site "mid" of layer 0: after the (noised) attention update, before the FFN
    exp = _np(got["resid_pre"][0]) + _np(got["attn_out"][0]) + _np(VEC)
    np.testing.assert_allclose(got["resid_mid"][0], exp, atol=1e-5)
    np.testing.assert_array_equal(got["resid_pre"][0], cap["resid_pre"][0])
    # The same hooks doing nothing (empty positions, zero vector) change nothing. Each alone is
    # exact, but together XLA may fuse the neighbouring ops into a different program, so equal
    # up to float32 rounding is what can be promised (hooks=() is the plain program, bitwise).
    logits_off, cap_off = inspect(model, tokens, _all_hooks(on=False))
    np.testing.assert_allclose(logits_off, logits0, rtol=1e-5, atol=1e-5)
    for name in cap:
        np.testing.assert_allclose(cap_off[name], cap[name], rtol=1e-5, atol=1e-5, err_msg=name)


def test_bad_hooks_and_capture_names_raise(model, tokens):
    with pytest.raises(ValueError, match="AddToResidual names layer 2.*2 layers"):
        model(tokens, hooks=(models.AddToResidual(layer=2, vector=jnp.zeros(32)),))
    with pytest.raises(ValueError, match="PatchHeads names layer -1"):
        model.inspect(tokens, hooks=(models.PatchHeads(layer=-1, value=0.0),))
    with pytest.raises(ValueError, match=r"heads must be a \(4,\) bool mask"):
        model(tokens, hooks=(models.PatchHeads(layer=0, value=0.0, heads=jnp.ones(2, bool)),))
    with pytest.raises(ValueError, match="site must be one of"):
        model(tokens, hooks=(models.AddToResidual(layer=0, vector=jnp.zeros(32), site="post_ffn"),))
    with pytest.raises(ValueError, match="unknown capture name"):
        model.inspect(tokens, capture=("resid_pre", "mlp_out"))
    with pytest.raises(ValueError, match="ReplaceUpdate names layer 7"):
        models.sample_llama(
            model,
            tokens,
            max_new_tokens=2,
            hooks=(models.ReplaceUpdate(layer=7, key=jax.random.key(0)),),
        )


# ------------------------------------------------------------------------------ sampler
N_NEW = 5
LENGTHS = [6, 4]  # ragged prompts (row 1 right-padded)


def _linear_bias(hidden_BxKxC, step, w_CxV):
    """A probe-style bias: the residual leaving the last block times a matrix."""
    return hidden_BxKxC[:, -1] @ w_CxV


def _padded_sequences(prompt, generated):
    """prompt[:n] + generated[:-1] per row, right-padded to 10 (causal: padding is harmless)."""
    seqs = [jnp.concatenate([prompt[b, :n], generated[b, :-1]]) for b, n in enumerate(LENGTHS)]
    return jnp.stack([jnp.pad(x, (0, 10 - x.shape[0])) for x in seqs])


def _check_draws(out, key):
    """Step i draws with fold_in(key, i) from the returned logits (over temperature 1)."""
    for i in range(N_NEW):
        exp = jax.random.categorical(jax.random.fold_in(key, i), out.logits[:, i], axis=-1)
        np.testing.assert_array_equal(out.tokens[:, i], exp)


def _manual_sampler(model, prompt, lengths, key):
    """The unhooked reference: the public prefill / decode, one jitted call per step."""
    pre = nnx.jit(lambda m, t, c, n: m.prefill(t, c, lengths=n))
    dec = nnx.jit(lambda m, t, c: m.decode(t, c))
    cache = model.init_cache(prompt.shape[0], prompt.shape[1] + N_NEW - 1)
    lg, cache = pre(model, prompt, cache, lengths)
    lg = jnp.take_along_axis(lg, (lengths - 1)[:, None, None], axis=1)[:, 0]
    toks, lgs = [], []
    for i in range(N_NEW):
        tok = jax.random.categorical(jax.random.fold_in(key, i), lg / 1.0, axis=-1).astype(
            jnp.int32
        )
        toks.append(tok)
        lgs.append(lg)
        lg, cache = dec(model, tok[:, None], cache)
        lg = lg[:, 0]
    return jnp.stack(toks, 1), jnp.stack(lgs, 1)


def test_sampler_hooks_off_bitwise_and_hooks_on_match_forward(model, tokens):
    prompt, lengths, key = tokens[:, :6], jnp.array(LENGTHS, jnp.int32), jax.random.key(7)
    kw = dict(max_new_tokens=N_NEW, lengths=lengths, key=key, temperature=1.0, stop_token=-1)
    out = models.sample_llama(model, prompt, **kw)
    assert out.num_tokens.tolist() == [N_NEW, N_NEW]
    _check_draws(out, key)
    # Hooks off: the jitted sampler equals the unhooked prefill / decode loop bit for bit.
    ref_tok, ref_lg = _manual_sampler(model, prompt, lengths, key)
    np.testing.assert_array_equal(out.tokens, ref_tok)
    np.testing.assert_array_equal(out.logits, ref_lg)
    # Unhooked sampler (KV cache) = full forward on the generated sequences.
    lg, _ = inspect(model, _padded_sequences(prompt, out.tokens), ())
    for b, n in enumerate(LENGTHS):
        np.testing.assert_allclose(
            out.logits[b], lg[b, n - 1 : n - 1 + N_NEW], rtol=1e-4, atol=1e-4
        )
    # A stop token: the row stops at its first occurrence, later tokens are the stop token.
    stop = int(out.tokens[0, 1])
    s = models.sample_llama(model, prompt, **{**kw, "stop_token": stop})
    first = int(np.argmax(np.asarray(out.tokens[0]) == stop))
    assert int(s.num_tokens[0]) == first + 1
    np.testing.assert_array_equal(s.tokens[0, : first + 1], out.tokens[0, : first + 1])
    assert np.all(np.asarray(s.tokens[0, first:]) == stop)
    with pytest.raises(ValueError, match="needs a key"):
        models.sample_llama(model, prompt, max_new_tokens=2, temperature=1.0)
    with pytest.raises(ValueError, match="cache_len"):
        models.sample_llama(model, prompt, max_new_tokens=3, cache_len=7)


def test_sampler_refuses_ids_outside_the_vocabulary_and_running_past_max_seq_len(model):
    """Issue 26, item 7: both ran silently (NaN logits drawn as token 0; positions past the
    trained length)."""
    v, n = CFG.vocab_size, CFG.max_seq_len
    for bad, shown in ((v, v), (v + 7, v + 7), (-1, -1)):
        prompt = jnp.array([[1, 2, bad]], jnp.int32)
        with pytest.raises(ValueError, match=rf"sample_llama: prompt .*\[0, {v}\), got {shown} "
                                             r"at index \(0, 2\)"):  # fmt: skip
            models.sample_llama(model, prompt, max_new_tokens=2)
    with pytest.raises(ValueError, match="integer token ids"):
        models.sample_llama(model, jnp.ones((1, 3), jnp.float32), max_new_tokens=2)
    # The whole sequence, prompt and generated tokens, must fit in max_seq_len.
    msg = rf"prefix 0 \+ prompt {n - 3} \+ max_new_tokens 4 = {n + 1} tokens exceeds the model's max_seq_len {n}"
    with pytest.raises(ValueError, match=msg):
        models.sample_llama(model, jnp.ones((1, n - 3), jnp.int32), max_new_tokens=4)
    with pytest.raises(ValueError, match=rf"stop_token {v} is outside \[0, {v}\)"):
        models.sample_llama(model, jnp.array([[1, 2]], jnp.int32), max_new_tokens=2, stop_token=v)


@pytest.mark.integration
def test_sampler_accepts_the_largest_id_and_the_longest_sequence(model):
    """The edges of the two checks above pass (one sampler compilation)."""
    v, n = CFG.vocab_size, CFG.max_seq_len
    edge = jnp.ones((1, n - 3), jnp.int32).at[0, -1].set(v - 1)
    full = models.sample_llama(model, edge, max_new_tokens=3)
    assert full.tokens.shape == (1, 3) and np.all(np.isfinite(np.asarray(full.logits)))


@pytest.mark.slow
def test_sampler_with_hooks_matches_hooked_forward(vl, model, tokens, digits):
    """Every hook inside the jitted sampler (two more sampler compilations: slow)."""
    prompt, lengths, key = tokens[:, :6], jnp.array(LENGTHS, jnp.int32), jax.random.key(7)
    kw = dict(max_new_tokens=N_NEW, lengths=lengths, key=key, temperature=1.0, stop_token=-1)
    out = models.sample_llama(model, prompt, **kw)

    def run(on, w, **extra):
        return models.sample_llama(
            model,
            prompt,
            hooks=_all_hooks(on),
            logit_bias=_linear_bias,
            logit_bias_args=w,
            **{**kw, **extra},
        )

    off = run(False, jnp.zeros((32, 256)))  # every hook present, doing nothing
    np.testing.assert_array_equal(off.tokens, out.tokens)
    np.testing.assert_allclose(off.logits, out.logits, rtol=1e-5, atol=1e-5)
    # Hooks on (noise, steering, attention and head patches, some at generated positions) and a
    # bias read from the residual: a full hooked forward over the generated sequences gives the
    # same logits before the bias and the residual the bias was computed from.
    w = jnp.asarray(np.random.default_rng(6).normal(size=(32, 256)) * 0.3, jnp.float32)
    on = run(True, w)
    assert not np.array_equal(on.tokens, out.tokens)
    _check_draws(on, key)
    lg, cap = inspect(model, _padded_sequences(prompt, on.tokens), _all_hooks())
    for b, n in enumerate(LENGTHS):
        pos = np.arange(n - 1, n - 1 + N_NEW)
        bias = _np(cap["resid_post"][-1][b, pos]) @ _np(w)
        np.testing.assert_allclose(on.logits[b], _np(lg[b, pos]) + bias, rtol=1e-4, atol=1e-4)
    # Vision-language: zero-length text, the image alone as the prompt (greedy); its first
    # logits are the last visual position's logits of the full VL forward.
    patches = models.image_patches(digits[0], 2)
    full = nnx.jit(lambda m, p, t: m(p, t))(vl, patches, jnp.zeros((2, 0), jnp.int32))
    g = models.sample_llama(
        vl.llm,
        jnp.zeros((2, 0), jnp.int32),
        max_new_tokens=2,
        prefix_embeds=vl.embed_patches(patches),
    )
    np.testing.assert_allclose(g.logits[:, 0], full[:, 15], atol=1e-5)
    np.testing.assert_array_equal(g.tokens, np.argmax(g.logits, -1))


# ------------------------------------------------------------------------------ vision-language
@pytest.fixture(scope="module")
def digits():
    from sklearn.datasets import load_digits

    d = load_digits()
    return jnp.asarray(d.images[:2] / 16.0, jnp.float32), d.images[:2]


def test_image_patches_layout(digits):
    x, raw = digits
    p = models.image_patches(x, 2)
    assert p.shape == (2, 16, 4)
    for i in range(4):
        for j in range(4):
            np.testing.assert_allclose(
                p[:, 4 * i + j], raw[:, 2 * i : 2 * i + 2, 2 * j : 2 * j + 2].reshape(2, 4) / 16.0
            )
    with pytest.raises(ValueError, match="multiples of patch"):
        models.image_patches(jnp.zeros((1, 7, 8)), 2)


def test_vision_language_prefix(vl, digits):
    run = nnx.jit(lambda m, p, t: m(p, t))
    patches = models.image_patches(digits[0], 2)  # digit 0 and digit 1
    text = jnp.array([[5, 6, 7], [5, 6, 7]], jnp.int32)
    logits = run(vl, patches, text)
    assert logits.shape == (2, 16 + 3, 256)
    # Same text, different image: the text logits differ (the visual prefix is attended).
    assert np.abs(_np(logits[0, 16:]) - _np(logits[1, 16:])).max() > 1e-3
    emb = _np(patches) @ _np(vl.patch_embed.kernel[...]) + _np(vl.patch_embed.bias[...])
    np.testing.assert_allclose(vl.embed_patches(patches), emb, atol=1e-5)
    # Zero-length text runs: the 16 visual positions' logits, unchanged (causal).
    empty = run(vl, patches, jnp.zeros((2, 0), jnp.int32))
    assert empty.shape == (2, 16, 256) and np.isfinite(_np(empty)).all()
    np.testing.assert_allclose(empty, logits[:, :16], atol=1e-5)
    with pytest.raises(ValueError, match=r"patches must be \(B, P, 4\)"):
        vl(jnp.zeros((2, 16, 3)), text)
