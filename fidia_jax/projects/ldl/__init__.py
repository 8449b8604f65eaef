"""fidia_jax.projects.ldl: divisiveness-consistent label distribution learning (LDL-DVS).

The driver cross-validates LDL models (linear or MLP softmax, :class:`fidia_jax.models.MLP`)
trained with ``KL + alpha * L_dvs`` for several ``alpha`` (``0`` = KL-only, the reference) on a
label-distribution data set (the ``.mat`` sets of ``<data_dir>/ldl/`` or a synthetic set) and
scores the test folds with the six standard LDL metrics and the divisiveness error.
:func:`train_and_evaluate` runs it at a config's scale and writes a JSON summary;
``benchmarks/ldl.py`` runs the eight-set comparison and ``notebooks/ldl.py`` shows it.

Paper:
  Lu, Wu, Li, Jia, "Divisiveness-consistent label distribution learning", ICML 2026. The paper's
  text was not available to us; the formulas follow the authors' code, ``LDL_DVS`` in the MIT
  package ``python-ldl`` 0.1.2 (github SpriteMisaka/PyLDL), each marked in the docstrings of
  :mod:`fidia_jax.losses` (authors' code vs ours).

The method's own code lives here: ``losses.py`` (:func:`ldl_dvs_loss`, the KL and divisiveness
losses), ``data.py`` (:func:`load_ldl_dataset`, :data:`LDL_POLARITY`,
:func:`synthetic_ldl_dataset`) and ``train.py`` (the cross-validation, each repeat one
:func:`fidia_jax.train.fit`). Primitives used: :func:`fidia_jax.metrics.ldl_metrics` (the six
standard LDL metrics and :func:`~fidia_jax.metrics.divisiveness_error`),
:class:`fidia_jax.models.MLP`, :mod:`fidia_jax.train`.

Re-exported for outside use: the loss (to train another model with it) and the data loaders.
"""

from fidia_jax.projects.ldl.configs import ACTIVATIONS as ACTIVATIONS
from fidia_jax.projects.ldl.configs import PRESETS as PRESETS
from fidia_jax.projects.ldl.configs import LdlConfig as LdlConfig
from fidia_jax.projects.ldl.configs import get_config as get_config
from fidia_jax.projects.ldl.configs import load_config as load_config
from fidia_jax.projects.ldl.data import LDL_POLARITY as LDL_POLARITY
from fidia_jax.projects.ldl.data import load_ldl_dataset as load_ldl_dataset
from fidia_jax.projects.ldl.data import synthetic_ldl_dataset as synthetic_ldl_dataset
from fidia_jax.projects.ldl.losses import ldl_dvs_loss as ldl_dvs_loss
from fidia_jax.projects.ldl.train import METRICS as METRICS
from fidia_jax.projects.ldl.train import baseline_predict as baseline_predict
from fidia_jax.projects.ldl.train import cross_validate as cross_validate
from fidia_jax.projects.ldl.train import fit_predict as fit_predict
from fidia_jax.projects.ldl.train import format_table as format_table
from fidia_jax.projects.ldl.train import kfold_splits as kfold_splits
from fidia_jax.projects.ldl.train import load_config_data as load_config_data
from fidia_jax.projects.ldl.train import paired_tests as paired_tests
from fidia_jax.projects.ldl.train import train_and_evaluate as train_and_evaluate

__all__ = [
    "ACTIVATIONS",
    "LDL_POLARITY",
    "METRICS",
    "PRESETS",
    "LdlConfig",
    "baseline_predict",
    "cross_validate",
    "fit_predict",
    "format_table",
    "get_config",
    "kfold_splits",
    "ldl_dvs_loss",
    "load_config",
    "load_config_data",
    "load_ldl_dataset",
    "paired_tests",
    "synthetic_ldl_dataset",
    "train_and_evaluate",
]
