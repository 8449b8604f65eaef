"""fidia_jax.projects.multifidelity: multi-fidelity regression from trusted information subsets.

One MLP predicts the high-fidelity value; it is supervised by three "trusted subsets" of the
labels, without paired samples: the absolute high-fidelity labels, lower-fidelity labels as
intervals around an affinely calibrated prediction with an adaptive trust radius, and the ordering
of labels within each fidelity (:func:`trusted_subset_loss`). The driver compares
it, on the same data, network and optimiser, with an HF-only MLP, a multi-head MLP, LF pretraining
then HF fine-tuning, Δ-learning (an oracle: it reads paired labels), and two scikit-learn
Gaussian processes (HF-only GP, two-stage Δ GP: ``baselines.py``); the benchmark adds
Kennedy–O'Hagan co-kriging from emukit/GPy (``benchmarks/multifidelity.py``).

Paper:
  "Credible Information Subset Decomposition: an end-to-end multi-fidelity learning model by
  modeling label information", ICML 2026. Only the abstract was available (no authors' code):
  **every loss formula is our reconstruction** of its description; see docs/multifidelity.md.

The method's own code lives here: ``losses.py`` (:func:`trusted_subset_loss` and its terms),
``data.py`` (the analytic multi-fidelity functions, FreeSolv, :class:`MultiFidelityData`),
``baselines.py`` (the GP baselines),
``train.py`` (the comparison, each method one :func:`fidia_jax.train.fit`). Primitives used:
:class:`fidia_jax.models.MLP`, :func:`fidia_jax.metrics.rmse`, :mod:`fidia_jax.train`.

Re-exported for outside use: the data container and analytic tasks (to run the comparison on
one's own data) and the loss with its weights and calibration (to train another network with it).
"""

from fidia_jax.projects.multifidelity.configs import METHODS as METHODS
from fidia_jax.projects.multifidelity.configs import PRESETS as PRESETS
from fidia_jax.projects.multifidelity.configs import TASKS as TASKS
from fidia_jax.projects.multifidelity.configs import MultiFidelityConfig as MultiFidelityConfig
from fidia_jax.projects.multifidelity.configs import get_config as get_config
from fidia_jax.projects.multifidelity.configs import load_config as load_config
from fidia_jax.projects.multifidelity.data import MultiFidelityData as MultiFidelityData
from fidia_jax.projects.multifidelity.data import (
    analytic_multifidelity_task as analytic_multifidelity_task,
)
from fidia_jax.projects.multifidelity.losses import TrustedSubsetWeights as TrustedSubsetWeights
from fidia_jax.projects.multifidelity.losses import (
    init_trusted_subset_calibration as init_trusted_subset_calibration,
)
from fidia_jax.projects.multifidelity.losses import trusted_subset_loss as trusted_subset_loss
from fidia_jax.projects.multifidelity.train import format_table as format_table
from fidia_jax.projects.multifidelity.train import make_task as make_task
from fidia_jax.projects.multifidelity.train import make_tasks as make_tasks
from fidia_jax.projects.multifidelity.train import run_methods as run_methods
from fidia_jax.projects.multifidelity.train import train_and_evaluate as train_and_evaluate

__all__ = [
    "METHODS",
    "PRESETS",
    "TASKS",
    "MultiFidelityConfig",
    "MultiFidelityData",
    "TrustedSubsetWeights",
    "analytic_multifidelity_task",
    "format_table",
    "get_config",
    "init_trusted_subset_calibration",
    "load_config",
    "make_task",
    "make_tasks",
    "run_methods",
    "train_and_evaluate",
    "trusted_subset_loss",
]
