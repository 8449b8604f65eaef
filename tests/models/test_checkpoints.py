"""Loaders of released LM checkpoints: tiny random checkpoints written here in each real layout
(Hugging Face safetensors, GGUF with llama.cpp's names and conventions) are loaded into
``models.Llama`` and compared with the independent numpy forward of ``lm_numpy_reference.py``."""

from __future__ import annotations

import json
import math

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from flax import nnx
from lm_numpy_reference import forward as numpy_forward

from fidia_jax import models
from fidia_jax.errors import CheckpointError, ConfigError

st = pytest.importorskip("safetensors.numpy")
gguf = pytest.importorskip("gguf")

V, C, L, HQ, HKV, FF, T = 64, 32, 3, 4, 2, 64, 9
_forward = nnx.jit(lambda m, t: m(t))


def _hf_config(family: str, **extra) -> dict:
    cfg = dict(
        model_type=family,
        vocab_size=V,
        hidden_size=C,
        num_hidden_layers=L,
        num_attention_heads=HQ,
        num_key_value_heads=HKV,
        intermediate_size=FF,
        max_position_embeddings=128,
        rms_norm_eps=1e-6,
        rope_theta=10000.0,
        tie_word_embeddings=False,
    )
    cfg.update(extra)
    return cfg


def _hf_weights(hf: dict, seed: int) -> dict:
    """Random tensors with Hugging Face names and PyTorch shapes for the family of ``hf``."""
    rng = np.random.default_rng(seed)
    fam = hf["model_type"]
    d = hf.get("head_dim") or C // HQ
    gemma = fam == "gemma3_text"
    bias = fam == "qwen2" or hf.get("attention_bias")
    qk_norm = fam in ("qwen3", "gemma3_text")
    lin = lambda o, i: rng.normal(0, i**-0.5, (o, i)).astype(np.float32)  # noqa: E731
    vec = lambda n: (rng.normal(0, 0.3, n) + (0 if gemma else 1)).astype(np.float32)  # noqa: E731
    w = {"model.embed_tokens.weight": rng.normal(0, 1, (V, C)).astype(np.float32)}
    for i in range(L):
        p = f"model.layers.{i}."
        w[p + "self_attn.q_proj.weight"] = lin(HQ * d, C)
        w[p + "self_attn.k_proj.weight"] = lin(HKV * d, C)
        w[p + "self_attn.v_proj.weight"] = lin(HKV * d, C)
        w[p + "self_attn.o_proj.weight"] = lin(C, HQ * d)
        if bias:
            for n, h in (("q", HQ), ("k", HKV), ("v", HKV)):
                w[p + f"self_attn.{n}_proj.bias"] = rng.normal(0, 0.3, h * d).astype(np.float32)
        if qk_norm:
            w[p + "self_attn.q_norm.weight"] = vec(d)
            w[p + "self_attn.k_norm.weight"] = vec(d)
        w[p + "input_layernorm.weight"] = vec(C)
        w[p + "post_attention_layernorm.weight"] = vec(C)
        if gemma:
            w[p + "pre_feedforward_layernorm.weight"] = vec(C)
            w[p + "post_feedforward_layernorm.weight"] = vec(C)
        w[p + "mlp.gate_proj.weight"] = lin(FF, C)
        w[p + "mlp.up_proj.weight"] = lin(FF, C)
        w[p + "mlp.down_proj.weight"] = lin(C, FF)
    w["model.norm.weight"] = vec(C)
    if not hf.get("tie_word_embeddings"):
        w["lm_head.weight"] = lin(V, C)
    return w


def _spec(hf: dict) -> dict:
    fam = hf["model_type"]
    d = hf.get("head_dim") or C // HQ
    spec = dict(
        n_heads=HQ,
        n_kv=HKV,
        head_dim=d,
        eps=hf["rms_norm_eps"],
        theta=hf["rope_theta"],
        scaling=hf.get("rope_scaling"),
        tied=hf.get("tie_word_embeddings", False),
        qkv_bias=fam == "qwen2",
        qk_norm=fam in ("qwen3", "gemma3_text"),
    )
    if fam == "gemma3_text":
        pattern = hf["sliding_window_pattern"]
        spec.update(
            norm_offset=1.0,
            post_norms=True,
            embed_scale=math.sqrt(C),
            act="gelu_tanh",
            qscalar=hf["query_pre_attn_scalar"],
            window=hf["sliding_window"],
            global_layers={i for i in range(L) if (i + 1) % pattern == 0},
            local_theta=hf["rope_local_base_freq"],
        )
    return spec


