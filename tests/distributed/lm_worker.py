"""One process of the LM test: ``train.fit_llama`` on a tiny random Llama, data-parallel on
:func:`fidia_jax.parallel.data_mesh` (run by tests/distributed/test_lm_multiprocess.py).

``python lm_worker.py WORKDIR OUT.npz STEPS [nomesh]`` trains ``STEPS`` steps (a rerun in the
same WORKDIR resumes from its checkpoint) and, on process 0, writes the losses and the trained
parameters to ``OUT.npz``.
"""

import sys

from fidia_jax import parallel

parallel.initialize_distributed()

import jax  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from flax import nnx  # noqa: E402

from fidia_jax import models, train  # noqa: E402

workdir, out, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
mesh = None if sys.argv[4:] == ["nomesh"] else parallel.data_mesh(8)
cfg = models.LlamaConfig.tiny(vocab_size=12, max_seq_len=8)
seqs = (np.arange(12)[:, None] + np.arange(6)[None]) % 12  # "a, a+1, ..." mod 12
model = models.Llama(cfg, rngs=nnx.Rngs(0))
model, losses = train.fit_llama(model, seqs, steps=steps, batch_size=8, tx=optax.adam(1e-2),
                                key=jax.random.key(1), workdir=workdir, run="lm",
                                mesh=mesh)  # fmt: skip
params = nnx.to_pure_dict(nnx.state(model, nnx.Param))
leaves = jax.tree_util.tree_flatten_with_path(params)[0]
flat = {"/".join(str(getattr(k, "key", k)) for k in path): np.asarray(v) for path, v in leaves}
if parallel.is_primary():
    np.savez(out, losses=losses, **{f"param/{k}": v for k, v in flat.items()})
print(f"lm_worker: process {jax.process_index()}/{jax.process_count()} ok", flush=True)
