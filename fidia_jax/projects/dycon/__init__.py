"""fidia_jax.projects.dycon: DyCon, probe-driven control of reflections, on a tiny LLaMA.

A linear probe reads, from the residual stream at each step boundary, how much reasoning remains
(log-normalised remaining length); at each boundary the reading softly raises or lowers the
logits of the reflection token ("wait"), and oppositely the end-of-thinking token, with no change
to the model's weights. The driver trains a small :class:`fidia_jax.models.Llama` on step-wise
modular-addition solutions with labelled corrective and redundant reflections
(:func:`.task.make_dycon_task`), measures the probe's held-out R² per layer against a
shuffled-label control, and compares the baseline, NoWait, a static probe and DyCon in accuracy
and tokens per difficulty bucket (:func:`train_and_evaluate`; ``fidia-jax dycon train|demo``).

Paper:
  Tu, Li, Zhen, Qin, Wei, Piao, Tian, Li, Zhang, "DyCon: dynamic reasoning control via evolving
  difficulty modeling", ICML 2026, arXiv:2606.07108, https://arxiv.org/abs/2606.07108. The
  control (default one-sided ``-lambda max(0, tau - d_hat)`` on reflection tokens, the direction
  every description of the paper states; the two-sided ``lambda (d_hat - tau)`` with an
  opposite push on the end token kept as an ablation, ``control_form="two_sided"``) and the
  target's normaliser are **reconstructions**: the paper's §3 could not be read here.

Shared primitives used: :class:`fidia_jax.models.Llama` (``inspect``),
:func:`fidia_jax.models.sample_llama` (``logit_bias``), :func:`fidia_jax.train.fit_llama`,
:func:`fidia_jax.metrics.ridge_fit` / ``ridge_predict`` / ``r2_score``. The method's own
modules: ``task.py`` (the task: :class:`DyconVocab`, :func:`make_dycon_task`,
:func:`parse_dycon_generation`, ``remaining_length_target``), ``control.py`` (the probe's reading
as a logit bias: :func:`dycon_control`, :func:`dycon_logit_bias`, ``dycon_static_bias``,
``ban_tokens_bias``), ``probes.py`` (:func:`layer_probe_r2`), ``train.py`` (the experiment).
Re-exported here: what a user of the method calls (the task, the control, the probe, the
experiment); the rest stays in its module.
"""

from fidia_jax.projects.dycon.configs import PRESETS as PRESETS
from fidia_jax.projects.dycon.configs import DyconConfig as DyconConfig
from fidia_jax.projects.dycon.configs import get_config as get_config
from fidia_jax.projects.dycon.configs import load_config as load_config
from fidia_jax.projects.dycon.control import dycon_control as dycon_control
from fidia_jax.projects.dycon.control import dycon_logit_bias as dycon_logit_bias
from fidia_jax.projects.dycon.probes import layer_probe_r2 as layer_probe_r2
from fidia_jax.projects.dycon.task import DyconVocab as DyconVocab
from fidia_jax.projects.dycon.task import make_dycon_task as make_dycon_task
from fidia_jax.projects.dycon.task import parse_dycon_generation as parse_dycon_generation
from fidia_jax.projects.dycon.train import METHODS as METHODS
from fidia_jax.projects.dycon.train import boundary_states as boundary_states
from fidia_jax.projects.dycon.train import build_model as build_model
from fidia_jax.projects.dycon.train import evaluate_generations as evaluate_generations
from fidia_jax.projects.dycon.train import fit_probe as fit_probe
from fidia_jax.projects.dycon.train import format_table as format_table
from fidia_jax.projects.dycon.train import generate as generate
from fidia_jax.projects.dycon.train import goals as goals
from fidia_jax.projects.dycon.train import headline as headline
from fidia_jax.projects.dycon.train import summarize as summarize
from fidia_jax.projects.dycon.train import train_and_evaluate as train_and_evaluate
from fidia_jax.projects.dycon.train import vocab_of as vocab_of

__all__ = [
    "METHODS",
    "PRESETS",
    "DyconConfig",
    "DyconVocab",
    "boundary_states",
    "build_model",
    "dycon_control",
    "dycon_logit_bias",
    "evaluate_generations",
    "fit_probe",
    "format_table",
    "generate",
    "get_config",
    "goals",
    "headline",
    "layer_probe_r2",
    "load_config",
    "make_dycon_task",
    "parse_dycon_generation",
    "summarize",
    "train_and_evaluate",
    "vocab_of",
]
