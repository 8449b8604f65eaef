"""fidia_jax.projects.safesci: a SafeSci-style scientific-safety evaluation harness.

Any ``generate(list[str]) -> list[str]`` callable is evaluated on records of single-choice,
multiple-choice, true/false items and refusal probes: prompts with seeded (or the official
unseeded) option shuffling, accuracy and refusal rate under strict scoring (the headline: the
last committed answer, exact credit, first-person declining patterns) and under the official
scoring (its ``<ans>...<eoa>`` parser, subset credit and marker list, as switches), the
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

Shared primitives used (the trained model only): :class:`fidia_jax.models.Llama`,
:func:`fidia_jax.train.fit_llama`, :func:`fidia_jax.models.sample_llama`. The method's own
modules: ``records.py`` (:class:`SafeSciRecord`, :func:`load_safesci_jsonl`,
:func:`safesci_prompt`), ``scoring.py`` (the official parser, credit rules, refusal markers,
bootstrap and breakdown: ``safesci_extract_answer``, ``safesci_choice_correct``,
``safesci_tf_correct``, ``safesci_is_refusal``, ``safesci_bootstrap``, ``safesci_breakdown``),
``models.py`` (the models the harness runs), ``evaluate.py`` (the harness and its verbs).
Imports go one way: ``evaluate`` -> ``models`` -> ``records``; ``evaluate`` -> ``scoring``.
Re-exported here: the records and the prompt (to evaluate one's own model with
:func:`evaluate`); the scoring functions stay in ``scoring``.
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
from fidia_jax.projects.safesci.records import SafeSciRecord as SafeSciRecord
from fidia_jax.projects.safesci.records import load_safesci_jsonl as load_safesci_jsonl
from fidia_jax.projects.safesci.records import safesci_prompt as safesci_prompt

__all__ = [
    "MODELS",
    "PRESETS",
    "SafeSciConfig",
    "SafeSciRecord",
    "default_data_path",
    "evaluate",
    "format_table",
    "get_config",
    "keyword_generate",
    "load_config",
    "load_safesci_jsonl",
    "run_demo",
    "run_evaluate",
    "safesci_prompt",
    "select_all_generate",
    "split_accuracy",
    "train_safesci_llama",
]
