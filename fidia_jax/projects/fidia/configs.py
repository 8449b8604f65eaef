"""Typed configuration of a FIDIA / baseline fine-tuning run.

A run is described by one :class:`FidiaConfig` made of four frozen groups (model, data, train,
eval). Named presets come from :func:`get_config` (``"tiny"`` for tests, ``"demo"`` for
``make demo``, ``"small"`` for the CPU method comparison, ``"default"`` for an accelerator);
:func:`load_config` also reads a JSON or TOML file whose keys mirror the dataclasses, optionally
starting from a preset given under the top-level key ``base``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fidia_jax import config as config_lib
from fidia_jax.config import config_to_dict, override_config
from fidia_jax.errors import ConfigError
from fidia_jax.parallel import PARAM_SHARDING_MODES

__all__ = [
    "CRITERIA",
    "METHODS",
    "PRESETS",
    "DataConfig",
    "EvalConfig",
    "FidiaConfig",
    "ModelConfig",
    "RewardSpec",
    "TrainConfig",
    "config_from_dict",
    "config_to_dict",
    "get_config",
    "load_config",
    "override_config",
]

#: Success criteria of :class:`RewardSpec` (``criteria``).
CRITERIA = ("proxy", "structure")

#: Methods sharing the training loop. ``bon`` is the frozen reference (no update).
METHODS = ("fidia", "rloo", "grpo", "dpo", "bon")


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Policy initialisation and decoding.

    Attributes:
      checkpoint: ProteinMPNN weights the policy and the frozen reference start from.
      variant: ``"vanilla"`` or ``"soluble"``.
      temperature: sampling temperature of rollouts and evaluation samples; the policy's
        log-probabilities are those of the tempered distribution that is actually sampled.
      omit_aas: tokens never sampled (and excluded from the policy's softmax).
    """

    checkpoint: str = "v_48_020"
    variant: str = "vanilla"
    temperature: float = 0.3
    omit_aas: str = "X"


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """Which backbones to train and evaluate on.

    Attributes:
      data_dir: root of the shared data (``None``: ``$FIDIA_DATA_DIR``, else an error; see
        :func:`fidia_jax.data.resolve_data_dir`).
      train_tasks: task-set name for training (passed to ``fidia_jax.protein`` task builders),
        or ``"default"`` for the built-in default backbone.
      eval_tasks: task-set name for held-out evaluation (never overlaps the training proteins).
      max_train_tasks: cap on the number of training backbones (``0``: all).
      max_eval_tasks: cap on the number of held-out backbones (``0``: all).
      eval_names: explicit held-out task names (``"rfdiffusion/5TPN"`` or ``"5TPN"``); empty:
        the first ``max_eval_tasks`` of the held-out split.
      max_length: backbones longer than this are cropped to a window around their motif.
      batch_backbones: backbones per update step; the batch is split over the largest number of
        devices that divides it (:func:`fidia_jax.parallel.data_mesh`), so make it a multiple
        of :func:`jax.device_count` to use every device.
      num_devices: cap on the devices of that mesh, the first ones of :func:`jax.devices`
        (``0``: all); with ``reward.fold_device`` it keeps the policy and the structure
        predictor on different devices.
    """

    data_dir: str | None = None
    train_tasks: str = "train"
    eval_tasks: str = "heldout"
    max_train_tasks: int = 0
    max_eval_tasks: int = 0
    eval_names: tuple[str, ...] = ()
    max_length: int = 128
    batch_backbones: int = 4
    num_devices: int = 0


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Optimisation. Every method uses the same sample budget: ``n_samples`` per backbone/step.

    Attributes:
      num_steps: update steps (``0`` for the ``bon`` baseline).
      n_samples: sequences sampled per backbone and step (n >= k_bon).
      k_bon: Best-of-N size FIDIA optimises (PKPO loo-1 effective rewards with k = k_bon).
      learning_rate, weight_decay, grad_clip: optax adamw (+ global-norm clipping).
      beta_kl: weight of the per-token k3 KL to the frozen reference.
      clip_eps: PPO ratio clipping (``0``: no clipping).
      ppo_epochs: gradient steps on each rollout batch.
      dpo_beta: DPO temperature on sequence log-ratios.
      grpo_eps: added to the group standard deviation of GRPO (and of FIDIA with group norm).
      fidia_group_norm: divide FIDIA's effective rewards by the group's reward std, as GRPO
        does to RLOO (see :func:`fidia_jax.projects.fidia.fidia_advantages`).
      checkpoint_every: orbax checkpoint period in steps (the last step is always saved).
      keep_checkpoints: how many checkpoints orbax keeps.
      param_sharding: how the policy, reference and optimiser state sit on the device mesh:
        ``"replicated"`` (every device holds them; the batch is split over the ``data`` axis)
        or ``"fsdp"`` (each array split over ``data`` along its largest divisible axis);
        see :func:`fidia_jax.parallel.param_shardings`.
    """

    num_steps: int = 40
    n_samples: int = 16
    k_bon: int = 8
    learning_rate: float = 3e-5
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    beta_kl: float = 0.02
    clip_eps: float = 0.2
    ppo_epochs: int = 2
    dpo_beta: float = 0.1
    grpo_eps: float = 1e-6
    fidia_group_norm: bool = False
    checkpoint_every: int = 10
    keep_checkpoints: int = 2
    param_sharding: str = "replicated"


@dataclasses.dataclass(frozen=True)
class EvalConfig:
    """Held-out evaluation.

    Attributes:
      n_samples: samples per backbone (>= max(ns)); max@N uses the unbiased estimator.
      ns: the N of max@N.
      bon_n: the N whose Best-of-N pick decides success and whose samples give precision.
      before_training: also evaluate the initial policy (the frozen reference).
      every: also evaluate every ``every`` steps during training, and at step 0 (``0``: no
        curve). Each evaluation is a line of ``eval_curve.jsonl`` in the run folder and its
        samples go to ``samples/step_<step>.npz``: the training-judge curve, and what held-out
        judges score afterwards (``benchmarks/fidia_sweep.py``).
    """

    n_samples: int = 32
    ns: tuple[int, ...] = (1, 4, 8, 16, 32)
    bon_n: int = 8
    before_training: bool = True
    every: int = 0


@dataclasses.dataclass(frozen=True)
class RewardSpec:
    """Composite reward (:class:`~fidia_jax.projects.fidia.RewardModel`, default weights).

    Attributes:
      judge: ``"variant/name"`` ProteinMPNN checkpoints of the frozen designability judge (never
        the policy's start); empty: no designability / function terms.
      judge_orders: random decoding orders per judge checkpoint.
      calibration_samples: reference samples per backbone that fit the standardiser.
      criteria: ``"proxy"`` (success and precision from
        :class:`~fidia_jax.projects.fidia.ProxyThresholds`; the default, no folding) or
        ``"structure"`` (a structure predictor folds every sample:
        :func:`fidia_jax.protein.structure_success`, scRMSD < 2 Å, motif RMSD < 1 Å,
        pLDDT > 70). Every report says which.
      fold_params: AlphaFold2 parameters folder (``params_<fold_model>.npz`` in it or in its
        ``params/``); needed by ``criteria="structure"`` (the CLI's ``--fold-params DIR``).
      fold_model: AlphaFold2 model name (``model_1_ptm`` ... ``model_5_ptm``; the multimer
        ``model_1_multimer_v3`` ... ``model_5_multimer_v3`` folds each designed chain as its own
        chain; the CLI's ``--fold-model NAME``).
      fold_recycles: AlphaFold2 recycles (3, as in the release).
      fold_batch: sequences folded per jitted call (memory grows linearly with it).
      fold_overrides: AlphaFold2 config overrides, ``"dotted.key=JSON value"`` each (e.g.
        ``"model.global_config.bfloat16=false"``).
      fold_device: index in :func:`jax.devices` of the device the predictor runs on (``0``:
        the first, where the policy also is; e.g. ``1`` with ``data.num_devices=1`` puts the
        policy on the first GPU and AlphaFold2 on the second).
      structure_gate: with ``criteria="structure"``, a sample whose fold fails the criteria also
        gets the gate value as its reward (the gate holds only for motif identities, no ``X``
        and a passing fold); ``False``: the fold decides success and precision only.
      fold_partners: binding tasks fold their partner (target) chains with the designed
        chains, each its own chain (for a multimer ``fold_model``); success stays on the
        designed chains, ipTM is the ``fold_iptm`` diagnostic.
    """

    judge: tuple[str, ...] = (
        "vanilla/v_48_002",
        "vanilla/v_48_010",
        "vanilla/v_48_030",
        "soluble/v_48_020",
    )
    judge_orders: int = 2
    calibration_samples: int = 32
    criteria: str = "proxy"
    fold_params: str | None = None
    fold_model: str = "model_1_ptm"
    fold_recycles: int = 3
    fold_batch: int = 8
    fold_overrides: tuple[str, ...] = ()
    fold_device: int = 0
    structure_gate: bool = True
    fold_partners: bool = False


@dataclasses.dataclass(frozen=True)
class FidiaConfig:
    """A complete run: ``method`` trained with ``train`` on ``data``, judged by ``eval``."""

    method: str = "fidia"
    seed: int = 0
    model: ModelConfig = ModelConfig()
    data: DataConfig = DataConfig()
    train: TrainConfig = TrainConfig()
    eval: EvalConfig = EvalConfig()
    reward: RewardSpec = RewardSpec()

    def __post_init__(self) -> None:
        validate_config(self)


def validate_config(config: FidiaConfig) -> None:
    """Raises :class:`~fidia_jax.errors.ConfigError` when values are inconsistent."""
    t, e, d = config.train, config.eval, config.data
    if config.method not in METHODS:
        raise ConfigError(f"method must be one of {METHODS}, got {config.method!r}")
    if t.num_steps < 0:
        raise ConfigError(f"train.num_steps must be >= 0, got {t.num_steps}")
    if t.n_samples < 2:
        raise ConfigError(
            f"train.n_samples must be >= 2 (baselines need a group), got {t.n_samples}"
        )
    if not 1 <= t.k_bon <= t.n_samples:
        raise ConfigError(f"train.k_bon must be in [1, n_samples={t.n_samples}], got {t.k_bon}")
    if t.ppo_epochs < 1:
        raise ConfigError(f"train.ppo_epochs must be >= 1, got {t.ppo_epochs}")
    if t.clip_eps < 0 or t.beta_kl < 0 or t.learning_rate < 0:
        raise ConfigError("train.clip_eps, train.beta_kl and train.learning_rate must be >= 0")
    if t.checkpoint_every < 1:
        raise ConfigError(f"train.checkpoint_every must be >= 1, got {t.checkpoint_every}")
    if t.param_sharding not in PARAM_SHARDING_MODES:
        raise ConfigError(
            f"train.param_sharding must be one of {PARAM_SHARDING_MODES}, got {t.param_sharding!r}"
        )
    if not e.ns or min(e.ns) < 1 or max(e.ns) > e.n_samples:
        raise ConfigError(f"eval.ns must lie in [1, eval.n_samples={e.n_samples}], got {e.ns}")
    if e.every < 0:
        raise ConfigError(f"eval.every must be >= 0, got {e.every}")
    if not 1 <= e.bon_n <= e.n_samples:
        raise ConfigError(f"eval.bon_n must be in [1, eval.n_samples={e.n_samples}], got {e.bon_n}")
    if d.batch_backbones < 1 or d.max_length < 8:
        raise ConfigError("data.batch_backbones must be >= 1 and data.max_length >= 8")
    if config.reward.calibration_samples < 2 or config.reward.judge_orders < 1:
        raise ConfigError("reward.calibration_samples must be >= 2 and reward.judge_orders >= 1")
    r = config.reward
    if r.criteria not in CRITERIA:
        raise ConfigError(f"reward.criteria must be one of {CRITERIA}, got {r.criteria!r}")
    if r.fold_recycles < 0 or r.fold_batch < 1 or r.fold_device < 0:
        raise ConfigError(
            "reward.fold_recycles and reward.fold_device must be >= 0 and reward.fold_batch >= 1"
        )
    if d.num_devices < 0:
        raise ConfigError(f"data.num_devices must be >= 0, got {d.num_devices}")
    for item in r.fold_overrides:
        if "=" not in item:
            raise ConfigError(f"reward.fold_overrides: {item!r} is not 'dotted.key=value'")
    if config.model.temperature <= 0:
        raise ConfigError(f"model.temperature must be > 0, got {config.model.temperature}")


_SMALL_EVAL = (
    "rfdiffusion/5TPN",
    "rfdiffusion/3IXT",
    "rfdiffusion/1YCR",
    "rfdiffusion/5YUI",
    "rfdiffusion/6EXZ",
    "rfdiffusion/7MRX",
    "rfdiffusion/2KL8",
    "rfdiffusion/1PRW",
)

PRESETS: dict[str, dict[str, Any]] = {
    # Unit tests: the default backbone cropped short, 4 samples, 2 steps, a 1-checkpoint judge.
    "tiny": {
        "data": {
            "train_tasks": "default",
            "eval_tasks": "default",
            "max_length": 24,
            "batch_backbones": 1,
        },
        "train": {
            "num_steps": 2,
            "n_samples": 4,
            "k_bon": 2,
            "ppo_epochs": 1,
            "checkpoint_every": 1,
            "learning_rate": 1e-4,
        },
        "eval": {"n_samples": 4, "ns": (1, 2, 4), "bon_n": 2, "before_training": False},
        "reward": {"judge": ("vanilla/v_48_002",), "judge_orders": 1, "calibration_samples": 4},
    },
    # `make demo`: a short FIDIA fine-tune on the built-in default backbone (~182 s CPU, 2-3 min on
    # an idle 2-core machine; docs/fidia.md).
    "demo": {
        "data": {
            "train_tasks": "default",
            "eval_tasks": "default",
            "max_length": 64,
            "batch_backbones": 1,
        },
        "train": {
            "num_steps": 12,
            "n_samples": 16,
            "k_bon": 8,
            "ppo_epochs": 1,
            "checkpoint_every": 4,
            "learning_rate": 5e-5,
            "beta_kl": 0.02,
        },
        "eval": {"n_samples": 32, "ns": (1, 4, 8, 16, 32), "bon_n": 8},
        "reward": {
            "judge": ("vanilla/v_48_002", "soluble/v_48_020"),
            "judge_orders": 1,
            "calibration_samples": 32,
        },
    },
    # The CPU-scale five-method comparison (docs/benchmarks.md, "FIDIA vs baselines"; ~2 min per
    # trained run, 2 cores).
    "small": {
        "data": {
            "train_tasks": "train",
            "eval_tasks": "heldout",
            "max_train_tasks": 8,
            "eval_names": _SMALL_EVAL,
            "max_length": 64,
            "batch_backbones": 2,
        },
        "train": {
            "num_steps": 24,
            "n_samples": 16,
            "k_bon": 8,
            "ppo_epochs": 1,
            "checkpoint_every": 12,
            "learning_rate": 5e-5,
            "beta_kl": 0.01,
        },
        "eval": {"n_samples": 32, "ns": (1, 4, 8, 16, 32), "bon_n": 8, "before_training": False},
        "reward": {
            "judge": ("vanilla/v_48_002", "soluble/v_48_020"),
            "judge_orders": 1,
            "calibration_samples": 16,
        },
    },
    "default": {},
}


CONFIGS = config_lib.ConfigSet(FidiaConfig, PRESETS)
get_config, load_config = CONFIGS.get_config, CONFIGS.load_config
config_from_dict = CONFIGS.config_from_dict
