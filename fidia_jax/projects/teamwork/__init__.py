"""fidia_jax.projects.teamwork: TeamWork, role-aware multivariate time-series anomaly detection.

The driver fits TeamWork (dominant / auxiliary channel roles, role-aware gated interaction,
period-aware masked reconstruction, uncertainty-weighted score), its ablations (no roles, no
gate, random masking), a role-free masked transformer, PCA T2+Q and Isolation Forest on the same
training data, and reports point-wise F1, point-adjusted F1 (inflated), affiliation F1 and AUC-PR
under a fixed-ratio threshold, the best-F1 oracle threshold and, on SKAB, SKAB's own UCL protocol.
:func:`train_and_evaluate` writes ``teamwork.json``; ``benchmarks/teamwork.py`` and
``notebooks/teamwork.py`` call it.

Paper:
  "TeamWork" (ICML 2026): multivariate time-series anomaly detection with dominant and
  auxiliary channels. Only the abstract was available: **the whole method here is our
  reconstruction** (see :mod:`fidia_jax.models` ``TeamWork`` and ``docs/teamwork.md``).

Primitives used: :class:`fidia_jax.models.TeamWork`, :func:`fidia_jax.models.channel_influence`,
:func:`fidia_jax.models.channel_roles`, :func:`fidia_jax.models.role_edges`,
:func:`fidia_jax.models.span_mask`, :func:`fidia_jax.models.eval_masks`,
:func:`fidia_jax.models.gaussian_nll`, :func:`fidia_jax.data.make_synthetic`,
:func:`fidia_jax.data.load_skab`, :func:`fidia_jax.data.dominant_period`,
:func:`fidia_jax.data.validate_series`, :func:`fidia_jax.metrics.detection_metrics` and the other
anomaly metrics of :mod:`fidia_jax.metrics`.
"""

from fidia_jax.projects.teamwork.configs import METHODS as METHODS
from fidia_jax.projects.teamwork.configs import PRESETS as PRESETS
from fidia_jax.projects.teamwork.configs import TeamWorkConfig as TeamWorkConfig
from fidia_jax.projects.teamwork.configs import get_config as get_config
from fidia_jax.projects.teamwork.configs import load_config as load_config
from fidia_jax.projects.teamwork.train import Detector as Detector
from fidia_jax.projects.teamwork.train import compare_methods as compare_methods
from fidia_jax.projects.teamwork.train import evaluate_scores as evaluate_scores
from fidia_jax.projects.teamwork.train import fit_detector as fit_detector
from fidia_jax.projects.teamwork.train import format_table as format_table
from fidia_jax.projects.teamwork.train import train_and_evaluate as train_and_evaluate

__all__ = [
    "METHODS",
    "PRESETS",
    "Detector",
    "TeamWorkConfig",
    "compare_methods",
    "evaluate_scores",
    "fit_detector",
    "format_table",
    "get_config",
    "load_config",
    "train_and_evaluate",
]
