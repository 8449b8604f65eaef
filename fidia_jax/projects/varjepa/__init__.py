"""fidia_jax.projects.varjepa: Var-T-JEPA against T-JEPA, frozen-embedding probes on tables.

The driver pretrains a feature-token transformer with T-JEPA (EMA target encoder, latent MSE,
[REG] tokens) and with Var-T-JEPA (one ELBO: reconstruction, KL of the context posterior to
N(0, I), KL of the target posterior to the predictor's conditional prior), then probes the frozen
embeddings (logistic regression, MLP) against a raw-feature MLP and LightGBM in the same run,
tracks the embeddings' effective rank over training, and scores the posterior variance as an
uncertainty (area under the risk-coverage curve). ``benchmarks/varjepa.py`` and
``notebooks/varjepa.py`` call :func:`train_and_evaluate` / :func:`run`.

Papers:
  Gögl, Yau, "Var-JEPA: A Variational Formulation of the Joint-Embedding Predictive
  Architecture -- Bridging Predictive and Generative Self-Supervised Learning", ICML 2026,
  arXiv:2603.20111, https://arxiv.org/abs/2603.20111. Only the abstract was used: the ELBO's
  terms, likelihoods and per-token factorisation are **our reconstruction**.
  Thimonier, De Melo Costa, Popineau, Rimmel, Doan, "T-JEPA: Augmentation-Free Self-Supervised
  Learning for Tabular Data", ICLR 2025, arXiv:2410.05016 (the baseline).

The method's own code lives here: ``data.py`` (:func:`load_tabular`, the tabular encoder),
``model.py`` (:class:`TabularJepa` and its feature-token transformer), ``losses.py``
(:func:`tjepa_objective`, :func:`var_tjepa_objective`, the ELBO) and ``train.py`` (pretraining
through :func:`fidia_jax.train.fit`, probes, baselines). Primitives used:
:func:`fidia_jax.losses.gaussian_kl`, :func:`fidia_jax.losses.standard_normal_kl`,
:func:`fidia_jax.metrics.effective_rank`, :func:`fidia_jax.metrics.area_under_risk_coverage`,
:mod:`fidia_jax.train`.

Re-exported for outside use: the data loader and the model with its two objectives (to pretrain
on another table).
"""

from fidia_jax.projects.varjepa.configs import METHODS as METHODS
from fidia_jax.projects.varjepa.configs import PRESETS as PRESETS
from fidia_jax.projects.varjepa.configs import VarJepaConfig as VarJepaConfig
from fidia_jax.projects.varjepa.configs import get_config as get_config
from fidia_jax.projects.varjepa.configs import load_config as load_config
from fidia_jax.projects.varjepa.data import load_csv as load_csv
from fidia_jax.projects.varjepa.data import load_tabular as load_tabular
from fidia_jax.projects.varjepa.losses import tjepa_objective as tjepa_objective
from fidia_jax.projects.varjepa.losses import var_tjepa_objective as var_tjepa_objective
from fidia_jax.projects.varjepa.model import TabularJepa as TabularJepa
from fidia_jax.projects.varjepa.train import embed as embed
from fidia_jax.projects.varjepa.train import format_table as format_table
from fidia_jax.projects.varjepa.train import load_config_data as load_config_data
from fidia_jax.projects.varjepa.train import pretrain as pretrain
from fidia_jax.projects.varjepa.train import probe as probe
from fidia_jax.projects.varjepa.train import raw_baselines as raw_baselines
from fidia_jax.projects.varjepa.train import run as run
from fidia_jax.projects.varjepa.train import train_and_evaluate as train_and_evaluate

__all__ = [
    "METHODS",
    "PRESETS",
    "TabularJepa",
    "VarJepaConfig",
    "embed",
    "format_table",
    "get_config",
    "load_config",
    "load_config_data",
    "load_csv",
    "load_tabular",
    "pretrain",
    "probe",
    "raw_baselines",
    "run",
    "tjepa_objective",
    "train_and_evaluate",
    "var_tjepa_objective",
]
