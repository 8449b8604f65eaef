"""fidia_jax.optim."""

__all__: list[str] = []
