"""fidia_jax.projects.fidia: FIDIA (Best-of-N-aligned RL fine-tuning of ProteinMPNN) and its baselines.

Paper:
  FIDIA, ICML 2026 (authors, title and link not available offline: this driver is
  **reconstructed from the abstract**; every choice not in the abstract is marked as ours in
  ``docs/fidia.md`` and ``docs/fidia_rewards.md``). Its effective rewards are PKPO's:
  Walder & Karkhanis, "Pass@K Policy Optimization: Solving Harder Reinforcement Learning
  Problems", 2025. https://arxiv.org/abs/2505.15201

What it does: one training loop (:func:`train_and_evaluate`, :class:`Trainer`) shared by FIDIA
(PKPO loo-1 effective rewards with ``k = N_BoN``), RLOO, GRPO, DPO and the frozen ProteinMPNN +
Best-of-N baseline, on composite design rewards (:class:`RewardModel`: a frozen ProteinMPNN
judge ensemble, :class:`Judge`, plus sequence terms); held-out metrics (max@N, success and
precision under proxy thresholds or, with ``reward.criteria = "structure"``, on AlphaFold2 folds
of every sample (:class:`FoldCache`, :func:`build_predictor`), diversity, recovery, motif
preservation).

Primitives it uses:
  * :mod:`fidia_jax.models` -- ``ProteinMPNN`` (policy, reference and judge), ``sample``,
    ``MPNNInputs``, ``random_decoding_order``;
  * :mod:`fidia_jax.rl` -- ``max_at_k`` / ``max_at_k_weights`` (max@N, success@N) and the
    policy-gradient pieces behind ``advantages`` / ``policy_loss``, and ``dpo_pair`` /
    ``dpo_sequence_loss`` of the DPO baseline;
  * :mod:`fidia_jax.protein` -- design tasks and splits, structure I/O, geometry, the
    judge-free sequence terms, ``structure_success`` and ``AlphaFoldPredictor`` (the ``fold``
    extra, only with ``reward.criteria = "structure"``);
  * :mod:`fidia_jax.parallel` -- device mesh, batch sharding, multi-host initialisation;
  * :mod:`fidia_jax.config` -- typed presets, files and ``--set`` overrides (``configs.py``);
  * :mod:`fidia_jax.train` -- each PPO update is a ``make_train_step`` step inside FIDIA's own
    RL loop; ``Checkpointer`` (orbax), ``FitProgress``, ``stage``, ``print_table``,
    ``write_json`` / ``write_summary`` and ``pyplot`` for what a run shows and leaves;
  * optax ``adamw`` (+ global-norm clipping).

Files: ``configs.py`` (presets ``tiny`` / ``demo`` / ``small`` / ``default``), ``train.py``
(``train_and_evaluate``, ``Trainer``), ``_step.py`` (train state, jitted rollout and update),
``_checkpoints.py``, ``_plots.py``, ``_rewards.py`` + ``_judge.py`` (composite reward),
``_backbones.py`` + ``_tasks_bridge.py`` (data), ``_evaluate.py`` (metrics), ``_fold.py``
(the cached structure predictor).
"""

