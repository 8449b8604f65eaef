"""FIDIA's training loop, evaluation and Best-of-N design as 2 real processes (2 CPU devices
each, gloo) against 1 process with 4 devices, same global batch (4 backbones per step).

Tolerance: both runs execute the same programs on a 4-way ``data`` mesh; the sampled tokens
are identical (the same keys, and every per-sample computation is the same on every device),
only the cross-device sums of the loss and gradient are added in another order (gloo's
all-reduce against XLA's in-process one): a few float32 ulps per update, carried over 4 adamw
steps. Per-step losses, KL and gradient norms are compared at ``rtol=1e-5`` (absolute ``1e-7``
for the KL, which starts at 0), rewards (host-side, from identical tokens) exactly. A run on
other backbones or other keys changes them by ~1e-2 and fails.

Also checked: only process 0 writes ``metrics.jsonl`` and prints the table, process 1 prints
one status line; the rewards are computed once, half on each process; each training backbone
is held by exactly one device of one process once per epoch; the Best-of-16 design (4 sample
blocks over the devices) writes the same FASTA; the 2-process run's last orbax checkpoint
restores bit for bit in 1 process (the pytest process).
"""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.integration

WORKER = pathlib.Path(__file__).resolve().parent / "fidia_worker.py"


def _jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


_GLOO_PREFIX = re.compile(r"\[Gloo\] Rank ")
_GLOO_MESSAGE = re.compile(r"^\s*$|is connected to \d|connected peer ranks")


def _own_lines(text):
    """Lines not printed by gloo's connection log. Gloo writes "[Gloo] Rank 1 is connected to 1
    peer ranks. Expected number of connected peer ranks is : 1" from C++ to the same stdout, once
    per device; the writes of two devices, or of gloo and Python, can interleave within a line
    ("2 is connected to 33 is connected to 3 peer ranks. ..."), so any line holding a piece of
    that message is gloo's."""
    text = _GLOO_PREFIX.sub("", text)
    return [line for line in text.splitlines() if not _GLOO_MESSAGE.search(line)]


def test_fidia_two_processes_match_one(multiprocess, single_process_env, tmp_path):
    two, one = tmp_path / "two", tmp_path / "one"
    two.mkdir()
    one.mkdir()
    # the one-process run alongside (the machine's cores are shared either way)
    with open(tmp_path / "one.err", "w") as err:
        ref = subprocess.Popen([sys.executable, str(WORKER), str(one / "w"), str(one)],
                               env=single_process_env, stdout=subprocess.DEVNULL,
                               stderr=err)  # fmt: skip
        try:
            p0, p1 = multiprocess([WORKER, two / "w", two], n=2, devices=2, timeout=420)
            ref.wait(timeout=420)
        finally:
            ref.kill()
            ref.wait()
    assert ref.returncode == 0, (tmp_path / "one.err").read_text()[-3000:]

    # output: one table and the files from process 0, one status line from process 1
    assert p0.stdout.count("evaluation on the training backbone (4 backbones") == 1
    assert _own_lines(p1.stdout) == []
    assert "fidia: process 1/2 done" in p1.stderr and "fidia: reward" not in p1.stderr
    assert "fidia: reward" in p0.stderr

    # per-step metrics
    a, b = _jsonl(two / "w" / "metrics.jsonl"), _jsonl(one / "w" / "metrics.jsonl")
    assert [r["step"] for r in a] == [r["step"] for r in b] == [0, 1, 2, 3]  # written once
    for key in ("reward_mean", "reward_max", "max@2", "pass_rate"):
        assert [r[key] for r in a] == [r[key] for r in b], key
    for key in ("loss", "pg", "grad_norm"):
        np.testing.assert_allclose([r[key] for r in a], [r[key] for r in b], rtol=1e-5)
    np.testing.assert_allclose([r["kl"] for r in a], [r["kl"] for r in b], rtol=1e-5, atol=1e-7)
    after = [json.loads((d / "w" / "eval_after.json").read_text()) for d in (two, one)]
    assert after[0]["summary"] == after[1]["summary"]

    # the work split: rewards half on each process; each backbone once per epoch
    rows2 = json.loads((two / "rows.json").read_text())
    (rows1,) = json.loads((one / "rows.json").read_text())
    assert rows2[0]["scored"] == rows2[1]["scored"] == rows1["scored"] // 2 > 0
    for step in range(4):
        mine0, mine1 = rows2[0]["held"][step], rows2[1]["held"][step]
        assert len(mine0) == len(mine1) == 2 and sorted(mine0 + mine1) == rows1["held"][step]
    for epoch in (0, 1):  # 8 backbones, 4 per step: an epoch is 2 steps
        seen = [i for s in (2 * epoch, 2 * epoch + 1) for p in rows2 for i in p["held"][s]]
        assert sorted(seen) == list(range(8))

    # Best-of-N design: the same samples, rewards and pick
    for name in ("samples.fasta", "best.fasta"):
        assert (two / "design" / name).read_bytes() == (one / "design" / name).read_bytes()
    assert (two / "design" / "samples.fasta").read_text().count(">") == 16

    # the 2-process run's last checkpoint restores bit for bit in this (one) process (the
    # parameters of the two runs are not compared at a tolerance: adamw's per-coordinate
    # normalisation turns the ulp-sized gradients of the never-sampled token X into steps
    # of noise size)
    trained2 = np.load(two / "params.npz")
    restored = _restore(two / "w")
    assert set(restored) == set(trained2.files) and len(restored) > 10
    for k, v in restored.items():
        assert v.tobytes() == trained2[k].tobytes(), k


def _restore(workdir):
    import jax
    from flax import nnx

    from fidia_jax import models
    from fidia_jax.projects import fidia
    from fidia_jax.projects.fidia import _checkpoints

    cfg = fidia.get_config("tiny")
    # the worker's reference
    tiny = dict(hidden_dim=16, edge_features=16, num_encoder_layers=1, num_decoder_layers=1,
                k_neighbors=8)  # fmt: skip
    params = nnx.to_pure_dict(nnx.state(models.ProteinMPNN(**tiny, rngs=nnx.Rngs(0))))
    like = fidia.TrainState(4, params, fidia.make_optimizer(cfg).init(params))
    ckpt = _checkpoints.checkpointer(workdir, cfg)
    try:
        state = _checkpoints.restore(ckpt, 4, like)
    finally:
        ckpt.close()
    leaves = jax.tree_util.tree_flatten_with_path(state.params)[0]
    return {"/".join(str(getattr(k, "key", k)) for k in p): np.asarray(v) for p, v in leaves}
