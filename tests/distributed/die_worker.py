"""One process of the failure test: both processes join, then process 1 dies and process 0
waits for it at a barrier (it would wait for the coordinator's failure detection)."""

import os

from fidia_jax import parallel

parallel.initialize_distributed()

import jax  # noqa: E402

parallel.sync("both started")
print(f"process {jax.process_index()} started", flush=True)
if jax.process_index() == 1:
    os._exit(3)
parallel.sync("never reached by process 1")
