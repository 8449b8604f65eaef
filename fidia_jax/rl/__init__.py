"""fidia_jax.rl: reinforcement-learning primitives, one pure function per concept (rlax style).

Every function acts on a single stream (one prompt's group of samples ``rewards_n``, one
sequence's steps ``logp_t``, one transition ``phi_tm1, r_t, phi_t``) and is batched by the caller
with ``jax.vmap``. Arguments are named by index: ``_n`` over samples of a group, ``_t`` over
steps, ``_tm1`` for the previous step.

Non-finite rewards, one rule for every reward estimator here (group advantages, Best-of-N
estimators and effective rewards, the DPO pair): a ``nan`` or ``+-inf`` reward is a missing
sample. It is excluded (zero advantage / effective reward, never picked by ``dpo_pair``) and the
estimate is the one of the ``m`` finite samples, as if the group had ``n = m``; with too few
finite samples the advantages are zero and the estimates (``max_at_k``, ``pass_at_k``) ``nan``.
The rule is branch-free, so it holds unchanged under ``jit`` / ``vmap``, where a value check
could not raise. Value errors that cannot be excluded away (non-binary rewards given to the
binary estimators, a chain without a unique stationary distribution) raise ``ValueError`` on
concrete input and give ``nan`` when traced.
"""

from ._advantages import TIE_ULPS as TIE_ULPS
from ._advantages import grpo_advantages as grpo_advantages
from ._advantages import pkpo_advantages as pkpo_advantages
from ._advantages import rloo_advantages as rloo_advantages
from ._best_of_n import max_at_k as max_at_k
from ._best_of_n import max_at_k_effective_rewards as max_at_k_effective_rewards
from ._best_of_n import max_at_k_weights as max_at_k_weights
from ._best_of_n import pass_at_k as pass_at_k
from ._best_of_n import pass_at_k_effective_rewards as pass_at_k_effective_rewards
from ._dpo import dpo_log_ratios as dpo_log_ratios
from ._dpo import dpo_loss as dpo_loss
from ._dpo import dpo_pair as dpo_pair
from ._dpo import dpo_sequence_loss as dpo_sequence_loss
from ._policy_gradient import K3_LOG_RATIO_MAX as K3_LOG_RATIO_MAX
from ._policy_gradient import clipped_surrogate as clipped_surrogate
from ._policy_gradient import k3_kl as k3_kl
from ._td import LinearMRP as LinearMRP
from ._td import linear_td0_direction as linear_td0_direction
from ._td import linear_td0_error as linear_td0_error
from ._td import linear_td0_update as linear_td0_update
from ._td import sample_transition_iid as sample_transition_iid
from ._td import sample_transition_markov as sample_transition_markov
from ._td import stationary_distribution as stationary_distribution
from ._td import td_fixed_point as td_fixed_point
from ._td import td_linear_system as td_linear_system
from ._td import td_param_error as td_param_error

__all__: list[str] = [
    # Best-of-N estimators and their effective rewards
    "max_at_k",
    "max_at_k_effective_rewards",
    "max_at_k_weights",
    "pass_at_k",
    "pass_at_k_effective_rewards",
    # group advantages
    "TIE_ULPS",
    "grpo_advantages",
    "pkpo_advantages",
    "rloo_advantages",
    # per-step policy-gradient terms
    "K3_LOG_RATIO_MAX",
    "clipped_surrogate",
    "k3_kl",
    # preference optimisation
    "dpo_log_ratios",
    "dpo_loss",
    "dpo_pair",
    "dpo_sequence_loss",
    # TD(0) with linear function approximation
    "LinearMRP",
    "linear_td0_direction",
    "linear_td0_error",
    "linear_td0_update",
    "sample_transition_iid",
    "sample_transition_markov",
    "stationary_distribution",
    "td_fixed_point",
    "td_linear_system",
    "td_param_error",
]
