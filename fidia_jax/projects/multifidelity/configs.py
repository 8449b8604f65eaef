"""Typed configuration of the multi-fidelity comparison (trusted subsets vs baselines).

One frozen :class:`MultiFidelityConfig`; presets in :data:`PRESETS` (``tiny`` for tests, ``demo``
for a short CPU run, ``default`` for one task of ``benchmarks/multifidelity.py``);
:func:`load_config` also reads a JSON or TOML file whose keys mirror the dataclass, optionally
from a preset under ``base``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fidia_jax import config as config_lib
from fidia_jax.errors import ConfigError
from fidia_jax.parallel import PARAM_SHARDING_MODES
from fidia_jax.projects.multifidelity.losses import TrustedSubsetWeights

__all__ = ["ACTIVATIONS", "GP_METHODS", "METHODS", "MultiFidelityConfig", "PRESETS", "TASKS",
           "get_config", "load_config"]  # fmt: skip

#: Tasks: the four analytic functions of :data:`~.data.ANALYTIC_FUNCTIONS` and FreeSolv.
TASKS = ("forrester", "currin", "park", "borehole", "freesolv")

#: Methods (config key -> row name). ``hf_only`` is the reference of every ratio.
METHODS: dict[str, str] = {
    "trusted_subsets": "trusted subsets (ours, all terms)",
    "ts_no_absolute": "trusted subsets, absolute term off",
    "ts_no_interval": "trusted subsets, interval term off",
    "ts_no_ranking": "trusted subsets, ranking term off",
    "ts_other_radius": "trusted subsets, the other radius mode",
    "ts_other_ranking": "trusted subsets, the other ranking form",
    "hf_only": "HF-only MLP",
    "multi_head": "multi-head MLP (one head per fidelity)",
    "pretrain_finetune": "LF pretrain -> HF fine-tune",
    "delta_oracle": "Δ-learning (ORACLE: lowest-fidelity label at HF train and test inputs)",
    "gp_hf_only": "HF-only GP (scikit-learn, ARD RBF + white noise)",
    "gp_two_stage": "two-stage Δ GP (GP on LF, affine map, GP on the residual)",
}

#: The Gaussian-process baselines (scikit-learn, :mod:`~.baselines`; not trained by ``fit``).
GP_METHODS = ("gp_hf_only", "gp_two_stage")

#: Hidden activations of the MLP.
ACTIVATIONS = ("relu", "silu", "tanh", "gelu")


@dataclasses.dataclass(frozen=True)
class MultiFidelityConfig:
    """One task, every method, ``num_seeds`` runs (vmapped).

    Attributes:
      task: one of :data:`TASKS`.
      data_dir: shared data directory (FreeSolv only; ``None``: ``$FIDIA_DATA_DIR``).
      n_hf, n_mf, n_lf: training rows per fidelity (disjoint inputs). ``n_mf = 0`` drops the
        medium fidelity; FreeSolv has two fidelities (``n_mf`` must be 0) and ``n_lf = None``
        takes every non-test, non-HF molecule. Analytic tasks need an integer ``n_lf``.
      n_test: analytic high-fidelity test points (FreeSolv: ``test_fraction`` of the molecules).
      features, n_bits: FreeSolv molecular features (``"morgan"`` bits or RDKit ``"descriptors"``).
      test_fraction, num_splits: FreeSolv test split; run ``s`` uses split ``s % num_splits``
        and HF subset ``s``.
      seed, num_seeds: runs ``seed .. seed + num_seeds - 1`` (data draw and network init).
      hidden, activation: the MLP (:class:`fidia_jax.models.MLP`) shared by every method.
      steps, learning_rate, weight_decay: full-batch AdamW per training phase.
      absolute_weight, interval_weight, ranking_weight, radius_mode, radius_quantile,
        radius_penalty, temperature, ranking_form, margin_scale:
        :class:`~.losses.TrustedSubsetWeights`.
      gp_restarts: extra random restarts of each GP baseline's hyper-parameter fit.
      baseline_threads: native threads (BLAS/OpenMP) of the scikit-learn baselines (``0``: the
        cores this process may use, :func:`fidia_jax.train.available_cores`).
      methods: keys of :data:`METHODS` to run; ``hf_only`` is required (the reference).
      checkpoint_every: with a workdir, each fit also saves a checkpoint every so many steps
        (``0``: only at its end); a run resumes from them.
      param_sharding: how the trained parameters sit on the device mesh: ``"replicated"``
        (every device holds all) or ``"fsdp"`` (each split along one axis;
        :data:`fidia_jax.parallel.PARAM_SHARDING_MODES`).
      num_devices: the most devices the runs (num_seeds) is split over
        (``0``: every visible device; :func:`fidia_jax.parallel.data_mesh` takes the most that
        divide it); not part of a checkpoint's fingerprint (it changes only the summation order).
    """

    task: str = "forrester"
    data_dir: str | None = None
    n_hf: int = 16
    n_mf: int = 48
    n_lf: int | None = 192
    n_test: int = 512
    features: str = "morgan"
    n_bits: int = 1024
    test_fraction: float = 0.2
    num_splits: int = 5
    seed: int = 0
    num_seeds: int = 10
    hidden: tuple[int, ...] = (64, 64)
    activation: str = "silu"
    steps: int = 2000
    learning_rate: float = 3e-3
    weight_decay: float = 1e-4
    absolute_weight: float = 1.0
    interval_weight: float = 1.0
    ranking_weight: float = 0.1
    radius_mode: str = "quantile"
    radius_quantile: float = 0.8
    radius_penalty: float = 0.1
    temperature: float = 1.0
    ranking_form: str = "hinge"
    margin_scale: float = 0.0
    gp_restarts: int = 3
    baseline_threads: int = 0
    methods: tuple[str, ...] = tuple(METHODS)
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
        if self.task not in TASKS:
            raise ConfigError(f"task must be one of {TASKS}, got {self.task!r}")
        if self.n_hf < 1 or self.n_mf < 0 or self.n_test < 1:
            raise ConfigError(
                f"need n_hf >= 1, n_mf >= 0, n_test >= 1; got {self.n_hf}, {self.n_mf}, {self.n_test}"
            )
        if self.task == "freesolv":
            if self.n_mf != 0:
                raise ConfigError(
                    "task 'freesolv' has two fidelities (experimental, GAFF): set n_mf=0"
                )
            if self.features not in ("morgan", "descriptors"):
                raise ConfigError(
                    f"features must be 'morgan' or 'descriptors', got {self.features!r}"
                )
        elif self.n_lf is None:
            raise ConfigError(
                f"task {self.task!r}: n_lf must be an integer >= 1 (None is FreeSolv's 'all')"
            )
        if self.n_lf is not None and self.n_lf < 1:
            raise ConfigError(f"n_lf must be >= 1 (or None for FreeSolv), got {self.n_lf}")
        if self.num_seeds < 1 or self.num_splits < 1:
            raise ConfigError(
                f"num_seeds and num_splits must be >= 1, got {self.num_seeds}, {self.num_splits}"
            )
        if self.steps < 1 or self.learning_rate <= 0 or self.weight_decay < 0:
            raise ConfigError("steps >= 1, learning_rate > 0 and weight_decay >= 0 are required")
        if self.baseline_threads < 0:
            raise ConfigError(f"baseline_threads must be >= 0, got {self.baseline_threads}")
        if self.gp_restarts < 0:
            raise ConfigError(f"gp_restarts must be >= 0, got {self.gp_restarts}")
        if self.checkpoint_every < 0:
            raise ConfigError(f"checkpoint_every must be >= 0, got {self.checkpoint_every}")
        if self.activation not in ACTIVATIONS:
            raise ConfigError(f"activation must be one of {ACTIVATIONS}, got {self.activation!r}")
        if not self.hidden or min(self.hidden) < 1:
            raise ConfigError(f"hidden must be widths >= 1 (at least one), got {self.hidden}")
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown or "hf_only" not in self.methods:
            raise ConfigError(
                f"methods must include 'hf_only' and name only {tuple(METHODS)}, got {self.methods}"
            )
        try:
            self.loss_weights()
        except ValueError as e:
            raise ConfigError(str(e)) from None

    def loss_weights(self, **changes: Any):
        """The :class:`~.losses.TrustedSubsetWeights` of this config, with ``changes``."""
        kw = dict(absolute=self.absolute_weight, interval=self.interval_weight,
                  ranking=self.ranking_weight, radius_mode=self.radius_mode,
                  radius_quantile=self.radius_quantile, radius_penalty=self.radius_penalty,
                  temperature=self.temperature, ranking_form=self.ranking_form,
                  margin_scale=self.margin_scale)  # fmt: skip
        kw.update(changes)
        return TrustedSubsetWeights(**kw)


PRESETS: dict[str, dict[str, Any]] = {
    # Unit tests (compilation-bound, a few seconds): Forrester HF + LF, 2 seeds, 400 steps.
    "tiny": {
        "n_hf": 8,
        "n_mf": 0,
        "n_lf": 24,
        "n_test": 64,
        "num_seeds": 2,
        "hidden": (16,),
        "steps": 400,
        "learning_rate": 1e-2,
        "methods": (
            "trusted_subsets",
            "ts_no_ranking",
            "hf_only",
            "multi_head",
            "pretrain_finetune",
            "delta_oracle",
            "gp_hf_only",
            "gp_two_stage",
        ),
        "gp_restarts": 1,
    },
    # `fidia-jax multifidelity demo`: Forrester at n_HF = 16, 3 seeds, every method (~1 min).
    "demo": {"num_seeds": 3, "steps": 1000},
    # One task of benchmarks/multifidelity.py.
    "default": {},
}


CONFIGS = config_lib.ConfigSet(MultiFidelityConfig, PRESETS)
get_config, load_config = CONFIGS.get_config, CONFIGS.load_config
config_from_dict = CONFIGS.config_from_dict
