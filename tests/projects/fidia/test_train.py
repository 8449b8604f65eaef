"""The training loop with the real ProteinMPNN on a tiny problem (stand-in reward).

* a run killed with SIGKILL after step 3 of 4 (subprocess, one device) and resumed ends with exactly the
  parameters and metrics of an uninterrupted run;
* the rollout and update sharded over 4 host devices equal the single-device result;
  ``train.param_sharding="fsdp"`` splits the parameters over the mesh;
* padding a backbone does not change its teacher-forced log-probabilities;
* ``load_policy`` restores the trained parameters.

Compiling the update dominates these tests. The SIGKILL test's subprocess therefore starts
training only after the uninterrupted run's first step, with JAX's persistent compilation cache
pointing at the programs that run just compiled: it loads them instead of compiling them again
(the same executables, so the same numbers).

Run as a script (``python test_train.py WORKDIR KILL_AFTER_STEP READY_FILE``) it is the
subprocess: it imports and loads the model while the parent compiles, then waits for READY_FILE.
"""

import contextlib
import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

HERE = pathlib.Path(__file__).resolve()


def _setup():
    from fidia_jax import models, protein
    from fidia_jax.projects import fidia

    prot = protein.load_structure(protein.default_backbone_path())
    full = models.MPNNInputs.from_protein(prot)
    hydrophobic = np.array([c in "AVILMFWC" for c in protein.ALPHABET])
    charged = np.array([c in "DEKR" for c in protein.ALPHABET])

    def reward(seqs):  # stand-in reward: a deterministic sequence statistic
        r = hydrophobic[seqs].mean(-1) - 0.5 * charged[seqs].mean(-1)
        return r.astype(np.float32), r > 0.2

    backbones = []
    for i, start in enumerate((0, 10, 20, 30)):
        sl = slice(start, start + 24)
        inp = models.MPNNInputs(*(np.asarray(a)[sl] for a in full))
        fixed = np.zeros(24, bool)
        fixed[8:11] = True
        backbones.append(fidia.Backbone(f"bpti{i}", "motif", inp, fixed, reward))
    cfg = fidia.override_config(
        fidia.get_config("tiny"),
        ["data.batch_backbones=4", "train.num_steps=4", "train.checkpoint_every=2"],
    )
    return cfg, backbones


def _run(workdir, kill_after=None, trainer=None, num_devices=0, after_step=None, wait_for=None):
    from fidia_jax.projects import fidia

    cfg, backbones = _setup()
    if trainer is None:
        trainer = fidia.Trainer(
            cfg, train_backbones=backbones, eval_backbones=backbones, num_devices=num_devices
        )
    while wait_for is not None and not wait_for.exists():  # imports overlap the parent's compile
        time.sleep(0.05)

    def on_step(step, metrics):
        if after_step is not None:
            after_step(step)
        if kill_after is not None and step == kill_after:
            os.kill(os.getpid(), signal.SIGKILL)

    return fidia.train_and_evaluate(cfg, workdir, trainer=trainer, progress=False, on_step=on_step)


if __name__ == "__main__":
    _run(
        pathlib.Path(sys.argv[1]),
        kill_after=int(sys.argv[2]),
        num_devices=1,
        wait_for=pathlib.Path(sys.argv[3]),
    )
    sys.exit(0)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from fidia_jax import models  # noqa: E402
from fidia_jax.projects import fidia  # noqa: E402


@pytest.fixture(scope="module")
def setup():
    return _setup()


@pytest.fixture(scope="module")
def trainer(setup):
    """Single-device trainer: bit-exact resume is checked without cross-device reductions,
    whose summation order on host CPU devices is not guaranteed (the 4-device run is compared
    to this one with a tolerance in ``test_sharded_step_equals_single_device``)."""
    cfg, backbones = setup
    return fidia.Trainer(cfg, train_backbones=backbones, eval_backbones=backbones, num_devices=1)


def _leaves(tree):
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


@contextlib.contextmanager
def _persistent_compilation_cache(path):
    """JAX's persistent compilation cache at ``path`` (every program) inside the block."""
    from jax.experimental.compilation_cache import compilation_cache as cc

    values = {
        "jax_compilation_cache_dir": str(path),
        "jax_persistent_cache_min_compile_time_secs": 0.0,
        "jax_persistent_cache_min_entry_size_bytes": 0,
    }
    old = {name: getattr(jax.config, name) for name in values}
    for name, value in values.items():
        jax.config.update(name, value)
    cc.reset_cache()
    try:
        yield {name.upper(): str(value) for name, value in values.items()}
    finally:
        for name, value in old.items():
            jax.config.update(name, value)
        cc.reset_cache()


