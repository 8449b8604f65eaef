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

Conversion cache: what a loader converts (the model's arrays in the parameter dtype and its
config; a GGUF file's rebuilt tokenizer) is written once to a cache directory and read back by
the next load of the same file (``fidia_jax/_disk_cache.py``; ``cache=`` /
``cache_dir=`` on every loader, ``FIDIA_LM_CACHE=0`` turns the default off).

The optional packages (``safetensors``, ``gguf``, ``tokenizers``, ``sentencepiece``) are the
``lm`` extra and imported inside the functions.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.metadata
import json
import math
import os
import struct
import time
from collections.abc import Callable, Collection, Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np

from fidia_jax import _disk_cache as cc
from fidia_jax.errors import CheckpointError, ConfigError, needs_extra
from fidia_jax.layers import RopeScaling
from fidia_jax.models._checkpoint_files import (
    check_gguf,
    safetensors_header_len,
    safetensors_layout,
)
from fidia_jax.models._init import init_without_compile
from fidia_jax.models._llama import Llama, LlamaConfig
from fidia_jax.models._lm_tokenizer import (
    GGUFSentencePiece,
    gguf_byte_level_bpe,
    gguf_sentencepiece,
)

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


def _build_mapped(
    cfg: LlamaConfig,
    names: dict[str, tuple[str, bool]],
    available: Collection[str],
    load: Callable[[str], np.ndarray],
    where: str,
    source: str,
    held: dict[str, np.ndarray] | None = None,
) -> Llama:
    """:func:`_build` with each leaf read through ``names`` (our dotted name -> (the file's
    tensor name, transpose)): ``load(file_name)`` gives the array, transposed when asked and
    cast by :func:`_to_param`; ``held`` (when given) receives every leaf as built (the
    conversion cache's arrays).

    Raises:
      CheckpointError: a leaf without a rule, or a tensor missing from ``source``.
    """

    def get(name):
        if name not in names:
            raise CheckpointError(f"{where}: no rule for the model leaf {name}")
        src, transpose = names[name]
        if src not in available:
            raise CheckpointError(f"{where}: tensor {src!r} is missing from {source!r}")
        x = load(src)
        out = _to_param(x.T if transpose else x, cfg)
        if held is not None:
            held[name] = out
        return out

    return _build(cfg, get, where)


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


# ----------------------------------------------------------------------------- conversion cache
_WEIGHTS = "weights.safetensors"
_CALL_FIELDS = ("max_seq_len", "attention_impl", "dtype", "param_dtype")


def _lib_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _config_fields_digest() -> str:
    """Changes whenever :class:`LlamaConfig` gains or loses a field (cached configs then miss)."""
    names = ",".join(f.name for f in dataclasses.fields(LlamaConfig))
    return hashlib.sha256(names.encode()).hexdigest()[:16]


def _config_json(cfg: LlamaConfig, default_max_seq_len: int) -> dict:
    """The checkpoint's part of ``cfg`` as JSON (the call's options left out)."""
    out: dict[str, Any] = {"default_max_seq_len": int(default_max_seq_len)}
    for f in dataclasses.fields(cfg):
        if f.name not in _CALL_FIELDS:
            value = getattr(cfg, f.name)
            out[f.name] = dataclasses.asdict(value) if isinstance(value, RopeScaling) else value
    return out


def _config_from_json(d: dict, *, max_seq_len, dtype, param_dtype, attention_impl) -> LlamaConfig:
    kw = dict(d)
    default = kw.pop("default_max_seq_len")
    if kw.get("rope_scaling") is not None:
        kw["rope_scaling"] = RopeScaling(**kw["rope_scaling"])
    return LlamaConfig(
        **kw,
        max_seq_len=int(max_seq_len or default),
        attention_impl=attention_impl,
        dtype=dtype,
        param_dtype=param_dtype or dtype,
    )


def _say(message: str) -> None:
    """One line on stderr (not when ``FIDIA_QUIET`` is set, nor on a process other than 0)."""
    from fidia_jax import parallel
    from fidia_jax._io import is_quiet, make_console

    if not is_quiet() and parallel.is_primary():
        make_console(stderr=True).print(message, highlight=False, markup=False, soft_wrap=True)


def _stage(description: str, show: bool):
    """The project's stage message (``fidia_jax.train.stage``) when ``show``, else nothing."""
    if not show:
        import contextlib

        return contextlib.nullcontext()
    from fidia_jax._io import stage

    return stage(description)


def _model_from_cache(
    entry: cc.Entry,
    make_cfg: Callable[[dict], LlamaConfig],
    names_of: Callable[[LlamaConfig], dict],
    where: str,
) -> Llama | None:
    """The model of a whole cache entry, or ``None`` (a miss; a broken entry is one warning).

    The arrays are read one at a time with plain reads (``cc.safetensors_table`` /
    ``cc.read_into``), not through a memory map, which keeps the whole file resident until it
    is closed (Gemma 3 270M: a 2.4 GB peak instead of 1.4 GB, ``docs/safesci.md``, *Memory*).
    """
    t0 = time.perf_counter()
    info = entry.read()
    if info is None:
        return None
    cfg = make_cfg(info)  # the entry's config is sealed by its manifest: errors are the call's
    path = entry.file(_WEIGHTS)
    try:
        table = cc.safetensors_table(path)
        held, want = set(table), set(names_of(cfg))
        if held != want:
            raise ValueError(
                f"it holds {len(held)} arrays, the model needs {len(want)} (e.g. "
                f"{sorted(held ^ want)[:2]})"
            )
        pdt = np.dtype(cfg.param_dtype)
        codes = {"float32": "F32", "float16": "F16", "bfloat16": "BF16", "float64": "F64"}

        def get(name):
            code, shape, offset, _ = table[name]
            if code != codes.get(pdt.name):
                raise ValueError(f"array {name} is {code}, not {pdt}")
            x = np.empty(shape, pdt)
            cc.read_into(path, offset, x.reshape(-1).view(np.uint8))
            return x

        model = _build(cfg, get, where)
    except ConfigError:
        raise  # the call's options (e.g. attention_impl), not the entry
    except Exception as err:  # anything unreadable in the entry: rebuild it
        entry.corrupt(f"{type(err).__name__}: {err}")
        return None
    _say(f"{where}: loaded from cache {entry.path} in {time.perf_counter() - t0:.1f} s")
    return model


def _store_model(entry: cc.Entry, arrays: dict[str, np.ndarray], info: dict) -> None:
    st = _import("safetensors.numpy")
    dense = {k: np.ascontiguousarray(v) for k, v in arrays.items()}  # safetensors: C order
    if entry.write({_WEIGHTS: lambda path: st.save_file(dense, path)}, info):
        _say(f"{entry.where}: conversion cached in {entry.path}")


def load_hf_checkpoint(
    path: str | os.PathLike,
    *,
    dtype=jnp.float32,
    param_dtype=None,
    max_seq_len: int | None = None,
    attention_impl: str = "xla",
    cache: bool | None = None,
    cache_dir: str | os.PathLike | None = None,
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
      cache: the conversion cache (``fidia_jax/_disk_cache.py``): ``None`` (default)
        uses it unless ``$FIDIA_LM_CACHE`` is ``0`` / ``off``, for checkpoints of at least
        16 MiB; ``True`` uses it whatever the size; ``False`` neither reads nor writes it.
        Cached: our arrays (transposed, in ``param_dtype``), keyed by each shard's size,
        ``st_mtime_ns`` and the sha256 of its JSON header and of sampled data blocks, the
        sha256 of ``config.json`` and of the index, ``param_dtype`` and the cache's format
        version (``max_seq_len``, ``dtype`` and ``attention_impl`` change no array and share
        the entry). A broken entry is rebuilt with one warning; a cache that cannot be
        written is one warning and the load goes on.
      cache_dir: the cache directory (default ``$FIDIA_CACHE_DIR/lm_convert``, else the user
        cache directory, ``~/.cache/fidia_jax/lm_convert`` on Linux).

    Returns:
      The model; ``model.config`` holds the options read from ``config.json``. Tensor names
      follow the mapping of :func:`hf_llama_config`'s families (``lm_head.weight`` absent
      means tied embeddings when ``tie_word_embeddings`` is set).

    Raises:
      CheckpointError: a missing file, a missing tensor, a tensor of the wrong shape, or
        unexpected tensors (named; e.g. a vision tower). Before any tensor is read (headers and
        sizes only, see ``_checkpoint_files.safetensors_layout``): a tensor in two shards; an
        index that puts a tensor in a shard that does not hold it, or omits one a shard holds;
        a ``model*.safetensors`` file beside the index that it does not list; a truncated or
        corrupt safetensors file (each named with the file and the tensor).
      ConfigError: an unsupported family or option (see :func:`hf_llama_config`); ``cache``
        not a bool / ``None``; ``cache_dir`` an existing file.
    """
    where = "load_hf_checkpoint"
    st = _import("safetensors.numpy")
    root = os.fspath(path)
    cfg_path = os.path.join(root, "config.json")
    if not os.path.isfile(cfg_path):
        raise CheckpointError(f"{where}: no config.json in {root!r}")
    with open(cfg_path, "rb") as f:
        cfg_bytes = f.read()
    hf = json.loads(cfg_bytes)
    cfg = hf_llama_config(
        hf,
        max_seq_len=max_seq_len,
        dtype=dtype,
        param_dtype=param_dtype,
        attention_impl=attention_impl,
    )
    holder = safetensors_layout(root, where)  # headers, sizes, index and shards checked
    shards = sorted(set(holder.values()))
    files = [os.path.join(root, shard) for shard in shards]
    total = sum(os.path.getsize(file) for file in files)
    cache_root = cc.resolve_cache_dir(cache, cache_dir, source_bytes=total, where=where)
    entry = None
    if cache_root is not None:
        index = os.path.join(root, "model.safetensors.index.json")
        key = {
            "format": cc.FORMAT_VERSION,
            "source": [
                {"name": shard, **cc.fingerprint(file, safetensors_header_len(file))}
                for shard, file in zip(shards, files, strict=True)
            ],
            "config_json": hashlib.sha256(cfg_bytes).hexdigest(),
            "index_json": cc.fingerprint(index, None)["sha256"] if os.path.isfile(index) else None,
            "param_dtype": np.dtype(cfg.param_dtype).name,
            "config_fields": _config_fields_digest(),
        }
        entry = cc.Entry(cache_root, "hf-model", key, where=where, sources=[root])
        model = _model_from_cache(entry, lambda info: cfg, _our_names, where)
        if model is not None:
            return model
    show = entry is not None or total >= cc.MIN_DEFAULT_BYTES
    note = ", then caching it" if entry is not None else ""
    name = os.path.basename(os.path.abspath(root))
    with _stage(f"{where}: converting {name} ({total / 2**20:.1f} MiB{note})", show):
        tensors: dict[str, np.ndarray] = {}
        for file in files:
            try:
                tensors.update(st.load_file(file))
            except Exception as err:  # safetensors raises its own error types
                raise CheckpointError(f"{where}: {file!r} could not be read: {err}") from err
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
        held: dict[str, np.ndarray] = {}
        model = _build_mapped(
            cfg, names, tensors, tensors.__getitem__, where, root,
            held if entry is not None else None,
        )  # fmt: skip
        if entry is not None:
            _store_model(entry, held, {})
    return model


# ----------------------------------------------------------------------------- GGUF
def _field(reader, key: str, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    return f.contents()


class _GGUFSource:
    """One GGUF file: checked on opening (:func:`check_gguf`), its cache-key fingerprint and
    its ``gguf.GGUFReader`` made once on demand (``load_lm_checkpoint`` shares them between the
    model and the tokenizer; parsing Gemma 3's 262144-token vocabulary takes 10 s or more)."""

    def __init__(self, path, where: str):
        self.gguf = _import("gguf")
        self.file = os.fspath(path)
        if not os.path.isfile(self.file):
            raise CheckpointError(f"{where}: no file {self.file!r}")
        self.header_len = check_gguf(self.file, where, self.gguf.GGML_QUANT_SIZES)
        self.size = os.path.getsize(self.file)
        self._reader = None
        self._key: dict | None = None

    def reader(self, where: str):
        """``gguf.GGUFReader`` of the file (errors as CheckpointError)."""
        if self._reader is None:
            try:
                self._reader = self.gguf.GGUFReader(self.file)
            except (ValueError, OSError, IndexError, KeyError, struct.error) as err:
                raise CheckpointError(
                    f"{where}: {self.file!r} is not a readable GGUF file: {err}"
                ) from err
        return self._reader

    def key(self) -> dict:
        """The file's part of a cache key (fingerprint, cache format, gguf version)."""
        if self._key is None:
            self._key = {
                "format": cc.FORMAT_VERSION,
                "source": [cc.fingerprint(self.file, self.header_len)],
                "gguf": _lib_version("gguf"),
            }
        return self._key


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
    cache: bool | None = None,
    cache_dir: str | os.PathLike | None = None,
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
      cache: the conversion cache (``fidia_jax/_disk_cache.py``): ``None`` (default)
        uses it unless ``$FIDIA_LM_CACHE`` is ``0`` / ``off``, for files of at least 16 MiB;
        ``True`` uses it whatever the size; ``False`` neither reads nor writes it. Cached: the
        dequantised arrays as the model takes them (in ``param_dtype``) and the file's part of
        the config, keyed by the file's size, ``st_mtime_ns`` and the sha256 of its header
        (key-values and tensor infos) and of sampled data blocks, ``param_dtype``, the gguf
        package's version and the cache's format version (``max_seq_len``, ``dtype`` and
        ``attention_impl`` change no array and share the entry). A hit prints ``loaded from
        cache <entry> in N s``; a conversion prints a stage line before and after. A broken
        entry is rebuilt with one warning; a cache that cannot be written is one warning and
        the load goes on.
      cache_dir: the cache directory (default ``$FIDIA_CACHE_DIR/lm_convert``, else the user
        cache directory, ``~/.cache/fidia_jax/lm_convert`` on Linux).

    Returns:
      The model. For ``llama`` the query/key rows are put back from llama.cpp's interleaved
      RoPE layout; for ``gemma3`` the stored ``1 + w`` norm weights become ``w`` (the model
      adds the 1); a missing ``output.weight`` means tied embeddings. A model from the cache
      is bit-identical to a fresh conversion.

    Raises:
      CheckpointError: not a file, a missing or unexpected tensor (named), a wrong shape; a
        file that is not GGUF, whose header runs past its end, or whose tensor data is cut short
        (checked from the tensor table before anything is read, naming the file and the first
        tensor that does not fit); a ``rope_freqs`` tensor (per-frequency RoPE factors, Llama 3.1 GGUFs: not supported).
      ConfigError: another architecture, or an unsupported option (named); ``cache`` not a
        bool / ``None``; ``cache_dir`` an existing file.
    """
    where = "load_gguf"
    return _gguf_model(
        _GGUFSource(path, where),
        dtype=dtype,
        param_dtype=param_dtype,
        max_seq_len=max_seq_len,
        attention_impl=attention_impl,
        cache=cache,
        cache_dir=cache_dir,
        where=where,
    )


def _gguf_model(
    src: _GGUFSource, *, dtype, param_dtype, max_seq_len, attention_impl, cache, cache_dir, where
) -> Llama:
    cache_root = cc.resolve_cache_dir(cache, cache_dir, source_bytes=src.size, where=where)
    call = dict(
        max_seq_len=max_seq_len, dtype=dtype, param_dtype=param_dtype, attention_impl=attention_impl
    )
    entry = None
    if cache_root is not None:
        key = {
            **src.key(),
            "param_dtype": np.dtype(param_dtype or dtype).name,
            "config_fields": _config_fields_digest(),
        }
        entry = cc.Entry(cache_root, "gguf-model", key, where=where, sources=[src.file])
        model = _model_from_cache(
            entry, lambda info: _config_from_json(info["config"], **call), _gguf_names, where
        )
        if model is not None:
            return model
    show = entry is not None or src.size >= cc.MIN_DEFAULT_BYTES
    note = ", then caching it" if entry is not None else ""
    name = os.path.basename(src.file)
    with _stage(f"{where}: converting {name} ({src.size / 2**20:.1f} MiB{note})", show):
        gguf, file = src.gguf, src.file
        reader = src.reader(where)
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
        cfg0 = _gguf_config(
            reader,
            arch,
            n_vocab,
            has_output="output.weight" in by_name,
            max_seq_len=None,
            dtype=dtype,
            param_dtype=param_dtype,
            impl=attention_impl,
        )
        cfg = dataclasses.replace(cfg0, max_seq_len=int(max_seq_len)) if max_seq_len else cfg0
        names = _gguf_names(cfg)
        extra = sorted(set(by_name) - {n for n, _ in names.values()})
        if extra:
            raise CheckpointError(
                f"{where}: {len(extra)} tensors the {arch} model does not use, e.g. {extra[:3]}"
            )
        held: dict[str, np.ndarray] = {}

        def load(gname: str) -> np.ndarray:
            t = by_name[gname]
            x = gguf.quants.dequantize(t.data, t.tensor_type)
            x = np.asarray(x, np.float32).reshape(tuple(int(n) for n in reversed(t.shape)))
            if arch == "gemma3" and gname.endswith("norm.weight"):
                x = x - 1.0
            if arch == "llama" and gname.endswith(("attn_q.weight", "attn_k.weight")):
                heads = cfg.n_heads if gname.endswith("attn_q.weight") else cfg.n_kv_heads
                x = _unpermute_qk(x, heads)
            return x

        model = _build_mapped(
            cfg, names, by_name, load, where, file, held if entry is not None else None
        )
        if entry is not None:
            _store_model(entry, held, {"config": _config_json(cfg, cfg0.max_seq_len)})
    return model


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


def load_tokenizer(
    path: str | os.PathLike,
    *,
    cache: bool | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> LMTokenizer:
    """The tokenizer of a checkpoint: a Hugging Face directory or a GGUF file.

    Args:
      path: a directory with ``tokenizer.json`` (read by ``tokenizers``; BOS/EOS and
        ``add_bos_token`` from ``tokenizer_config.json`` / ``config.json`` when present, else a
        post-processor that puts a token first, as Llama 3's ``TemplateProcessing`` does, gives
        the BOS id and ``add_bos``), or a ``.gguf`` file whose ``tokenizer.ggml.model`` is
        ``llama`` (SentencePiece: pieces, scores, types, byte fallback; control and user-defined
        tokens such as Gemma's runs of spaces matched whole; space prefix from
        ``tokenizer.ggml.add_space_prefix``, **true when absent**, the reference's default) or
        ``gpt2`` (byte-level BPE with ``tokenizer.ggml.merges`` and the pre-tokenizer expression
        of ``tokenizer.ggml.pre``: ``llama-bpe`` / ``llama3``, ``qwen2``, ``default``, ...). See
        ``fidia_jax/models/_lm_tokenizer.py``. BOS, EOS from ``tokenizer.ggml.bos_token_id`` /
        ``eos_token_id``; ``add_bos`` from ``tokenizer.ggml.add_bos_token`` (when absent: true
        for SentencePiece, false for BPE, the reference's defaults).
      cache, cache_dir: the conversion cache of a GGUF file's tokenizer (as in
        :func:`load_gguf`; a directory's ``tokenizer.json`` is read directly): the rebuilt
        tokenizer (the serialised ``sentencepiece`` model or the ``tokenizers`` JSON, the
        special tokens, BOS / EOS / ``add_bos``), keyed by the file's fingerprint, the cache's
        format version and the versions of gguf, sentencepiece and tokenizers.

    Returns:
      An :class:`LMTokenizer`. Its ids equal those of ``transformers``' tokenizer of the same
      file (``tests/models/test_lm_tokenizer_reference.py``).

    Raises:
      CheckpointError: no tokenizer in the directory; a broken GGUF file (named, see
        :func:`load_gguf`); a GGUF vocabulary of another kind, or a BPE pre-tokenizer not in
        ``_lm_tokenizer.BPE_SPLITS`` (use the model's ``tokenizer.json``).
      ConfigError: ``cache`` not a bool / ``None``; ``cache_dir`` an existing file.
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
        # a post-processor that puts a token first (Llama 3's TemplateProcessing) is the file's
        # own BOS rule: taken when tokenizer_config.json does not say otherwise
        plain = tok.encode("a", add_special_tokens=False).ids
        full = tok.encode("a", add_special_tokens=True).ids
        first = full[0] if len(full) > len(plain) and full[1 : 1 + len(plain)] == plain else None
        if first is not None and (bos is None or bos == first):
            bos = first
        add_bos = meta.get("add_bos_token")
        if not isinstance(add_bos, bool):
            add_bos = first is not None and first == bos
        return LMTokenizer(tok, bos, eos, add_bos)
    if not os.path.isfile(p):
        raise CheckpointError(f"{where}: {p!r} is neither a directory nor a file")
    return _gguf_tokenizer(_GGUFSource(p, where), cache=cache, cache_dir=cache_dir, where=where)


def _gguf_tokenizer(src: _GGUFSource, *, cache, cache_dir, where) -> LMTokenizer:
    cache_root = cc.resolve_cache_dir(cache, cache_dir, source_bytes=src.size, where=where)
    entry = None
    if cache_root is not None:
        key = {
            **src.key(),
            "sentencepiece": _lib_version("sentencepiece"),
            "tokenizers": _lib_version("tokenizers"),
        }
        entry = cc.Entry(cache_root, "gguf-tokenizer", key, where=where, sources=[src.file])
        tok = _tokenizer_from_cache(entry, where)
        if tok is not None:
            return tok
    show = entry is not None or src.size >= cc.MIN_DEFAULT_BYTES
    name = os.path.basename(src.file)
    with _stage(f"{where}: rebuilding the tokenizer of {name}", show):
        reader = src.reader(where)
        kind = _field(reader, "tokenizer.ggml.model")
        if kind == "llama":
            backend, ids = gguf_sentencepiece(
                reader,
                _field,
                where,
                _import("sentencepiece"),
                _import("sentencepiece.sentencepiece_model_pb2"),
            )
        elif kind == "gpt2":
            backend, ids = gguf_byte_level_bpe(reader, _field, where, _import("tokenizers"))
        else:
            raise CheckpointError(
                f"{where}: GGUF tokenizer {kind!r} of {src.file!r} is not supported (only "
                "'llama', SentencePiece, and 'gpt2', byte-level BPE); use the model's "
                "tokenizer.json"
            )
        # without tokenizer.ggml.add_bos_token, transformers (the reference) adds BOS to a
        # SentencePiece vocabulary and none to a byte-level BPE one
        add_bos = bool(_field(reader, "tokenizer.ggml.add_bos_token", kind == "llama"))
        tok = LMTokenizer(
            backend,
            None if ids["bos"] is None else int(ids["bos"]),
            None if ids["eos"] is None else int(ids["eos"]),
            add_bos,
        )
        if entry is not None:
            _store_tokenizer(entry, tok)
    return tok


def _store_tokenizer(entry: cc.Entry, tok: LMTokenizer) -> None:
    b = tok.backend
    info: dict[str, Any] = {"bos": tok.bos_id, "eos": tok.eos_id, "add_bos": tok.add_bos}
    if isinstance(b, GGUFSentencePiece):
        blob = b.processor.serialized_model_proto()
        info.update(kind="sentencepiece", specials=b.specials, add_space_prefix=b.add_space_prefix)
        name = "tokenizer.model"
    else:
        blob = b.to_str().encode()
        info["kind"] = "tokenizers"
        name = "tokenizer.json"

    def write(path):
        with open(path, "wb") as f:
            f.write(blob)

    if entry.write({name: write}, info):
        _say(f"{entry.where}: tokenizer cached in {entry.path}")


def _tokenizer_from_cache(entry: cc.Entry, where: str) -> LMTokenizer | None:
    t0 = time.perf_counter()
    info = entry.read()
    if info is None:
        return None
    try:
        if info["kind"] == "sentencepiece":
            spm = _import("sentencepiece")
            with open(entry.file("tokenizer.model"), "rb") as f:
                proc = spm.SentencePieceProcessor()
                proc.LoadFromSerializedProto(f.read())
            backend = GGUFSentencePiece(proc, info["specials"], info["add_space_prefix"])
        else:
            tk = _import("tokenizers")
            with open(entry.file("tokenizer.json"), encoding="utf-8") as f:
                backend = tk.Tokenizer.from_str(f.read())
        tok = LMTokenizer(backend, info["bos"], info["eos"], bool(info["add_bos"]))
    except Exception as err:  # anything unreadable in the entry: rebuild it
        entry.corrupt(f"{type(err).__name__}: {err}")
        return None
    _say(f"{where}: loaded from cache {entry.path} in {time.perf_counter() - t0:.1f} s")
    return tok


def load_lm_checkpoint(
    path: str | os.PathLike,
    *,
    max_seq_len: int | None = None,
    dtype=jnp.float32,
    cache: bool | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> tuple[Llama, LMTokenizer]:
    """A released model and its tokenizer from one path: what a method's ``checkpoint=`` reads.

    A path ending in ``.gguf`` goes to :func:`load_gguf`, any other to
    :func:`load_hf_checkpoint`; the tokenizer comes from :func:`load_tokenizer`. A GGUF file is
    checked and parsed once for both.

    Args:
      path: a GGUF file or a Hugging Face model directory.
      max_seq_len: the loaded model's default KV-cache / position limit.
      dtype: compute (and parameter) dtype.
      cache, cache_dir: the conversion cache (see :func:`load_gguf`): on by default for
        checkpoints of at least 16 MiB; ``FIDIA_LM_CACHE=0`` in the environment turns the
        default off (e.g. for every method's ``checkpoint=`` run); a later load of the same
        file reads the converted model and tokenizer back in seconds.

    Returns:
      ``(model, tokenizer)``.

    Raises:
      CheckpointError: ``path`` does not exist (one message naming it), or what the loaders
        raise (a missing tensor, no tokenizer, ...).
      ConfigError: an unsupported family or option; a bad ``cache`` / ``cache_dir``.
    """
    p = os.fspath(path)
    if not os.path.exists(p):
        raise CheckpointError(
            f"load_lm_checkpoint: {p!r} does not exist (give a .gguf file or a Hugging Face model "
            "directory)"
        )
    if p.endswith(".gguf"):
        src = _GGUFSource(p, "load_gguf")
        model = _gguf_model(
            src,
            dtype=dtype,
            param_dtype=None,
            max_seq_len=max_seq_len,
            attention_impl="xla",
            cache=cache,
            cache_dir=cache_dir,
            where="load_gguf",
        )
        return model, _gguf_tokenizer(src, cache=cache, cache_dir=cache_dir, where="load_tokenizer")
    model = load_hf_checkpoint(
        p, max_seq_len=max_seq_len, dtype=dtype, cache=cache, cache_dir=cache_dir
    )
    return model, load_tokenizer(p)
