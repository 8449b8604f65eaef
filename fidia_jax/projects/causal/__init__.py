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

The method's own code lives here: ``data.py`` (IHDP, ACIC 2016 covariates, the K-arm generator,
:class:`CausalData`), ``model.py`` (:class:`TARNet`, :class:`CausalEGM`, the W2 arm embedding),
``losses.py`` (the balancing schemes, the plug-in alpha, CausalEGM's objectives),
``baselines.py`` (T-, S-, X-learner baselines on scikit-learn / LightGBM), ``_fit.py``
(the training loops) and ``train.py`` (the experiment). Primitives used: the IPMs of
:mod:`fidia_jax.losses` (``ipm``, ``mmd2_rbf``, ``mmd2_linear``, ``wasserstein1_sinkhorn``),
:func:`fidia_jax.metrics.sqrt_pehe`, :func:`fidia_jax.metrics.ate_error`,
:class:`fidia_jax.models.MLP`, :mod:`fidia_jax.train`.

Re-exported for outside use: the data entry points (to score the methods on other data), the two
networks and :func:`balancing_loss` (to train another representation with a scheme).
"""

from fidia_jax.projects.causal._fit import CfrSettings as CfrSettings
from fidia_jax.projects.causal._fit import EgmSettings as EgmSettings
from fidia_jax.projects.causal._fit import estimate_alpha_for as estimate_alpha_for
from fidia_jax.projects.causal._fit import fit_causalegm as fit_causalegm
from fidia_jax.projects.causal._fit import fit_cfr as fit_cfr
from fidia_jax.projects.causal.baselines import fit_meta_learner as fit_meta_learner
from fidia_jax.projects.causal.configs import DATASETS as DATASETS
from fidia_jax.projects.causal.configs import METHODS as METHODS
from fidia_jax.projects.causal.configs import PRESETS as PRESETS
from fidia_jax.projects.causal.configs import CausalConfig as CausalConfig
from fidia_jax.projects.causal.configs import get_config as get_config
from fidia_jax.projects.causal.configs import load_config as load_config
from fidia_jax.projects.causal.data import CausalData as CausalData
from fidia_jax.projects.causal.data import load_ihdp as load_ihdp
from fidia_jax.projects.causal.data import make_multiarm as make_multiarm
from fidia_jax.projects.causal.data import split_causal as split_causal
from fidia_jax.projects.causal.losses import balancing_loss as balancing_loss
from fidia_jax.projects.causal.model import CausalEGM as CausalEGM
from fidia_jax.projects.causal.model import TARNet as TARNet
from fidia_jax.projects.causal.train import format_table as format_table
from fidia_jax.projects.causal.train import instances as instances
from fidia_jax.projects.causal.train import run_experiment as run_experiment
from fidia_jax.projects.causal.train import train_and_evaluate as train_and_evaluate

__all__ = [
    "DATASETS",
    "METHODS",
    "PRESETS",
    "CausalConfig",
    "CausalData",
    "CausalEGM",
    "CfrSettings",
    "EgmSettings",
    "TARNet",
    "balancing_loss",
    "estimate_alpha_for",
    "fit_causalegm",
    "fit_cfr",
    "fit_meta_learner",
    "format_table",
    "get_config",
    "instances",
    "load_config",
    "load_ihdp",
    "make_multiarm",
    "run_experiment",
    "split_causal",
    "train_and_evaluate",
]
