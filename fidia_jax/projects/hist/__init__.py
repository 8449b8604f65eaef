"""fidia_jax.projects.hist: HiST, H&E image features -> spatial gene expression on a spot lattice.

The driver compares HiST (a U-shaped sparse hierarchical window transformer over the measured
spots) with ridge regression, a per-spot MLP and a dense transformer over all spots, leaving one
tissue section out at a time (HER2ST patient C, or synthetic lattices), and reports HiST's pooled
PCC / R² over spots x genes and HEST's mean per-gene PCC. :func:`train_and_evaluate` writes
``workdir/hist_results.json``; ``benchmarks/hist.py`` and ``notebooks/hist.py`` call it.

Paper:
  Wu, Xu, Diao, Li, Wei, Andersson, Gui, "HiST: hierarchical sparse transformer for spatial
  transcriptomics from histology", ICML 2026, arXiv:2606.14251; code github.com/wwyi1828/HiST
  (MIT; read for the facts, not copied). The paper's patch features come from UNI, whose weights
  are not available here: we use a fixed colour-deconvolution + texture featuriser
  (:func:`fidia_jax.data.her2st_image_features`).

Primitives used: :class:`fidia_jax.models.HiST`, :class:`fidia_jax.models.DenseSpotTransformer`,
:func:`fidia_jax.models.masked_mse`, :class:`fidia_jax.models.MLP`,
:func:`fidia_jax.layers.plan_hierarchy` (and the sparse window attention, pooling and unpooling of
:mod:`fidia_jax.layers`), :func:`fidia_jax.data.load_her2st`,
:func:`fidia_jax.data.her2st_image_features`, :func:`fidia_jax.data.synthetic_sections`,
:func:`fidia_jax.data.augment_lattice`, :func:`fidia_jax.metrics.pearson_r`,
:func:`fidia_jax.metrics.r2_score`.
"""

from fidia_jax.projects.hist.configs import METHODS as METHODS
from fidia_jax.projects.hist.configs import PRESETS as PRESETS
from fidia_jax.projects.hist.configs import HistConfig as HistConfig
from fidia_jax.projects.hist.configs import get_config as get_config
from fidia_jax.projects.hist.configs import load_config as load_config
from fidia_jax.projects.hist.train import Prepared as Prepared
from fidia_jax.projects.hist.train import fit_predict as fit_predict
from fidia_jax.projects.hist.train import format_table as format_table
from fidia_jax.projects.hist.train import prepare_sections as prepare_sections
from fidia_jax.projects.hist.train import section_metrics as section_metrics
from fidia_jax.projects.hist.train import train_and_evaluate as train_and_evaluate

__all__ = [
    "METHODS",
    "PRESETS",
    "HistConfig",
    "Prepared",
    "fit_predict",
    "format_table",
    "get_config",
    "load_config",
    "prepare_sections",
    "section_metrics",
    "train_and_evaluate",
]
