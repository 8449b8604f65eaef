"""Typed configuration of the multi-treatment effect experiments (IHDP and K-arm semi-synthetic).

One frozen :class:`CausalConfig`; presets in :data:`PRESETS` (``tiny`` for tests, ``demo`` for a
short CPU run, ``default`` for the documented run); :func:`load_config` also reads a JSON or TOML
file whose keys mirror the dataclass, optionally from a preset under ``base``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fidia_jax import config as config_lib
from fidia_jax.errors import ConfigError
from fidia_jax.parallel import PARAM_SHARDING_MODES

__all__ = ["DATASETS", "METHODS", "PRESETS", "CausalConfig", "get_config", "load_config"]

#: ``ihdp``: the IHDP replications (binary); ``multiarm_ihdp`` / ``multiarm_acic`` /
#: ``multiarm_random``: :func:`~.data.make_multiarm` on IHDP covariates (shared data),
#: ACIC 2016 covariates (causallib) or Gaussian covariates (no data needed).
DATASETS = ("ihdp", "multiarm_ihdp", "multiarm_acic", "multiarm_random")
#: ``tarnet`` (no balancing), ``cfr_<scheme>`` (``pairwise``, ``one_vs_all``, ``aggregation``),
#: ``causalegm`` (binary: the package's model; K > 2: multi-treatment CausalEGM), and the
#: meta-learner baselines ``<t|s|x>_<ridge|gbm|lgbm>`` (:mod:`~.baselines`: T-, S-, X-learner
#: with ridge, scikit-learn gradient boosting or LightGBM).
NETWORKS = ("tarnet", "cfr_pairwise", "cfr_one_vs_all", "cfr_aggregation", "causalegm")
BASELINES = tuple(f"{m}_{b}" for m in ("t", "s", "x") for b in ("ridge", "gbm", "lgbm"))
METHODS = NETWORKS + BASELINES


@dataclasses.dataclass(frozen=True)
class CausalConfig:
    """One experiment: datasets x seeds x methods; metrics on held-out units.

    Attributes:
      seed: base seed (model init, batches, the split and the generator add to it).
      dataset: one of :data:`DATASETS`.
      data_dir: the shared data directory (``None``: ``$FIDIA_DATA_DIR``).
      replications: IHDP replications (1..10) or, for the generators, seeds of the data.
      num_arms: ``K`` values of the generator (ignored for IHDP, which has 2).
      n_units: generator only: units drawn (random covariates) or kept (ACIC: first ``n_units``).
      imbalance: generator's assignment imbalance (0 = randomised).
      test_fraction: held-out fraction (stratified by arm).
      methods: subset of :data:`METHODS`.
      ipm: ``mmd_rbf`` | ``mmd_linear`` | ``wasserstein``.
      alpha: balancing weight; ``None`` = the plug-in estimate (reconstruction).
      alpha_grid: when non-empty, CFR-pairwise is also run at each value (alpha_hat vs grid).
      validation_fraction: when ``> 0`` (and ``alpha_grid`` is set), alpha is chosen by a
        validation split instead of the grid rows: CFR-pairwise is fitted at each grid value
        on the other ``1 - validation_fraction`` of the training units, and the fit with the
        lowest factual MSE on the validation units is the row ``cfr_pairwise@val`` (the
        row's ``grid`` keeps every grid fit's validation MSE and held-out scores).
      early_stopping: with ``validation_fraction > 0``, add two early-stopped rows on the
        validation split of the alpha selection: ``tarnet@es`` and ``cfr_pairwise@val_es``
        (CFR-pairwise early-stopped at each ``alpha_grid`` value, the alpha whose best
        validation factual MSE is lowest kept: CFR's own protocol). Each stops after
        ``patience`` evaluations (every ``eval_every`` steps) without improvement, at most
        ``iterations`` steps, and keeps the parameters of its best evaluation.
      iterations, batch_size, learning_rate: CFR/TARNet training.
      rep_hidden, head_hidden: TARNet widths.
      egm_iterations: CausalEGM iterations (package default 30000).
      egm_embed_dim: multi-treatment CausalEGM arm embedding size.
      egm_small: CausalEGM with two 16/8-wide layers per network instead of the package's
        widths (tests and notebooks only: compiles in a fraction of the time).
      time_epochs: if > 0, time this many epochs per CFR scheme (per-epoch cost vs K).
      num_devices: the gradient steps of TARNet, CFR and CausalEGM run data-parallel on a
        :func:`fidia_jax.parallel.data_mesh` of the most devices ``<= num_devices`` (``0``:
        all) that divide the minibatch (each minibatch split along ``"data"``); one device:
        the plain single-device program.
      param_sharding: ``"replicated"`` (default) or ``"fsdp"``: how the networks and their
        optimiser states sit on that mesh (:func:`fidia_jax.parallel.param_shardings`).
    """

    seed: int = 0
    dataset: str = "ihdp"
    data_dir: str | None = None
    replications: tuple[int, ...] = (1, 2, 3)
    num_arms: tuple[int, ...] = (2, 4, 8, 16)
    n_units: int = 747
    imbalance: float = 1.0
    test_fraction: float = 0.3
    methods: tuple[str, ...] = ("tarnet", "cfr_pairwise", "causalegm")
    ipm: str = "mmd_rbf"
    alpha: float | None = 1.0
    alpha_grid: tuple[float, ...] = ()
    validation_fraction: float = 0.0
    early_stopping: bool = False
    patience: int = 10
    eval_every: int = 10
    iterations: int = 1500
    batch_size: int = 100
    learning_rate: float = 1e-3
    rep_hidden: tuple[int, ...] = (200, 200, 200)
    head_hidden: tuple[int, ...] = (100, 100)
    egm_iterations: int = 1000
    egm_embed_dim: int = 3
    egm_small: bool = False
    time_epochs: int = 0
    num_devices: int = 0
    param_sharding: str = "replicated"

    def __post_init__(self) -> None:
        if self.dataset not in DATASETS:
            raise ConfigError(f"dataset must be one of {DATASETS}, got {self.dataset!r}")
        bad = [m for m in self.methods if m not in METHODS]
        if bad or not self.methods:
            raise ConfigError(
                f"methods must be a non-empty subset of {METHODS}, got {self.methods}"
            )
        if not self.replications:
            raise ConfigError("replications must name at least one replication/seed")
        if self.dataset == "ihdp" and not all(1 <= r <= 10 for r in self.replications):
            raise ConfigError(f"IHDP replications must be in 1..10, got {self.replications}")
        if self.dataset != "ihdp" and (not self.num_arms or min(self.num_arms) < 2):
            raise ConfigError(
                f"num_arms must be ints >= 2 (effects need a control and a treatment), "
                f"got {self.num_arms}"
            )
        if self.ipm not in ("mmd_rbf", "mmd_linear", "wasserstein"):
            raise ConfigError(f"ipm must be mmd_rbf, mmd_linear or wasserstein, got {self.ipm!r}")
        if self.alpha is not None and self.alpha < 0:
            raise ConfigError(f"alpha must be >= 0 or None (estimate), got {self.alpha}")
        if not 0 <= self.validation_fraction < 1:
            raise ConfigError(
                f"validation_fraction must be in [0, 1), got {self.validation_fraction}"
            )
        if self.validation_fraction > 0 and not self.alpha_grid:
            raise ConfigError("validation_fraction > 0 needs an alpha_grid to choose alpha from")
        if self.early_stopping and self.validation_fraction == 0:
            raise ConfigError("early_stopping needs validation_fraction > 0 (its validation split)")
        if self.patience < 0 or self.eval_every < 1:
            raise ConfigError(
                f"patience must be >= 0 and eval_every >= 1, got {self.patience}, {self.eval_every}"
            )
        if any(a < 0 for a in self.alpha_grid):
            raise ConfigError(f"alpha_grid values must be >= 0, got {self.alpha_grid}")
        if not 0 < self.test_fraction < 1:
            raise ConfigError(f"test_fraction must be in (0, 1), got {self.test_fraction}")
        if min(self.iterations, self.batch_size, self.egm_iterations) < 1:
            raise ConfigError("iterations, batch_size and egm_iterations must be >= 1")
        if self.num_devices < 0:
            raise ConfigError(f"num_devices must be >= 0, got {self.num_devices}")
        if self.param_sharding not in PARAM_SHARDING_MODES:
            raise ConfigError(
                f"param_sharding must be one of {PARAM_SHARDING_MODES}, got {self.param_sharding!r}"
            )
        if self.imbalance < 0:
            raise ConfigError(f"imbalance must be >= 0, got {self.imbalance}")


PRESETS: dict[str, dict[str, Any]] = {
    # Unit tests: random covariates, K=3, tiny nets, a few steps (no shared data needed).
    "tiny": {
        "dataset": "multiarm_random",
        "replications": (0,),
        "num_arms": (3,),
        "n_units": 120,
        "methods": ("cfr_aggregation", "causalegm"),
        "iterations": 30,
        "batch_size": 32,
        "rep_hidden": (16, 16),
        "head_hidden": (8,),
        "egm_iterations": 4,
        "egm_embed_dim": 2,
        "egm_small": True,
    },
    # `fidia-jax causal demo` (a few minutes on 2 cores):
    # IHDP replication 1 of the headline table (docs/causal.md; CausalEGM is benchmarked
    # separately): TARNet, CFR with alpha from the bound estimator and from a validation
    # split, TARNet and that CFR again early-stopped on the split, the nine meta-learner
    # baselines, all on the same split.
    "demo": {
        "replications": (1,),
        "methods": ("tarnet", "cfr_pairwise", *BASELINES),
        "alpha": None,
        "alpha_grid": (0.1, 1.0, 10.0),
        "validation_fraction": 0.2,
        "early_stopping": True,
        "iterations": 600,
    },
    # The IHDP part of docs/causal.md (benchmarks/causal.py runs the K-arm parts).
    "default": {},
}


CONFIGS = config_lib.ConfigSet(CausalConfig, PRESETS)
get_config, load_config = CONFIGS.get_config, CONFIGS.load_config
config_from_dict = CONFIGS.config_from_dict
