"""fidia_jax.rl."""

__all__: list[str] = []
