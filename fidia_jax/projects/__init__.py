"""fidia_jax.projects: one driver package per paper.

A driver reads a config, loops over training steps, writes files and reports; everything a second
method could call lives in the primitive packages (``models``, ``layers``, ``rl``, ``optim``,
``kernels``, ``protein``, ``data``). Nothing in the library imports a driver except the command
line (:mod:`fidia_jax.cli`), through the registry below, so ``import fidia_jax.projects`` imports
no project.
"""
