"""fidia_jax.losses: training objectives of the methods, one pure function per loss.

Every loss takes arrays (no module, no config) and returns a scalar or per-example array, as its
docstring says; batch with ``jax.vmap`` where a loss is written for one example. Each docstring
names its source (paper, equation, authors' code) and says plainly which formula is our
reconstruction.
"""

from fidia_jax.losses._causal import IPMS as IPMS
from fidia_jax.losses._causal import SCHEMES as SCHEMES
from fidia_jax.losses._causal import arm_weights as arm_weights
from fidia_jax.losses._causal import balancing_loss as balancing_loss
from fidia_jax.losses._causal import balancing_one_vs_all as balancing_one_vs_all
from fidia_jax.losses._causal import balancing_pairwise as balancing_pairwise
from fidia_jax.losses._causal import (
    balancing_treatment_aggregation as balancing_treatment_aggregation,
)
from fidia_jax.losses._causal import estimate_alpha as estimate_alpha
from fidia_jax.losses._causal import ipm as ipm
from fidia_jax.losses._causal import mmd2_linear as mmd2_linear
from fidia_jax.losses._causal import mmd2_rbf as mmd2_rbf
from fidia_jax.losses._causal import wasserstein1_sinkhorn as wasserstein1_sinkhorn
from fidia_jax.losses._causal_egm import EGMWeights as EGMWeights
from fidia_jax.losses._causal_egm import causalegm_critic_loss as causalegm_critic_loss
from fidia_jax.losses._causal_egm import causalegm_generator_loss as causalegm_generator_loss
from fidia_jax.losses._ldl import CHARBONNIER_EPS as CHARBONNIER_EPS
from fidia_jax.losses._ldl import DIVISIVENESS_MODES as DIVISIVENESS_MODES
from fidia_jax.losses._ldl import KERAS_KL_EPS as KERAS_KL_EPS
from fidia_jax.losses._ldl import divisiveness as divisiveness
from fidia_jax.losses._ldl import divisiveness_loss as divisiveness_loss
from fidia_jax.losses._ldl import ldl_dvs_loss as ldl_dvs_loss
from fidia_jax.losses._ldl import ldl_kl_loss as ldl_kl_loss
from fidia_jax.losses._ldl import soft_divisiveness as soft_divisiveness
from fidia_jax.losses._multifidelity import RADIUS_MODES as RADIUS_MODES
from fidia_jax.losses._multifidelity import TrustedSubsetCalibration as TrustedSubsetCalibration
from fidia_jax.losses._multifidelity import TrustedSubsetWeights as TrustedSubsetWeights
from fidia_jax.losses._multifidelity import absolute_label_loss as absolute_label_loss
from fidia_jax.losses._multifidelity import (
    init_trusted_subset_calibration as init_trusted_subset_calibration,
)
from fidia_jax.losses._multifidelity import interval_trust_loss as interval_trust_loss
from fidia_jax.losses._multifidelity import masked_quantile as masked_quantile
from fidia_jax.losses._multifidelity import pairwise_ranking_loss as pairwise_ranking_loss
from fidia_jax.losses._multifidelity import trusted_subset_loss as trusted_subset_loss
from fidia_jax.losses._rectified_flow import (
    rectified_flow_interpolate as rectified_flow_interpolate,
)
from fidia_jax.losses._rectified_flow import rectified_flow_loss as rectified_flow_loss
from fidia_jax.losses._tokens import next_token_loss as next_token_loss
from fidia_jax.losses._tokens import token_log_probs as token_log_probs
from fidia_jax.losses._tokens import token_nll as token_nll
from fidia_jax.losses._varjepa import gaussian_kl as gaussian_kl
from fidia_jax.losses._varjepa import standard_normal_kl as standard_normal_kl
from fidia_jax.losses._varjepa import tjepa_latent_loss as tjepa_latent_loss
from fidia_jax.losses._varjepa import tjepa_objective as tjepa_objective
from fidia_jax.losses._varjepa import var_tjepa_elbo as var_tjepa_elbo
from fidia_jax.losses._varjepa import var_tjepa_objective as var_tjepa_objective

__all__: list[str] = [
    # token log-likelihoods (language models, token predictors)
    "next_token_loss",
    "token_log_probs",
    "token_nll",
    # multi-fidelity learning from trusted label subsets
    "RADIUS_MODES",
    "TrustedSubsetCalibration",
    "TrustedSubsetWeights",
    "absolute_label_loss",
    "init_trusted_subset_calibration",
    "interval_trust_loss",
    "masked_quantile",
    "pairwise_ranking_loss",
    "trusted_subset_loss",
    # multi-treatment effects, CFR balancing, CausalEGM
    "EGMWeights",
    "IPMS",
    "SCHEMES",
    "arm_weights",
    "balancing_loss",
    "balancing_one_vs_all",
    "balancing_pairwise",
    "balancing_treatment_aggregation",
    "causalegm_critic_loss",
    "causalegm_generator_loss",
    "estimate_alpha",
    "ipm",
    "mmd2_linear",
    "mmd2_rbf",
    "wasserstein1_sinkhorn",
    # Var-JEPA / T-JEPA (tabular)
    "gaussian_kl",
    "standard_normal_kl",
    "tjepa_latent_loss",
    "tjepa_objective",
    "var_tjepa_elbo",
    "var_tjepa_objective",
    # divisiveness-consistent label distribution learning
    "CHARBONNIER_EPS",
    "DIVISIVENESS_MODES",
    "KERAS_KL_EPS",
    "divisiveness",
    "divisiveness_loss",
    "ldl_dvs_loss",
    "ldl_kl_loss",
    "soft_divisiveness",
    "rectified_flow_interpolate",
    "rectified_flow_loss",
]
