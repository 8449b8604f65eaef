"""Each option of released checkpoints in ``LlamaConfig``, one at a time and all of Gemma 3's
together, against the independent float64 numpy forward in ``lm_numpy_reference.py``."""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from lm_numpy_reference import forward as numpy_forward
from tiny_configs import GEMMA3_LIKE

from fidia_jax import layers, models
from fidia_jax.errors import ConfigError

T = 10
_forward = nnx.jit(lambda m, t: m(t))
_prefill = nnx.jit(lambda m, t, c: m.prefill(t, c))
_decode = nnx.jit(lambda m, t, c: m.decode(t, c))


def _randomize(model, seed):
    """Every parameter random (norm scales and biases too, so a missing one shows)."""
    rng = np.random.default_rng(seed)
    state = nnx.state(model, nnx.Param)

    def draw(x):
        shape = x.shape
        std = 0.3 if len(shape) == 1 else shape[0] ** -0.5
        if len(shape) == 2 and shape[0] == model.config.vocab_size:  # embedding
            std = 1.0
        return jnp.asarray(rng.normal(0.0, std, shape), x.dtype)

    nnx.update(model, jax.tree.map(draw, state))
    return model


def _to_hf(model) -> dict:
    """Our parameters under Hugging Face names, PyTorch ``(out, in)`` layout (test-side map)."""
    cfg = model.config
    a = lambda p: np.asarray(p[...], np.float64)  # noqa: E731
    w = {"model.embed_tokens.weight": a(model.tok_embeddings.embedding)}
    for i, blk in enumerate(model.layers):
        p = f"model.layers.{i}."
        att = blk.attention
        for name, lin in (("q", att.wq), ("k", att.wk), ("v", att.wv), ("o", att.wo)):
            w[p + f"self_attn.{name}_proj.weight"] = a(lin.kernel).T
            if lin.bias is not None:
                w[p + f"self_attn.{name}_proj.bias"] = a(lin.bias)
        if cfg.qk_norm:
            w[p + "self_attn.q_norm.weight"] = a(att.q_norm.scale)
            w[p + "self_attn.k_norm.weight"] = a(att.k_norm.scale)
        w[p + "input_layernorm.weight"] = a(blk.attention_norm.scale)
        if cfg.post_norms:
            w[p + "post_attention_layernorm.weight"] = a(blk.attention_post_norm.scale)
            w[p + "pre_feedforward_layernorm.weight"] = a(blk.ffn_norm.scale)
            w[p + "post_feedforward_layernorm.weight"] = a(blk.ffn_post_norm.scale)
        else:
            w[p + "post_attention_layernorm.weight"] = a(blk.ffn_norm.scale)
        w[p + "mlp.gate_proj.weight"] = a(blk.feed_forward.w1.kernel).T
        w[p + "mlp.up_proj.weight"] = a(blk.feed_forward.w3.kernel).T
        w[p + "mlp.down_proj.weight"] = a(blk.feed_forward.w2.kernel).T
    w["model.norm.weight"] = a(model.norm.scale)
    if not cfg.tie_embeddings:
        w["lm_head.weight"] = a(model.lm_head.kernel).T
    return w


def _spec(cfg: models.LlamaConfig, **extra) -> dict:
    spec = dict(
        n_heads=cfg.n_heads,
        n_kv=cfg.n_kv_heads,
        head_dim=cfg.head_dim,
        eps=cfg.norm_eps,
        theta=cfg.rope_theta,
    )
    spec.update(extra)
    return spec


LLAMA3 = dict(
    rope_type="llama3",
    factor=8.0,
    low_freq_factor=1.0,
    high_freq_factor=4.0,
    original_max_position_embeddings=64,
)

# (LlamaConfig overrides, reference spec extras): one option at a time, then Gemma 3 whole
CASES = {
    "plain": ({}, {}),
    "qkv_bias": ({"qkv_bias": True}, {"qkv_bias": True}),
    "qk_norm": ({"qk_norm": True}, {"qk_norm": True}),
    "tied": ({"tie_embeddings": True}, {"tied": True}),
    "head_size": ({"head_size": 16}, {}),
    "rope_linear": (
        {"rope_scaling": layers.RopeScaling("linear", factor=4.0)},
        {"scaling": {"rope_type": "linear", "factor": 4.0}},
    ),
    "rope_llama3": (
        {
            "rope_scaling": layers.RopeScaling(
                "llama3", 8.0, 1.0, 4.0, original_max_position_embeddings=64
            )
        },
        {"scaling": LLAMA3},
    ),
    "sliding": (
        {"sliding_window": 3, "sliding_window_pattern": 2, "rope_local_theta": 100.0},
        {"window": 3, "global_layers": {1}, "local_theta": 100.0},
    ),
    "norm_offset": ({"norm_offset": 1.0}, {"norm_offset": 1.0}),
    "post_norms": ({"post_norms": True}, {"post_norms": True}),
    "embed_scale": ({"embed_scale": 5.0}, {"embed_scale": 5.0}),
    "gelu_tanh": ({"mlp_activation": "gelu_tanh"}, {"act": "gelu_tanh"}),
    "query_scalar": ({"query_pre_attn_scalar": 12.0}, {"qscalar": 12.0}),
    "gemma3": (
        dict(GEMMA3_LIKE),
        dict(
            qk_norm=True,
            tied=True,
            window=4,
            global_layers={2},
            local_theta=1e4,
            scaling={"rope_type": "linear", "factor": 8.0},
            norm_offset=1.0,
            post_norms=True,
            embed_scale=math.sqrt(32),
            act="gelu_tanh",
            qscalar=16.0,
        ),
    ),
}