FAMILIES = {
    "llama": _hf_config(
        "llama",
        rope_scaling=dict(
            rope_type="llama3",
            factor=8.0,
            low_freq_factor=1.0,
            high_freq_factor=4.0,
            original_max_position_embeddings=64,
        ),
    ),
    "qwen2": _hf_config("qwen2", tie_word_embeddings=True, rope_theta=1e6),
    "qwen3": _hf_config("qwen3", head_dim=16),
    "gemma3_text": _hf_config(
        "gemma3_text",
        head_dim=16,
        tie_word_embeddings=True,
        rope_theta=1e6,
        rope_local_base_freq=10000.0,
        sliding_window=4,
        sliding_window_pattern=3,
        query_pre_attn_scalar=24,
        hidden_activation="gelu_pytorch_tanh",
        rope_scaling={"rope_type": "linear", "factor": 8.0},
    ),
}


def _write_hf(dirpath, hf, w, *, shards=1, dtype=np.float32):
    dirpath.mkdir(exist_ok=True)
    (dirpath / "config.json").write_text(json.dumps(hf))
    arrays = {k: v.astype(dtype) for k, v in w.items()}
    if shards == 1:
        st.save_file(arrays, str(dirpath / "model.safetensors"))
        return arrays
    names = sorted(arrays)
    weight_map = {}
    for s in range(shards):
        file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: arrays[n] for n in names[s::shards]}
        st.save_file(part, str(dirpath / file))
        weight_map.update({n: file for n in part})
    (dirpath / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return arrays


def _tokens(seed=3):
    return np.random.default_rng(seed).integers(0, V, (2, T))


def _check(model, w, spec, tokens, rel=2e-5):
    ours = np.asarray(_forward(model, jnp.asarray(tokens, jnp.int32)), np.float64)
    for row in range(tokens.shape[0]):
        ref = numpy_forward(w, spec, tokens[row])
        np.testing.assert_allclose(ours[row], ref, rtol=0, atol=rel * np.abs(ref).max())


@pytest.mark.parametrize("family", list(FAMILIES))
def test_hf_checkpoint_matches_numpy_reference(family, tmp_path):
    hf = FAMILIES[family]
    w = _hf_weights(hf, seed=len(family))
    shards = 2 if family in ("qwen3", "gemma3_text") else 1  # sharded index for two of them
    _write_hf(tmp_path / family, hf, w, shards=shards)
    model = models.load_hf_checkpoint(tmp_path / family)
    assert model.config.tie_embeddings == bool(hf["tie_word_embeddings"])
    _check(model, w, _spec(hf), _tokens())


def test_hf_checkpoint_bfloat16(tmp_path):
    """bf16 files load as bf16 parameters with the stored values (no silent extra rounding)."""
    hf = FAMILIES["gemma3_text"]
    w = _hf_weights(hf, seed=7)
    stored = _write_hf(tmp_path / "g", hf, w, dtype=ml_dtypes.bfloat16)
    model = models.load_hf_checkpoint(tmp_path / "g", dtype=jnp.bfloat16)
    emb = np.asarray(model.tok_embeddings.embedding[...])
    assert emb.dtype == jnp.bfloat16
    np.testing.assert_array_equal(emb, stored["model.embed_tokens.weight"])
    k = np.asarray(model.layers[1].attention.wk.kernel[...])
    np.testing.assert_array_equal(k, stored["model.layers.1.self_attn.k_proj.weight"].T)
    ref = numpy_forward(
        {k: v.astype(np.float64) for k, v in stored.items()}, _spec(hf), _tokens()[0]
    )
    ours = np.asarray(_forward(model, jnp.asarray(_tokens()[:1], jnp.int32))[0], np.float64)
    # bf16 activations: a few per cent of the logit scale
    assert np.abs(ours - ref).max() < 0.05 * np.abs(ref).max()


def test_hf_checkpoint_errors(tmp_path):
    hf = FAMILIES["llama"]
    w = _hf_weights(hf, seed=1)
    with pytest.raises(CheckpointError, match="config.json"):
        models.load_hf_checkpoint(tmp_path)
    bad = dict(w)
    del bad["model.layers.2.mlp.up_proj.weight"]
    _write_hf(tmp_path / "missing", hf, bad)
    with pytest.raises(CheckpointError, match="up_proj"):
        models.load_hf_checkpoint(tmp_path / "missing")
    bad = dict(w, **{"model.layers.0.self_attn.k_proj.weight": np.zeros((7, C), np.float32)})
    _write_hf(tmp_path / "shape", hf, bad)
    with pytest.raises(CheckpointError, match="shape"):
        models.load_hf_checkpoint(tmp_path / "shape")
    bad = dict(w, **{"vision_tower.patch.weight": np.zeros((2, 2), np.float32)})
    _write_hf(tmp_path / "extra", hf, bad)
    with pytest.raises(CheckpointError, match="vision_tower"):
        models.load_hf_checkpoint(tmp_path / "extra")
    with pytest.raises(ConfigError, match="yarn"):
        models.hf_llama_config(dict(hf, rope_scaling={"rope_type": "yarn", "factor": 4.0}))
    with pytest.raises(ConfigError, match="mistral"):
        models.hf_llama_config(dict(hf, model_type="mistral"))
    with pytest.raises(ConfigError, match="softcapping"):
        models.hf_llama_config(dict(FAMILIES["gemma3_text"], final_logit_softcapping=30.0))


# ------------------------------------------------------------------------------ GGUF
def _gguf_name(hf_name: str, gemma: bool) -> str:
    """llama.cpp's tensor names (gguf.constants TENSOR_NAMES) for a Hugging Face name."""
    if not hf_name.startswith("model.layers."):
        return {
            "model.embed_tokens.weight": "token_embd.weight",
            "model.norm.weight": "output_norm.weight",
            "lm_head.weight": "output.weight",
        }[hf_name]
    i, rest = hf_name.split(".", 3)[2:]
    table = {
        "self_attn.q_proj": "attn_q",
        "self_attn.k_proj": "attn_k",
        "self_attn.v_proj": "attn_v",
        "self_attn.o_proj": "attn_output",
        "self_attn.q_norm": "attn_q_norm",
        "self_attn.k_norm": "attn_k_norm",
        "input_layernorm": "attn_norm",
        "post_attention_layernorm": "post_attention_norm" if gemma else "ffn_norm",
        "pre_feedforward_layernorm": "ffn_norm",
        "post_feedforward_layernorm": "post_ffw_norm",
        "mlp.gate_proj": "ffn_gate",
        "mlp.up_proj": "ffn_up",
        "mlp.down_proj": "ffn_down",
    }
    stem, kind = rest.rsplit(".", 1)
    return f"blk.{i}.{table[stem]}.{kind}"


def _llama_cpp_permute(w_OxI, heads):
    """llama.cpp's converter: per head, rows (r * D/2 + i) -> (2 i + r) (interleaved RoPE)."""
    o = w_OxI.shape[0]
    return w_OxI.reshape(heads, 2, o // heads // 2, -1).swapaxes(1, 2).reshape(w_OxI.shape)


def _write_gguf(path, arch, hf, w, *, quantize=()):
    """Writes ``w`` (HF names) as llama.cpp would; returns the weights as the file holds them
    (HF names, after any quantisation round trip) for the reference."""
    gemma = arch == "gemma3"
    d = hf.get("head_dim") or C // HQ
    wr = gguf.GGUFWriter(str(path), arch)
    wr.add_context_length(hf["max_position_embeddings"])
    wr.add_embedding_length(C)
    wr.add_block_count(L)
    wr.add_feed_forward_length(FF)
    wr.add_head_count(HQ)
    wr.add_head_count_kv(HKV)
    wr.add_layer_norm_rms_eps(hf["rms_norm_eps"])
    wr.add_key_length(d)
    wr.add_value_length(d)
    wr.add_rope_freq_base(hf["rope_theta"])
    if gemma:
        wr.add_sliding_window(hf["sliding_window"])
    held = {}
    for name, x in w.items():
        x = x.astype(np.float32)
        gname = _gguf_name(name, gemma)
        if gemma and name.endswith("norm.weight"):
            x_file = x + 1.0  # llama.cpp stores Gemma's 1 + w
        elif arch == "llama" and name.endswith(("q_proj.weight", "k_proj.weight")):
            x_file = _llama_cpp_permute(x, HQ if "q_proj" in name else HKV)
        else:
            x_file = x
        if gname.split(".")[-2] in quantize and x.ndim == 2:
            qt = gguf.GGMLQuantizationType.Q8_0
            q = gguf.quants.quantize(x_file, qt)
            wr.add_tensor(gname, q, raw_dtype=qt)
            back = gguf.quants.dequantize(q, qt).reshape(x_file.shape)
            if arch == "llama" and name.endswith(("q_proj.weight", "k_proj.weight")):
                h = HQ if "q_proj" in name else HKV
                back = back.reshape(h, back.shape[0] // h // 2, 2, -1).swapaxes(1, 2)
                back = back.reshape(x.shape)
            held[name] = back
        else:
            wr.add_tensor(gname, x_file)
            held[name] = x
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    return held


def test_gguf_gemma3_matches_numpy_reference(tmp_path):
    hf = dict(FAMILIES["gemma3_text"], query_pre_attn_scalar=16, rope_scaling=None)
    hf["sliding_window_pattern"] = 6  # llama.cpp's gemma3 rule: every 6th layer global
    w = _hf_weights(hf, seed=11)
    held = _write_gguf(
        tmp_path / "g.gguf", "gemma3", hf, w, quantize=("attn_q", "ffn_up", "token_embd")
    )
    model = models.load_gguf(tmp_path / "g.gguf")
    cfg = model.config
    assert (cfg.sliding_window, cfg.sliding_window_pattern, cfg.rope_local_theta) == (4, 6, 1e4)
    assert cfg.tie_embeddings and cfg.norm_offset == 1.0 and cfg.head_dim == 16
    np.testing.assert_allclose(  # the stored 1 + w came back as w
        np.asarray(model.layers[0].attention.q_norm.scale[...]),
        w["model.layers.0.self_attn.q_norm.weight"],
        atol=1e-6,
    )
    assert not np.array_equal(
        held["model.layers.1.mlp.up_proj.weight"], w["model.layers.1.mlp.up_proj.weight"]
    )
    _check(model, held, _spec(hf), _tokens())


def test_gguf_llama_unpermutes_qk(tmp_path):
    hf = dict(FAMILIES["llama"], rope_scaling=None)
    w = _hf_weights(hf, seed=12)
    held = _write_gguf(tmp_path / "l.gguf", "llama", hf, w, quantize=("attn_k",))
    model = models.load_gguf(tmp_path / "l.gguf")
    np.testing.assert_array_equal(
        np.asarray(model.layers[2].attention.wq.kernel[...]),
        w["model.layers.2.self_attn.q_proj.weight"].T,
    )
    _check(model, held, _spec(hf), _tokens())


def test_gguf_bfloat16_and_errors(tmp_path):
    hf = dict(FAMILIES["qwen3"])
    w = _hf_weights(hf, seed=13)
    _write_gguf(tmp_path / "q.gguf", "qwen3", hf, w)
    model = models.load_gguf(tmp_path / "q.gguf", dtype=jnp.bfloat16)
    emb = np.asarray(model.tok_embeddings.embedding[...])
    assert emb.dtype == jnp.bfloat16
    np.testing.assert_array_equal(emb, w["model.embed_tokens.weight"].astype(ml_dtypes.bfloat16))
    with pytest.raises(CheckpointError, match="no file"):
        models.load_gguf(tmp_path / "absent.gguf")
    wr = gguf.GGUFWriter(str(tmp_path / "m.gguf"), "mamba")
    wr.add_tensor("token_embd.weight", np.zeros((4, 8), np.float32))
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    with pytest.raises(ConfigError, match="mamba"):
        models.load_gguf(tmp_path / "m.gguf")
