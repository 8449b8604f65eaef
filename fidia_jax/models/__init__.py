"""fidia_jax.models."""

__all__: list[str] = []
