"""Typed configuration of a byte-level LLaMA language-model run with one optax optimiser.

A run is one :class:`LmConfig` (frozen groups ``model``, ``data``, ``optimizer``). Presets:
``tiny`` (unit tests, a few seconds on a CPU), ``demo`` (a short CPU run), ``default`` (the
0.78 M-parameter model and 150 steps of ``benchmarks/scale_llama.py``). :func:`load_config`
also reads a JSON or TOML file whose keys mirror the dataclasses, optionally starting from a
preset named under the top-level key ``base``; ``--set optimizer.name=adamw`` style overrides
go through :func:`override_config`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fidia_jax import config as config_lib
from fidia_jax.config import config_to_dict, override_config
from fidia_jax.errors import ConfigError
from fidia_jax.models import LlamaSize

__all__ = [
    "OPTIMIZERS",
    "PEAK_LEARNING_RATES",
    "PRESETS",
    "DataConfig",
    "LmConfig",
    "OptimizerConfig",
    "config_from_dict",
    "config_to_dict",
    "get_config",
    "load_config",
    "override_config",
]

#: Optimisers the driver builds by name (see :func:`fidia_jax.projects.optimizers.make_optimizer`).
OPTIMIZERS = ("adamw", "scale", "muon", "sgd")

#: Default peak learning rate per optimiser (not tuned; those of docs/benchmarks.md).
PEAK_LEARNING_RATES: dict[str, float] = {"adamw": 3e-3, "scale": 3e-3, "muon": 2e-2, "sgd": 0.1}

#: Default peak rate of the Adam(W) part, per optimiser. SCALE: the authors' training script's
#: ``--adam_lr`` default, 2e-2 (github OptimAI-Lab/Minimalist_LLM_Pretraining @ f5bd4e7,
#: ``mem_eff_pt/utils/args.py``; their 60M-350M scripts keep it, with ``--lr 1e-3``). Muon:
#: 3e-3 (not tuned). Others have no Adam part.
_ADAM_LEARNING_RATES: dict[str, float] = {"scale": 2e-2, "muon": 3e-3}


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """Byte-level Shakespeare (:func:`fidia_jax.data.load_shakespeare`) and the batches.

    Attributes:
      data_dir: root of the shared data (``None``: ``$FIDIA_DATA_DIR``).
      max_files: read only the first plays (``0``: all 42).
      batch_size: windows per step ``B``.
      seq_len: bytes per window ``L`` (also the model's context length).
      data_seed: step ``t`` trains on ``sample_windows(fold_in(key(data_seed), t), ...)``
        (``None``: ``seed + 1000``).
      val_windows: validation windows (fixed for the run).
      val_seed: key of the validation windows.
    """

    data_dir: str | None = None
    max_files: int = 0
    batch_size: int = 16
    seq_len: int = 64
    data_seed: int | None = None
    val_windows: int = 64
    val_seed: int = 999


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
    """The optimiser and its schedule: linear warm-up from 0, cosine decay to ``end_fraction``.

    Attributes:
      name: one of :data:`OPTIMIZERS`.
      learning_rate: peak learning rate (``None``: :data:`PEAK_LEARNING_RATES` of ``name``).
      adam_learning_rate: peak rate of the AdamW that SCALE applies to 1-D parameters and of
        the Adam that Muon applies to non-matrices, on the same schedule shape: the rate at
        step ``t`` is ``adam_learning_rate / learning_rate * lr(t)``, the authors' rule for
        SCALE (``adam_lr / max_lr * lr``). ``None``: 2e-2 for SCALE (the authors' default
        ``--adam_lr``), 3e-3 for Muon.
      warmup_steps: linear warm-up length (``None``: ``max(1, steps // 10)``).
      end_fraction: final learning rate as a fraction of the peak.
      weight_decay: decoupled weight decay (AdamW, SCALE).
      momentum: SCALE's last-layer EMA coefficient and SGD's momentum.
    """

    name: str = "scale"
    learning_rate: float | None = None
    adam_learning_rate: float | None = None
    warmup_steps: int | None = None
    end_fraction: float = 0.1
    weight_decay: float = 0.0
    momentum: float = 0.9

    @property
    def peak_learning_rate(self) -> float:
        """``learning_rate``, or the default of ``name``."""
        if self.learning_rate is not None:
            return self.learning_rate
        return PEAK_LEARNING_RATES[self.name]

    @property
    def peak_adam_learning_rate(self) -> float:
        """``adam_learning_rate``, or the default of ``name`` (2e-2 SCALE, 3e-3 otherwise)."""
        if self.adam_learning_rate is not None:
            return self.adam_learning_rate
        return _ADAM_LEARNING_RATES.get(self.name, 3e-3)


@dataclasses.dataclass(frozen=True)
class LmConfig:
    """A complete run: ``optimizer`` trains ``model`` for ``steps`` steps on ``data``.

    Attributes:
      seed: parameter initialisation seed (the data seed defaults to ``seed + 1000``).
      steps: optimiser steps.
      model, data, optimizer: the groups above.
      checkpoint_every: with a workdir, an orbax checkpoint every so many steps (``0``: only
        the last step); a rerun resumes from the newest one.
    """

    seed: int = 0
    steps: int = 150
    model: LlamaSize = LlamaSize()
    data: DataConfig = DataConfig()
    optimizer: OptimizerConfig = OptimizerConfig()
    checkpoint_every: int = 0

    def __post_init__(self) -> None:
        validate_config(self)


def validate_config(config: LmConfig) -> None:
    """Raises :class:`~fidia_jax.errors.ConfigError` when values are inconsistent."""
    m, d, o = config.model, config.data, config.optimizer
    if config.steps < 1:
        raise ConfigError(f"steps must be >= 1, got {config.steps}")
    if config.checkpoint_every < 0:
        raise ConfigError(f"checkpoint_every must be >= 0, got {config.checkpoint_every}")
    if o.name not in OPTIMIZERS:
        raise ConfigError(f"optimizer.name must be one of {OPTIMIZERS}, got {o.name!r}")
    if o.peak_learning_rate <= 0 or o.peak_adam_learning_rate <= 0:
        raise ConfigError("optimizer.learning_rate and optimizer.adam_learning_rate must be > 0")
    if o.warmup_steps is not None and not 0 <= o.warmup_steps <= config.steps:
        raise ConfigError(f"optimizer.warmup_steps must be in [0, steps], got {o.warmup_steps}")
    if min(m.dim, m.n_layers, m.n_heads, m.n_kv_heads) < 1 or m.hidden_dim < 0:
        raise ConfigError("model sizes must be >= 1 (hidden_dim >= 0)")
    if m.n_heads % m.n_kv_heads or m.dim % m.n_heads:
        raise ConfigError(
            f"model.n_heads ({m.n_heads}) must be a multiple of n_kv_heads ({m.n_kv_heads}) "
            f"and divide dim ({m.dim})"
        )
    if min(d.batch_size, d.seq_len, d.val_windows) < 1 or d.max_files < 0:
        raise ConfigError("data.batch_size, data.seq_len and data.val_windows must be >= 1")


PRESETS: dict[str, dict[str, Any]] = {
    # Unit tests: one 32-wide block, 2 plays, 8 x 32 bytes, 12 steps (a few seconds on a CPU).
    "tiny": {
        "steps": 12,
        "model": {"dim": 32, "n_layers": 1, "hidden_dim": 64},
        "data": {"max_files": 2, "batch_size": 8, "seq_len": 32, "val_windows": 16},
        "optimizer": {"name": "scale"},
    },
    # `fidia-jax optimizers demo`: the benchmark model for 40 steps (about a minute on 2 cores).
    "demo": {"steps": 40},
    # benchmarks/scale_llama.py: 0.78 M parameters, 150 steps of 16 x 64 bytes.
    "default": {},
}


CONFIGS = config_lib.ConfigSet(LmConfig, PRESETS)
get_config, load_config = CONFIGS.get_config, CONFIGS.load_config
config_from_dict = CONFIGS.config_from_dict
