"""fidia_jax.rl."""

from ._best_of_n import max_at_k as max_at_k
from ._best_of_n import max_at_k_effective_rewards as max_at_k_effective_rewards
from ._best_of_n import max_at_k_weights as max_at_k_weights
from ._best_of_n import pass_at_k as pass_at_k
from ._best_of_n import pass_at_k_effective_rewards as pass_at_k_effective_rewards
from ._td import LinearMRP as LinearMRP
from ._td import linear_td0_direction as linear_td0_direction
from ._td import linear_td0_error as linear_td0_error
from ._td import linear_td0_update as linear_td0_update
from ._td import random_linear_mrp as random_linear_mrp
from ._td import run_linear_td0 as run_linear_td0
from ._td import sample_transition_iid as sample_transition_iid
from ._td import sample_transition_markov as sample_transition_markov
from ._td import stationary_distribution as stationary_distribution
from ._td import td_fixed_point as td_fixed_point
from ._td import td_param_error as td_param_error

__all__: list[str] = [
    "max_at_k",
    "max_at_k_effective_rewards",
    "max_at_k_weights",
    "pass_at_k",
    "pass_at_k_effective_rewards",
    # TD(0) with linear function approximation
    "LinearMRP",
    "linear_td0_direction",
    "linear_td0_error",
    "linear_td0_update",
    "random_linear_mrp",
    "run_linear_td0",
    "sample_transition_iid",
    "sample_transition_markov",
    "stationary_distribution",
    "td_fixed_point",
    "td_param_error",
]
