"""Typed configuration of the attention-kernel experiments (Attn-QAT training, SANTA decoding).

A run is one :class:`AttentionConfig` (frozen groups ``model``, ``data``, ``qat``, ``santa``).
Presets: ``tiny`` (unit tests, ~12 s on a CPU, compile-bound), ``demo`` (a short CPU run),
``default`` (the defaults of ``benchmarks/attention_experiments.py``: 300 steps; the figures
of ``docs/kernels.md`` used ``qat.steps=250``). :func:`load_config` also reads a JSON or TOML
file whose keys mirror the dataclasses, optionally starting from a preset under ``base``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fidia_jax import config as config_lib
from fidia_jax.errors import ConfigError
from fidia_jax.kernels.santa import METHODS
from fidia_jax.models import LlamaConfig, LlamaSize

__all__ = [
    "PRESETS",
    "QAT_IMPLS",
    "AttentionConfig",
    "DataConfig",
    "QatConfig",
    "SantaConfig",
    "get_config",
    "llama_config",
    "load_config",
]

#: Attention variants the Attn-QAT comparison trains (``LlamaConfig.attention_impl`` names):
#: softmax attention on bf16-rounded inputs (the baseline, also the model SANTA decodes with),
#: the drop-in FP4 forward with a plain flash backward, and Attn-QAT (FP4 forward, matched
#: backward).
QAT_IMPLS = ("bf16", "attn_qat_dropin", "attn_qat")


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """Byte-level Shakespeare (:func:`fidia_jax.data.load_shakespeare`, last 10 % of each play
    is validation).

    Attributes:
      data_dir: root of the shared data (``None``: ``$FIDIA_DATA_DIR``).
      max_files: read only the first plays (``0``: all 42).
      seq_len: bytes per window ``L`` (the model's context; a multiple of 16 for FP4 tiles).
    """

    data_dir: str | None = None
    max_files: int = 0
    seq_len: int = 128


@dataclasses.dataclass(frozen=True)
class QatConfig:
    """Attn-QAT comparison: every variant from the same init, on the same batches.

    Optimiser: ``clip_by_global_norm(clip_norm)`` then AdamW (``weight_decay``) with a linear
    warm-up from 0 over ``max(steps // 10, 1)`` steps and a cosine decay to ``lr / 10``.

    Attributes:
      impls: variants trained, in order (subset of :data:`QAT_IMPLS`; ``bf16`` required: it is
        the reference of ``val_rel_to_bf16`` and the model SANTA decodes with).
      steps: training steps.
      batch_size: windows per step.
      learning_rate: peak learning rate.
      weight_decay: AdamW decoupled weight decay.
      clip_norm: global gradient-norm clip.
      seed: parameter initialisation seed (the same for every variant).
      data_seed: step ``t`` trains on ``sample_windows(fold_in(key(data_seed), t), ...)``.
      val_batches: validation batches of ``batch_size`` windows; batch ``i`` is drawn with
        ``fold_in(key(val_seed), i)``; the validation loss is the mean of the batch means.
      val_seed: see ``val_batches``.
      log_every: the loss curve keeps steps ``t % log_every == 0`` and the last step.
    """

    impls: tuple[str, ...] = QAT_IMPLS
    steps: int = 300
    batch_size: int = 16
    learning_rate: float = 3e-3
    weight_decay: float = 0.01
    clip_norm: float = 1.0
    seed: int = 0
    data_seed: int = 1234
    val_batches: int = 8
    val_seed: int = 99
    log_every: int = 25


@dataclasses.dataclass(frozen=True)
class SantaConfig:
    """SANTA decoding of the ``bf16``-trained model, teacher-forced, against dense decoding.

    Attributes:
      batch_size: validation windows decoded (drawn with ``key(window_seed)``).
      prefix: bytes prefilled densely (``0``: ``seq_len // 2``); the rest are decoded one at a
        time from the KV cache.
      methods: samplers compared (:data:`fidia_jax.kernels.santa.METHODS`).
      num_samples: total sample budgets ``S`` (``ceil(S / n_tiles)`` per key tile).
      block_k: keys per tile.
      window_seed: key of the decoded windows.
      decode_seed: key the model folds with (layer, step) for the SANTA uniforms.
      backend: :func:`fidia_jax.kernels.santa.make_santa_attention` backend (``reference``,
        ``auto``, ``pallas``, ``pallas_interpret``).
    """

    batch_size: int = 16
    prefix: int = 0
    methods: tuple[str, ...] = METHODS
    num_samples: tuple[int, ...] = (32, 128, 512, 2048)
    block_k: int = 64
    window_seed: int = 2024
    decode_seed: int = 7
    backend: str = "reference"


@dataclasses.dataclass(frozen=True)
class AttentionConfig:
    """A complete run: train ``qat.impls`` on ``data``, then decode with SANTA."""

    model: LlamaSize = LlamaSize(n_layers=2, hidden_dim=344)
    data: DataConfig = DataConfig()
    qat: QatConfig = QatConfig()
    santa: SantaConfig = SantaConfig()

    def __post_init__(self) -> None:
        validate_config(self)


def llama_config(config: AttentionConfig, impl: str = "xla") -> LlamaConfig:
    """The :class:`fidia_jax.models.LlamaConfig` of ``config.model``, context ``data.seq_len``.

    Raises:
      ConfigError: inconsistent model sizes (from ``LlamaConfig``).
    """
    return config.model.llama_config(config.data.seq_len, impl)


def validate_config(config: AttentionConfig) -> None:
    """Raises :class:`~fidia_jax.errors.ConfigError` when values are inconsistent."""
    m, d, q, s = config.model, config.data, config.qat, config.santa
    llama_config(config)  # model sizes: LlamaConfig raises ConfigError
    if d.seq_len < 2 or d.max_files < 0:
        raise ConfigError(f"data.seq_len must be >= 2 and max_files >= 0, got {d}")
    if any(i != "bf16" for i in q.impls) and (d.seq_len % 16 or (m.dim // m.n_heads) % 16):
        raise ConfigError(
            f"FP4 attention needs data.seq_len ({d.seq_len}) and the head dim "
            f"(model.dim / n_heads = {m.dim // m.n_heads}) to be multiples of 16"
        )
    unknown = [i for i in q.impls if i not in QAT_IMPLS]
    if unknown or "bf16" not in q.impls or len(set(q.impls)) != len(q.impls):
        raise ConfigError(
            f"qat.impls must be distinct names of {QAT_IMPLS} including 'bf16', got {q.impls}"
        )
    if min(q.steps, q.batch_size, q.val_batches, q.log_every) < 1:
        raise ConfigError("qat.steps, batch_size, val_batches and log_every must be >= 1")
    if q.learning_rate <= 0 or q.clip_norm <= 0 or q.weight_decay < 0:
        raise ConfigError("qat.learning_rate and clip_norm must be > 0, weight_decay >= 0")
    if not (s.prefix == 0 or 2 <= s.prefix < d.seq_len) or s.batch_size < 1 or s.block_k < 1:
        raise ConfigError(
            f"santa.prefix must be 0 (seq_len // 2) or in [2, seq_len={d.seq_len}), batch_size and block_k >= 1"
        )
    if not s.methods or any(x not in METHODS for x in s.methods):
        raise ConfigError(f"santa.methods must name only {METHODS}, got {s.methods}")
    if not s.num_samples or min(s.num_samples) < 1:
        raise ConfigError(f"santa.num_samples must be ints >= 1, got {s.num_samples}")


PRESETS: dict[str, dict[str, Any]] = {
    # Unit tests (~12 s of one core, 9 s of it XLA compiles): one 32-wide block, 2 plays,
    # 32-byte windows, bf16 vs Attn-QAT, one SANTA budget.
    "tiny": {
        "model": {"dim": 32, "n_layers": 1, "n_heads": 2, "n_kv_heads": 1, "hidden_dim": 64},
        "data": {"max_files": 2, "seq_len": 32},
        "qat": {"impls": ("bf16", "attn_qat"), "steps": 8, "batch_size": 8, "val_batches": 2,
                "log_every": 2},
        "santa": {"batch_size": 4, "methods": ("systematic",), "num_samples": (1024,),
                  "block_k": 16},
    },
    # `fidia-jax attention demo`: the benchmark model for 40 steps, two SANTA budgets.
    "demo": {"qat": {"steps": 40}, "santa": {"num_samples": (32, 512)}},
    # benchmarks/attention_experiments.py (docs/kernels.md ran it with qat.steps=250).
    "default": {},
}  # fmt: skip


CONFIGS = config_lib.ConfigSet(AttentionConfig, PRESETS)
get_config, load_config = CONFIGS.get_config, CONFIGS.load_config
config_from_dict = CONFIGS.config_from_dict
