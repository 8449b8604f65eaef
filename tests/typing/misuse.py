"""Calls a type checker must flag (``tools/typecheck.py``: each ``# type error`` line must be
reported by mypy, and no other line). Never imported by pytest (no ``test_`` name)."""

import optax

from fidia_jax import optim, rl

optim.scale(learning_rate="oops")  # type error
optim.scale(learning_rate=1e-3, momentum="high")  # type error
optax.chain(optim.scale(learning_rate=1e-3))
rl.max_at_k([1.0, 2.0], k="2")  # type error
