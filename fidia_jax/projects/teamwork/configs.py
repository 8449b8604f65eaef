"""Typed configuration of the TeamWork anomaly-detection comparison.

One frozen :class:`TeamWorkConfig`; presets in :data:`PRESETS` (``tiny`` for tests, ``demo`` for
a short CPU run, ``default`` for ``docs/teamwork.md``); :func:`load_config` also reads a JSON or
TOML file whose keys mirror the dataclass, optionally from a preset under ``base``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fidia_jax import config as config_lib
from fidia_jax.errors import ConfigError
from fidia_jax.parallel import PARAM_SHARDING_MODES

__all__ = ["METHODS", "PRESETS", "TeamWorkConfig", "get_config", "load_config"]

#: Methods compared (config key -> row name).
METHODS: dict[str, str] = {
    "teamwork": "TeamWork (ours, reconstruction)",
    "no_roles": "ablation: no roles (all-to-all gated messages)",
    "no_gate": "ablation: no gate",
    "random_mask": "ablation: random point masking",
    "transformer": "role-free masked transformer (random masking, MSE)",
    "pca": "PCA T2+Q",
    "iforest": "Isolation Forest",
    "convae": "Conv-AE (SKAB's leaderboard peer)",
}


@dataclasses.dataclass(frozen=True)
class TeamWorkConfig:
    """A comparison run.

    Attributes:
      dataset: ``"synthetic"`` (:func:`fidia_jax.projects.teamwork.data.make_synthetic`) or
        ``"skab"`` (``<data_dir>/skab/``, SKAB's protocol: train on the first 400 points of each
        run).
      data_dir: shared data directory (``--data-dir`` / ``$FIDIA_DATA_DIR``); SKAB only.
      skab_runs: use only the first ``skab_runs`` labelled runs (0 = all 34).
      skab_every: then keep every ``skab_every``-th run (a reduced protocol spanning all folders).
      seed: model init, batches and masks; the synthetic series uses ``seed`` too.
      train_length, test_length, n_anomalies: synthetic series sizes.
      window: model window ``L`` (steps).
      dim, heads: model width and temporal attention heads.
      steps, batch_size, learning_rate: Adam training of every neural method (per SKAB run).
      mask_ratio: masking probability per span (``K = round(1 / mask_ratio)`` test passes).
      lags: lags of the channel-influence regressions.
      smooth: moving-average width applied to every method's score (1 = none).
      anomaly_ratio: the fixed-ratio threshold flags this fraction of each test series.
      convae_window, convae_steps: Conv-AE's window (SKAB's notebook: 60, a multiple of 4)
        and Adam steps (batch ``batch_size``, learning rate 1e-3 as in SKAB's notebook).
      methods: keys of :data:`METHODS` to run; the first is the reference of the ratios
        (default: all but ``convae``, which the ``skab`` preset adds).
      param_sharding: how the trained parameters sit on the device mesh: ``"replicated"``
        (every device holds all) or ``"fsdp"`` (each split along one axis;
        :data:`fidia_jax.parallel.PARAM_SHARDING_MODES`).
      num_devices: the most devices each neural method's batch of windows is split over
        (``0``: every visible device; :func:`fidia_jax.parallel.data_mesh` takes the most that
        divide it); not part of a checkpoint's fingerprint (it changes only the summation order).
    """

    dataset: str = "synthetic"
    data_dir: str | None = None
    skab_runs: int = 0
    skab_every: int = 1
    seed: int = 0
    train_length: int = 3000
    test_length: int = 3000
    n_anomalies: int = 15
    window: int = 48
    dim: int = 32
    heads: int = 4
    steps: int = 400
    batch_size: int = 32
    learning_rate: float = 2e-3
    mask_ratio: float = 0.25
    lags: int = 4
    smooth: int = 1
    anomaly_ratio: float = 0.1
    convae_window: int = 60
    convae_steps: int = 300
    methods: tuple[str, ...] = tuple(m for m in METHODS if m != "convae")
    param_sharding: str = "replicated"
    num_devices: int = 0

    def __post_init__(self) -> None:
        if self.param_sharding not in PARAM_SHARDING_MODES:
            raise ConfigError(
                f"param_sharding must be one of {PARAM_SHARDING_MODES}, got {self.param_sharding!r}"
            )
        if self.num_devices < 0:
            raise ConfigError(f"num_devices must be >= 0, got {self.num_devices}")
        if self.dataset not in ("synthetic", "skab"):
            raise ConfigError(f"dataset must be 'synthetic' or 'skab', got {self.dataset!r}")
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown or not self.methods:
            raise ConfigError(
                f"methods must name at least one of {tuple(METHODS)}, got {self.methods}"
            )
        if self.window < 4 or self.dim < 1 or self.dim % self.heads:
            raise ConfigError(
                f"need window >= 4 and dim % heads == 0, got window={self.window}, "
                f"dim={self.dim}, heads={self.heads}"
            )
        if self.steps < 1 or self.batch_size < 1 or self.learning_rate <= 0:
            raise ConfigError("steps, batch_size must be >= 1 and learning_rate > 0")
        if not 0.0 < self.mask_ratio < 1.0:
            raise ConfigError(f"mask_ratio must be in (0, 1), got {self.mask_ratio}")
        if not 0.0 < self.anomaly_ratio <= 1.0:
            raise ConfigError(f"anomaly_ratio must be in (0, 1], got {self.anomaly_ratio}")
        if self.convae_window < 4 or self.convae_window % 4 or self.convae_steps < 1:
            raise ConfigError(
                f"convae_window must be a multiple of 4 (>= 4) and convae_steps >= 1, got "
                f"{self.convae_window}, {self.convae_steps}"
            )
        if self.smooth < 1 or self.lags < 1 or self.skab_runs < 0 or self.skab_every < 1:
            raise ConfigError("smooth, lags, skab_every must be >= 1 and skab_runs >= 0")


PRESETS: dict[str, dict[str, Any]] = {
    # Unit tests: a short synthetic series, tiny model, few steps, three methods.
    "tiny": {
        "train_length": 400,
        "test_length": 400,
        "n_anomalies": 4,
        "window": 16,
        "dim": 8,
        "heads": 2,
        "steps": 15,
        "batch_size": 8,
        "methods": ("teamwork", "pca"),
    },
    # `fidia-jax teamwork demo`: the synthetic comparison at reduced size, the reduced protocol of
    # docs/teamwork.md's synthetic table (width 16, 2 heads, batch 16: width 32 and batch 32
    # took 4x the compute, over the 3-minute budget of a demo on 2 idle cores).
    "demo": {
        "train_length": 1500,
        "test_length": 1500,
        "n_anomalies": 8,
        "steps": 200,
        "dim": 16,
        "heads": 2,
        "batch_size": 16,
    },
    # docs/teamwork.md synthetic table (`python benchmarks/teamwork.py`).
    "default": {},
    # docs/teamwork.md SKAB table: SKAB's protocol, 34 runs, one model per run.
    "skab": {
        "dataset": "skab",
        "window": 32,
        "steps": 150,
        "anomaly_ratio": 0.5,
        "smooth": 5,
        "methods": (*(m for m in METHODS if m != "convae"), "convae"),
    },
}


CONFIGS = config_lib.ConfigSet(TeamWorkConfig, PRESETS)
get_config, load_config = CONFIGS.get_config, CONFIGS.load_config
config_from_dict = CONFIGS.config_from_dict
