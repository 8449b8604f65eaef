"""fidia_jax.projects.algotrace: algorithmic primitives in reasoning traces, and primitive vectors.

A small grouped-query LLaMA is trained on travelling-salesperson and graph-navigation traces
that share five primitives (distance, compare, nearest, verify, path; a true label per token,
several strategies). The driver clusters the model's token activations with k-means (k = 50)
and scores the clusters against the true primitives, meta-clusters the cluster transition graph
spectrally, builds one function vector per primitive (mean head outputs at the primitive's
tokens, heads chosen by causal indirect effect), and measures what injecting each vector does to
the rate of every primitive in sampled traces (the paper's Table 1), what the sum of two
vectors does (composition), and what a vector built on one task does on the other (transfer).

Paper:
  Lippl, McGee, Lopez, Pan, Zhang, Ziadi, Eberle, Momennejad, "Algorithmic primitives and
  compositional geometry of reasoning in language models", ICML 2026; earlier version
  arXiv:2510.15987, https://arxiv.org/abs/2510.15987. The paper works on Phi-4 / Llama-3
  traces; the tasks, model size, injection site and scale here are ours (a toy-scale
  reconstruction, see docs/algotrace.md).

Shared primitives used: :class:`fidia_jax.models.Llama` (``inspect``),
:func:`fidia_jax.models.sample_llama`, :class:`fidia_jax.models.AddToResidual`,
:class:`fidia_jax.models.PatchHeads`, :func:`fidia_jax.train.fit_llama`,
:func:`fidia_jax.metrics.kmeans`, :func:`fidia_jax.metrics.spectral_clustering`,
:func:`fidia_jax.metrics.cluster_agreement`, :func:`fidia_jax.metrics.cluster_transition_matrix`.
The method's own modules: ``traces.py`` (the two tasks and their labels:
:func:`make_algotrace_data`, :func:`algotrace_primitive_labels`, ``primitive_rates``),
``vectors.py`` (function vectors: :func:`mean_head_outputs`, :func:`head_indirect_effects`,
:func:`top_heads`, :func:`function_vector`), ``train.py`` (the experiment). Re-exported here:
the data generator, the labeller and the function-vector recipe (they apply to any
:class:`~fidia_jax.models.Llama`); the rest stays in its module.
"""

from fidia_jax.projects.algotrace.configs import PRESETS as PRESETS
from fidia_jax.projects.algotrace.configs import AlgoTraceConfig as AlgoTraceConfig
from fidia_jax.projects.algotrace.configs import get_config as get_config
from fidia_jax.projects.algotrace.configs import load_config as load_config
from fidia_jax.projects.algotrace.traces import (
    algotrace_primitive_labels as algotrace_primitive_labels,
)
from fidia_jax.projects.algotrace.traces import make_algotrace_data as make_algotrace_data
from fidia_jax.projects.algotrace.train import build_vectors as build_vectors
from fidia_jax.projects.algotrace.train import cluster_analysis as cluster_analysis
from fidia_jax.projects.algotrace.train import format_tables as format_tables
from fidia_jax.projects.algotrace.train import headline as headline
from fidia_jax.projects.algotrace.train import injection_experiment as injection_experiment
from fidia_jax.projects.algotrace.train import make_model as make_model
from fidia_jax.projects.algotrace.train import train_and_evaluate as train_and_evaluate
from fidia_jax.projects.algotrace.train import train_model as train_model
from fidia_jax.projects.algotrace.vectors import function_vector as function_vector
from fidia_jax.projects.algotrace.vectors import head_indirect_effects as head_indirect_effects
from fidia_jax.projects.algotrace.vectors import mean_head_outputs as mean_head_outputs
from fidia_jax.projects.algotrace.vectors import top_heads as top_heads

__all__ = [
    "PRESETS",
    "AlgoTraceConfig",
    "algotrace_primitive_labels",
    "build_vectors",
    "cluster_analysis",
    "format_tables",
    "headline",
    "function_vector",
    "get_config",
    "head_indirect_effects",
    "injection_experiment",
    "load_config",
    "make_algotrace_data",
    "make_model",
    "mean_head_outputs",
    "top_heads",
    "train_and_evaluate",
    "train_model",
]
