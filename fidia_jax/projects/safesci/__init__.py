"""fidia_jax.projects.safesci: a SafeSci-style scientific-safety evaluation harness.

Any ``generate(list[str]) -> list[str]`` callable is evaluated on records of single-choice,
multiple-choice, true/false items and refusal probes: prompts with seeded (or the official
unseeded) option shuffling, the official ``<ans>...<eoa>`` parser, accuracy with the official
subset credit or strict, refusal rate with the official marker list or strict patterns, the
official bootstrap (5 subsamples of 34 %) and a per-discipline breakdown. :func:`evaluate` is the
library entry point; ``fidia-jax safesci evaluate|demo`` the command line. The SafeSci data is
not available offline: a small benign fixture written here (``tests/data/safesci/benign.jsonl``)
stands in, and the models are rule-based or a small Llama trained here (see ``docs/safesci.md``).

Paper:
  Zhu, Tian, Jia, Zhang, Zhang, Li, Ji, Liu, Chen, Sun, Zhang, Teng, Shao, Sun, Hu, Qiao, Zhai,
  "SafeSci: Safety Evaluation of Large Language Models in Science Domains and Beyond",
  ICML 2026, arXiv:2603.01589, https://arxiv.org/abs/2603.01589. Official code:
  https://github.com/yangyangyang127/SafeSci (``eval.py``, ``calc_metrics.py``,
  ``evaluation/{mcq,true_or_false,reject}.py``; read at commit ``ff55ea5``). Facts taken from it
  are cited where they are used; the prompt wording and the strict rules are ours.

Primitives used: :class:`fidia_jax.data.SafeSciRecord`, :func:`fidia_jax.data.load_safesci_jsonl`,
:func:`fidia_jax.data.safesci_prompt`, :func:`fidia_jax.metrics.safesci_extract_answer`,
:func:`fidia_jax.metrics.safesci_choice_correct`, :func:`fidia_jax.metrics.safesci_tf_correct`,
:func:`fidia_jax.metrics.safesci_is_refusal`, :func:`fidia_jax.metrics.safesci_bootstrap`,
:func:`fidia_jax.metrics.safesci_breakdown`; for the trained model :class:`fidia_jax.models.Llama`,
:func:`fidia_jax.train.fit_llama`, :func:`fidia_jax.models.sample_llama`.
"""

from fidia_jax.projects.safesci.configs import MODELS as MODELS
from fidia_jax.projects.safesci.configs import PRESETS as PRESETS
from fidia_jax.projects.safesci.configs import SafeSciConfig as SafeSciConfig
from fidia_jax.projects.safesci.configs import get_config as get_config
from fidia_jax.projects.safesci.configs import load_config as load_config
from fidia_jax.projects.safesci.evaluate import default_data_path as default_data_path
from fidia_jax.projects.safesci.evaluate import evaluate as evaluate
from fidia_jax.projects.safesci.evaluate import format_table as format_table
from fidia_jax.projects.safesci.evaluate import run_demo as run_demo
from fidia_jax.projects.safesci.evaluate import run_evaluate as run_evaluate
from fidia_jax.projects.safesci.evaluate import split_accuracy as split_accuracy
from fidia_jax.projects.safesci.models import keyword_generate as keyword_generate
from fidia_jax.projects.safesci.models import select_all_generate as select_all_generate
from fidia_jax.projects.safesci.models import train_safesci_llama as train_safesci_llama

__all__ = [
    "MODELS",
    "PRESETS",
    "SafeSciConfig",
    "default_data_path",
    "evaluate",
    "format_table",
    "get_config",
    "keyword_generate",
    "load_config",
    "run_demo",
    "run_evaluate",
    "select_all_generate",
    "split_accuracy",
    "train_safesci_llama",
]
