"""fidia_jax.projects.optimizers: the language-model experiments of SCALE and PASO.

One driver trains a byte-level LLaMA on Shakespeare with any optax optimiser
(:func:`train_and_evaluate`, presets in :mod:`.configs`; several optimisers trained into one
workdir are compared there), and trains several optimisers with their steps interleaved in one
process (:func:`train_interleaved`) so that step times are paired measurements.
``benchmarks/scale_llama.py`` (SCALE vs AdamW, Muon, SGD), ``benchmarks/paso.py`` /
``benchmarks/gpu_paso.py`` (PASO on the same model) and ``notebooks/optimizers.py`` call it.

Papers:
  Glentis, Li, Han, Hong, "A Minimalist Optimizer Design for LLM Pretraining" (SCALE),
  ICML 2026, arXiv:2506.16659.
  Lu et al., "PASO: step-parallel optimisation", ICML 2026; code github.com/Jianrong-Lu/PASO.

Primitives used: :func:`fidia_jax.optim.scale`, :func:`fidia_jax.optim.paso` (in the PASO
benchmark), :class:`fidia_jax.models.Llama`, :func:`fidia_jax.losses.next_token_loss`,
:func:`fidia_jax.data.load_shakespeare`, :func:`fidia_jax.data.sample_windows`; the step, loop
and files of :mod:`fidia_jax.train` (``make_train_step``, ``fit``, ``make_lm_task``).
"""

from fidia_jax.projects.optimizers.configs import OPTIMIZERS as OPTIMIZERS
from fidia_jax.projects.optimizers.configs import PEAK_LEARNING_RATES as PEAK_LEARNING_RATES
from fidia_jax.projects.optimizers.configs import PRESETS as PRESETS
from fidia_jax.projects.optimizers.configs import DataConfig as DataConfig
from fidia_jax.projects.optimizers.configs import LmConfig as LmConfig
from fidia_jax.projects.optimizers.configs import OptimizerConfig as OptimizerConfig
from fidia_jax.projects.optimizers.configs import config_from_dict as config_from_dict
from fidia_jax.projects.optimizers.configs import get_config as get_config
from fidia_jax.projects.optimizers.configs import load_config as load_config
from fidia_jax.projects.optimizers.train import RunResult as RunResult
from fidia_jax.projects.optimizers.train import evaluate as evaluate
from fidia_jax.projects.optimizers.train import llama_config as llama_config
from fidia_jax.projects.optimizers.train import make_optimizer as make_optimizer
from fidia_jax.projects.optimizers.train import make_schedule as make_schedule
from fidia_jax.projects.optimizers.train import make_task as make_task
from fidia_jax.projects.optimizers.train import step_time_ratios as step_time_ratios
from fidia_jax.projects.optimizers.train import train_and_evaluate as train_and_evaluate
from fidia_jax.projects.optimizers.train import train_interleaved as train_interleaved
from fidia_jax.projects.optimizers.train import tree_bytes as tree_bytes
from fidia_jax.projects.optimizers.train import with_optimizer as with_optimizer

__all__ = [
    "OPTIMIZERS",
    "PEAK_LEARNING_RATES",
    "PRESETS",
    "DataConfig",
    "LmConfig",
    "OptimizerConfig",
    "RunResult",
    "config_from_dict",
    "evaluate",
    "get_config",
    "llama_config",
    "load_config",
    "make_optimizer",
    "make_schedule",
    "make_task",
    "step_time_ratios",
    "train_and_evaluate",
    "train_interleaved",
    "tree_bytes",
    "with_optimizer",
]
