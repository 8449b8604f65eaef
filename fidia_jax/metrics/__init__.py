"""fidia_jax.metrics: evaluation metrics, pure functions on arrays.

Regression and correlation (:func:`rmse`, :func:`pearson_r`, :func:`r2_score`) and the effective
rank of a representation (:func:`effective_rank`) are shared by several methods; each method's own
metrics (label distributions, treatment effects, anomaly detection, ...) follow.
"""

from fidia_jax.metrics._rank import effective_rank as effective_rank
from fidia_jax.metrics._regression import pearson_r as pearson_r
from fidia_jax.metrics._regression import r2_score as r2_score
from fidia_jax.metrics._regression import rmse as rmse
# >>> multifidelity
# <<< multifidelity
# >>> causal
# <<< causal
# >>> varjepa
# <<< varjepa
# >>> ldl
# <<< ldl
# >>> hist
# <<< hist
# >>> teamwork
# <<< teamwork

__all__: list[str] = [
    "effective_rank",
    "pearson_r",
    "r2_score",
    "rmse",
    # >>> multifidelity
    # <<< multifidelity
    # >>> causal
    # <<< causal
    # >>> varjepa
    # <<< varjepa
    # >>> ldl
    # <<< ldl
    # >>> hist
    # <<< hist
    # >>> teamwork
    # <<< teamwork
]
