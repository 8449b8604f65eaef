"""fidia_jax.losses: training objectives of the methods, one pure function per loss.

Every loss takes arrays (no module, no config) and returns a scalar or per-example array, as its
docstring says; batch with ``jax.vmap`` where a loss is written for one example. Each docstring
names its source (paper, equation, authors' code) and says plainly which formula is our
reconstruction.
"""

# >>> multifidelity
# <<< multifidelity
# >>> causal
# <<< causal
# >>> varjepa
# <<< varjepa
# >>> ldl
# <<< ldl
# >>> hist
# <<< hist
# >>> teamwork
# <<< teamwork

__all__: list[str] = [
    # >>> multifidelity
    # <<< multifidelity
    # >>> causal
    # <<< causal
    # >>> varjepa
    # <<< varjepa
    # >>> ldl
    # <<< ldl
    # >>> hist
    # <<< hist
    # >>> teamwork
    # <<< teamwork
]
