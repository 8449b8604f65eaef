"""fidia_jax.metrics: evaluation metrics, pure functions on arrays.

Regression and correlation (:func:`rmse`, :func:`pearson_r`, :func:`r2_score`) and the effective
rank of a representation (:func:`effective_rank`) are shared by several methods; each method's own
metrics (label distributions, treatment effects, anomaly detection, ...) follow.
"""

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
from fidia_jax.metrics._clustering import cluster_agreement as cluster_agreement
from fidia_jax.metrics._clustering import cluster_purity as cluster_purity
from fidia_jax.metrics._clustering import cluster_transition_matrix as cluster_transition_matrix
from fidia_jax.metrics._clustering import kmeans as kmeans
from fidia_jax.metrics._clustering import kmeans_plus_plus as kmeans_plus_plus
from fidia_jax.metrics._clustering import knn_affinity as knn_affinity
from fidia_jax.metrics._clustering import spectral_clustering as spectral_clustering
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
from fidia_jax.metrics._ridge import RidgeFit as RidgeFit
from fidia_jax.metrics._ridge import ridge_fit as ridge_fit
from fidia_jax.metrics._ridge import ridge_predict as ridge_predict
from fidia_jax.metrics._risk_coverage import area_under_risk_coverage as area_under_risk_coverage
from fidia_jax.metrics._risk_coverage import risk_coverage_curve as risk_coverage_curve
from fidia_jax.metrics._vision import alexnet_frechet_distance as alexnet_frechet_distance
from fidia_jax.metrics._vision import frechet_distance as frechet_distance
from fidia_jax.metrics._vision import lpips as lpips
from fidia_jax.metrics._vision import psnr as psnr
from fidia_jax.metrics._vision import ssim as ssim

__all__ = [
    "effective_rank",
    "KMeansResult",
    "RidgeFit",
    "cluster_agreement",
    "cluster_purity",
    "cluster_transition_matrix",
    "kmeans",
    "kmeans_plus_plus",
    "knn_affinity",
    "ridge_fit",
    "ridge_predict",
    "spectral_clustering",
    "pearson_r",
    "r2_score",
    "rmse",
    "ate_error",
    "sqrt_pehe",
    "area_under_risk_coverage",
    "risk_coverage_curve",
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
]
