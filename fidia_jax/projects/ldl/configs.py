"""Typed configuration of the LDL-DVS cross-validation (KL-only vs KL + alpha * divisiveness).

One frozen :class:`LdlConfig`; presets in :data:`PRESETS` (``tiny`` for tests, ``demo`` for a
short CPU run, ``default`` for the authors' settings on one data set); :func:`load_config` also
reads a JSON or TOML file whose keys mirror the dataclass, optionally from a preset under ``base``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fidia_jax import config as config_lib
from fidia_jax.errors import ConfigError
from fidia_jax.metrics import LDL_METRICS
from fidia_jax.parallel import PARAM_SHARDING_MODES
from fidia_jax.projects.ldl.losses import DIVISIVENESS_MODES

__all__ = ["ACTIVATIONS", "BASELINES", "PRESETS", "LdlConfig", "get_config", "load_config"]

#: Hidden-layer activations of the MLP (PyLDL's 3-layer model uses ``sigmoid``).
ACTIVATIONS = ("sigmoid", "relu", "tanh")
#: Simple baselines the cross-validation scores on the same folds (``train._baseline_predict``).
BASELINES = ("aa_knn", "ridge")


@dataclasses.dataclass(frozen=True)
class LdlConfig:
    """A cross-validated comparison of LDL models trained with ``KL + alpha * L_dvs``.

    Attributes:
      dataset: a ``.mat`` set under ``<data_dir>/ldl/`` (e.g. ``SJAFFE``, ``Emotion6``) or
        ``synthetic`` (:func:`~.data.synthetic_ldl_dataset`, no file needed).
      data_dir: the shared data directory (else ``$FIDIA_DATA_DIR``); unused for ``synthetic``.
      alphas: weights of the divisiveness loss compared; ``0.0`` (required) is KL-only, the
        reference of every ratio.
      k: softmin sharpness of the smooth divisiveness (authors' default 10).
      mode: divisiveness-loss mode (``ovo`` = authors' code, ``ovo_symmetric``, ``full``).
      hidden: hidden widths of the MLP (``()`` = linear softmax model; PyLDL's default is
        ``(64,)`` with sigmoid).
      activation: one of :data:`ACTIVATIONS`.
      learning_rate, epochs: full-batch Adam (PyLDL's defaults: 1e-3, 1000 epochs).
      n_folds, n_repeats: K-fold cross-validation repeated with reshuffled folds.
      folds_per_repeat: run only the first this many folds of each repeat (``0`` = all); a
        declared reduction for slow machines.
      max_features: reduce the features to this many principal components (``0`` = keep all);
        the PCA is fitted on each fold's training rows only and applied to its test rows.
      baselines: simple baselines scored on the same folds (:data:`BASELINES`): ``aa_knn``
        (mean label distribution of the ``knn_k`` nearest training rows, PyLDL's AA-kNN) and
        ``ridge`` (multi-output ridge regression on the features, penalty by leave-one-out,
        prediction clipped at 0 and renormalised to sum 1).
      knn_k: neighbours of ``aa_knn`` when ``knn_k_grid`` is empty (a fixed ``k``).
      knn_k_grid: ``aa_knn``'s ``k`` is chosen per training fold from this grid (default
        ``(3, 5, 10, 20)``; values above the inner fitting part's size are skipped) on an inner
        split of that fold's training rows (``train.choose_knn_k``: 20 % held out), by
        ``knn_k_metric``; the fold's test rows are never seen. ``()``: use ``knn_k``.
      knn_k_metric: the metric of the choice, one of the reported ones (``train.METRICS``;
        default ``divisiveness_error``, the method's main metric and the table's first column).
      seed: fold shuffling uses ``seed + repeat``; model initialisation ``key(seed)``.
      n_samples, n_features, n_labels: size of the ``synthetic`` set.
      param_sharding: how the models sit on the device mesh: ``"replicated"`` (every device
        holds all) or ``"fsdp"`` (:data:`fidia_jax.parallel.PARAM_SHARDING_MODES`).
      num_devices: how many devices the rows are split over (``0``: every visible device; the
        rows are padded with weight-0 rows to a multiple of it); not part of a checkpoint's
        fingerprint (it changes only the summation order).
    """

    dataset: str = "SJAFFE"
    data_dir: str = ""
    alphas: tuple[float, ...] = (0.0, 0.01, 0.1, 1.0)
    k: float = 10.0
    mode: str = "ovo"
    hidden: tuple[int, ...] = (64,)
    activation: str = "sigmoid"
    learning_rate: float = 1e-3
    epochs: int = 1000
    n_folds: int = 10
    n_repeats: int = 3
    folds_per_repeat: int = 0
    max_features: int = 0
    baselines: tuple[str, ...] = ("aa_knn", "ridge")
    knn_k: int = 10
    knn_k_grid: tuple[int, ...] = (3, 5, 10, 20)
    knn_k_metric: str = "divisiveness_error"
    seed: int = 0
    n_samples: int = 400
    n_features: int = 16
    n_labels: int = 6
    param_sharding: str = "replicated"
    num_devices: int = 0

    def __post_init__(self) -> None:
        if not self.alphas or 0.0 not in self.alphas or min(self.alphas) < 0:
            raise ConfigError(f"alphas must be >= 0 and include 0.0 (KL-only), got {self.alphas}")
        if self.k <= 0:
            raise ConfigError(f"k must be > 0, got {self.k}")
        if self.mode not in DIVISIVENESS_MODES:
            raise ConfigError(f"mode must be one of {DIVISIVENESS_MODES}, got {self.mode!r}")
        if self.activation not in ACTIVATIONS:
            raise ConfigError(f"activation must be one of {ACTIVATIONS}, got {self.activation!r}")
        if any(h < 1 for h in self.hidden):
            raise ConfigError(f"hidden widths must be >= 1, got {self.hidden}")
        if self.learning_rate <= 0 or self.epochs < 1:
            raise ConfigError(
                f"need learning_rate > 0 and epochs >= 1, got {self.learning_rate}, {self.epochs}"
            )
        if self.n_folds < 2 or self.n_repeats < 1:
            raise ConfigError(
                f"need n_folds >= 2 and n_repeats >= 1, got {self.n_folds}, {self.n_repeats}"
            )
        if not 0 <= self.folds_per_repeat <= self.n_folds:
            raise ConfigError(
                f"folds_per_repeat must be in [0, n_folds={self.n_folds}], got "
                f"{self.folds_per_repeat}"
            )
        unknown = [b for b in self.baselines if b not in BASELINES]
        if unknown:
            raise ConfigError(f"baselines must be some of {BASELINES}, got {unknown}")
        if self.knn_k < 1:
            raise ConfigError(f"knn_k must be >= 1, got {self.knn_k}")
        if any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in self.knn_k_grid):
            raise ConfigError(f"knn_k_grid must hold integers >= 1, got {self.knn_k_grid}")
        known = ("divisiveness_error", *LDL_METRICS)
        if self.knn_k_metric not in known:
            raise ConfigError(f"knn_k_metric must be one of {known}, got {self.knn_k_metric!r}")
        if self.max_features < 0:
            raise ConfigError(f"max_features must be >= 0, got {self.max_features}")
        if self.param_sharding not in PARAM_SHARDING_MODES:
            raise ConfigError(
                f"param_sharding must be one of {PARAM_SHARDING_MODES}, got {self.param_sharding!r}"
            )
        if self.num_devices < 0:
            raise ConfigError(f"num_devices must be >= 0, got {self.num_devices}")


PRESETS: dict[str, dict[str, Any]] = {
    # Unit tests (seconds): synthetic data, linear model, 2 alphas, 3 folds x 1 repeat.
    "tiny": {
        "dataset": "synthetic",
        "alphas": (0.0, 1.0),
        "hidden": (),
        "learning_rate": 0.05,
        "epochs": 60,
        "n_folds": 3,
        "n_repeats": 1,
        "n_samples": 90,
        "n_features": 6,
        "n_labels": 4,
    },
    # `fidia-jax ldl demo --data-dir ../shared/data`: SJAFFE, 5-fold x 1, ~1 min on 2 CPU cores.
    "demo": {
        "dataset": "SJAFFE",
        "n_folds": 5,
        "n_repeats": 1,
        "epochs": 500,
        "learning_rate": 3e-3,
    },
    # The authors' LDL_DVS settings (MLP 64 sigmoid, Adam 1e-3, 1000 full-batch epochs),
    # 10-fold x 3 on SJAFFE.
    "default": {},
}


CONFIGS = config_lib.ConfigSet(LdlConfig, PRESETS)
get_config, load_config = CONFIGS.get_config, CONFIGS.load_config
config_from_dict = CONFIGS.config_from_dict
