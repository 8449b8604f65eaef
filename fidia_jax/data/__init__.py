"""fidia_jax.data."""

__all__: list[str] = []
