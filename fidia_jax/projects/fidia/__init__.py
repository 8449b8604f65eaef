"""fidia_jax.projects.fidia: FIDIA (Best-of-N-aligned RL fine-tuning of ProteinMPNN) and its baselines.

One training loop (:func:`train_and_evaluate`) shared by FIDIA (PKPO loo-1 effective rewards with
``k = N_BoN``), RLOO, GRPO, DPO and the frozen ProteinMPNN + Best-of-N baseline; held-out
metrics (max@N, proxy success and precision, diversity, recovery, motif preservation).

References:
  FIDIA (ICML 2026; reconstructed from the abstract -- the paper text is not available).
  Walder & Karkhanis, "Pass@K Policy Optimization", 2025. https://arxiv.org/abs/2505.15201
"""

from fidia_jax.projects.fidia._advantages import advantages as advantages
from fidia_jax.projects.fidia._advantages import dpo_pair as dpo_pair
from fidia_jax.projects.fidia._advantages import fidia_advantages as fidia_advantages
from fidia_jax.projects.fidia._advantages import grpo_advantages as grpo_advantages
from fidia_jax.projects.fidia._advantages import rloo_advantages as rloo_advantages
from fidia_jax.projects.fidia._backbones import Backbone as Backbone
from fidia_jax.projects.fidia._backbones import StackedBackbones as StackedBackbones
from fidia_jax.projects.fidia._backbones import crop_inputs as crop_inputs
from fidia_jax.projects.fidia._backbones import load_backbones as load_backbones
from fidia_jax.projects.fidia._backbones import stack_backbones as stack_backbones
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
from fidia_jax.projects.fidia._evaluate import backbone_metrics as backbone_metrics
from fidia_jax.projects.fidia._evaluate import max_at_n as max_at_n
from fidia_jax.projects.fidia._evaluate import mean_pairwise_identity as mean_pairwise_identity
from fidia_jax.projects.fidia._evaluate import success_at_n as success_at_n
from fidia_jax.projects.fidia._evaluate import summarise as summarise
from fidia_jax.projects.fidia._policy import dpo_loss as dpo_loss
from fidia_jax.projects.fidia._policy import omit_mask as omit_mask
from fidia_jax.projects.fidia._policy import policy_loss as policy_loss
from fidia_jax.projects.fidia._policy import policy_token_log_probs as policy_token_log_probs
from fidia_jax.projects.fidia._policy import tempered_token_log_probs as tempered_token_log_probs
from fidia_jax.projects.fidia.train import Trainer as Trainer
from fidia_jax.projects.fidia.train import evaluate_params as evaluate_params
from fidia_jax.projects.fidia.train import load_policy as load_policy
from fidia_jax.projects.fidia.train import make_optimizer as make_optimizer
from fidia_jax.projects.fidia.train import plot_max_at_n as plot_max_at_n
from fidia_jax.projects.fidia.train import plot_training as plot_training
from fidia_jax.projects.fidia.train import train_and_evaluate as train_and_evaluate

__all__ = [
    "METHODS",
    "Backbone",
    "DataConfig",
    "EvalConfig",
    "FidiaConfig",
    "ModelConfig",
    "RewardSpec",
    "StackedBackbones",
    "TrainConfig",
    "Trainer",
    "advantages",
    "backbone_metrics",
    "config_from_dict",
    "config_to_dict",
    "crop_inputs",
    "dpo_loss",
    "dpo_pair",
    "evaluate_params",
    "fidia_advantages",
    "get_config",
    "grpo_advantages",
    "load_backbones",
    "load_config",
    "load_policy",
    "make_optimizer",
    "max_at_n",
    "mean_pairwise_identity",
    "omit_mask",
    "override_config",
    "plot_max_at_n",
    "plot_training",
    "policy_loss",
    "policy_token_log_probs",
    "rloo_advantages",
    "stack_backbones",
    "success_at_n",
    "summarise",
    "tempered_token_log_probs",
    "train_and_evaluate",
]
