"""fidia_jax.losses: training objectives of the methods, one pure function per loss.

Every loss takes arrays (no module, no config) and returns a scalar or per-example array, as its
docstring says; batch with ``jax.vmap`` where a loss is written for one example. Each docstring
names its source (paper, equation, authors' code) and says plainly which formula is our
reconstruction.
"""

from fidia_jax.losses._gaussian_kl import gaussian_kl as gaussian_kl
from fidia_jax.losses._gaussian_kl import standard_normal_kl as standard_normal_kl
from fidia_jax.losses._ipm import IPMS as IPMS
from fidia_jax.losses._ipm import ipm as ipm
from fidia_jax.losses._ipm import mmd2_linear as mmd2_linear
from fidia_jax.losses._ipm import mmd2_rbf as mmd2_rbf
from fidia_jax.losses._ipm import wasserstein1_sinkhorn as wasserstein1_sinkhorn
from fidia_jax.losses._rectified_flow import (
    rectified_flow_interpolate as rectified_flow_interpolate,
)
from fidia_jax.losses._rectified_flow import rectified_flow_loss as rectified_flow_loss
from fidia_jax.losses._tokens import next_token_loss as next_token_loss
from fidia_jax.losses._tokens import token_log_probs as token_log_probs
from fidia_jax.losses._tokens import token_nll as token_nll

__all__ = [
    "next_token_loss",
    "token_log_probs",
    "token_nll",
    "IPMS",
    "ipm",
    "mmd2_linear",
    "mmd2_rbf",
    "wasserstein1_sinkhorn",
    "gaussian_kl",
    "standard_normal_kl",
    "rectified_flow_interpolate",
    "rectified_flow_loss",
]
