"""Released language-model checkpoints into :class:`Llama`: Hugging Face safetensors and GGUF.

Two readers, one target. :func:`load_hf_checkpoint` reads a Hugging Face model directory
(``config.json`` + ``model.safetensors`` or a sharded ``model.safetensors.index.json``) of the
Llama, Qwen2, Qwen3 and Gemma 3 text families; :func:`load_gguf` reads a GGUF file (llama.cpp's
format; architectures ``llama``, ``qwen2``, ``qwen3``, ``gemma3``), dequantising every tensor
with ``gguf.quants.dequantize``. Both return a plain :class:`Llama` whose options
(:class:`LlamaConfig`) are set from the checkpoint's metadata, so the capture and intervention
hooks work unchanged. :func:`load_tokenizer` returns the checkpoint's own tokenizer through a
well-kept library (``tokenizers`` for ``tokenizer.json``, ``sentencepiece`` for a GGUF's
SentencePiece vocabulary).

Conventions undone here (facts about the formats, checked by the tests on files written in each
layout): PyTorch stores linear weights ``(out, in)``, we store ``(in, out)``; llama.cpp permutes
the rows of the query and key projections of the ``llama`` architecture into the interleaved
RoPE layout (per head, output row ``2 i + r`` of GGUF is row ``r * D/2 + i`` of the original),
and stores Gemma's RMSNorm weights with the ``+ 1`` already added.

The optional packages (``safetensors``, ``gguf``, ``tokenizers``, ``sentencepiece``) are the
``lm`` extra and imported inside the functions.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np

from fidia_jax.errors import CheckpointError, ConfigError, needs_extra
from fidia_jax.layers import RopeScaling
from fidia_jax.models._init import init_without_compile
from fidia_jax.models._llama import Llama, LlamaConfig

__all__ = [
    "LMTokenizer",
    "hf_llama_config",
    "load_lm_checkpoint",
    "load_gguf",
    "load_hf_checkpoint",
    "load_tokenizer",
]

_HF_FAMILIES = ("llama", "qwen2", "qwen3", "gemma3_text")
_GGUF_ARCHS = ("llama", "qwen2", "qwen3", "gemma3")


def _import(name: str):
    """Imports ``name`` from the ``lm`` extra (a missing one is a ``MissingExtraError``)."""
    with needs_extra("lm", "reading language-model checkpoints"):
        return importlib.import_module(name)


# ----------------------------------------------------------------------------- config
def _rope_scaling(spec: dict | None, where: str) -> RopeScaling | None:
    if not spec:
        return None
    kind = spec.get("rope_type", spec.get("type"))
    if kind in (None, "default"):
        return None
    if kind == "linear":
        return RopeScaling("linear", factor=float(spec["factor"]))
    if kind == "llama3":
        return RopeScaling(
            "llama3",
            factor=float(spec["factor"]),
            low_freq_factor=float(spec["low_freq_factor"]),
            high_freq_factor=float(spec["high_freq_factor"]),
            original_max_position_embeddings=int(spec["original_max_position_embeddings"]),
        )
    raise ConfigError(
        f"{where}: rope scaling {kind!r} is not supported (only 'linear' and 'llama3')"
    )


def hf_llama_config(
    hf: dict,
    *,
    max_seq_len: int | None = None,
    dtype=jnp.float32,
    param_dtype=None,
    attention_impl: str = "xla",
) -> LlamaConfig:
    """The :class:`LlamaConfig` of a Hugging Face ``config.json`` (as a dict).

    Args:
      hf: the parsed ``config.json``; ``model_type`` one of ``llama``, ``qwen2``, ``qwen3``,
        ``gemma3_text``.
      max_seq_len: default KV-cache length (default: the checkpoint's
        ``max_position_embeddings``, capped at 8192).
      dtype, param_dtype: compute and parameter dtypes (``param_dtype`` defaults to ``dtype``).
      attention_impl: the attention implementation of global layers.

    Returns:
      The config (Gemma 3: ``norm_offset=1``, ``post_norms``, ``embed_scale = sqrt(hidden)``,
      tanh-GELU MLP, QK-norm, local layers with their own RoPE base).

    Raises:
      ConfigError: an unsupported family or option (RoPE scaling other than linear / llama3,
        logit soft-capping, a Qwen2 sliding window, an activation other than the family's), or
        a layer-type list that is not Gemma 3's periodic pattern.
    """
    where = "hf_llama_config"
    mt = hf.get("model_type")
    if mt not in _HF_FAMILIES:
        raise ConfigError(
            f"{where}: model_type {mt!r} is not supported (one of {', '.join(_HF_FAMILIES)}; "
            "for a multimodal Gemma 3 use its text checkpoint)"
        )
    gemma = mt == "gemma3_text"
    act = hf.get("hidden_activation" if gemma else "hidden_act") or hf.get("hidden_act")
    want = "gelu_pytorch_tanh" if gemma else "silu"
    if act not in (want, None):
        raise ConfigError(f"{where}: {mt} with activation {act!r} is not supported ({want})")
    for key in ("final_logit_softcapping", "attn_logit_softcapping"):
        if hf.get(key) is not None:
            raise ConfigError(f"{where}: {key}={hf[key]} is not supported")
    if mt == "qwen2" and hf.get("use_sliding_window"):
        raise ConfigError(f"{where}: Qwen2 use_sliding_window=True is not supported")
    dim, heads = int(hf["hidden_size"]), int(hf["num_attention_heads"])
    head_dim = int(hf.get("head_dim") or dim // heads)
    n_layers = int(hf["num_hidden_layers"])
    rope = hf.get("rope_parameters")  # newer transformers: theta and scaling in one dict
    local_theta = 0.0
    if isinstance(rope, dict) and "full_attention" in rope:
        local_theta = float(rope.get("sliding_attention", {}).get("rope_theta", 0.0))
        rope = rope["full_attention"]
    theta = float((rope or {}).get("rope_theta", hf.get("rope_theta", 1e6 if gemma else 10000.0)))
    scaling = _rope_scaling(hf.get("rope_scaling") or rope, where)
    kw: dict[str, Any] = {}
    if gemma:
        window = int(hf.get("sliding_window") or 0)
        pattern = int(hf.get("sliding_window_pattern") or hf.get("_sliding_window_pattern") or 6)
        types = hf.get("layer_types")
        if types is not None:
            want_types = [
                "full_attention" if (i + 1) % pattern == 0 else "sliding_attention"
                for i in range(n_layers)
            ]
            if list(types) != want_types:
                raise ConfigError(
                    f"{where}: layer_types {types} is not the periodic pattern of "
                    f"sliding_window_pattern={pattern}"
                )
        kw.update(
            sliding_window=window,
            sliding_window_pattern=pattern,
            rope_local_theta=local_theta or float(hf.get("rope_local_base_freq", 10000.0)),
            norm_offset=1.0,
            post_norms=True,
            embed_scale=math.sqrt(dim),
            mlp_activation="gelu_tanh",
            query_pre_attn_scalar=float(hf.get("query_pre_attn_scalar") or head_dim),
            qk_norm=True,
        )
    kw["qkv_bias"] = mt == "qwen2" or bool(hf.get("attention_bias", False))
    if mt == "qwen3":
        kw["qk_norm"] = True
    if mt == "llama" and hf.get("mlp_bias"):
        raise ConfigError(f"{where}: mlp_bias=True is not supported")
    ctx = int(hf.get("max_position_embeddings", 8192))
    return LlamaConfig(
        vocab_size=int(hf["vocab_size"]),
        dim=dim,
        n_layers=n_layers,
        n_heads=heads,
        n_kv_heads=int(hf.get("num_key_value_heads") or heads),
        hidden_dim=int(hf["intermediate_size"]),
        max_seq_len=int(max_seq_len or min(ctx, 8192)),
        rope_theta=theta,
        norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
        attention_impl=attention_impl,
        dtype=dtype,
        param_dtype=param_dtype or dtype,
        head_size=head_dim if head_dim != dim // heads or dim % heads else 0,
        tie_embeddings=bool(hf.get("tie_word_embeddings", gemma)),
        rope_scaling=scaling,
        **kw,
    )


# ----------------------------------------------------------------------------- assembly
def _build(cfg: LlamaConfig, get: Callable[[str], np.ndarray], where: str) -> Llama:
    """A :class:`Llama` whose leaves come from ``get(our_dotted_name)`` (no XLA compile)."""

    def draw(names, shape, rng):
        del rng
        name = ".".join(names)
        value = get(name)
        if tuple(value.shape) != tuple(shape):
            raise CheckpointError(
                f"{where}: tensor for {name} has shape {tuple(value.shape)}, the model "
                f"(config) needs {tuple(shape)}"
            )
        return value

    return init_without_compile(lambda: Llama(cfg, rngs=_rngs()), draw, seed=0)


def _rngs():
    from flax import nnx

    return nnx.Rngs(0)


def _our_names(cfg: LlamaConfig) -> dict[str, tuple[str, bool]]:
    """Our dotted leaf name -> (Hugging Face tensor name, transpose)."""
    out = {"tok_embeddings.embedding": ("model.embed_tokens.weight", False)}
    for i in range(cfg.n_layers):
        hp, op = f"model.layers.{i}.", f"layers.{i}."
        for n in "qkvo":
            out[f"{op}attention.w{n}.kernel"] = (f"{hp}self_attn.{n}_proj.weight", True)
            if cfg.qkv_bias and n != "o":
                out[f"{op}attention.w{n}.bias"] = (f"{hp}self_attn.{n}_proj.bias", False)
        if cfg.qk_norm:
            out[f"{op}attention.q_norm.scale"] = (f"{hp}self_attn.q_norm.weight", False)
            out[f"{op}attention.k_norm.scale"] = (f"{hp}self_attn.k_norm.weight", False)
        out[f"{op}attention_norm.scale"] = (f"{hp}input_layernorm.weight", False)
        if cfg.post_norms:
            out[f"{op}attention_post_norm.scale"] = (f"{hp}post_attention_layernorm.weight", False)
            out[f"{op}ffn_norm.scale"] = (f"{hp}pre_feedforward_layernorm.weight", False)
            out[f"{op}ffn_post_norm.scale"] = (f"{hp}post_feedforward_layernorm.weight", False)
        else:
            out[f"{op}ffn_norm.scale"] = (f"{hp}post_attention_layernorm.weight", False)
        for ours, theirs in (("w1", "gate_proj"), ("w2", "down_proj"), ("w3", "up_proj")):
            out[f"{op}feed_forward.{ours}.kernel"] = (f"{hp}mlp.{theirs}.weight", True)
    out["norm.scale"] = ("model.norm.weight", False)
    if not cfg.tie_embeddings:
        out["lm_head.kernel"] = ("lm_head.weight", True)
    return out


def _to_param(x: np.ndarray, cfg: LlamaConfig) -> np.ndarray:
    return np.asarray(x).astype(np.dtype(cfg.param_dtype))


def load_hf_checkpoint(
    path: str | os.PathLike,
    *,
    dtype=jnp.float32,
    param_dtype=None,
    max_seq_len: int | None = None,
    attention_impl: str = "xla",
) -> Llama:
    """Loads a Hugging Face safetensors checkpoint directory into a :class:`Llama`.

    Args:
      path: directory with ``config.json`` and ``model.safetensors`` or
        ``model.safetensors.index.json`` (+ its shards). Families: ``llama``, ``qwen2``,
        ``qwen3``, ``gemma3_text`` (``model_type``).
      dtype: compute dtype (float32 or bfloat16).
      param_dtype: parameter dtype (default ``dtype``); stored tensors (bf16 / f16 / f32) are
        cast to it.
      max_seq_len, attention_impl: see :func:`hf_llama_config`.

    Returns:
      The model; ``model.config`` holds the options read from ``config.json``. Tensor names
      follow the mapping of :func:`hf_llama_config`'s families (``lm_head.weight`` absent
      means tied embeddings when ``tie_word_embeddings`` is set).

    Raises:
      CheckpointError: a missing file, a missing tensor, a tensor of the wrong shape, or
        unexpected tensors (named; e.g. a vision tower).
      ConfigError: an unsupported family or option (see :func:`hf_llama_config`).
    """
    where = "load_hf_checkpoint"
    st = _import("safetensors.numpy")
    root = os.fspath(path)
    cfg_path = os.path.join(root, "config.json")
    if not os.path.isfile(cfg_path):
        raise CheckpointError(f"{where}: no config.json in {root!r}")
    with open(cfg_path) as f:
        hf = json.load(f)
    cfg = hf_llama_config(
        hf,
        max_seq_len=max_seq_len,
        dtype=dtype,
        param_dtype=param_dtype,
        attention_impl=attention_impl,
    )
    index = os.path.join(root, "model.safetensors.index.json")
    single = os.path.join(root, "model.safetensors")
    if os.path.isfile(index):
        with open(index) as f:
            shard_of = json.load(f)["weight_map"]
    elif os.path.isfile(single):
        shard_of = None
    else:
        raise CheckpointError(
            f"{where}: neither model.safetensors nor model.safetensors.index.json in {root!r}"
        )
    tensors: dict[str, np.ndarray] = {}
    for shard in sorted(set(shard_of.values())) if shard_of else ["model.safetensors"]:
        file = os.path.join(root, shard)
        if not os.path.isfile(file):
            raise CheckpointError(f"{where}: shard {shard!r} named by the index is missing")
        tensors.update(st.load_file(file))
    names = _our_names(cfg)
    wanted = {hf_name for hf_name, _ in names.values()}
    if hf.get("tie_word_embeddings") and "lm_head.weight" in tensors:
        wanted.add("lm_head.weight")  # some tied checkpoints store the copy; it must agree
        if not np.array_equal(tensors["lm_head.weight"], tensors["model.embed_tokens.weight"]):
            raise CheckpointError(
                f"{where}: tie_word_embeddings is set but lm_head.weight differs from the "
                "embeddings"
            )
    extra = sorted(
        set(tensors) - wanted - {k for k in tensors if k.endswith("rotary_emb.inv_freq")}
    )
    if extra:
        raise CheckpointError(
            f"{where}: {len(extra)} tensors the {hf['model_type']} model does not use, "
            f"e.g. {extra[:3]}"
        )

    def get(name):
        if name not in names:
            raise CheckpointError(f"{where}: no rule for the model leaf {name}")
        hf_name, transpose = names[name]
        if hf_name not in tensors:
            raise CheckpointError(f"{where}: tensor {hf_name!r} is missing from {root!r}")
        x = tensors[hf_name]
        return _to_param(x.T if transpose else x, cfg)

    return _build(cfg, get, where)


# ----------------------------------------------------------------------------- GGUF
def _field(reader, key: str, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    return f.contents()


def _unpermute_qk(w_OxI: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's interleaving of query/key rows (``llama`` architecture only)."""
    o = w_OxI.shape[0]
    d = o // heads
    rest = w_OxI.shape[1:]
    return w_OxI.reshape(heads, d // 2, 2, *rest).swapaxes(1, 2).reshape(o, *rest)


def _gguf_config(reader, arch, n_vocab, *, has_output, max_seq_len, dtype, param_dtype, impl):
    where = "load_gguf"
    g = lambda key, default=None: _field(reader, key.format(arch=arch), default)  # noqa: E731
    dim = int(g("{arch}.embedding_length"))
    heads = int(g("{arch}.attention.head_count"))
    n_layers = int(g("{arch}.block_count"))
    head_dim = int(g("{arch}.attention.key_length", dim // heads))
    if int(g("{arch}.attention.value_length", head_dim)) != head_dim:
        raise ConfigError(f"{where}: key and value head sizes differ")
    kv = g("{arch}.attention.head_count_kv", heads)
    if isinstance(kv, list):
        raise ConfigError(f"{where}: per-layer KV head counts are not supported")
    for key in ("{arch}.attn_logit_softcapping", "{arch}.final_logit_softcapping"):
        if g(key) is not None:
            raise ConfigError(f"{where}: {key.format(arch=arch)} is not supported")
    scaling = None
    kind = g("{arch}.rope.scaling.type")
    if kind not in (None, "none"):
        if kind != "linear":
            raise ConfigError(f"{where}: rope scaling {kind!r} is not supported (only linear)")
        scaling = RopeScaling("linear", factor=float(g("{arch}.rope.scaling.factor")))
    gemma = arch == "gemma3"
    kw: dict[str, Any] = {}
    if gemma:
        # llama.cpp's gemma3 rules: local layers every layer but each 6th, base 1e4 there; the
        # 27B model (62 layers) scales queries by (dim / heads) ** -0.5, the others by D ** -0.5
        pattern = int(g("{arch}.attention.sliding_window_pattern", 6) or 6)
        kw.update(
            sliding_window=int(g("{arch}.attention.sliding_window", 0)),
            sliding_window_pattern=pattern,
            rope_local_theta=float(g("{arch}.rope.freq_base_swa", 10000.0)),
            norm_offset=1.0,
            post_norms=True,
            embed_scale=math.sqrt(dim),
            mlp_activation="gelu_tanh",
            query_pre_attn_scalar=float(dim // heads if n_layers == 62 else head_dim),
            qk_norm=True,
        )
    if arch == "qwen3":
        kw["qk_norm"] = True
    ctx = int(g("{arch}.context_length", 8192))
    return LlamaConfig(
        vocab_size=n_vocab,
        dim=dim,
        n_layers=n_layers,
        n_heads=heads,
        n_kv_heads=int(kv),
        hidden_dim=int(g("{arch}.feed_forward_length")),
        max_seq_len=int(max_seq_len or min(ctx, 8192)),
        rope_theta=float(g("{arch}.rope.freq_base", 1e6 if gemma else 10000.0)),
        norm_eps=float(g("{arch}.attention.layer_norm_rms_epsilon", 1e-6)),
        attention_impl=impl,
        dtype=dtype,
        param_dtype=param_dtype or dtype,
        head_size=head_dim if head_dim != dim // heads or dim % heads else 0,
        qkv_bias=arch == "qwen2",
        tie_embeddings=not has_output,
        rope_scaling=scaling,
        **kw,
    )


def load_gguf(
    path: str | os.PathLike,
    *,
    dtype=jnp.float32,
    param_dtype=None,
    max_seq_len: int | None = None,
    attention_impl: str = "xla",
) -> Llama:
    """Loads a GGUF file (llama.cpp) into a :class:`Llama`, dequantising every tensor.

    Args:
      path: a ``.gguf`` file of architecture ``llama``, ``qwen2``, ``qwen3`` or ``gemma3``
        (``general.architecture``). Any tensor type ``gguf.quants.dequantize`` reads (F32, F16,
        BF16, Q8_0, Q4_K, Q5_0, Q6_K, ...) becomes float32, then ``param_dtype``.
      dtype: compute dtype (float32 or bfloat16).
      param_dtype: parameter dtype (default ``dtype``).
      max_seq_len: default KV-cache length (default the file's context length, capped at 8192).
      attention_impl: attention implementation of the global layers.

    Returns:
      The model. For ``llama`` the query/key rows are put back from llama.cpp's interleaved
      RoPE layout; for ``gemma3`` the stored ``1 + w`` norm weights become ``w`` (the model
      adds the 1); a missing ``output.weight`` means tied embeddings.

    Raises:
      CheckpointError: not a file, a missing or unexpected tensor (named), a wrong shape; a
        ``rope_freqs`` tensor (per-frequency RoPE factors, Llama 3.1 GGUFs: not supported).
      ConfigError: another architecture, or an unsupported option (named).
    """
    where = "load_gguf"
    gguf = _import("gguf")
    file = os.fspath(path)
    if not os.path.isfile(file):
        raise CheckpointError(f"{where}: no file {file!r}")
    reader = gguf.GGUFReader(file)
    arch = _field(reader, "general.architecture")
    if arch not in _GGUF_ARCHS:
        raise ConfigError(
            f"{where}: architecture {arch!r} is not supported (one of {', '.join(_GGUF_ARCHS)})"
        )
    by_name = {t.name: t for t in reader.tensors}
    if "rope_freqs.weight" in by_name:
        raise CheckpointError(f"{where}: rope_freqs (per-frequency RoPE factors) not supported")
    if "token_embd.weight" not in by_name:
        raise CheckpointError(f"{where}: token_embd.weight is missing")
    emb = by_name["token_embd.weight"]
    n_vocab = int(emb.shape[-1])  # ggml order: (dim, vocab)
    cfg = _gguf_config(
        reader,
        arch,
        n_vocab,
        has_output="output.weight" in by_name,
        max_seq_len=max_seq_len,
        dtype=dtype,
        param_dtype=param_dtype,
        impl=attention_impl,
    )
    names = _gguf_names(cfg)
    extra = sorted(set(by_name) - {n for n, _ in names.values()})
    if extra:
        raise CheckpointError(
            f"{where}: {len(extra)} tensors the {arch} model does not use, e.g. {extra[:3]}"
        )

    def get(name):
        if name not in names:
            raise CheckpointError(f"{where}: no rule for the model leaf {name}")
        gname, transpose = names[name]
        if gname not in by_name:
            raise CheckpointError(f"{where}: tensor {gname!r} is missing from {file!r}")
        t = by_name[gname]
        x = gguf.quants.dequantize(t.data, t.tensor_type)
        x = np.asarray(x, np.float32).reshape(tuple(int(n) for n in reversed(t.shape)))
        if arch == "gemma3" and gname.endswith("norm.weight"):
            x = x - 1.0
        if arch == "llama" and gname.endswith(("attn_q.weight", "attn_k.weight")):
            heads = cfg.n_heads if gname.endswith("attn_q.weight") else cfg.n_kv_heads
            x = _unpermute_qk(x, heads)
        return _to_param(x.T if transpose else x, cfg)

    return _build(cfg, get, where)


def _gguf_names(cfg: LlamaConfig) -> dict[str, tuple[str, bool]]:
    out = {"tok_embeddings.embedding": ("token_embd.weight", False)}
    for i in range(cfg.n_layers):
        gp, op = f"blk.{i}.", f"layers.{i}."
        for ours, theirs in (
            ("q", "attn_q"),
            ("k", "attn_k"),
            ("v", "attn_v"),
            ("o", "attn_output"),
        ):
            out[f"{op}attention.w{ours}.kernel"] = (f"{gp}{theirs}.weight", True)
            if cfg.qkv_bias and ours != "o":
                out[f"{op}attention.w{ours}.bias"] = (f"{gp}{theirs}.bias", False)
        if cfg.qk_norm:
            out[f"{op}attention.q_norm.scale"] = (f"{gp}attn_q_norm.weight", False)
            out[f"{op}attention.k_norm.scale"] = (f"{gp}attn_k_norm.weight", False)
        out[f"{op}attention_norm.scale"] = (f"{gp}attn_norm.weight", False)
        out[f"{op}ffn_norm.scale"] = (f"{gp}ffn_norm.weight", False)
        if cfg.post_norms:
            out[f"{op}attention_post_norm.scale"] = (f"{gp}post_attention_norm.weight", False)
            out[f"{op}ffn_post_norm.scale"] = (f"{gp}post_ffw_norm.weight", False)
        for ours, theirs in (("w1", "ffn_gate"), ("w2", "ffn_down"), ("w3", "ffn_up")):
            out[f"{op}feed_forward.{ours}.kernel"] = (f"{gp}{theirs}.weight", True)
    out["norm.scale"] = ("output_norm.weight", False)
    if not cfg.tie_embeddings:
        out["lm_head.kernel"] = ("output.weight", True)
    return out


# ----------------------------------------------------------------------------- tokenizer
@dataclasses.dataclass(frozen=True)
class LMTokenizer:
    """A checkpoint's tokenizer (``tokenizers.Tokenizer`` or ``SentencePieceProcessor``).

    Attributes:
      backend: the library object (use it directly for anything not wrapped here).
      bos_id, eos_id: special token ids, or ``None`` when the checkpoint names none.
      add_bos: whether the checkpoint asks for a BOS token before a prompt.
    """

    backend: Any
    bos_id: int | None
    eos_id: int | None
    add_bos: bool

    @property
    def vocab_size(self) -> int:
        b = self.backend
        return int(b.get_vocab_size() if hasattr(b, "get_vocab_size") else b.get_piece_size())

    def encode(self, text: str, *, add_bos: bool | None = None) -> list[int]:
        """Token ids of ``text`` (with BOS first when ``add_bos``, default the checkpoint's)."""
        add_bos = self.add_bos if add_bos is None else add_bos
        b = self.backend
        if hasattr(b, "encode_as_ids"):
            ids = list(b.encode_as_ids(text))
        else:
            ids = list(b.encode(text, add_special_tokens=False).ids)
        if add_bos and self.bos_id is not None:
            ids = [self.bos_id, *ids]
        return ids

    def decode(self, ids: Sequence[int], *, skip_special: bool = True) -> str:
        """The text of ``ids`` (control tokens such as BOS dropped when ``skip_special``)."""
        b = self.backend
        ids = [int(i) for i in ids]
        if hasattr(b, "decode_ids"):
            if skip_special:
                ids = [i for i in ids if not b.is_control(i)]
            return b.decode_ids(ids)
        return b.decode(ids, skip_special_tokens=skip_special)


def load_tokenizer(path: str | os.PathLike) -> LMTokenizer:
    """The tokenizer of a checkpoint: a Hugging Face directory or a GGUF file.

    Args:
      path: a directory with ``tokenizer.json`` (read by ``tokenizers``; BOS/EOS from
        ``tokenizer_config.json`` / ``config.json`` when present), or a ``.gguf`` file whose
        ``tokenizer.ggml.model`` is ``llama`` (a SentencePiece vocabulary with scores and token
        types, rebuilt as a ``sentencepiece`` BPE model: pieces, scores, types, byte fallback,
        no dummy prefix unless ``tokenizer.ggml.add_space_prefix`` says so).

    Returns:
      An :class:`LMTokenizer`.

    Raises:
      CheckpointError: no tokenizer in the directory; a GGUF vocabulary of another kind
        (``gpt2`` BPE: use the model's ``tokenizer.json``).
    """
    where = "load_tokenizer"
    p = os.fspath(path)
    if os.path.isdir(p):
        tk = _import("tokenizers")
        file = os.path.join(p, "tokenizer.json")
        if not os.path.isfile(file):
            raise CheckpointError(f"{where}: no tokenizer.json in {p!r}")
        tok = tk.Tokenizer.from_file(file)
        meta: dict = {}
        for name in ("config.json", "tokenizer_config.json"):
            if os.path.isfile(os.path.join(p, name)):
                with open(os.path.join(p, name)) as f:
                    meta.update(json.load(f))

        def special(key):
            value = meta.get(key)
            if isinstance(value, dict):
                value = value.get("content")
            if isinstance(value, str):
                return tok.token_to_id(value)
            return meta.get(key + "_id") if isinstance(meta.get(key + "_id"), int) else None

        bos, eos = special("bos_token"), special("eos_token")
        return LMTokenizer(tok, bos, eos, bool(meta.get("add_bos_token", False)))
    if not os.path.isfile(p):
        raise CheckpointError(f"{where}: {p!r} is neither a directory nor a file")
    gguf = _import("gguf")
    reader = gguf.GGUFReader(p)
    kind = _field(reader, "tokenizer.ggml.model")
    if kind != "llama":
        raise CheckpointError(
            f"{where}: GGUF tokenizer {kind!r} is not supported (only 'llama', SentencePiece); "
            "use the model's tokenizer.json"
        )
    spm = _import("sentencepiece")
    pb = _import("sentencepiece.sentencepiece_model_pb2")
    tokens = _field(reader, "tokenizer.ggml.tokens")
    scores = _field(reader, "tokenizer.ggml.scores") or [0.0] * len(tokens)
    types = _field(reader, "tokenizer.ggml.token_type") or [1] * len(tokens)
    model = pb.ModelProto()
    for piece, score, typ in zip(tokens, scores, types, strict=True):
        sp = model.pieces.add()
        sp.piece, sp.score, sp.type = piece, float(score), int(typ)  # same enum as GGUF's
    ts = model.trainer_spec
    ts.model_type = pb.TrainerSpec.BPE
    ts.byte_fallback = any(int(t) == 6 for t in types)
    ids = {
        "unk": _field(reader, "tokenizer.ggml.unknown_token_id"),
        "bos": _field(reader, "tokenizer.ggml.bos_token_id"),
        "eos": _field(reader, "tokenizer.ggml.eos_token_id"),
        "pad": _field(reader, "tokenizer.ggml.padding_token_id"),
    }
    ts.unk_id = int(ids["unk"]) if ids["unk"] is not None else -1
    ts.bos_id = int(ids["bos"]) if ids["bos"] is not None else -1
    ts.eos_id = int(ids["eos"]) if ids["eos"] is not None else -1
    ts.pad_id = int(ids["pad"]) if ids["pad"] is not None else -1
    ns = model.normalizer_spec
    ns.name = "identity"
    ns.add_dummy_prefix = bool(_field(reader, "tokenizer.ggml.add_space_prefix", False))
    ns.remove_extra_whitespaces = False
    ns.escape_whitespaces = True
    proc = spm.SentencePieceProcessor()
    try:
        proc.LoadFromSerializedProto(model.SerializeToString())
    except RuntimeError as err:
        raise CheckpointError(
            f"{where}: the GGUF vocabulary is not a valid SentencePiece one: {err}"
        ) from err
    add_bos = bool(_field(reader, "tokenizer.ggml.add_bos_token", True))
    return LMTokenizer(
        proc,
        None if ids["bos"] is None else int(ids["bos"]),
        None if ids["eos"] is None else int(ids["eos"]),
        add_bos,
    )


def load_lm_checkpoint(
    path: str | os.PathLike, *, max_seq_len: int | None = None, dtype=jnp.float32
) -> tuple[Llama, LMTokenizer]:
    """A released model and its tokenizer from one path: what a method's ``checkpoint=`` reads.

    A path ending in ``.gguf`` goes to :func:`load_gguf`, any other to
    :func:`load_hf_checkpoint`; the tokenizer comes from :func:`load_tokenizer`.

    Args:
      path: a GGUF file or a Hugging Face model directory.
      max_seq_len: the loaded model's default KV-cache / position limit.
      dtype: compute (and parameter) dtype.

    Returns:
      ``(model, tokenizer)``.

    Raises:
      CheckpointError: ``path`` does not exist (one message naming it), or what the loaders
        raise (a missing tensor, no tokenizer, ...).
      ConfigError: an unsupported family or option.
    """
    p = os.fspath(path)
    if not os.path.exists(p):
        raise CheckpointError(
            f"load_lm_checkpoint: {p!r} does not exist (give a .gguf file or a Hugging Face model "
            "directory)"
        )
    if p.endswith(".gguf"):
        model = load_gguf(p, max_seq_len=max_seq_len, dtype=dtype)
    else:
        model = load_hf_checkpoint(p, max_seq_len=max_seq_len, dtype=dtype)
    return model, load_tokenizer(p)
