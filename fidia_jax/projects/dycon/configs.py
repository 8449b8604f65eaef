"""Typed configuration of the DyCon experiment (task, model, training, probe, control, evaluation).

One frozen :class:`DyconConfig`; presets in :data:`PRESETS` (``tiny`` for tests, ``demo`` for a
short CPU run, ``default`` for the figures of ``docs/dycon.md``); :func:`load_config` also reads a
JSON or TOML file whose keys mirror the dataclass, optionally from a preset under ``base``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from fidia_jax import config as config_lib
from fidia_jax.errors import ConfigError

__all__ = ["PRESETS", "DyconConfig", "get_config", "load_config"]


@dataclasses.dataclass(frozen=True)
class DyconConfig:
    """The DyCon experiment at one scale.

    Attributes:
      seed: every random stream derives from it (training set ``seed``, probe set ``seed + 1``,
        development prompts ``seed + 2``, test prompts ``seed + 3``; model init, minibatches and
        sampling keys from ``key(seed)``).
      base, max_operands, min_operands, max_redundant, error_rate, redundant_rate: the task
        (:func:`.task.make_dycon_task`); difficulty = ``k`` operands = steps.
      num_train: training solutions.
      num_probe: solutions (teacher-forced) whose boundary states fit and score the probe;
        half of the examples fit, half are held out.
      num_dev: prompts on which ``(lambda, tau)`` of DyCon and of the static probe are chosen.
      num_test: prompts of the reported comparison (one sample per prompt and method; the same
        sampling key for every method, so the comparison is paired).
      dim, n_layers, n_heads, n_kv_heads, hidden_dim: the :class:`fidia_jax.models.Llama`.
      steps, batch_size, learning_rate, warmup_steps, weight_decay: AdamW with warmup + cosine
        decay, :func:`fidia_jax.train.fit_llama`.
      probe_alpha: ridge penalty of the probes.
      lam_grid, tau_grid: the control settings tried on the development prompts.
      control_form: ``"one_sided"`` (default: ``-lambda max(0, tau - d_hat)`` on reflection
        tokens, the direction every description of the paper states) or ``"two_sided"`` (the
        ablation, this package's first form: ``+lambda (d_hat - tau)`` on reflection tokens and
        the opposite push on the end-of-thinking token); see :mod:`.control`.
      end_scale: weight of the opposite push on the end-of-thinking token, two-sided form only
        (0 = reflection tokens only).
      checkpoint: a released model (GGUF file or Hugging Face directory, see
        ``docs/lm_checkpoints.md``); when set, ``train`` runs the probe analysis on that model
        (:func:`.lm_probe.checkpoint_and_evaluate`: progress per stage, the probe panel of
        ``dycon_tradeoff.png``) instead of training the small one.
      checkpoint_traces, checkpoint_max_seq_len: traces of the checkpoint probe, and the
        loaded model's ``max_seq_len``; a trace longer than it (or than the checkpoint's
        trained context) is a ``DataError`` before the weights load.
      temperature: sampling temperature (> 0: the model imitates its training data, errors and
        redundant reflections included, so greedy decoding would never err).
      bucket_ends: the largest ``k`` of each difficulty bucket, increasing, the last equal to
        ``max_operands`` (buckets are the inclusive ranges between; see :attr:`buckets`).
    """

    seed: int = 0
    base: int = 3
    max_operands: int = 6
    min_operands: int = 2
    max_redundant: int = 2
    error_rate: float = 0.15
    redundant_rate: float = 0.5
    num_train: int = 8000
    num_probe: int = 300
    num_dev: int = 256
    num_test: int = 768
    dim: int = 64
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int = 2
    hidden_dim: int = 128
    steps: int = 1200
    batch_size: int = 32
    learning_rate: float = 3e-3
    warmup_steps: int = 100
    weight_decay: float = 0.01
    # data parallelism of the training steps (fit_llama(mesh=)): the most devices <= num_devices
    # (0: all) that divide batch_size; parameters replicated (issue 40)
    num_devices: int = 0
    probe_alpha: float = 1.0
    lam_grid: tuple[float, ...] = (2.0, 4.0, 8.0)
    tau_grid: tuple[float, ...] = (0.3, 0.45, 0.6)
    control_form: str = "one_sided"
    end_scale: float = 1.0
    checkpoint: str = ""
    checkpoint_traces: int = 60
    checkpoint_max_seq_len: int = 256
    temperature: float = 1.0
    bucket_ends: tuple[int, ...] = (3, 5, 6)

    def __post_init__(self) -> None:
        for name in (
            "num_train",
            "num_dev",
            "num_test",
            "steps",
            "batch_size",
            "dim",
            "n_layers",
            "n_heads",
            "n_kv_heads",
            "hidden_dim",
            "base",
            "max_operands",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.checkpoint_traces < 8 or self.checkpoint_max_seq_len < 64:
            raise ConfigError(
                "checkpoint_traces must be >= 8 and checkpoint_max_seq_len >= 64, got "
                f"{self.checkpoint_traces}, {self.checkpoint_max_seq_len}"
            )
        if self.num_probe < 4:
            raise ConfigError(
                f"num_probe must be >= 4 (a probe fitted on one example says nothing), got {self.num_probe}"
            )
        if not 1 <= self.min_operands <= self.max_operands:
            raise ConfigError(
                f"min_operands must be in [1, max_operands={self.max_operands}], got {self.min_operands}"
            )
        if not 0.0 <= self.error_rate < 1.0 or not 0.0 <= self.redundant_rate <= 1.0:
            raise ConfigError(
                f"error_rate must be in [0, 1) and redundant_rate in [0, 1], got "
                f"{self.error_rate}, {self.redundant_rate}"
            )
        if not self.lam_grid or any(not (math.isfinite(x) and x >= 0) for x in self.lam_grid):
            raise ConfigError(f"lam_grid must hold finite lambdas >= 0, got {self.lam_grid}")
        if not self.tau_grid or any(not 0.0 <= x <= 1.0 for x in self.tau_grid):
            raise ConfigError(f"tau_grid must hold taus in [0, 1], got {self.tau_grid}")
        if self.control_form not in ("one_sided", "two_sided"):
            raise ConfigError(
                f"control_form must be one_sided or two_sided, got {self.control_form!r}"
            )
        if not (math.isfinite(self.end_scale) and self.end_scale >= 0):
            raise ConfigError(f"end_scale must be finite and >= 0, got {self.end_scale}")
        if not self.temperature > 0:
            raise ConfigError(f"temperature must be > 0, got {self.temperature}")
        ends = (self.min_operands - 1, *self.bucket_ends)
        if (
            any(b <= a for a, b in zip(ends, ends[1:], strict=False))
            or ends[-1] != self.max_operands
        ):
            raise ConfigError(
                f"bucket_ends must increase from min_operands={self.min_operands} and end at "
                f"max_operands={self.max_operands}, got {self.bucket_ends}"
            )

    @property
    def buckets(self) -> tuple[tuple[int, int], ...]:
        """Inclusive ``(k_lo, k_hi)`` difficulty ranges, easiest first."""
        los = (self.min_operands, *(e + 1 for e in self.bucket_ends[:-1]))
        return tuple(zip(los, self.bucket_ends, strict=True))


PRESETS: dict[str, dict[str, Any]] = {
    # Unit tests: a 1-layer model, a handful of steps; the numbers mean nothing. Compilation-bound
    # (7 programs); 44 s measured on the shared 2 cores at load average 12.
    "tiny": {
        "max_operands": 3,
        "num_train": 64,
        "num_probe": 8,
        "num_dev": 8,
        "num_test": 12,
        "dim": 16,
        "n_layers": 1,
        "n_heads": 2,
        "n_kv_heads": 1,
        "hidden_dim": 32,
        "steps": 3,
        "batch_size": 8,
        "lam_grid": (4.0,),
        "tau_grid": (0.5,),
        "bucket_ends": (2, 3),
    },
    # `fidia-jax dycon demo` and the notebook: a third of the training, fewer prompts (minutes).
    "demo": {"num_train": 4000, "steps": 400, "num_probe": 200, "num_dev": 128, "num_test": 256},
    # docs/dycon.md (`python benchmarks/dycon.py`, 16 min on the shared 2-core sandbox): a
    # declared reduced protocol, see the docs for the fuller command.
    "default": {},
}


CONFIGS = config_lib.ConfigSet(DyconConfig, PRESETS)
get_config, load_config = CONFIGS.get_config, CONFIGS.load_config
config_from_dict = CONFIGS.config_from_dict
