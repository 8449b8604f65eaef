"""The language-model driver of SCALE / PASO: tiny run, interleaved loop, workdir, configs."""

import dataclasses
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import PartitionSpec as P

from fidia_jax import optim, train
from fidia_jax.errors import ConfigError, TrainingError
from fidia_jax.projects import optimizers as lm
from fidia_jax.projects.optimizers import train as lm_train


@pytest.fixture(scope="module")
def tiny_run(shared_data_dir, tmp_path_factory, record_lm_batches):
    """The tiny run, once per module, with every batch it trained on and its task recorded."""
    config = lm.get_config("tiny", data={"data_dir": str(shared_data_dir)})
    workdir = tmp_path_factory.mktemp("optimizers_tiny")
    with record_lm_batches(lm_train) as seen:
        out = lm.train_and_evaluate(config, workdir)
    return config, out, workdir, seen


@pytest.mark.integration  # a tiny driver run (make test-integration, CI)
def test_tiny_train_and_evaluate(tiny_run):
    config, out, tmp_path, _ = tiny_run
    written = json.loads((tmp_path / "metrics.json").read_text())
    assert written == {k: v for k, v in out.items() if k != "params"}
    # 1 block of width 32, SwiGLU 64, 4 query / 2 kv heads of size 8, untied 256-byte head.
    blocks = 32 * 32 * 2 + 32 * 16 * 2 + 3 * 32 * 64 + 2 * 32
    assert out["n_params"] == 256 * 32 + blocks + 32 + 32 * 256
    # SCALE's state: the head's momentum + AdamW moments of the three norm scales + counters.
    state = lm.make_optimizer(config).init(_toy_task().params)  # same groups and counters
    n_counters = sum(1 for x in jax.tree.leaves(state) if x.ndim == 0)
    assert out["state_bytes"] == 4 * (32 * 256 + 2 * 3 * 32) + 4 * n_counters
    losses = np.asarray(out["train_losses"])
    assert losses.shape == (config.steps,)
    # Starts above the uniform byte model's log(256) (random init) and learns below it.
    assert losses[0] > math.log(256)
    assert losses[-3:].mean() < losses[0] - 0.5
    assert out["val_loss"] < math.log(256) - 0.3
    # the fit's files: one record per step under the optimiser's run name, the final
    # checkpoint, the curves, and the summary of the workdir's optimisers
    records = train.read_metrics(tmp_path / "metrics.jsonl")
    assert [r["run"] for r in records] == ["scale"] * config.steps
    assert [r["loss"] for r in records] == out["train_losses"]
    assert sorted(p.name for p in (tmp_path / "checkpoints" / "scale").iterdir() if p.is_dir()) == [
        "12"
    ]
    assert (tmp_path / "curves.png").read_bytes()[:4] == b"\x89PNG"
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["val_loss"] == out["val_loss"] and list(summary["optimizers"]) == ["scale"]
    assert summary["final_train_loss"] == out["train_losses"][-1]


@pytest.mark.integration  # a tiny driver run (make test-integration, CI)
def test_tiny_run_is_data_parallel_over_the_four_devices(tiny_run):
    """tests/conftest.py forces 4 host devices: the batch of every step is split over them
    (B = 8: 2 windows each), the parameters are replicated, and the sharded step's loss is the
    unsharded one up to the summation order of the cross-device mean."""
    config, out, _, seen = tiny_run
    (task,) = seen["tasks"]
    assert len(seen["batches"]) == config.steps
    for t, tokens in enumerate(seen["batches"]):
        assert tokens.sharding.spec == P("data") and len(tokens.sharding.device_set) == 4
        assert [s.data.shape for s in tokens.addressable_shards] == [(2, 32)] * 4
        assert len({s.device for s in tokens.addressable_shards}) == 4
        np.testing.assert_array_equal(tokens, task.batch_fn(jnp.int32(t)))  # same windows
    for leaf in jax.tree.leaves(out["params"]):
        assert leaf.sharding.is_fully_replicated and len(leaf.sharding.device_set) == 4
    unsharded = jax.jit(task.loss_fn)(task.params, task.batch_fn(jnp.int32(0)))
    assert len(unsharded.sharding.device_set) == 1
    np.testing.assert_allclose(out["train_losses"][0], float(unsharded), rtol=1e-6)


def _toy_task():
    """A 2-parameter-group regression whose target depends on the step (no LLaMA compile)."""
    params = {
        "hidden": {"kernel": jnp.arange(12.0).reshape(3, 4) / 10, "bias": jnp.ones(4)},
        "lm_head": {"kernel": jnp.ones((4, 2))},
    }

    def loss_fn(p, x_BxD):
        h = jnp.tanh(x_BxD @ p["hidden"]["kernel"] + p["hidden"]["bias"][None])
        return jnp.mean((h @ p["lm_head"]["kernel"] - 1.0) ** 2)

    def batch_fn(t):
        return jax.random.normal(jax.random.fold_in(jax.random.key(3), t), (5, 3))

    return train.LmTask(None, params, loss_fn, batch_fn, batch_fn(jnp.int32(99)))


