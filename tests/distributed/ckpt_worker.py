"""One process of the multi-process checkpoint test (run by tests/distributed/test_multiprocess.py).

``python ckpt_worker.py save DIR`` writes step 1 of a small state (one batch-sharded and one
replicated leaf on :func:`fidia_jax.parallel.data_mesh`); ``restore DIR OUT.npz`` reads it back
onto this run's mesh and (process 0) writes the host values to ``OUT.npz``.
"""

import sys

import numpy as np

from fidia_jax import parallel

parallel.initialize_distributed()

import jax  # noqa: E402

from fidia_jax import train  # noqa: E402


def state():
    mesh = parallel.data_mesh(8)
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 3)).astype(np.float32)
    b = rng.standard_normal((5,)).astype(np.float32)
    return {"w": parallel.shard_batch(w, mesh), "b": parallel.replicate(b, mesh)}


mode, directory = sys.argv[1], sys.argv[2]
ckpt = train.Checkpointer(directory)
if mode == "save":
    ckpt.save(1, state())
else:
    like = jax.tree.map(lambda x: x * 0, state())
    restored = parallel.to_host(ckpt.restore(ckpt.latest_step(), like))
    if parallel.is_primary():
        np.savez(sys.argv[3], **restored)
ckpt.close()
parallel.sync("ckpt_worker done")
print(f"ckpt_worker {mode}: process {jax.process_index()}/{jax.process_count()} ok")
