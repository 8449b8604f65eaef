"""fidia_jax.projects.multifidelity: multi-fidelity regression from trusted information subsets.

One MLP predicts the high-fidelity value; it is supervised by three "trusted subsets" of the
labels, without paired samples: the absolute high-fidelity labels, lower-fidelity labels as
intervals around an affinely calibrated prediction with an adaptive trust radius, and the ordering
of labels within each fidelity (:func:`fidia_jax.losses.trusted_subset_loss`). The driver compares
it, on the same data, network and optimiser, with an HF-only MLP, a multi-head MLP, LF pretraining
then HF fine-tuning, and Δ-learning (an oracle: it reads paired labels); the benchmark adds
Kennedy–O'Hagan co-kriging from emukit/GPy (``benchmarks/multifidelity.py``).

Paper:
  "Credible Information Subset Decomposition: an end-to-end multi-fidelity learning model by
  modeling label information", ICML 2026. Only the abstract was available (no authors' code):
  **every loss formula is our reconstruction** of its description; see docs/multifidelity.md.

Primitives used: :func:`fidia_jax.losses.trusted_subset_loss` and its terms,
:class:`fidia_jax.models.MLP`, :func:`fidia_jax.metrics.rmse`,
:func:`fidia_jax.data.analytic_multifidelity_task`, :func:`fidia_jax.data.load_freesolv`,
:func:`fidia_jax.data.freesolv_features`, :func:`fidia_jax.data.freesolv_multifidelity_task`.
"""

from fidia_jax.projects.multifidelity.configs import METHODS as METHODS
from fidia_jax.projects.multifidelity.configs import PRESETS as PRESETS
from fidia_jax.projects.multifidelity.configs import TASKS as TASKS
from fidia_jax.projects.multifidelity.configs import MultiFidelityConfig as MultiFidelityConfig
from fidia_jax.projects.multifidelity.configs import get_config as get_config
from fidia_jax.projects.multifidelity.configs import load_config as load_config
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
    "format_table",
    "get_config",
    "load_config",
    "make_task",
    "make_tasks",
    "run_methods",
    "train_and_evaluate",
]
