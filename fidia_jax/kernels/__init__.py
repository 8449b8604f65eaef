"""fidia_jax.kernels."""

__all__: list[str] = []