def _model(overrides, seed=0):
    cfg = models.LlamaConfig.tiny(vocab_size=50, **overrides)
    return _randomize(models.Llama(cfg, rngs=nnx.Rngs(seed)), seed)


def _tokens(b=2, seed=1):
    return jnp.asarray(np.random.default_rng(seed).integers(0, 50, (b, T)), jnp.int32)


def _assert_close(ours, ref):
    ours = np.asarray(ours, np.float64)
    scale = np.abs(ref).max()
    np.testing.assert_allclose(ours, ref, rtol=0, atol=2e-5 * scale)


@pytest.mark.parametrize("case", list(CASES))
def test_option_matches_numpy_reference(case):
    overrides, extra = CASES[case]
    model = _model(overrides)
    tokens = _tokens()
    ours = _forward(model, tokens)
    spec = _spec(model.config, **extra)
    w = _to_hf(model)
    for row in range(tokens.shape[0]):
        _assert_close(ours[row], numpy_forward(w, spec, np.asarray(tokens[row])))
    if case not in ("plain", "head_size", "tied"):
        # the option matters: the reference without it (same weights) is far from ours
        off = numpy_forward(w, _spec(model.config, tied=model.config.tie_embeddings), tokens[0])
        assert np.abs(off - np.asarray(ours[0], np.float64)).max() > 1e-3 * np.abs(off).max()


@pytest.mark.parametrize("case", ["sliding", "gemma3"])
def test_cached_decode_matches_full_pass(case):
    """Prefill 3 tokens then decode 7 one by one (past the window) equals the full pass."""
    model = _model(CASES[case][0])
    tokens = _tokens()
    full = np.asarray(_forward(model, tokens))
    cache = model.init_cache(2, 16)
    lg, cache = _prefill(model, tokens[:, :3], cache)
    steps = [np.asarray(lg)]
    for t in range(3, T):
        lg, cache = _decode(model, tokens[:, t : t + 1], cache)
        steps.append(np.asarray(lg))
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=1e-5, atol=1e-5)


def test_sliding_window_capture_and_hooks():
    """Captured weights of a local layer are zero outside the window; hooks still apply."""
    model = _model(CASES["sliding"][0])
    tokens = _tokens()
    logits, cap = model.inspect(tokens, capture=("attn_weights", "resid_post"))
    np.testing.assert_array_equal(np.asarray(logits), np.asarray(model(tokens)))
    p = np.asarray(cap["attn_weights"])  # (L, B, H, T, T)
    i, j = np.meshgrid(np.arange(T), np.arange(T), indexing="ij")
    outside = (i - j >= 3) | (j > i)
    assert np.all(p[0][..., outside] == 0.0)  # layer 0 is local
    assert np.all(p[1][..., (i - j >= 3) & (j <= i)] > 0.0)  # layer 1 is global
    np.testing.assert_allclose(p.sum(-1), 1.0, rtol=1e-5)
    vec = jnp.ones((model.config.dim,)) * 3.0
    steered = model(tokens, hooks=(models.AddToResidual(1, vec, site="post"),))
    assert not np.allclose(np.asarray(steered), np.asarray(logits))


def test_layer_window_pattern():
    cfg = models.LlamaConfig.tiny(n_layers=12, sliding_window=512, sliding_window_pattern=6)
    assert [cfg.layer_window(i) for i in range(12)] == [512] * 5 + [0] + [512] * 5 + [0]
    assert models.LlamaConfig.tiny().layer_window(0) == 0


def test_rope_frequencies_llama3_bands():
    """Short waves kept, long waves divided by the factor, the middle band between."""
    sc = layers.RopeScaling("llama3", 8.0, 1.0, 4.0, original_max_position_embeddings=64)
    base = layers.rope_frequencies(8, 10000.0)
    f = layers.rope_frequencies(8, 10000.0, sc)
    np.testing.assert_allclose(base, 10000.0 ** (-np.arange(0, 8, 2) / 8), rtol=1e-6)
    assert f[0] == base[0]  # wavelength 6.3 < 16
    assert base[1] / 8 < f[1] < base[1]  # wavelength 63 in [16, 64]
    np.testing.assert_allclose(f[2:], base[2:] / 8, rtol=1e-6)


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"mlp_activation": "relu"}, "mlp_activation"),
        ({"sliding_window": -1}, "sliding_window"),
        ({"embed_scale": 0.0}, "embed_scale"),
        ({"rope_scaling": {"factor": 2}}, "rope_scaling"),
        ({"head_size": -4}, "head_size"),
    ],
)
def test_bad_options_raise(overrides, match):
    with pytest.raises(ConfigError, match=match):
        models.LlamaConfig.tiny(**overrides)
    with pytest.raises(ConfigError, match="llama3"):
        layers.RopeScaling("llama3", 8.0, 4.0, 1.0)


def test_defaults_unchanged():
    """The new options default to the plain model (the bit-identity check is test_llama.py)."""
    cfg = models.LlamaConfig.tiny()
    assert cfg.head_dim == cfg.dim // cfg.n_heads
    assert dataclasses.replace(cfg, head_size=16).head_dim == 16
    model = models.Llama(cfg, rngs=nnx.Rngs(0))
    assert hasattr(model, "lm_head") and not hasattr(model.layers[0], "attention_post_norm")