from fidia_jax.projects.fidia._advantages import advantages as advantages
from fidia_jax.projects.fidia._advantages import fidia_advantages as fidia_advantages
from fidia_jax.projects.fidia._advantages import grpo_advantages as grpo_advantages
from fidia_jax.projects.fidia._advantages import rloo_advantages as rloo_advantages
from fidia_jax.projects.fidia._backbones import Backbone as Backbone
from fidia_jax.projects.fidia._backbones import StackedBackbones as StackedBackbones
from fidia_jax.projects.fidia._backbones import crop_inputs as crop_inputs
from fidia_jax.projects.fidia._backbones import stack_backbones as stack_backbones
from fidia_jax.projects.fidia._checkpoints import load_policy as load_policy
from fidia_jax.projects.fidia._evaluate import backbone_metrics as backbone_metrics
from fidia_jax.projects.fidia._evaluate import max_at_n as max_at_n
from fidia_jax.projects.fidia._evaluate import mean_pairwise_identity as mean_pairwise_identity
from fidia_jax.projects.fidia._evaluate import success_at_n as success_at_n
from fidia_jax.projects.fidia._evaluate import summarise as summarise
from fidia_jax.projects.fidia._fold import FoldCache as FoldCache
from fidia_jax.projects.fidia._fold import build_predictor as build_predictor
from fidia_jax.projects.fidia._judge import DEFAULT_JUDGE_CHECKPOINTS as DEFAULT_JUDGE_CHECKPOINTS
from fidia_jax.projects.fidia._judge import MPNN_CHECKPOINTS as MPNN_CHECKPOINTS
from fidia_jax.projects.fidia._judge import Frame2seqJudge as Frame2seqJudge
from fidia_jax.projects.fidia._judge import Judge as Judge
from fidia_jax.projects.fidia._judge import JudgeConfig as JudgeConfig
from fidia_jax.projects.fidia._judge import heldout_judge_checkpoints as heldout_judge_checkpoints
from fidia_jax.projects.fidia._plots import plot_max_at_n as plot_max_at_n
from fidia_jax.projects.fidia._plots import plot_training as plot_training
from fidia_jax.projects.fidia._policy import omit_mask as omit_mask
from fidia_jax.projects.fidia._policy import policy_loss as policy_loss
from fidia_jax.projects.fidia._policy import policy_token_log_probs as policy_token_log_probs
from fidia_jax.projects.fidia._policy import tempered_token_log_probs as tempered_token_log_probs
from fidia_jax.projects.fidia._rewards import COMPONENTS as COMPONENTS
from fidia_jax.projects.fidia._rewards import ProxyThresholds as ProxyThresholds
from fidia_jax.projects.fidia._rewards import RewardBreakdown as RewardBreakdown
from fidia_jax.projects.fidia._rewards import RewardConfig as RewardConfig
from fidia_jax.projects.fidia._rewards import RewardFeatures as RewardFeatures
from fidia_jax.projects.fidia._rewards import RewardModel as RewardModel
from fidia_jax.projects.fidia._rewards import RewardResult as RewardResult
from fidia_jax.projects.fidia._rewards import Standardizer as Standardizer
from fidia_jax.projects.fidia._rewards import combine_rewards as combine_rewards
from fidia_jax.projects.fidia._rewards import developability_score as developability_score
from fidia_jax.projects.fidia._rewards import fit_standardizer as fit_standardizer
from fidia_jax.projects.fidia._rewards import make_reward_features as make_reward_features
from fidia_jax.projects.fidia._rewards import sequence_terms as sequence_terms
from fidia_jax.projects.fidia._rewards import standardize as standardize
from fidia_jax.projects.fidia._step import TrainState as TrainState
from fidia_jax.projects.fidia._step import make_optimizer as make_optimizer
from fidia_jax.projects.fidia._tasks_bridge import load_backbones as load_backbones
from fidia_jax.projects.fidia.configs import METHODS as METHODS
from fidia_jax.projects.fidia.configs import DataConfig as DataConfig
from fidia_jax.projects.fidia.configs import EvalConfig as EvalConfig
from fidia_jax.projects.fidia.configs import FidiaConfig as FidiaConfig
from fidia_jax.projects.fidia.configs import ModelConfig as ModelConfig
from fidia_jax.projects.fidia.configs import RewardSpec as RewardSpec
from fidia_jax.projects.fidia.configs import TrainConfig as TrainConfig
from fidia_jax.projects.fidia.configs import config_from_dict as config_from_dict
from fidia_jax.projects.fidia.configs import config_to_dict as config_to_dict
from fidia_jax.projects.fidia.configs import get_config as get_config
from fidia_jax.projects.fidia.configs import load_config as load_config
from fidia_jax.projects.fidia.configs import override_config as override_config
from fidia_jax.projects.fidia.train import Trainer as Trainer
from fidia_jax.projects.fidia.train import evaluate_params as evaluate_params
from fidia_jax.projects.fidia.train import train_and_evaluate as train_and_evaluate

__all__ = [
    "COMPONENTS",
    "DEFAULT_JUDGE_CHECKPOINTS",
    "METHODS",
    "MPNN_CHECKPOINTS",
    "Backbone",
    "DataConfig",
    "EvalConfig",
    "FidiaConfig",
    "FoldCache",
    "Frame2seqJudge",
    "Judge",
    "JudgeConfig",
    "ModelConfig",
    "ProxyThresholds",
    "RewardBreakdown",
    "RewardConfig",
    "RewardFeatures",
    "RewardModel",
    "RewardResult",
    "RewardSpec",
    "StackedBackbones",
    "Standardizer",
    "TrainConfig",
    "TrainState",
    "Trainer",
    "advantages",
    "backbone_metrics",
    "build_predictor",
    "combine_rewards",
    "config_from_dict",
    "config_to_dict",
    "crop_inputs",
    "developability_score",
    "evaluate_params",
    "fidia_advantages",
    "fit_standardizer",
    "get_config",
    "grpo_advantages",
    "heldout_judge_checkpoints",
    "load_backbones",
    "load_config",
    "load_policy",
    "make_optimizer",
    "make_reward_features",
    "max_at_n",
    "mean_pairwise_identity",
    "omit_mask",
    "override_config",
    "plot_max_at_n",
    "plot_training",
    "policy_loss",
    "policy_token_log_probs",
    "rloo_advantages",
    "sequence_terms",
    "stack_backbones",
    "standardize",
    "success_at_n",
    "summarise",
    "tempered_token_log_probs",
    "train_and_evaluate",
]
