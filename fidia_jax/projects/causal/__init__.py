"""fidia_jax.projects.causal: multi-treatment individual treatment effects (CFR schemes, CausalEGM).

The driver fits TARNet, CFR with one of three K-arm balancing schemes (Pairwise, One-vs-All,
Treatment Aggregation), and CausalEGM (the authors' binary model; a multi-treatment version whose
arm code follows the arms' latent 2-Wasserstein geometry) on IHDP and on a K-arm semi-synthetic
generator, and scores them by sqrt(PEHE) and ATE error over all arm pairs on held-out units.

Paper:
  Liang, Chi, Zhang, "Causal representation learning with optimal compression under complex
  treatments", ICML 2026, arXiv:2603.11907, https://arxiv.org/abs/2603.11907. Only the abstract
  was available: the three schemes' formulas, the plug-in alpha estimator and the
  multi-treatment CausalEGM's arm embedding are **our reconstructions** (docs/causal.md marks
  each formula). CausalEGM follows the authors' MIT package ``causalegm`` 0.4.0 (Liu et al.,
  PNAS 2024); TARNet/CFR follow Shalit et al., ICML 2017.

Primitives used: :func:`fidia_jax.losses.balancing_loss` (and the IPMs),
:func:`fidia_jax.losses.estimate_alpha`, :func:`fidia_jax.losses.causalegm_generator_loss`,
:func:`fidia_jax.losses.causalegm_critic_loss`, :class:`fidia_jax.models.TARNet`,
:class:`fidia_jax.models.CausalEGM`, :func:`fidia_jax.models.arm_embedding_w2`,
:func:`fidia_jax.metrics.sqrt_pehe`, :func:`fidia_jax.metrics.ate_error`,
:func:`fidia_jax.data.load_ihdp`, :func:`fidia_jax.data.make_multiarm`.
"""

from fidia_jax.projects.causal._fit import CfrSettings as CfrSettings
from fidia_jax.projects.causal._fit import EgmSettings as EgmSettings
from fidia_jax.projects.causal._fit import estimate_alpha_for as estimate_alpha_for
from fidia_jax.projects.causal._fit import fit_causalegm as fit_causalegm
from fidia_jax.projects.causal._fit import fit_cfr as fit_cfr
from fidia_jax.projects.causal.configs import DATASETS as DATASETS
from fidia_jax.projects.causal.configs import METHODS as METHODS
from fidia_jax.projects.causal.configs import PRESETS as PRESETS
from fidia_jax.projects.causal.configs import CausalConfig as CausalConfig
from fidia_jax.projects.causal.configs import get_config as get_config
from fidia_jax.projects.causal.configs import load_config as load_config
from fidia_jax.projects.causal.train import format_table as format_table
from fidia_jax.projects.causal.train import instances as instances
from fidia_jax.projects.causal.train import run_experiment as run_experiment
from fidia_jax.projects.causal.train import train_and_evaluate as train_and_evaluate

__all__ = [
    "DATASETS",
    "METHODS",
    "PRESETS",
    "CausalConfig",
    "CfrSettings",
    "EgmSettings",
    "estimate_alpha_for",
    "fit_causalegm",
    "fit_cfr",
    "format_table",
    "get_config",
    "instances",
    "load_config",
    "run_experiment",
    "train_and_evaluate",
]