def test_interleaved_equals_hand_written_loops():
    task = _toy_task()
    before = jax.tree.map(np.asarray, task.params)
    txs = {"scale": optim.scale(0.05), "adam": optax.adam(0.05)}
    results = lm.train_interleaved(task, txs, 4)
    assert list(results) == ["scale", "adam"]
    for name, tx in txs.items():

        @jax.jit
        def step(p, s, t, tx=tx):
            loss, g = jax.value_and_grad(task.loss_fn)(p, task.batch_fn(t))
            u, s = tx.update(g, s, p)
            return optax.apply_updates(p, u), s, loss

        p, s, losses = task.params, tx.init(task.params), []
        for t in range(4):
            p, s, loss = step(p, s, jnp.int32(t))
            losses.append(float(loss))
        res = results[name]
        np.testing.assert_allclose(res.losses, losses, rtol=1e-6)
        jax.tree.map(
            lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7), res.params, p
        )
        assert res.step_times_s.shape == (4,) and np.all(res.step_times_s > 0)
        assert res.state_bytes == lm.tree_bytes(tx.init(task.params))
    # The initial parameters were copied before the donating steps.
    jax.tree.map(np.testing.assert_array_equal, task.params, before)


def test_interleaved_stops_at_a_nonfinite_step():
    task = _toy_task()
    with pytest.raises(TrainingError, match="nan: the loss or update at step 1 is not finite"):
        lm.train_interleaved(task, {"ok": optax.sgd(0.1), "nan": optax.sgd(float("nan"))}, 3)


def test_a_workdir_holds_one_experiment(tmp_path):
    """Runs of several optimisers share a workdir; another experiment, or the same optimiser
    with other settings, is refused before anything is trained (its checkpoints must not be
    continued)."""
    tiny = lm.get_config("tiny")
    lm_train._claim_workdir(tmp_path, tiny)
    lm_train._claim_workdir(tmp_path, tiny)  # the same run again (a resume)
    lm_train._claim_workdir(tmp_path, lm.with_optimizer(tiny, "adamw", learning_rate=1e-2))
    assert sorted(p.name for p in (tmp_path / "configs").iterdir()) == ["adamw.json", "scale.json"]
    with pytest.raises(ConfigError, match=r"holds the scale run with a different config .*"
                       r"differs in optimizer\.learning_rate"):  # fmt: skip
        lm_train._claim_workdir(tmp_path, lm.with_optimizer(tiny, "scale", learning_rate=1e-2))
    # where the shared data lie is not the experiment: another data_dir is the same run
    moved = dataclasses.replace(tiny, data=dataclasses.replace(tiny.data, data_dir="/elsewhere"))
    lm_train._claim_workdir(tmp_path, moved)
    with pytest.raises(ConfigError, match="of another experiment"):
        lm_train._claim_workdir(
            tmp_path, lm.with_optimizer(dataclasses.replace(tiny, steps=3), "sgd")
        )


def test_step_time_ratios_are_paired_medians():
    def run(times):
        return lm.RunResult(None, None, np.zeros(len(times)), np.asarray(times, float), 0)

    results = {"ref": run([9.0, 2.0, 2.0, 2.0]), "x": run([1.0, 1.0, 2.0, 3.0])}
    assert lm.step_time_ratios(results, "ref") == {"ref": 1.0, "x": 1.0}  # 0.5, 1, 1.5
    results["y"] = run([1.0, 1.0, 1.0, 5.0])
    assert lm.step_time_ratios(results, "ref")["y"] == 0.5  # step 0 (compile) left out
    with pytest.raises(ConfigError, match="reference"):
        lm.step_time_ratios(results, "adamw")


def test_configs_and_schedules():
    default = lm.get_config("default")
    assert lm.llama_config(default).hidden_dim == 336  # int(128 * 8 / 3) // 8 * 8
    assert lm.llama_config(default).max_seq_len == default.data.seq_len == 64
    sched = lm.make_schedule(3e-3, 150, default)  # warm-up 15 steps, cosine to 10 %
    np.testing.assert_allclose([sched(0), sched(15), sched(150)], [0.0, 3e-3, 3e-4], rtol=1e-6)
    for name in lm.OPTIMIZERS:
        c = lm.with_optimizer(default, name)
        assert c.optimizer.peak_learning_rate == lm.PEAK_LEARNING_RATES[name]
        assert isinstance(lm.make_optimizer(c), optax.GradientTransformation)
    c = lm.config_from_dict({"base": "tiny", "optimizer": {"name": "adamw", "learning_rate": 1}})
    assert c.optimizer.peak_learning_rate == 1.0 and c.model.dim == 32
    with pytest.raises(ConfigError, match="optimizer.name"):
        lm.get_config("tiny", optimizer={"name": "adam"})
    with pytest.raises(ConfigError, match="optimizer.warmup_steps"):
        lm.get_config("tiny", optimizer={"warmup_steps": 1000})
    with pytest.raises(ConfigError, match="unknown config key"):
        lm.get_config("tiny", model={"width": 3})
