"""Well-typed use of the public API: mypy must report nothing here (``tools/typecheck.py``)."""

import jax.numpy as jnp
import optax

from fidia_jax import optim, rl

schedule = optax.cosine_decay_schedule(1e-3, 100)
tx = optax.chain(optim.scale(learning_rate=schedule, weight_decay=0.1), optax.clip(1.0))
best = rl.max_at_k(jnp.array([1.0, 2.0, 3.0]), 2)
