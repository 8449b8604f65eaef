"""Backend choice shared by the kernel ``api.py`` modules."""

from __future__ import annotations

import jax

__all__ = ["Backend", "resolve_backend"]

Backend = str  # "auto" | "pallas" | "pallas_interpret" | "reference"
_BACKENDS = ("auto", "pallas", "pallas_interpret", "reference")


def resolve_backend(backend: str) -> str:
    """``"auto"`` -> ``"pallas"`` on GPU/TPU, ``"reference"`` elsewhere; others are checked.

    Raises:
      ValueError: unknown backend name.
    """
    if backend not in _BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; expected one of {_BACKENDS}")
    if backend == "auto":
        return "pallas" if jax.default_backend() in ("gpu", "cuda", "rocm", "tpu") else "reference"
    return backend
