"""fidia_jax.projects.td: TD(0) with exponential step sizes, compared with constant and 1/t steps.

The driver draws random Markov reward processes with linear features, runs TD(0) from
``theta = 0`` under several step-size schedules (the exponential horizon schedule
``eta_t = eta_0 T^(-t/T)``, constant, ``1/t``, and ``1/(omega t)`` told the smallest eigenvalue)
and reports the error to the exact TD fixed point; Markovian sampling adds the regularised TD(0)
(``lambda = 1/sqrt(T)``). :func:`train_and_evaluate` runs it at a config's scale with progress,
prints the table and writes ``td_schedules.json``, ``summary.json`` and ``td_curves.png`` (the
error curves of the schedules); ``benchmarks/td_schedules.py`` and ``notebooks/optimizers.py``
call it.

Paper:
  Li, Schmidt, Babanezhad, Vaswani, "Towards Parameter-Free Temporal Difference Learning",
  arXiv:2603.02577 (2026), https://arxiv.org/abs/2603.02577. Venue: not stated in the sources we
  had (the package collects ICML 2026 methods). Only the abstract and the formulas of the issue
  were available: the regularisation constant ``lambda = 1/sqrt(T)`` and the ``beta``
  generalisation of the schedule are **reconstructed**, not taken from the paper's theorems.

Primitives used: :func:`fidia_jax.optim.exponential_horizon_schedule`,
:func:`fidia_jax.optim.inverse_time_schedule`, :class:`fidia_jax.rl.LinearMRP`,
:func:`fidia_jax.rl.linear_td0_update`, :func:`fidia_jax.rl.sample_transition_iid` /
:func:`~fidia_jax.rl.sample_transition_markov`, :func:`fidia_jax.rl.stationary_distribution`,
:func:`fidia_jax.rl.td_fixed_point`, :func:`fidia_jax.rl.td_linear_system`,
:func:`fidia_jax.rl.td_param_error`; :mod:`fidia_jax.train` for the stages, the table and
summary.json (no gradient steps, so no fit).
"""

from fidia_jax.projects.td._mrp import linear_td0_path as linear_td0_path
from fidia_jax.projects.td._mrp import random_linear_mrp as random_linear_mrp
from fidia_jax.projects.td._mrp import run_linear_td0 as run_linear_td0
from fidia_jax.projects.td.configs import PRESETS as PRESETS
from fidia_jax.projects.td.configs import SCHEDULES as SCHEDULES
from fidia_jax.projects.td.configs import TdConfig as TdConfig
from fidia_jax.projects.td.configs import get_config as get_config
from fidia_jax.projects.td.configs import load_config as load_config
from fidia_jax.projects.td.train import EXPONENTIAL as EXPONENTIAL
from fidia_jax.projects.td.train import compare_schedules as compare_schedules
from fidia_jax.projects.td.train import error_curves as error_curves
from fidia_jax.projects.td.train import format_table as format_table
from fidia_jax.projects.td.train import smallest_eig as smallest_eig
from fidia_jax.projects.td.train import train_and_evaluate as train_and_evaluate

__all__ = [
    "EXPONENTIAL",
    "PRESETS",
    "SCHEDULES",
    "TdConfig",
    "compare_schedules",
    "error_curves",
    "format_table",
    "get_config",
    "linear_td0_path",
    "load_config",
    "random_linear_mrp",
    "run_linear_td0",
    "smallest_eig",
    "train_and_evaluate",
]
