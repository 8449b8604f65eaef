"""A plain multilayer perceptron, the one every tabular method and baseline shares."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
from flax import nnx

__all__ = ["MLP"]


class MLP(nnx.Module):
    """``Linear -> activation [-> Dropout]`` per hidden width, then a final ``Linear``.

    Args:
      in_features: input width ``D``.
      hidden: hidden widths, e.g. ``(64, 64)``; ``()`` gives a linear model.
      out_features: output width.
      activation: elementwise nonlinearity after each hidden layer (``jax.nn.relu`` default).
      dropout: dropout rate after each hidden activation (``0`` disables it; then no
        ``dropout`` RNG stream is needed).
      kernel_init: initialiser of every kernel (``None``: ``nnx.Linear``'s default).
      dtype, param_dtype: computation and parameter dtypes.
      rngs: ``nnx.Rngs`` with ``params`` (and ``dropout`` when ``dropout > 0``).

    Call: ``mlp(x_BxD, deterministic=True) -> y_BxO``; any leading batch axes are allowed.
    """

    def __init__(
        self,
        in_features: int,
        hidden: Sequence[int],
        out_features: int,
        *,
        activation: Callable[[jax.Array], jax.Array] = jax.nn.relu,
        dropout: float = 0.0,
        kernel_init=None,
        dtype=None,
        param_dtype=jax.numpy.float32,
        rngs: nnx.Rngs,
    ):
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"MLP: dropout must be in [0, 1), got {dropout}")
        widths = [in_features, *hidden, out_features]
        if min(widths) < 1:
            raise ValueError(f"MLP: every width must be >= 1, got {widths}")
        init = {} if kernel_init is None else {"kernel_init": kernel_init}
        self.layers = nnx.List(
            [
                nnx.Linear(a, b, dtype=dtype, param_dtype=param_dtype, rngs=rngs, **init)
                for a, b in zip(widths[:-1], widths[1:], strict=True)
            ]
        )
        self.activation = activation
        self.dropout = nnx.Dropout(dropout, rngs=rngs) if dropout > 0 else None

    def __call__(self, x, *, deterministic: bool = True):
        *hidden_layers, last = self.layers
        for layer in hidden_layers:
            x = self.activation(layer(x))
            if self.dropout is not None:
                x = self.dropout(x, deterministic=deterministic)
        return last(x)
