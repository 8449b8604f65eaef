"""fidia_jax.optim: optax GradientTransformations (SCALE, PASO) and schedules."""

from fidia_jax.optim._paso import PasoResult as PasoResult
from fidia_jax.optim._paso import paso as paso
from fidia_jax.optim._paso import sequential_optimize as sequential_optimize
from fidia_jax.optim._riemannian import RiemannianAdamState as RiemannianAdamState
from fidia_jax.optim._riemannian import poincare_retract as poincare_retract
from fidia_jax.optim._riemannian import riemannian_adam as riemannian_adam
from fidia_jax.optim._riemannian import riemannian_sgd as riemannian_sgd
from fidia_jax.optim._riemannian import scale_by_poincare_metric as scale_by_poincare_metric
from fidia_jax.optim._scale import DEFAULT_LAST_LAYER_NAMES as DEFAULT_LAST_LAYER_NAMES
from fidia_jax.optim._scale import column_rms_normalize as column_rms_normalize
from fidia_jax.optim._scale import path_to_name as path_to_name
from fidia_jax.optim._scale import scale as scale
from fidia_jax.optim._scale import scale_by_column_rms as scale_by_column_rms
from fidia_jax.optim._scale import scale_param_labels as scale_param_labels
from fidia_jax.optim._schedules import exponential_horizon_schedule as exponential_horizon_schedule
from fidia_jax.optim._schedules import inverse_time_schedule as inverse_time_schedule

__all__ = [
    "PasoResult",
    "paso",
    "sequential_optimize",
    "DEFAULT_LAST_LAYER_NAMES",
    "column_rms_normalize",
    "exponential_horizon_schedule",
    "inverse_time_schedule",
    "path_to_name",
    "scale",
    "scale_by_column_rms",
    "scale_param_labels",
    "RiemannianAdamState",
    "poincare_retract",
    "riemannian_adam",
    "riemannian_sgd",
    "scale_by_poincare_metric",
]
