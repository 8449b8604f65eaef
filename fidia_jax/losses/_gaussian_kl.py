"""Closed-form KL divergences between diagonal Gaussians (in nats).

Textbook formulas (e.g. Kingma & Welling, "Auto-Encoding Variational Bayes", ICLR 2014,
appendix B), tested against Monte-Carlo estimates and known values
(``tests/losses/test_gaussian_kl.py``). Var-T-JEPA's ELBO uses both
(:mod:`fidia_jax.projects.varjepa`).
"""

from __future__ import annotations

import jax.numpy as jnp

__all__ = ["gaussian_kl", "standard_normal_kl"]


def gaussian_kl(mean_q, log_var_q, mean_p, log_var_p):
    """``KL(N(mean_q, diag e^log_var_q) || N(mean_p, diag e^log_var_p))``, summed over the last axis.

    Closed form ``0.5 sum(log_var_p - log_var_q + (e^log_var_q + (mean_q - mean_p)^2) /
    e^log_var_p - 1)``, in nats.

    Args:
      mean_q, log_var_q, mean_p, log_var_p: ``(..., D)`` float arrays of one shape.

    Returns:
      ``(...)``, ``>= 0`` (0 iff the two Gaussians are equal).

    Raises:
      ValueError: the four shapes differ.
    """
    shapes = {jnp.shape(a) for a in (mean_q, log_var_q, mean_p, log_var_p)}
    if len(shapes) != 1:
        raise ValueError(f"gaussian_kl: means and log-variances must share one shape, got {shapes}")
    var_ratio = jnp.exp(log_var_q - log_var_p)
    mahal = jnp.square(mean_q - mean_p) * jnp.exp(-log_var_p)
    return 0.5 * jnp.sum(var_ratio + mahal - 1.0 - (log_var_q - log_var_p), axis=-1)


def standard_normal_kl(mean, log_var):
    """``KL(N(mean, diag e^log_var) || N(0, I))`` summed over the last axis: ``0.5 sum(e^lv +
    mean^2 - 1 - lv)``. Shapes as :func:`gaussian_kl`."""
    if jnp.shape(mean) != jnp.shape(log_var):
        raise ValueError(
            f"standard_normal_kl: mean {jnp.shape(mean)} and log_var {jnp.shape(log_var)} differ"
        )
    return 0.5 * jnp.sum(jnp.exp(log_var) + jnp.square(mean) - 1.0 - log_var, axis=-1)
