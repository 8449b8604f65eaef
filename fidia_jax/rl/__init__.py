"""fidia_jax.rl."""

from ._best_of_n import max_at_k as max_at_k
from ._best_of_n import max_at_k_effective_rewards as max_at_k_effective_rewards
from ._best_of_n import max_at_k_weights as max_at_k_weights
from ._best_of_n import pass_at_k as pass_at_k
from ._best_of_n import pass_at_k_effective_rewards as pass_at_k_effective_rewards

__all__: list[str] = [
    "max_at_k",
    "max_at_k_effective_rewards",
    "max_at_k_weights",
    "pass_at_k",
    "pass_at_k_effective_rewards",
]
