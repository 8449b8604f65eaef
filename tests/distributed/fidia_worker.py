"""One process of the FIDIA test (run by tests/distributed/test_fidia_multiprocess.py).

``python fidia_worker.py WORKDIR OUT``: FIDIA's training loop (``commands.run_train``: the
``fidia-jax fidia train`` path after the config) on the ``tiny`` preset with 4 backbones per
step, a small random ProteinMPNN as the reference (compiles in seconds, unlike the released
weights) and a stand-in sequence reward on 8 slices of the built-in backbone; then a
Best-of-16 design of the first slice in 4 blocks (:func:`fidia_jax.projects.fidia.design.best_of_n`).
Process 0 writes ``OUT/design/`` and ``OUT/rows.json``: per process, the training rows its
devices held at each step (read from :func:`fidia_jax.parallel.shard_batch`'s shards) and the
number of sample rewards it computed, and ``OUT/params.npz``, the trained parameters.
"""

import json
import pathlib
import sys

from fidia_jax import parallel

parallel.initialize_distributed()

import jax  # noqa: E402
import numpy as np  # noqa: E402
from flax import nnx  # noqa: E402

from fidia_jax import models, protein  # noqa: E402
from fidia_jax.parallel import gather_in_order  # noqa: E402
from fidia_jax.projects import fidia  # noqa: E402
from fidia_jax.projects.fidia import commands, design  # noqa: E402
from fidia_jax.projects.fidia._step import schedule  # noqa: E402

#: the reference's size (tests/distributed/test_fidia_multiprocess.py builds the same)
TINY = dict(hidden_dim=16, edge_features=16, num_encoder_layers=1, num_decoder_layers=1,
            k_neighbors=8)  # fmt: skip
workdir, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
full = models.MPNNInputs.from_protein(protein.load_structure(protein.default_backbone_path()))
hydrophobic = np.array([c in "AVILMFWC" for c in protein.ALPHABET])
charged = np.array([c in "DEKR" for c in protein.ALPHABET])
scored = [0]  # sample rewards computed by this process


def reward(seqs):  # stand-in reward: a deterministic sequence statistic
    scored[0] += len(seqs)
    r = hydrophobic[seqs].mean(-1) - 0.5 * charged[seqs].mean(-1)
    return r.astype(np.float32), r > 0.2


def backbone(i, start):
    fixed = np.zeros(24, bool)
    fixed[8:11] = True
    inputs = models.MPNNInputs(*(np.asarray(a)[start : start + 24] for a in full))
    return fidia.Backbone(f"bpti{i}", "motif", inputs, fixed, reward)


backbones = [backbone(i, s) for i, s in enumerate(range(0, 32, 4))]  # 8: an epoch is 2 steps
cfg = fidia.override_config(
    fidia.get_config("tiny"),
    ["data.batch_backbones=4", "train.num_steps=4", "train.checkpoint_every=2"],
)
reference = models.ProteinMPNN(**TINY, rngs=nnx.Rngs(0))
trainer = fidia.Trainer(
    cfg, train_backbones=backbones, eval_backbones=backbones[:4], reference=reference
)
result = commands.run_train(cfg, workdir, trainer=trainer)
seqs, rewards, passes, ref_rewards = design.best_of_n(
    trainer, result["params"], backbones[0], num_samples=16, seed=3, blocks=4
)

held = []  # the schedule's rows of each step on this process's devices
for step in range(cfg.train.num_steps):
    idx = schedule(step, len(backbones), cfg.data.batch_backbones, cfg.seed).astype(np.int32)
    placed = parallel.shard_batch(idx, trainer.mesh)
    held.append(sorted(int(v) for s in placed.addressable_shards for v in np.asarray(s.data)))
every = gather_in_order([{"held": held, "scored": scored[0]}], jax.process_count())


leaves = jax.tree_util.tree_flatten_with_path(parallel.to_host(result["params"]))[0]
params = {"/".join(str(getattr(k, "key", k)) for k in path): v for path, v in leaves}
if parallel.is_primary():
    np.savez(out / "params.npz", **params)
    design.write_design_outputs(out / "design", backbones[0], seqs, rewards, passes,
                                meta={"seed": 3}, ref_rewards=ref_rewards)  # fmt: skip
    (out / "rows.json").write_text(json.dumps(every))
