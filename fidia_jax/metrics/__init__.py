"""fidia_jax.metrics: evaluation metrics, pure functions on arrays.

Regression and correlation (:func:`rmse`, :func:`pearson_r`, :func:`r2_score`) and the effective
rank of a representation (:func:`effective_rank`) are shared by several methods; each method's own
metrics (label distributions, treatment effects, anomaly detection, ...) follow.
"""

from fidia_jax.metrics._algotrace import cluster_agreement as cluster_agreement
from fidia_jax.metrics._algotrace import cluster_purity as cluster_purity
from fidia_jax.metrics._algotrace import cluster_transition_matrix as cluster_transition_matrix
from fidia_jax.metrics._algotrace import primitive_rates as primitive_rates
from fidia_jax.metrics._anomaly import affiliation_metrics as affiliation_metrics
from fidia_jax.metrics._anomaly import anomaly_events as anomaly_events
from fidia_jax.metrics._anomaly import auc_pr as auc_pr
from fidia_jax.metrics._anomaly import best_f1_threshold as best_f1_threshold
from fidia_jax.metrics._anomaly import detection_metrics as detection_metrics
from fidia_jax.metrics._anomaly import point_adjust as point_adjust
from fidia_jax.metrics._anomaly import point_f1 as point_f1
from fidia_jax.metrics._anomaly import threshold_at_ratio as threshold_at_ratio
from fidia_jax.metrics._causal import ate_error as ate_error
from fidia_jax.metrics._causal import sqrt_pehe as sqrt_pehe
from fidia_jax.metrics._clustering import KMeansResult as KMeansResult
from fidia_jax.metrics._clustering import kmeans as kmeans
from fidia_jax.metrics._clustering import kmeans_plus_plus as kmeans_plus_plus
from fidia_jax.metrics._clustering import knn_affinity as knn_affinity
from fidia_jax.metrics._clustering import spectral_clustering as spectral_clustering
from fidia_jax.metrics._dycon import LayerProbes as LayerProbes
from fidia_jax.metrics._dycon import layer_probe_r2 as layer_probe_r2
from fidia_jax.metrics._continual import continual_metrics as continual_metrics
from fidia_jax.metrics._ldl import LDL_METRICS as LDL_METRICS
from fidia_jax.metrics._ldl import LDL_METRICS_HIGHER_BETTER as LDL_METRICS_HIGHER_BETTER
from fidia_jax.metrics._ldl import canberra as canberra
from fidia_jax.metrics._ldl import chebyshev as chebyshev
from fidia_jax.metrics._ldl import clark as clark
from fidia_jax.metrics._ldl import cosine as cosine
from fidia_jax.metrics._ldl import divisiveness_error as divisiveness_error
from fidia_jax.metrics._ldl import intersection as intersection
from fidia_jax.metrics._ldl import ldl_kl_divergence as ldl_kl_divergence
from fidia_jax.metrics._ldl import ldl_metrics as ldl_metrics
from fidia_jax.metrics._rank import effective_rank as effective_rank
from fidia_jax.metrics._regression import pearson_r as pearson_r
from fidia_jax.metrics._regression import r2_score as r2_score
from fidia_jax.metrics._regression import rmse as rmse
from fidia_jax.metrics._residual_geometry import erank as erank
from fidia_jax.metrics._residual_geometry import mixing_information_gain as mixing_information_gain
from fidia_jax.metrics._residual_geometry import numerical_rank as numerical_rank
from fidia_jax.metrics._residual_geometry import (
    residual_information_dynamics as residual_information_dynamics,
)
from fidia_jax.metrics._residual_geometry import spectral_change as spectral_change
from fidia_jax.metrics._residual_geometry import subspace_innovation as subspace_innovation
from fidia_jax.metrics._residual_geometry import subspace_projector as subspace_projector
from fidia_jax.metrics._residual_geometry import token_mixing_entropy as token_mixing_entropy
from fidia_jax.metrics._ridge import RidgeFit as RidgeFit
from fidia_jax.metrics._ridge import ridge_fit as ridge_fit
from fidia_jax.metrics._ridge import ridge_predict as ridge_predict
from fidia_jax.metrics._safesci import (
    SAFESCI_OFFICIAL_REFUSAL_MARKERS as SAFESCI_OFFICIAL_REFUSAL_MARKERS,
)
from fidia_jax.metrics._safesci import (
    SAFESCI_STRICT_REFUSAL_PATTERNS as SAFESCI_STRICT_REFUSAL_PATTERNS,
)
from fidia_jax.metrics._safesci import safesci_bootstrap as safesci_bootstrap
from fidia_jax.metrics._safesci import safesci_breakdown as safesci_breakdown
from fidia_jax.metrics._safesci import safesci_choice_correct as safesci_choice_correct
from fidia_jax.metrics._safesci import safesci_extract_answer as safesci_extract_answer
from fidia_jax.metrics._safesci import safesci_is_refusal as safesci_is_refusal
from fidia_jax.metrics._safesci import safesci_tf_correct as safesci_tf_correct
from fidia_jax.metrics._varjepa import area_under_risk_coverage as area_under_risk_coverage
from fidia_jax.metrics._varjepa import risk_coverage_curve as risk_coverage_curve
from fidia_jax.metrics._vision import alexnet_frechet_distance as alexnet_frechet_distance
from fidia_jax.metrics._vision import frechet_distance as frechet_distance
from fidia_jax.metrics._vision import lpips as lpips
from fidia_jax.metrics._vision import psnr as psnr
from fidia_jax.metrics._vision import ssim as ssim

__all__: list[str] = [
    "effective_rank",
    # probes and clustering of representations (issue 14, shared)
    "KMeansResult",
    "RidgeFit",
    "kmeans",
    "kmeans_plus_plus",
    "knn_affinity",
    "ridge_fit",
    "ridge_predict",
    "spectral_clustering",
    "pearson_r",
    "r2_score",
    "rmse",
    # multi-treatment effects, CFR balancing, CausalEGM
    "ate_error",
    "sqrt_pehe",
    # Var-JEPA / T-JEPA (tabular)
    "area_under_risk_coverage",
    "risk_coverage_curve",
    # divisiveness-consistent label distribution learning
    "LDL_METRICS",
    "LDL_METRICS_HIGHER_BETTER",
    "canberra",
    "chebyshev",
    "clark",
    "cosine",
    "divisiveness_error",
    "intersection",
    "ldl_kl_divergence",
    "ldl_metrics",
    # TeamWork (time-series anomaly detection)
    "affiliation_metrics",
    "anomaly_events",
    "auc_pr",
    "best_f1_threshold",
    "detection_metrics",
    "point_adjust",
    "point_f1",
    "threshold_at_ratio",
    "alexnet_frechet_distance",
    "frechet_distance",
    "lpips",
    "psnr",
    "ssim",
    "continual_metrics",
    "LayerProbes",
    "layer_probe_r2",
    "cluster_agreement",
    "cluster_purity",
    "cluster_transition_matrix",
    "primitive_rates",
    "erank",
    "mixing_information_gain",
    "numerical_rank",
    "residual_information_dynamics",
    "spectral_change",
    "subspace_innovation",
    "subspace_projector",
    "token_mixing_entropy",
    "SAFESCI_OFFICIAL_REFUSAL_MARKERS",
    "SAFESCI_STRICT_REFUSAL_PATTERNS",
    "safesci_bootstrap",
    "safesci_breakdown",
    "safesci_choice_correct",
    "safesci_extract_answer",
    "safesci_is_refusal",
    "safesci_tf_correct",
]