@pytest.mark.integration
def test_sigkill_and_resume_equals_uninterrupted(tmp_path, trainer, setup):
    cfg, _ = setup
    assert trainer.mesh.devices.size == 1
    killed, ready = tmp_path / "killed", tmp_path / "cache_ready"
    with _persistent_compilation_cache(tmp_path / "xla_cache") as cache_env:
        env = dict(os.environ, JAX_PLATFORMS="cpu", **cache_env)
        proc = subprocess.Popen(
            [sys.executable, str(HERE), str(killed), "2", str(ready)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )

        def release_killed_run(step):  # step 0 compiled and cached the step's programs
            if step == 0:
                ready.touch()

        full = _run(tmp_path / "full", trainer=trainer, after_step=release_killed_run)  # overlaps
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == -signal.SIGKILL, out.decode()[-2000:]
    # killed after step index 2: checkpoint of step 2 on disk, 3 metric lines, no final eval
    assert sorted(int(p.name) for p in (killed / "checkpoints").iterdir() if p.name.isdigit()) == [
        2
    ]
    assert len((killed / "metrics.jsonl").read_text().splitlines()) == 3
    assert not (killed / "eval_after.json").exists()

    resumed = _run(killed, trainer=trainer)
    for a, b in zip(_leaves(resumed["params"]), _leaves(full["params"]), strict=True):
        np.testing.assert_array_equal(a, b)
    # the parameters did move away from the reference
    moved = max(
        float(np.abs(a - b).max())
        for a, b in zip(_leaves(full["params"]), _leaves(trainer.ref_params), strict=True)
    )
    assert moved > 1e-6

    def rows(path):
        import json

        return [
            {k: v for k, v in json.loads(line).items() if k != "seconds"}
            for line in (path / "metrics.jsonl").read_text().splitlines()
        ]

    assert rows(killed) == rows(tmp_path / "full")
    assert resumed["after"]["summary"] == full["after"]["summary"]
    for name in ("training.png", "max_at_n.png", "eval_after.json", "config.json"):
        assert (killed / name).is_file()

    # load_policy restores the final parameters of the run directory
    model, cfg2, step = fidia.load_policy(tmp_path / "full")
    assert (cfg2, step) == (cfg, cfg.train.num_steps)
    from flax import nnx

    restored = nnx.to_pure_dict(nnx.state(model))
    for a, b in zip(_leaves(restored), _leaves(full["params"]), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.integration  # a tiny driver run (make test-integration, CI)
def test_eval_curve_records_every_k_steps_and_survives_resume(tmp_path, trainer, setup):
    """``eval.every = 2`` over 4 steps: evaluations at steps 0, 2 and 4, each a curve line and a
    samples file; step 4's line is the final evaluation; a resumed (finished) run adds nothing."""
    import json

    cfg, _ = setup
    cfg = fidia.override_config(cfg, ["eval.every=2"])
    tr = trainer.with_method("fidia")
    tr.config = cfg
    res = fidia.train_and_evaluate(cfg, tmp_path, trainer=tr, progress=False)
    rows = [json.loads(x) for x in (tmp_path / "eval_curve.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 2, 4]
    assert rows[-1]["summary"] == res["after"]["summary"]
    assert "samples" not in res["after"]
    for r in rows:
        saved = np.load(tmp_path / "samples" / f"step_{r['step']:06d}.npz")
        assert list(saved["names"]) == [m["name"] for m in r["per_backbone"]]
        for i, m in enumerate(r["per_backbone"]):
            seqs = saved[f"seqs_{i}"]
            assert seqs.shape == (cfg.eval.n_samples, m["length"])
            # the saved samples are the evaluated ones: their native recovery is the reported one
            bb = tr.eval_backbones[i]
            d = np.asarray(bb.designed_mask, bool)
            assert float((seqs[:, d] == np.asarray(bb.native)[d]).mean()) == pytest.approx(
                m["recovery"]
            )
    # step 0 is the reference policy: its samples equal a fresh evaluation of the reference
    ref = tr.evaluate(tr.ref_params, with_samples=True)
    step0 = np.load(tmp_path / "samples" / "step_000000.npz")
    for i, (seqs, rewards, passes) in enumerate(ref["samples"]):
        np.testing.assert_array_equal(step0[f"seqs_{i}"], seqs)
        np.testing.assert_array_equal(step0[f"rewards_{i}"], rewards)
        np.testing.assert_array_equal(step0[f"passes_{i}"], passes)
        assert float(np.max(rewards)) == pytest.approx(rows[0]["per_backbone"][i]["best_reward"])
    fidia.train_and_evaluate(cfg, tmp_path, trainer=tr, progress=False)  # resume a finished run
    assert len((tmp_path / "eval_curve.jsonl").read_text().splitlines()) == 3


@pytest.mark.integration  # a tiny driver run (make test-integration, CI)
def test_sharded_step_equals_single_device(trainer, setup):
    cfg, backbones = setup
    single = trainer
    sharded = fidia.Trainer(
        cfg, train_backbones=backbones, eval_backbones=backbones, reference=nnx_model(trainer)
    )
    assert (single.mesh.devices.size, sharded.mesh.devices.size) == (1, 4)
    key = jax.random.PRNGKey(3)
    _, a = sharded.rollout(sharded.ref_params, backbones, key, 4)
    _, b = single.rollout(single.ref_params, backbones, key, 4)
    np.testing.assert_array_equal(np.asarray(a.sequences), np.asarray(b.sequences))
    # float32 rounding of two programs (one backbone per device vs four on one): up to 1e-5
    # with jax.nn.gelu's erfc form, 3.2e-5 with the erf form the layers use since 2026-12-05
    np.testing.assert_allclose(np.asarray(a.log_probs), np.asarray(b.log_probs), atol=5e-5)
    s4, m4 = sharded.step(sharded.init_state())
    s1, m1 = single.step(single.init_state())
    assert s4.step == s1.step == 1
    assert m4["reward_mean"] == m1["reward_mean"]
    assert m4["loss"] == pytest.approx(m1["loss"], rel=1e-4, abs=1e-6)
    assert m4["grad_norm"] == pytest.approx(m1["grad_norm"], rel=1e-4)
    # Adam's first step is ~lr * sign(g): float noise on a near-zero gradient entry can flip it,
    # so allow 2 lr on a handful of entries and require the rest to agree to 1e-6.
    lr = cfg.train.learning_rate
    diffs = np.concatenate(
        [np.abs(x - y).ravel() for x, y in zip(_leaves(s4.params), _leaves(s1.params), strict=True)]
    )
    assert diffs.max() <= 2 * lr + 1e-6
    assert np.mean(diffs > 1e-6) < 1e-3
    # the sharded parameters are replicated over the 4-device mesh
    leaf = jax.tree.leaves(s4.params)[0]
    assert len(leaf.sharding.device_set) == 4


def test_fsdp_config_splits_parameters_over_the_mesh(trainer, setup):
    """``train.param_sharding="fsdp"``: each parameter (and Adam moment) is split 4 ways along
    its largest axis divisible by 4; the values are the reference's (placement only)."""
    cfg, backbones = setup
    fsdp = fidia.Trainer(
        fidia.override_config(cfg, ["train.param_sharding=fsdp"]),
        train_backbones=backbones,
        eval_backbones=backbones,
        reference=nnx_model(trainer),
    )
    state = fsdp.init_state()
    for tree in (fsdp.ref_params, state.params, state.opt_state):
        for x in jax.tree.leaves(tree):
            if any(d % 4 == 0 for d in x.shape):
                assert not x.sharding.is_fully_replicated and len(x.sharding.device_set) == 4
                assert x.addressable_shards[0].data.size * 4 == x.size
    for a, b in zip(_leaves(state.params), _leaves(trainer.ref_params), strict=True):
        np.testing.assert_array_equal(a, b)


def nnx_model(trainer):
    from flax import nnx

    return nnx.merge(trainer.graphdef, trainer.ref_params)


def test_padding_does_not_change_log_probs(setup):
    """Pads are masked out of every message once the backbone has >= k_neighbors residues.

    (With fewer residues than ``k_neighbors`` ProteinMPNN's top-k would include the pads, whose
    edges reach the decoder unmasked, as in the original's padded batches.) A small random
    ProteinMPNN (k = 8) keeps this cheap.
    """
    from flax import nnx

    _, backbones = setup
    bb = backbones[0]
    graphdef, state = nnx.split(
        models.ProteinMPNN(16, 16, 16, 1, 1, k_neighbors=8, rngs=nnx.Rngs(0))
    )

    @jax.jit
    def logp(inputs, seqs, order):
        return fidia.policy_token_log_probs(
            nnx.merge(graphdef, state), inputs, seqs, order, temperature=0.5
        )

    rng = np.random.default_rng(0)
    seqs = jnp.asarray(rng.integers(0, 20, size=(1, 2, 24)), jnp.int32)
    order = jnp.asarray(np.stack([rng.permutation(24) for _ in range(2)])[None])
    unpadded = logp(jax.tree.map(lambda a: jnp.asarray(a)[None], bb.inputs), seqs, order)
    padded = fidia.stack_backbones([bb], 30)
    assert np.asarray(padded.fixed)[0, 24:].all() and not np.asarray(padded.designed)[0, 24:].any()
    seqs_p = jnp.concatenate([seqs, jnp.full((1, 2, 6), 20, jnp.int32)], -1)
    order_p = jnp.concatenate([jnp.broadcast_to(24 + jnp.arange(6), (1, 2, 6)), order], -1)
    got = logp(padded.inputs, seqs_p, order_p)
    np.testing.assert_allclose(got[..., :24], unpadded, atol=2e-5)


def _tiny_update_inputs(backbones, seed):
    """A tiny ProteinMPNN split into ``(graphdef, params)`` and an update batch of 2 backbones x
    3 random sequences (random orders, advantages; ``old`` = -3) at length 24."""
    from flax import nnx

    graphdef, state = nnx.split(
        models.ProteinMPNN(16, 16, 16, 1, 1, k_neighbors=8, rngs=nnx.Rngs(0))
    )
    stacked = fidia.stack_backbones(backbones[:2], 24)
    rng = np.random.default_rng(seed)
    b, n, length = 2, 3, 24
    batch = {
        "inputs": jax.tree.map(jnp.asarray, stacked.inputs),
        "seqs": jnp.asarray(rng.integers(0, 20, (b, n, length)), jnp.int32),
        "orders": jnp.asarray(np.stack([[rng.permutation(length) for _ in range(n)]] * b)),
        "designed": jnp.broadcast_to(jnp.asarray(stacked.designed)[:, None], (b, n, length)),
        "old": jnp.full((b, n, length), -3.0),
        "adv": jnp.asarray(rng.normal(size=(b, n)), jnp.float32),
    }
    return graphdef, nnx.to_pure_dict(state), batch


def test_update_skips_a_non_finite_step(setup):
    """The update is a :func:`fidia_jax.train.make_train_step` step: a NaN advantage makes the
    loss non-finite, the step reports ``nonfinite = 1`` and leaves the parameters and the adamw
    state as they were (the library's policy; ``Trainer.step`` then raises TrainingError)."""
    from fidia_jax.projects.fidia._step import make_update

    cfg, backbones = setup
    graphdef, params, batch = _tiny_update_inputs(backbones, seed=0)
    opt_state = fidia.make_optimizer(cfg).init(params)
    update = make_update(graphdef, cfg)
    p1, o1, m1 = update(params, opt_state, params, batch)
    assert int(m1["nonfinite"]) == 0 and np.isfinite(float(m1["loss"]))
    assert {"loss", "grad_norm", "pg", "kl", "clip_frac"} <= set(m1)
    assert any(not np.array_equal(a, b) for a, b in zip(_leaves(p1), _leaves(params), strict=True))
    p2, o2, m2 = update(
        params, opt_state, params, dict(batch, adv=batch["adv"].at[0, 1].set(np.nan))
    )
    assert int(m2["nonfinite"]) == 1 and not np.isfinite(float(m2["loss"]))
    for a, b in zip(_leaves((p2, o2)), _leaves((params, opt_state)), strict=True):
        np.testing.assert_array_equal(a, b)


def test_reference_program_feeds_the_update(setup):
    """The trainer's reference log-probs (a forward-only program with the inference options,
    once per step) equal the update's own reference forward up to float rounding, and the
    update reads ``batch["ref"]`` when given: the same ref gives the same step, a shifted ref
    changes the KL term only."""
    from flax import nnx

    from fidia_jax.projects.fidia._policy import omit_mask, policy_token_log_probs
    from fidia_jax.projects.fidia._step import make_reference_log_probs, make_update

    cfg, backbones = setup
    graphdef, params, batch = _tiny_update_inputs(backbones, seed=1)
    ref_params = jax.tree.map(lambda x: x * 1.01, params)  # a reference other than the policy
    b, n, length = batch["seqs"].shape
    ref = make_reference_log_probs(graphdef, cfg)(
        ref_params, batch["inputs"], batch["seqs"], batch["orders"]
    )
    m = cfg.model
    expected = jax.jit(
        lambda p: policy_token_log_probs(
            nnx.merge(graphdef, p),
            batch["inputs"],
            batch["seqs"],
            batch["orders"],
            temperature=m.temperature,
            omit_21=omit_mask(m.omit_aas),
        )
    )(ref_params)
    assert ref.shape == (b, n, length) and ref.dtype == jnp.float32
    np.testing.assert_allclose(ref, expected, atol=1e-4 / m.temperature, rtol=0)

    update = make_update(graphdef, cfg)
    opt_state = fidia.make_optimizer(cfg).init(params)
    _, _, inside = update(params, opt_state, ref_params, batch)
    _, _, given = update(params, opt_state, ref_params, dict(batch, ref=expected))
    for k in ("loss", "pg", "kl"):
        np.testing.assert_allclose(float(given[k]), float(inside[k]), rtol=1e-5, atol=1e-7)
    _, _, shifted = update(params, opt_state, ref_params, dict(batch, ref=expected - 1.0))
    assert float(shifted["pg"]) == pytest.approx(float(given["pg"]), rel=1e-6, abs=1e-8)
    assert abs(float(shifted["kl"]) - float(given["kl"])) > 1e-3
