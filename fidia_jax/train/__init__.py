"""fidia_jax.train: the one training package (state, step, loop, files, progress).

Every driver that takes gradient steps builds them here (scenic's and big_vision's trainers): the
step, the bookkeeping and the files come from this package; a driver keeps its own outer loop
only where its method needs one (alternating updates, several models in one run).

- :class:`TrainState`, :func:`init_train_state`, :func:`make_train_step`: the jitted gradient
  step, data-parallel over :func:`fidia_jax.parallel.data_mesh`, with the library's one policy
  for a non-finite loss or update (the step is skipped; :func:`fit` stops at the first such
  step unless ``max_nonfinite`` allows more, naming the step).
- :func:`split_model` / :func:`merge_model`: a Flax NNX module as ``(graphdef, params, state)``.
- :func:`fit`: progress bar within seconds (compilation as its own phase, then steps/s, loss,
  ETA), ``metrics.jsonl``, orbax checkpoints every N steps and at the end, resume from the
  workdir by default (bit-identical on one device), ``curves.png``, an evaluation hook.
- :class:`Checkpointer`: orbax checkpoints with incomplete-step detection.
- :func:`stage`, :func:`print_table`, :func:`write_summary`, :func:`write_json`,
  :func:`plot_curves`, :func:`plot_bars`, :func:`read_metrics`: what a run shows and leaves.
- :func:`fit_llama`: a small LLaMA trained on token sequences (the language-model drivers' run).
- :func:`load_checked`, :func:`loop_progress`, :class:`LoopProgress`, :func:`heartbeat`: the
  stages of a run on a released checkpoint (length check before the weights load, progress with
  an ETA over batches and layers, a line whenever a long step is silent).
- :class:`LmTask`, :func:`make_lm_task`, :func:`make_lm_batch_fn`, :func:`lm_data_mesh`,
  :func:`place_lm_batch`: a byte-level LLaMA on a token stream as pure functions (loss, batch of
  step ``t`` sampled on the devices) for :func:`make_train_step` (SCALE / PASO, Attn-QAT).
"""

from fidia_jax.train._checkpoint import Checkpointer as Checkpointer
from fidia_jax.train._checkpoint import is_complete as is_complete
from fidia_jax.train._fit import FitResult as FitResult
from fidia_jax.train._fit import config_fingerprint as config_fingerprint
from fidia_jax.train._fit import fit as fit
from fidia_jax.train._lm import fit_llama as fit_llama
from fidia_jax.train._lm_run import LoopProgress as LoopProgress
from fidia_jax.train._lm_run import heartbeat as heartbeat
from fidia_jax.train._lm_run import load_checked as load_checked
from fidia_jax.train._lm_run import loop_progress as loop_progress
from fidia_jax.train._lm_task import LmTask as LmTask
from fidia_jax.train._lm_task import lm_data_mesh as lm_data_mesh
from fidia_jax.train._lm_task import make_lm_batch_fn as make_lm_batch_fn
from fidia_jax.train._lm_task import make_lm_task as make_lm_task
from fidia_jax.train._lm_task import place_lm_batch as place_lm_batch
from fidia_jax.train._progress import FitProgress as FitProgress
from fidia_jax.train._progress import is_quiet as is_quiet
from fidia_jax.train._progress import print_table as print_table
from fidia_jax.train._progress import stage as stage
from fidia_jax.train._report import append_metrics as append_metrics
from fidia_jax.train._report import plot_bars as plot_bars
from fidia_jax.train._report import plot_curves as plot_curves
from fidia_jax.train._report import pyplot as pyplot
from fidia_jax.train._report import read_metrics as read_metrics
from fidia_jax.train._report import write_json as write_json
from fidia_jax.train._report import write_summary as write_summary
from fidia_jax.train._step import TrainState as TrainState
from fidia_jax.train._step import init_train_state as init_train_state
from fidia_jax.train._step import make_train_step as make_train_step
from fidia_jax.train._step import merge_model as merge_model
from fidia_jax.train._step import split_model as split_model
from fidia_jax.train._threads import available_cores as available_cores
from fidia_jax.train._threads import cpu_stage as cpu_stage
from fidia_jax.train._threads import limit_threads as limit_threads

__all__ = [
    "Checkpointer",
    "FitProgress",
    "FitResult",
    "LmTask",
    "LoopProgress",
    "TrainState",
    "append_metrics",
    "available_cores",
    "config_fingerprint",
    "cpu_stage",
    "fit",
    "fit_llama",
    "heartbeat",
    "init_train_state",
    "is_complete",
    "is_quiet",
    "limit_threads",
    "load_checked",
    "loop_progress",
    "lm_data_mesh",
    "make_lm_batch_fn",
    "make_lm_task",
    "make_train_step",
    "merge_model",
    "place_lm_batch",
    "plot_bars",
    "plot_curves",
    "print_table",
    "pyplot",
    "read_metrics",
    "split_model",
    "stage",
    "write_json",
    "write_summary",
]
