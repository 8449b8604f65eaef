"""fidia_jax.projects.teamwork: TeamWork, role-aware multivariate time-series anomaly detection.

The driver fits TeamWork (dominant / auxiliary channel roles, role-aware gated interaction,
period-aware masked reconstruction, uncertainty-weighted score), its ablations (no roles, no
gate, random masking), a role-free masked transformer, PCA T2+Q, Isolation Forest and SKAB's
Conv-AE (the ``skab`` preset) on the same
training data, and reports point-wise F1, point-adjusted F1 (inflated), affiliation F1 and AUC-PR
under a fixed-ratio threshold, the best-F1 oracle threshold and, on SKAB, SKAB's own UCL protocol.
:func:`train_and_evaluate` writes ``teamwork.json``, ``summary.json`` and two PNGs;
``benchmarks/teamwork.py`` and ``notebooks/teamwork.py`` call it.

Paper:
  "TeamWork" (ICML 2026): multivariate time-series anomaly detection with dominant and
  auxiliary channels. Only the abstract was available: **the whole method here is our
  reconstruction** (see :mod:`fidia_jax.projects.teamwork.model` and ``docs/teamwork.md``).

The method's own modules (used by no other method):

- :mod:`~fidia_jax.projects.teamwork.model`: :class:`TeamWork`, ``ConvAE`` (SKAB's Conv-AE
  peer, ``init_convae``), ``channel_influence``,
  ``channel_roles``, ``role_edges``, ``span_mask``, ``eval_masks``, ``anomaly_score``, and
  ``init_teamwork`` (:func:`fidia_jax.models.init_without_compile` with ``teamwork_draw``);
- :mod:`~fidia_jax.projects.teamwork.losses`: ``gaussian_nll``, ``masked_mse``;
- :mod:`~fidia_jax.projects.teamwork.data`: SKAB loading, the synthetic generator,
  ``dominant_period``, ``validate_series``;
- :mod:`~fidia_jax.projects.teamwork.skab`: SKAB's evaluation protocol (``skab_ucl``,
  ``skab_binary_metrics``, ``skab_window_labels``), checked against SKAB's code.

Shared primitives used: :func:`fidia_jax.metrics.point_f1`, :func:`fidia_jax.metrics.point_adjust`,
:func:`fidia_jax.metrics.affiliation_metrics`, :func:`fidia_jax.metrics.auc_pr` and the
thresholds of :mod:`fidia_jax.metrics` (standard anomaly-detection metrics with hand-count
tests), :func:`fidia_jax.models.init_without_compile`, :mod:`fidia_jax.train`.

Re-exported here for outside users (notebooks, benchmarks): :class:`TeamWork`,
:func:`make_synthetic`, :func:`load_skab`, :func:`dominant_period`, :data:`SKAB_CHANNELS`,
:data:`SKAB_TRAIN_SIZE`.
"""

from fidia_jax.projects.teamwork.configs import METHODS as METHODS
from fidia_jax.projects.teamwork.configs import PRESETS as PRESETS
from fidia_jax.projects.teamwork.configs import TeamWorkConfig as TeamWorkConfig
from fidia_jax.projects.teamwork.configs import get_config as get_config
from fidia_jax.projects.teamwork.configs import load_config as load_config
from fidia_jax.projects.teamwork.data import SKAB_CHANNELS as SKAB_CHANNELS
from fidia_jax.projects.teamwork.data import SKAB_TRAIN_SIZE as SKAB_TRAIN_SIZE
from fidia_jax.projects.teamwork.data import dominant_period as dominant_period
from fidia_jax.projects.teamwork.data import load_skab as load_skab
from fidia_jax.projects.teamwork.data import make_synthetic as make_synthetic
from fidia_jax.projects.teamwork.model import TeamWork as TeamWork
from fidia_jax.projects.teamwork.train import Detector as Detector
from fidia_jax.projects.teamwork.train import compare_methods as compare_methods
from fidia_jax.projects.teamwork.train import evaluate_scores as evaluate_scores
from fidia_jax.projects.teamwork.train import fit_detector as fit_detector
from fidia_jax.projects.teamwork.train import format_table as format_table
from fidia_jax.projects.teamwork.train import train_and_evaluate as train_and_evaluate

__all__ = [
    "METHODS",
    "PRESETS",
    "SKAB_CHANNELS",
    "SKAB_TRAIN_SIZE",
    "Detector",
    "TeamWork",
    "TeamWorkConfig",
    "compare_methods",
    "dominant_period",
    "evaluate_scores",
    "fit_detector",
    "format_table",
    "get_config",
    "load_config",
    "load_skab",
    "make_synthetic",
    "train_and_evaluate",
]
