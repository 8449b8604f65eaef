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

Primitives used: :func:`fidia_jax.data.make_algotrace_data`,
:func:`fidia_jax.data.algotrace_primitive_labels`, :class:`fidia_jax.models.Llama`
(``inspect``), :func:`fidia_jax.train.fit_llama`, :func:`fidia_jax.models.sample_llama`,
:class:`fidia_jax.models.AddToResidual`, :func:`fidia_jax.models.mean_head_outputs`,
:func:`fidia_jax.models.head_indirect_effects`, :func:`fidia_jax.models.top_heads`,
:func:`fidia_jax.models.function_vector`, :func:`fidia_jax.metrics.kmeans`,
:func:`fidia_jax.metrics.spectral_clustering`, :func:`fidia_jax.metrics.cluster_agreement`,
:func:`fidia_jax.metrics.cluster_transition_matrix`, :func:`fidia_jax.metrics.primitive_rates`.
"""

from fidia_jax.projects.algotrace.configs import PRESETS as PRESETS
from fidia_jax.projects.algotrace.configs import AlgoTraceConfig as AlgoTraceConfig
from fidia_jax.projects.algotrace.configs import get_config as get_config
from fidia_jax.projects.algotrace.configs import load_config as load_config
from fidia_jax.projects.algotrace.train import build_vectors as build_vectors
from fidia_jax.projects.algotrace.train import cluster_analysis as cluster_analysis
from fidia_jax.projects.algotrace.train import format_tables as format_tables
from fidia_jax.projects.algotrace.train import injection_experiment as injection_experiment
from fidia_jax.projects.algotrace.train import make_model as make_model
from fidia_jax.projects.algotrace.train import train_and_evaluate as train_and_evaluate
from fidia_jax.projects.algotrace.train import train_model as train_model

__all__ = [
    "PRESETS",
    "AlgoTraceConfig",
    "build_vectors",
    "cluster_analysis",
    "format_tables",
    "get_config",
    "injection_experiment",
    "load_config",
    "make_model",
    "train_and_evaluate",
    "train_model",
]
