"""Typed configuration of the residual-update geometry experiment (tiny vision-language model).

One frozen :class:`ResidualGeometryConfig`; presets in :data:`PRESETS` (``tiny`` for tests,
``demo`` for a short CPU run, ``default`` for the table of ``docs/residual_geometry.md``);
:func:`load_config` also reads a JSON or TOML file whose keys mirror the dataclass, optionally
from a preset under ``base``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fidia_jax import config as config_lib
from fidia_jax.errors import ConfigError

__all__ = ["INTERVENTIONS", "PRESETS", "ResidualGeometryConfig", "get_config", "load_config"]

#: Interventions on the 16 visual tokens (config key -> row name): matched-RMS noise in place of
#: the attention update ("Noise Δ"), of the visual queries/keys/values ("Noise QKV"), and
#: predefined uniform attention weights on the visual keys ("SAP", reconstruction).
INTERVENTIONS: dict[str, str] = {
    "noise_delta": "Noise Δ",
    "noise_qkv": "Noise QKV",
    "sap": "SAP (uniform visual attention)",
}


@dataclasses.dataclass(frozen=True)
class ResidualGeometryConfig:
    """Train a tiny LlamaVL on digit questions, then measure update geometry and interventions.

    Attributes:
      seed: image split, questions, initialisation (``key(seed)``), minibatches and noise.
      dim, n_layers, n_heads, n_kv_heads, hidden_dim: the :class:`fidia_jax.models.LlamaConfig`.
      test_images: fraction of the 1797 digit images held out (test questions use only those).
      n_train, n_test: questions drawn on each split (kinds uniform over the four).
      steps, batch_size, learning_rate, warmup_steps: AdamW (weight decay 0.01) with a
        warmup-cosine schedule, answer-only loss (:func:`fidia_jax.train.fit_llama`).
      num_devices: data parallelism of the training steps (``fit_llama(mesh=)``): the most
        devices ``<= num_devices`` (``0``: all) that divide ``batch_size``; parameters
        replicated. The analysis after training runs on one device.
      n_analysis: test sequences whose activations feed RID / TME / MixIG (first ``n_analysis``).
      rtol: numerical-rank rule of the subspace projectors: ``None`` (default) the authors'
        cutoff, singular values ``> max(N, C) · eps(dtype) · σ_max`` (the captures are float32);
        a float in ``(0, 1)``: singular values ``> rtol · σ_max`` (``0.01`` was this page's
        earlier default).
      delta_d_form: ΔD's form, ``"authors"`` (default, the authors' ``novelty_from_hiddens_96``)
        or ``"page"`` (ours; :func:`.geometry.subspace_innovation`). RID and the rank
        sensitivity use it; ``delta_d_page`` / ``rid_page`` are reported either way.
      rtol_grid, rank_grid: the sensitivity of ΔD / RID to that rule (relative tolerances, and
        fixed ranks; ranks above ``min(N, C)`` are skipped).
      per_layer: also run every intervention on one layer at a time (else all layers at once).
      interventions: which of :data:`INTERVENTIONS` to run.
      checkpoint: a released text model (GGUF file or Hugging Face directory, see
        ``docs/lm_checkpoints.md``); when set, ``train`` measures the attention and FFN updates
        of that model on text (:func:`.checkpoint.checkpoint_geometry`, a text-only check)
        instead of training the small vision-language model; of the fields above only
        ``seed``, ``rtol`` and ``delta_d_form`` are used.
      checkpoint_max_seq_len: the loaded model's ``max_seq_len`` (``checkpoint_tokens`` above
        it is a ConfigError here; above the checkpoint's trained context, a ``DataError``
        before the weights load).
      checkpoint_sequences, checkpoint_tokens, checkpoint_batch: text sequences analysed, tokens
        per sequence (BOS included), sequences per forward pass.
      checkpoint_layers: the layers measured (empty: every layer).
    """

    seed: int = 0
    dim: int = 64
    n_layers: int = 4
    n_heads: int = 4
    n_kv_heads: int = 2
    hidden_dim: int = 172
    test_images: float = 0.25
    n_train: int = 8000
    n_test: int = 1000
    steps: int = 3000
    batch_size: int = 64
    learning_rate: float = 3e-3
    warmup_steps: int = 100
    num_devices: int = 0
    n_analysis: int = 200
    rtol: float | None = None
    delta_d_form: str = "authors"
    rtol_grid: tuple[float, ...] = (1e-1, 1e-2, 1e-3)
    rank_grid: tuple[int, ...] = (4, 8, 16)
    per_layer: bool = True
    interventions: tuple[str, ...] = tuple(INTERVENTIONS)
    checkpoint: str = ""
    checkpoint_max_seq_len: int = 256
    checkpoint_sequences: int = 16
    checkpoint_tokens: int = 128
    checkpoint_batch: int = 4
    checkpoint_layers: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for name in (
            "dim",
            "n_layers",
            "n_heads",
            "n_kv_heads",
            "hidden_dim",
            "n_train",
            "n_test",
            "steps",
            "batch_size",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0.0 < self.test_images < 1.0:
            raise ConfigError(f"test_images must be in (0, 1), got {self.test_images}")
        if not 4 <= self.n_analysis <= self.n_test:
            raise ConfigError(
                f"n_analysis must be in [4, n_test={self.n_test}], got {self.n_analysis}"
            )
        if (self.rtol is not None and not 0.0 < self.rtol < 1.0) or any(
            not 0.0 < r < 1.0 for r in self.rtol_grid
        ):
            raise ConfigError(
                f"rtol and rtol_grid must be in (0, 1), got {self.rtol}, {self.rtol_grid}"
            )
        if any(r < 1 for r in self.rank_grid):
            raise ConfigError(f"rank_grid must hold ints >= 1, got {self.rank_grid}")
        if self.learning_rate <= 0 or self.warmup_steps < 0:
            raise ConfigError("learning_rate must be > 0 and warmup_steps >= 0")
        if self.checkpoint_sequences < 4 or self.checkpoint_tokens < 8 or self.checkpoint_batch < 1:
            raise ConfigError(
                "checkpoint_sequences must be >= 4, checkpoint_tokens >= 8 and checkpoint_batch "
                f">= 1, got {self.checkpoint_sequences}, {self.checkpoint_tokens}, "
                f"{self.checkpoint_batch}"
            )
        if self.checkpoint_tokens > self.checkpoint_max_seq_len:
            raise ConfigError(
                f"checkpoint_tokens ({self.checkpoint_tokens}) must not exceed "
                f"checkpoint_max_seq_len ({self.checkpoint_max_seq_len})"
            )
        if self.delta_d_form not in ("authors", "page"):
            raise ConfigError(
                f"delta_d_form must be 'authors' or 'page', got {self.delta_d_form!r}"
            )
        unknown = [k for k in self.interventions if k not in INTERVENTIONS]
        if unknown:
            raise ConfigError(f"interventions must name only {tuple(INTERVENTIONS)}, got {unknown}")


PRESETS: dict[str, dict[str, Any]] = {
    # Unit tests (compilation-bound): width 16, 1 layer, 10 steps, one intervention.
    "tiny": {
        "dim": 16,
        "n_layers": 1,
        "n_heads": 2,
        "n_kv_heads": 1,
        "hidden_dim": 32,
        "n_train": 64,
        "n_test": 16,
        "steps": 8,
        "batch_size": 16,
        "warmup_steps": 2,
        "n_analysis": 8,
        "rank_grid": (4,),
        "rtol_grid": (1e-2,),
        "per_layer": False,
        "interventions": ("noise_qkv",),
    },
    # `fidia-jax residual_geometry demo` and the documented (reduced) benchmark run: 2 layers,
    # 800 steps (about 3 CPU-minutes; 10-15 min wall on the shared 2-core sandbox).
    "demo": {
        "n_layers": 2,
        "hidden_dim": 172,
        "n_train": 4000,
        "n_test": 400,
        "steps": 800,
        "n_analysis": 100,
    },
    # docs/residual_geometry.md (`python benchmarks/residual_geometry.py`).
    "default": {},
}


CONFIGS = config_lib.ConfigSet(ResidualGeometryConfig, PRESETS)
get_config, load_config = CONFIGS.get_config, CONFIGS.load_config
config_from_dict = CONFIGS.config_from_dict
