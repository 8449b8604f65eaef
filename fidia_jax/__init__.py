"""fidia_jax: reference JAX implementations of FIDIA and companion ICML 2026 methods.

Subpackages are imported on first attribute access (PEP 562), so ``import fidia_jax.kernels``
needs only jax, not the protein stack (biotite, Biopython) that ``fidia_jax.protein`` uses.
"""

import importlib

__version__ = "0.1.0"

_SUBPACKAGES = (
    "config", "data", "errors", "kernels", "launch", "layers", "losses", "metrics", "models", "optim",
    "parallel", "projects", "protein", "rl", "train",
)  # fmt: skip

__all__ = ["__version__", *_SUBPACKAGES]


def __getattr__(name: str):
    if name in _SUBPACKAGES:
        module = importlib.import_module(f"fidia_jax.{name}")
        globals()[name] = module
        return module
    raise AttributeError(f"module 'fidia_jax' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_SUBPACKAGES))
