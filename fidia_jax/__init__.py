"""fidia_jax: reference JAX implementations of FIDIA and companion ICML 2026 methods."""

__version__ = "0.1.0"

from fidia_jax import data as data
from fidia_jax import errors as errors
from fidia_jax import fidia as fidia
from fidia_jax import kernels as kernels
from fidia_jax import models as models
from fidia_jax import optim as optim
from fidia_jax import protein as protein
from fidia_jax import rl as rl

__all__ = ["__version__", "data", "errors", "fidia", "kernels", "models", "optim", "protein", "rl"]
