"""Hyperbolic linear layer (Flax NNX) on the Poincaré-ball operations of ``_poincare.py``.

Kept apart from the operations so that they import without flax; ``fidia_jax.layers`` loads
this module on first use of :class:`HypLinear`.

References:
  Ganea, Bécigneul, Hofmann, "Hyperbolic Neural Networks", NeurIPS 2018, arXiv:1805.09112.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from fidia_jax.layers._poincare import (
    check_curvature,
    expmap0,
    mobius_add,
    mobius_matvec,
    project_to_ball,
)

__all__ = ["HypLinear"]


class HypLinear(nnx.Module):
    """Hyperbolic linear layer ``y = proj((W (x)_c x) (+)_c exp_0(b))`` (Ganea et al. 2018, §3.2).

    The kernel ``W`` ``(in, out)`` and the bias ``b`` ``(out,)`` (a tangent vector at 0, so any
    optimiser can train it) are Euclidean parameters; inputs and outputs are points of the ball.

    Args:
      in_features, out_features: widths.
      c: curvature magnitude ``> 0``.
      use_bias: add the Möbius bias.
      param_dtype: parameter dtype.
      rngs: ``nnx.Rngs`` with a ``params`` stream.

    Call: ``layer(x_BxI) -> y_BxO`` (leading batch axes allowed).

    Raises:
      ValueError: ``c <= 0``.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        *,
        c: float = 1.0,
        use_bias: bool = True,
        param_dtype=jnp.float32,
        rngs: nnx.Rngs,
    ):
        check_curvature(c)
        self.c = float(c)
        init = nnx.initializers.lecun_normal()
        self.kernel = nnx.Param(init(rngs.params(), (in_features, out_features), param_dtype))
        self.bias = nnx.Param(jnp.zeros((out_features,), param_dtype)) if use_bias else None

    def __call__(self, x: jax.Array) -> jax.Array:
        y = mobius_matvec(self.kernel[...], x, self.c)
        if self.bias is not None:
            b = jnp.broadcast_to(expmap0(self.bias[...], self.c), y.shape)
            y = project_to_ball(mobius_add(y, b, self.c), self.c)
        return y
