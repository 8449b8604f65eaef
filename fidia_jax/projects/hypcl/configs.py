"""Typed configuration of the HypCL class-incremental comparison.

One frozen :class:`HypclConfig`; presets in :data:`PRESETS` (``tiny`` for tests, ``demo`` for a
short CPU run, ``default`` for the table of ``docs/hypcl.md``); :func:`load_config` also reads a
JSON or TOML file whose keys mirror the dataclass, optionally from a preset under ``base``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fidia_jax import config as config_lib
from fidia_jax.errors import ConfigError
from fidia_jax.parallel import PARAM_SHARDING_MODES

__all__ = ["METHODS", "NCM_FEATURES", "PRESETS", "HypclConfig", "get_config", "load_config"]

#: Methods compared (config key -> row name).
METHODS: dict[str, str] = {
    "ncm": "NCM on frozen features",
    "finetune": "sequential fine-tuning (lower bound)",
    "euclidean": "Euclidean adapter + prototypes",
    "hypcl": "HypCL (hyperbolic adapter + prototypes)",
    "joint_euclidean": "joint training, Euclidean (upper bound)",
    "joint_hypcl": "joint training, hyperbolic (upper bound)",
}


NCM_FEATURES = ("raw", "running", "first_task")


@dataclasses.dataclass(frozen=True)
class HypclConfig:
    """A class-incremental run: ``num_orders`` class orders, tasks of ``classes_per_task``.

    Attributes:
      seed: split, class orders, initialisation and minibatches derive from it.
      task: ``"digits"`` (frozen AlexNet conv5 features of scikit-learn's digits at 64x64,
        10 classes) or ``"synthetic"``
        (:func:`~fidia_jax.projects.hypcl.data.hierarchical_gaussian_mixture`).
      num_orders: class orders (order 0 is ``0..K-1``, the others random permutations).
      classes_per_task: classes per task (digits: 2 -> 5 tasks).
      test_fraction: stratified held-out fraction per class.
      dim: embedding width; curvature: ``c > 0`` of the ball; clip_r: feature clipping radius
        before ``exp_0``; temperature: logits ``-d^2 / temperature``.
      steps_per_task, batch_size: Adam steps per task and minibatch size (joint: the same steps
        on the pooled data of every step).
      learning_rate: Adam (Euclidean weights and Euclidean prototypes) and Riemannian Adam
        (hyperbolic prototypes) step size.
      distill_weight: weight of the embedding distillation to the previous task's adapter
        (HypCL and the Euclidean adapter; 0 for fine-tuning).
      local_ce: the softmax of HypCL / the Euclidean adapter runs over the current task's
        classes only (else over every class seen so far; fine-tuning always uses all seen).
        Ignored with ``feature_replay``.
      feature_replay: HypCL and the Euclidean adapter also train on Gaussian pseudo-features
        of the old classes (per-class mean and std of the frozen features, no exemplars), with
        the softmax over every seen class.
      validation_fraction: with ``tune_learning_rates`` / ``tune_distill_weights`` non-empty,
        this stratified fraction of the *training* split is held out as a validation set; every
        grid point is run on class order 0 with the rest of the training split and scored by
        average accuracy on the validation set, separately for ``hypcl``, ``euclidean`` and
        ``finetune`` (when in ``methods``; its learning rate only: it never distils); the best (ties: the first) is used for that method in the comparison. The test split is
        never seen during the choice.
      tune_learning_rates, tune_distill_weights: the grid (``()``: the configured value).
      methods: keys of :data:`METHODS` to run (``hypcl`` and ``euclidean`` required).
      synth_depth, synth_branching, synth_dim, synth_n_per_class, synth_decay, synth_noise:
        the synthetic task (``task="synthetic"``).
      ncm_features: features of the ``ncm`` baseline: ``"raw"`` (default: the frozen features
        as they are; its distances need no scaling and this is its strongest fair form),
        ``"running"`` (standardised at task ``t`` with the mean and std of the training data
        of tasks ``0..t``, floored) or ``"first_task"`` (the trained methods' standardisation,
        the pre-issue-41 behaviour).
      sweep_depths: tree depths of the depth sweep on the synthetic task (HypCL vs Euclidean;
        ``()`` skips it); sweep_dim: embedding width in the sweep.
      num_devices: the gradient steps run data-parallel on a
        :func:`fidia_jax.parallel.data_mesh` of the most devices ``<= num_devices`` (``0``:
        all) that divide ``batch_size``: each minibatch (real and replayed rows) is split along
        ``"data"``. One device: the plain single-device program.
      param_sharding: ``"replicated"`` (default) or ``"fsdp"``: how the adapter, the
        prototypes and the optimiser state sit on that mesh
        (:func:`fidia_jax.parallel.param_shardings`).
    """

    seed: int = 0
    task: str = "digits"
    num_orders: int = 3
    classes_per_task: int = 2
    test_fraction: float = 0.25
    dim: int = 16
    curvature: float = 1.0
    clip_r: float = 2.0
    temperature: float = 1.0
    steps_per_task: int = 300
    batch_size: int = 64
    learning_rate: float = 0.01
    distill_weight: float = 0.0
    local_ce: bool = True
    feature_replay: bool = True
    validation_fraction: float = 0.2
    tune_learning_rates: tuple[float, ...] = (3e-3, 1e-2, 3e-2)
    tune_distill_weights: tuple[float, ...] = (0.0, 0.1)
    methods: tuple[str, ...] = tuple(METHODS)
    synth_depth: int = 3
    synth_branching: int = 2
    synth_dim: int = 16
    synth_n_per_class: int = 60
    synth_decay: float = 0.6
    synth_noise: float = 0.35
    sweep_depths: tuple[int, ...] = (2, 3, 4)
    sweep_dim: int = 4
    ncm_features: str = "raw"
    num_devices: int = 0
    param_sharding: str = "replicated"

    def __post_init__(self) -> None:
        if self.task not in ("digits", "synthetic"):
            raise ConfigError(f"task must be 'digits' or 'synthetic', got {self.task!r}")
        if self.ncm_features not in NCM_FEATURES:
            raise ConfigError(
                f"ncm_features must be one of {NCM_FEATURES}, got {self.ncm_features!r}"
            )
        if self.num_orders < 1 or self.classes_per_task < 1:
            raise ConfigError("num_orders and classes_per_task must be >= 1")
        if not 0.0 < self.test_fraction < 1.0:
            raise ConfigError(f"test_fraction must be in (0, 1), got {self.test_fraction}")
        if not self.curvature > 0.0:
            raise ConfigError(f"curvature c must be > 0, got {self.curvature}")
        if self.dim < 1 or self.sweep_dim < 1 or self.steps_per_task < 1 or self.batch_size < 1:
            raise ConfigError("dim, sweep_dim, steps_per_task and batch_size must be >= 1")
        if self.clip_r <= 0 or self.temperature <= 0 or self.learning_rate <= 0:
            raise ConfigError("clip_r, temperature and learning_rate must be > 0")
        if not 0.0 < self.validation_fraction < 1.0:
            raise ConfigError(
                f"validation_fraction must be in (0, 1), got {self.validation_fraction}"
            )
        if any(v <= 0 for v in self.tune_learning_rates) or any(
            v < 0 for v in self.tune_distill_weights
        ):
            raise ConfigError("tune_learning_rates must be > 0 and tune_distill_weights >= 0")
        if self.distill_weight < 0:
            raise ConfigError(f"distill_weight must be >= 0, got {self.distill_weight}")
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown or not {"hypcl", "euclidean"} <= set(self.methods):
            raise ConfigError(
                f"methods must include 'hypcl' and 'euclidean' and name only {tuple(METHODS)}, "
                f"got {self.methods}"
            )
        if any(d < 1 for d in self.sweep_depths) or self.synth_depth < 1:
            raise ConfigError("tree depths must be >= 1")
        if self.num_devices < 0:
            raise ConfigError(f"num_devices must be >= 0, got {self.num_devices}")
        if self.param_sharding not in PARAM_SHARDING_MODES:
            raise ConfigError(
                f"param_sharding must be one of {PARAM_SHARDING_MODES}, got {self.param_sharding!r}"
            )


PRESETS: dict[str, dict[str, Any]] = {
    # Unit tests (~seconds): a depth-2 synthetic tree (4 classes, 2 tasks), one order, few steps.
    "tiny": {
        "task": "synthetic",
        "num_orders": 1,
        "synth_depth": 2,
        "synth_dim": 8,
        "synth_n_per_class": 24,
        "dim": 4,
        "steps_per_task": 30,
        "batch_size": 16,
        "methods": ("ncm", "finetune", "euclidean", "hypcl"),
        "sweep_depths": (),
        "tune_learning_rates": (3e-2,),
        "tune_distill_weights": (),
    },
    # `fidia-jax hypcl demo`: digits, one order, short tasks, depth sweep 2..3.
    "demo": {
        "num_orders": 1,
        "steps_per_task": 150,
        "sweep_depths": (2, 3),
        "tune_learning_rates": (),
        "tune_distill_weights": (),
    },
    # docs/hypcl.md (`python benchmarks/hypcl.py`).
    "default": {},
}


CONFIGS = config_lib.ConfigSet(HypclConfig, PRESETS)
get_config, load_config = CONFIGS.get_config, CONFIGS.load_config
config_from_dict = CONFIGS.config_from_dict
