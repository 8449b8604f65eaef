"""fidia_jax.protein."""

__all__: list[str] = []
