"""Typed configuration of the StreamFlow driver: train a small rectified flow, serve it streamed.

One frozen :class:`StreamFlowConfig`; presets in :data:`PRESETS` (``tiny`` for tests, ``demo``
for a short CPU run, ``default`` for the figures of ``docs/streamflow.md``); :func:`load_config`
also reads a JSON or TOML file whose keys mirror the dataclass, optionally from a preset under
``base``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fidia_jax import config as config_lib
from fidia_jax.errors import ConfigError
from fidia_jax.parallel import PARAM_SHARDING_MODES

__all__ = ["PRESETS", "StreamFlowConfig", "get_config", "load_config"]


@dataclasses.dataclass(frozen=True)
class StreamFlowConfig:
    """Train a rectified flow on digits, optionally reflow once, sample through the stream batch.

    Attributes:
      seed: the digit split, weights, noise and training batches derive from it.
      image_size: digits are resized to ``image_size x image_size``
        (:func:`fidia_jax.data.load_digit_images`); must be divisible by
        ``2 ** (len(features) - 1)``.
      holdout: digits held out from training (the reference set of the Fréchet proxy).
      features, time_dim, groups: of :class:`fidia_jax.models.StreamFlowUNet`.
      train_steps, batch_size, learning_rate: Adam on the rectified-flow loss
        (cosine decay to 0, no warm-up).
      reflow_rounds: 0 or 1; a round samples ``reflow_pairs`` (noise, image) pairs with
        ``reflow_sample_steps`` Euler steps and fine-tunes for ``reflow_train_steps`` steps on them.
      eval_steps: Euler step counts evaluated (each sample is a stream-batch request).
      eval_samples: samples per step count (and held-out digits compared with).
      fd_proxy: compute the AlexNet Fréchet distance (a proxy, not FID) of the samples.
      exact_check: requests per step count re-sampled one at a time by the sequential sampler
        and compared with the stream batch (max |delta|).
      buckets: the stream batcher's AOT-compiled batch sizes.
      sample_grid: write ``samples.png`` (matplotlib) in the work directory.
      checkpoint_every: save the training state every so many steps of each fit (``0``: only
        at its end); a rerun in the same work directory resumes from the newest checkpoint.
      parameterisation: ``"velocity"`` (the network outputs the velocity) or ``"perflow_eps"``
        (the network outputs an eps, turned into a velocity per PeRFlow window by
        :func:`fidia_jax.projects.streamflow.perflow.perflow_apply`, the authors' scheduler;
        the loss is the same rectified-flow loss on the converted velocity).
      perflow_windows: ``K``, PeRFlow's number of time windows (the authors' 4).
      num_devices: the training steps run data-parallel on a
        :func:`fidia_jax.parallel.data_mesh` of the most devices ``<= num_devices`` (``0``:
        all) that divide the batch: each batch is split along ``"data"``. One device: the plain
        single-device program. Not part of a run's resume fingerprint (a checkpoint restores
        onto any mesh).
      param_sharding: ``"replicated"`` (default) or ``"fsdp"``: how the parameters and the Adam
        state sit on that mesh (:func:`fidia_jax.parallel.param_shardings`); not part of the
        resume fingerprint either.
    """

    seed: int = 0
    image_size: int = 16
    holdout: int = 297
    features: tuple[int, ...] = (16, 32)
    time_dim: int = 32
    groups: int = 8
    train_steps: int = 1000
    batch_size: int = 32
    learning_rate: float = 2e-3
    reflow_rounds: int = 1
    reflow_pairs: int = 512
    reflow_sample_steps: int = 16
    reflow_train_steps: int = 300
    eval_steps: tuple[int, ...] = (4, 8, 16)
    eval_samples: int = 256
    fd_proxy: bool = True
    exact_check: int = 8
    buckets: tuple[int, ...] = (1, 2, 4, 8, 16)
    sample_grid: bool = True
    checkpoint_every: int = 0
    parameterisation: str = "velocity"
    perflow_windows: int = 4
    num_devices: int = 0
    param_sharding: str = "replicated"

    def __post_init__(self) -> None:
        if self.parameterisation not in ("velocity", "perflow_eps"):
            raise ConfigError(
                f"parameterisation must be 'velocity' or 'perflow_eps', got "
                f"{self.parameterisation!r}"
            )
        if self.perflow_windows < 1:
            raise ConfigError(f"perflow_windows must be >= 1, got {self.perflow_windows}")
        if not self.features or min(self.features) < 1:
            raise ConfigError(f"features must be ints >= 1 (at least one), got {self.features}")
        factor = 2 ** (len(self.features) - 1)
        if self.image_size < 1 or self.image_size % factor:
            raise ConfigError(
                f"image_size must be a positive multiple of {factor} (2^(levels-1)), got "
                f"{self.image_size}"
            )
        for name in (
            "train_steps",
            "batch_size",
            "reflow_pairs",
            "reflow_sample_steps",
            "eval_samples",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.reflow_rounds not in (0, 1):
            raise ConfigError(f"reflow_rounds must be 0 or 1, got {self.reflow_rounds}")
        if not self.eval_steps or min(self.eval_steps) < 1:
            raise ConfigError(
                f"eval_steps must be step counts >= 1 (step count 0 makes no "
                f"image), got {self.eval_steps}"
            )
        if not 2 <= self.holdout <= 1797 - self.batch_size:
            raise ConfigError(f"holdout must be in [2, 1797 - batch_size], got {self.holdout}")
        if self.fd_proxy and min(self.eval_samples, self.holdout) < 2:
            raise ConfigError("fd_proxy needs eval_samples >= 2 and holdout >= 2")
        if self.checkpoint_every < 0:
            raise ConfigError(f"checkpoint_every must be >= 0, got {self.checkpoint_every}")
        if not 0 <= self.exact_check <= self.eval_samples:
            raise ConfigError(f"exact_check must be in [0, eval_samples], got {self.exact_check}")
        if (
            not self.buckets
            or self.buckets[0] < 1
            or list(self.buckets) != sorted(set(self.buckets))
        ):
            raise ConfigError(f"buckets must be increasing ints >= 1, got {self.buckets}")
        if self.num_devices < 0:
            raise ConfigError(f"num_devices must be >= 0, got {self.num_devices}")
        if self.param_sharding not in PARAM_SHARDING_MODES:
            raise ConfigError(
                f"param_sharding must be one of {PARAM_SHARDING_MODES}, got {self.param_sharding!r}"
            )


PRESETS: dict[str, dict[str, Any]] = {
    # Unit tests (seconds): 8x8 digits, a one-level net, 3 training steps, every path once.
    "tiny": {
        "image_size": 8,
        "holdout": 16,
        "features": (8,),
        "time_dim": 16,
        "groups": 4,
        "train_steps": 3,
        "batch_size": 8,
        "reflow_pairs": 4,
        "reflow_sample_steps": 2,
        "reflow_train_steps": 1,
        "eval_steps": (1, 2),
        "eval_samples": 3,
        "fd_proxy": False,
        "exact_check": 2,
        "buckets": (1, 2),
    },
    # `fidia-jax streamflow demo`: about a minute on 2 idle CPU cores, no reflow.
    "demo": {"train_steps": 300, "reflow_rounds": 0, "eval_samples": 64, "exact_check": 4},
    # docs/streamflow.md (`python benchmarks/streamflow.py`): a few minutes on 2 CPU cores
    # (a declared reduced scale: the 2 cores are shared; a longer run is
    # `--set features=[32,64] time_dim=64 train_steps=4000 batch_size=64`).
    "default": {},
}


CONFIGS = config_lib.ConfigSet(StreamFlowConfig, PRESETS)
get_config, load_config = CONFIGS.get_config, CONFIGS.load_config
config_from_dict = CONFIGS.config_from_dict
