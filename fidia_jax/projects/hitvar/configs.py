"""Typed configuration of the HIT-VAR x4 super-resolution experiment.

One frozen :class:`HitVarConfig`; :data:`PRESETS` ``tiny`` (tests, seconds), ``demo`` (the
CLI demo, every phase at a short budget), ``reduced`` (the documented reduced run of
``docs/hitvar.md``) and ``default`` (the full protocol); :func:`load_config` also reads JSON /
TOML files (``base`` = a preset).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fidia_jax import config as config_lib
from fidia_jax.errors import ConfigError
from fidia_jax.parallel import PARAM_SHARDING_MODES

__all__ = ["HitVarConfig", "PRESETS", "get_config", "load_config"]


@dataclasses.dataclass(frozen=True)
class HitVarConfig:
    """x``max_scale`` SR on ``lr_size * max_scale`` HR crops of the bundled photos.

    Attributes:
      seed: model inits, crops and sampling derive from it.
      lr_size: LR side (pixels); HR side = ``lr_size * max_scale``.
      max_scale: the largest SR factor (outputs at x1..x``max_scale``).
      grids: token-grid sides of the residual quantiser, increasing, ending at ``latent_size``.
      latent_size: latent side; must divide the HR side with a power-of-two ratio.
      channels, latent_dim, codebook_size, res_blocks: tokenizer sizes.
      dim, depth, heads: next-scale transformer sizes.
      context_size: side of the transformer's grid of LR start tokens (VARSR's prefix); ``0``
        = ``lr_size // 2``.
      lr_scale_term: add the per-scale LR term (the LR tokenization's code embeddings) to the
        transformer's inputs (VARSR's ``lr_inp_scale``).
      sr_blocks: residual blocks of the conv SR baseline (its width is chosen to match the
        HIT-VAR inference parameter count).
      blur_sigma, noise_std, jpeg_quality: the degradation (:class:`fidia_jax.data.Degradation`).
      held_out: bundled photos never used for training (evaluation crops come only from them).
      n_train, n_eval: training / held-out evaluation crops.
      batch_size, learning_rate: of every training phase (Adam).
      tokenizer_steps, var_steps, sr_steps, dpo_steps: steps of each phase (``dpo_steps = 0``
        skips the preference phase).
      ema_decay, commitment: codebook EMA decay, commitment weight.
      dpo_beta, dpo_ce_weight: the preference phase (DPO on the (LR, HR) token pairs of every
        training crop): DPO temperature ``beta``; weight of the cross-entropy anchor.
      dpo_lpips_ablation: also train the ablation that ranks VAR samples by LPIPS instead:
        ``dpo_samples`` samples (temperature ``dpo_temperature``) for each of ``dpo_pool``
        training crops, best vs worst.
      eval_temperature: ``0`` = argmax decoding at evaluation.
      png: write ``hitvar_samples.png``.
      checkpoint_every: save each training phase's state every so many steps (``0``: only at
        the phase's end); a rerun in the same work directory resumes from the newest one.
      param_sharding: how the trained parameters sit on the device mesh: ``"replicated"``
        (every device holds all) or ``"fsdp"`` (each split along one axis;
        :data:`fidia_jax.parallel.PARAM_SHARDING_MODES`).
      num_devices: the most devices each phase's batch (batch_size crops) is split over
        (``0``: every visible device; :func:`fidia_jax.parallel.data_mesh` takes the most that
        divide it); not part of a checkpoint's fingerprint (it changes only the summation order).
    """

    seed: int = 0
    lr_size: int = 16
    max_scale: int = 4
    grids: tuple[int, ...] = (1, 2, 4, 8, 16)
    latent_size: int = 16
    channels: int = 32
    latent_dim: int = 16
    codebook_size: int = 256
    res_blocks: int = 2
    dim: int = 64
    depth: int = 2
    heads: int = 4
    context_size: int = 0
    lr_scale_term: bool = True
    sr_blocks: int = 4
    blur_sigma: float = 1.0
    noise_std: float = 0.01
    jpeg_quality: int = 75
    held_out: tuple[str, ...] = ("astronaut", "camera", "coffee")
    n_train: int = 4096
    n_eval: int = 256
    batch_size: int = 16
    learning_rate: float = 2e-3
    tokenizer_steps: int = 3000
    var_steps: int = 3000
    sr_steps: int = 3000
    dpo_steps: int = 300
    ema_decay: float = 0.99
    commitment: float = 0.25
    dpo_pool: int = 512
    dpo_samples: int = 4
    dpo_temperature: float = 1.0
    dpo_beta: float = 0.1
    dpo_ce_weight: float = 1.0
    dpo_lpips_ablation: bool = True
    eval_temperature: float = 0.0
    png: bool = True
    checkpoint_every: int = 0
    param_sharding: str = "replicated"
    num_devices: int = 0

    def __post_init__(self) -> None:
        if self.param_sharding not in PARAM_SHARDING_MODES:
            raise ConfigError(
                f"param_sharding must be one of {PARAM_SHARDING_MODES}, got {self.param_sharding!r}"
            )
        if self.num_devices < 0:
            raise ConfigError(f"num_devices must be >= 0, got {self.num_devices}")
        hr = self.lr_size * self.max_scale
        if self.lr_size < 1 or self.max_scale < 1:
            raise ConfigError(
                f"lr_size and max_scale must be >= 1, got {self.lr_size}, {self.max_scale}"
            )
        if self.latent_size < 1 or hr % self.latent_size:
            raise ConfigError(f"latent_size {self.latent_size} must divide the HR side {hr}")
        g = tuple(self.grids)
        if (
            not g
            or g[-1] != self.latent_size
            or any(a >= b for a, b in zip(g, g[1:], strict=False))
        ):
            raise ConfigError(
                f"grids must increase and end at latent_size={self.latent_size}, got {g}"
            )
        for name in (
            "n_train",
            "n_eval",
            "batch_size",
            "codebook_size",
            "channels",
            "latent_dim",
            "dim",
            "depth",
            "heads",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("tokenizer_steps", "var_steps", "sr_steps", "dpo_steps"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.dpo_steps and (self.dpo_samples < 2 or self.dpo_pool < 1):
            raise ConfigError(
                f"dpo_samples must be >= 2 and dpo_pool >= 1, got "
                f"{self.dpo_samples}, {self.dpo_pool}"
            )
        if not 0.0 <= self.ema_decay < 1.0:
            raise ConfigError(f"ema_decay must be in [0, 1), got {self.ema_decay}")
        if self.checkpoint_every < 0:
            raise ConfigError(f"checkpoint_every must be >= 0, got {self.checkpoint_every}")
        if self.context_size < 0:
            raise ConfigError(f"context_size must be >= 0, got {self.context_size}")
        if self.dim % self.heads:
            raise ConfigError(f"dim {self.dim} must be divisible by heads {self.heads}")


# The CPU geometry of the demo and reduced presets: x4 SR of 8x8 LR crops to 32x32 (LPIPS's
# AlexNet needs >= 31 px, so only x4 has an LPIPS), an 8x8 latent with 4 token scales (85
# tokens) and a 4x4 grid of LR start tokens: a quarter of the default's pixels and tokens.
_SMALL: dict[str, Any] = {
    "lr_size": 8,
    "grids": (1, 2, 4, 8),
    "latent_size": 8,
    "context_size": 4,
}

PRESETS: dict[str, dict[str, Any]] = {
    # Unit tests (seconds): 32x32 HR (LPIPS's AlexNet needs >= 31 px), 16x16 LR at x2, a 4x4
    # latent, a few steps of each phase.
    "tiny": {
        "lr_size": 16,
        "max_scale": 2,
        "grids": (2, 4),
        "latent_size": 4,
        "channels": 8,
        "latent_dim": 4,
        "codebook_size": 16,
        "res_blocks": 1,
        "dim": 16,
        "depth": 1,
        "heads": 2,
        "context_size": 4,
        "sr_blocks": 1,
        "n_train": 32,
        "n_eval": 8,
        "batch_size": 8,
        "tokenizer_steps": 3,
        "var_steps": 3,
        "sr_steps": 3,
        "dpo_steps": 2,
        "dpo_pool": 8,
        "dpo_samples": 2,
    },
    # `fidia-jax hitvar demo`: every phase once, at a few minutes of CPU (see docs/hitvar.md
    # for its measured time); too short for the tokens to matter.
    "demo": {
        **_SMALL,
        "n_train": 256,
        "n_eval": 48,
        "tokenizer_steps": 200,
        "var_steps": 150,
        "sr_steps": 100,
        "dpo_steps": 20,
        "dpo_pool": 32,
    },
    # docs/hitvar.md's measured table (the declared reduced protocol: `python
    # benchmarks/hitvar.py`, minutes of CPU).
    "reduced": {
        **_SMALL,
        "n_train": 512,
        "n_eval": 96,
        "tokenizer_steps": 400,
        "var_steps": 250,
        "sr_steps": 200,
        "dpo_steps": 40,
        "dpo_pool": 32,
    },
    # The full protocol of docs/hitvar.md (not run on the 2-core sandbox).
    "default": {},
}


CONFIGS = config_lib.ConfigSet(HitVarConfig, PRESETS)
get_config, load_config = CONFIGS.get_config, CONFIGS.load_config
config_from_dict = CONFIGS.config_from_dict
