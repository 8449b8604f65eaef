"""XLA options of ProteinMPNN's inference programs and the ``jit`` that applies them.

On CPU, XLA (jaxlib 0.10) hands chains of dots and element-wise work to YNNPACK as one fused
subgraph. In ProteinMPNN's message MLPs (the GELU, ``W2``, its bias, the second GELU, the sum
over the ``K`` neighbours, ``W3``) such a fusion, fed with materialised ``(rows, K, C)``
constants, runs about twice as slow as the same work as separate dots and XLA's own loop
fusions: in the sampler's decoding loop and in forward-only teacher forcing (scoring, the FIDIA
judge). Compiled with YNNPACK for single dots only, these programs took about a third less CPU
time than with ``jax.nn.gelu`` and XLA's defaults, and half or less of what the erf-form GELU
took with the defaults (readings of 2026-12-05: docs/benchmarks.md, the sampler's profile;
benchmarks/fidia_step_time.py). Training programs (forward + backward) are left to XLA's
defaults, which measured faster there.
"""

from __future__ import annotations

import functools

import jax
import numpy as np

# Each dot its own YNNPACK call, no YNNPACK fusions.
_OPTIONS = {"xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT"}


@functools.cache
def inference_compiler_options() -> dict[str, str]:
    """XLA options of ProteinMPNN's forward-only programs (see the module docstring).

    Returns ``{}`` off CPU, and where this jaxlib does not know the option (checked once per
    process by compiling a one-operation program with it, about 35 ms): the programs then
    compile with XLA's defaults, correct but slower. The values computed do not change beyond
    float rounding.
    """
    if jax.default_backend() != "cpu":
        return {}
    try:
        jax.jit(lambda x: x + 1, compiler_options=_OPTIONS).lower(np.float32(0)).compile()
    except jax.errors.JaxRuntimeError:
        return {}
    return dict(_OPTIONS)


def inference_jit(fn, **jit_kwargs):
    """``jax.jit(fn, **jit_kwargs)``, compiled with :func:`inference_compiler_options` when
    called at the top level.

    ``jax.jit`` accepts compiler options on top-level calls only: a call with traced arguments
    (inside a user's ``jit``, ``vmap`` or ``grad``) becomes part of the caller's program and runs
    ``fn`` jitted without them, and so does a call staged into an outer ``jit`` with concrete
    arguments only (JAX's ``ValueError`` about ``compiler_options`` is caught for it).
    ``call.program(top_level)`` is the jitted function itself (for ``.lower`` and
    ``._cache_size``).
    """

    @functools.cache
    def program(top_level: bool = True):
        options = inference_compiler_options() if top_level else {}
        return jax.jit(fn, compiler_options=options or None, **jit_kwargs)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves((args, kwargs))):
            return program(False)(*args, **kwargs)
        try:
            return program(True)(*args, **kwargs)
        except ValueError as e:  # staged into an outer jit with concrete arguments only
            if "compiler_options" not in str(e):
                raise
            return program(False)(*args, **kwargs)

    call.program = program
    return call
