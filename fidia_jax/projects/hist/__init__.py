"""fidia_jax.projects.hist: HiST, H&E image features -> spatial gene expression on a spot lattice.

The driver compares HiST (a U-shaped sparse hierarchical window transformer over the measured
spots) with ridge regression, a per-spot MLP and a dense transformer over all spots, leaving one
tissue section out at a time (HER2ST patient C, or synthetic lattices), and reports HiST's pooled
PCC / R² over spots x genes and HEST's mean per-gene PCC. :func:`train_and_evaluate` writes
``workdir/hist_results.json``, ``summary.json`` and two PNGs; ``benchmarks/hist.py`` and
``notebooks/hist.py`` call it.

Paper:
  Wu, Xu, Diao, Li, Wei, Andersson, Gui, "HiST: hierarchical sparse transformer for spatial
  transcriptomics from histology", ICML 2026, arXiv:2606.14251; code github.com/wwyi1828/HiST
  (MIT; read for the facts, not copied). The paper's patch features come from UNI, whose weights
  are not available here: we use a fixed colour-deconvolution + texture featuriser
  (:func:`fidia_jax.projects.hist.data.her2st_image_features`).

The method's own modules (used by no other method):

- :mod:`~fidia_jax.projects.hist.lattice`: the sparse lattice primitives (window partition,
  window attention with relative position bias, patch pooling and unpooling, the hierarchy
  plan);
- :mod:`~fidia_jax.projects.hist.model`: :class:`HiST`, :class:`DenseSpotTransformer`;
- :mod:`~fidia_jax.projects.hist.losses`: ``masked_mse``;
- :mod:`~fidia_jax.projects.hist.data`: HER2ST loading, image features, synthetic lattices,
  HiST's coordinate augmentation.

Shared primitives used: :class:`fidia_jax.models.MLP`, :func:`fidia_jax.metrics.pearson_r`,
:func:`fidia_jax.metrics.r2_score`, :mod:`fidia_jax.train` (steps, fits, files).

Re-exported here for outside users (notebooks, benchmarks): :class:`HiST`,
:class:`DenseSpotTransformer`, :func:`plan_hierarchy`, :func:`lattice_window_attention`,
:func:`dense_window_attention`, :func:`load_her2st`, :func:`synthetic_sections`.
"""

from fidia_jax.projects.hist.configs import METHODS as METHODS
from fidia_jax.projects.hist.configs import PRESETS as PRESETS
from fidia_jax.projects.hist.configs import HistConfig as HistConfig
from fidia_jax.projects.hist.configs import get_config as get_config
from fidia_jax.projects.hist.configs import load_config as load_config
from fidia_jax.projects.hist.data import load_her2st as load_her2st
from fidia_jax.projects.hist.data import synthetic_sections as synthetic_sections
from fidia_jax.projects.hist.lattice import dense_window_attention as dense_window_attention
from fidia_jax.projects.hist.lattice import lattice_window_attention as lattice_window_attention
from fidia_jax.projects.hist.lattice import plan_hierarchy as plan_hierarchy
from fidia_jax.projects.hist.model import DenseSpotTransformer as DenseSpotTransformer
from fidia_jax.projects.hist.model import HiST as HiST
from fidia_jax.projects.hist.model import check_finite_features as check_finite_features
from fidia_jax.projects.hist.train import Prepared as Prepared
from fidia_jax.projects.hist.train import fit_predict as fit_predict
from fidia_jax.projects.hist.train import format_table as format_table
from fidia_jax.projects.hist.train import neighbour_features as neighbour_features
from fidia_jax.projects.hist.train import paired_gene_test as paired_gene_test
from fidia_jax.projects.hist.train import prepare_sections as prepare_sections
from fidia_jax.projects.hist.train import section_metrics as section_metrics
from fidia_jax.projects.hist.train import train_and_evaluate as train_and_evaluate

__all__ = [
    "METHODS",
    "PRESETS",
    "DenseSpotTransformer",
    "HiST",
    "HistConfig",
    "Prepared",
    "check_finite_features",
    "dense_window_attention",
    "fit_predict",
    "format_table",
    "get_config",
    "lattice_window_attention",
    "load_config",
    "load_her2st",
    "neighbour_features",
    "paired_gene_test",
    "plan_hierarchy",
    "prepare_sections",
    "section_metrics",
    "synthetic_sections",
    "train_and_evaluate",
]
