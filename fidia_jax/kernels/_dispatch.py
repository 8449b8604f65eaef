"""Backend choice and GPU compiler parameters shared by the kernel modules."""

from __future__ import annotations

import jax
from jax.experimental.pallas import triton as pl_triton

__all__ = ["Backend", "on_gpu", "resolve_backend", "triton_params"]

Backend = str  # "auto" | "pallas" | "pallas_interpret" | "reference" (| "xla" for exact decode)
_BACKENDS = ("auto", "pallas", "pallas_interpret", "reference")


def on_gpu() -> bool:
    """Whether jax's default backend is a GPU (CUDA or ROCm)."""
    return jax.default_backend() in ("gpu", "cuda", "rocm")


def resolve_backend(backend: str, *, extra: tuple[str, ...] = ()) -> str:
    """``"auto"`` -> ``"pallas"`` on GPU, ``"reference"`` elsewhere (CPU, TPU); others are checked.

    ``extra`` names further backends the caller accepts (``flash_decode`` accepts ``"xla"``).

    The Pallas kernels are written for the Triton GPU lowering (pointer loads, row gathers,
    power-of-two blocks); they are not laid out for TPU's VMEM tiling, so TPU uses the jnp
    reference.

    Raises:
      ValueError: unknown backend name.
    """
    if backend not in _BACKENDS + extra:
        raise ValueError(f"unknown backend {backend!r}; expected one of {_BACKENDS + extra}")
    if backend == "auto":
        return "pallas" if on_gpu() else "reference"
    return backend


def triton_params(num_warps: int = 4, num_stages: int = 2) -> pl_triton.CompilerParams:
    """Compiler parameters that select Pallas' Triton lowering for a ``pallas_call`` on GPU.

    Without them, jax >= 0.10 lowers a GPU ``pallas_call`` through Mosaic GPU, which rejects
    these kernels (their 4-byte per-row copies are below a warpgroup). Interpret mode ignores
    them. ``tests/kernels/test_triton_lowering.py`` lowers every kernel for CUDA on a CPU-only
    machine with these parameters.
    """
    return pl_triton.CompilerParams(num_warps=num_warps, num_stages=num_stages)
