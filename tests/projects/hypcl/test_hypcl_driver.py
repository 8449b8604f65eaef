"""HypCL driver: the tiny run through the command line, its summary, NCM against scikit-learn."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from sklearn.neighbors import NearestCentroid

from fidia_jax import cli, metrics, optim, train
from fidia_jax.errors import ConfigError, TrainingError
from fidia_jax.projects import hypcl


@pytest.fixture(scope="module")
def tiny_workdir(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("hypcl")
    assert cli.main(["hypcl", "train", "--config", "tiny", "--workdir", str(workdir)]) == 0
    return workdir


@pytest.fixture(scope="module")
def tiny_run(tiny_workdir):
    return json.loads((tiny_workdir / "hypcl.json").read_text())


@pytest.mark.integration  # a tiny driver run (make test-integration, CI)
def test_tiny_run_writes_summary_and_chart(tiny_workdir, tiny_run):
    summary = json.loads((tiny_workdir / "summary.json").read_text())
    assert summary["average_accuracy"] == {
        m: row["average_accuracy"] for m, row in tiny_run["methods"].items()
    }
    assert summary["gap_average_accuracy"] == tiny_run["gap_average_accuracy"]
    for png in ("hypcl_methods.png", "curves.png"):
        assert (tiny_workdir / png).read_bytes()[:4] == b"\x89PNG"
    # every training step's loss, per method (ncm does not train) and class order
    records = train.read_metrics(tiny_workdir / "metrics.jsonl")
    cfg = hypcl.get_config("tiny")
    steps = cfg.steps_per_task * 2  # two tasks
    for m in ("finetune", "euclidean", "hypcl"):
        rows = [r for r in records if r["run"] == f"{m}/order0" and "loss" in r]
        assert [r["step"] for r in rows] == list(range(1, steps + 1))
        assert all(np.isfinite(r["loss"]) for r in rows)
    assert not [r for r in records if r["run"].startswith("ncm") and "loss" in r]
    # the seen-class accuracy at the end of each task (ncm too): the accuracy matrix's rows
    acc = np.array(tiny_run["methods"]["hypcl"]["orders"][0]["acc"], dtype=float)
    evals = [r for r in records if r["run"] == "hypcl/order0" and "eval/seen_accuracy" in r]
    assert [r["step"] for r in evals] == [cfg.steps_per_task, steps]
    np.testing.assert_allclose([r["eval/seen_accuracy"] for r in evals],
                               [acc[0, 0], acc[1, :2].mean()])  # fmt: skip


@pytest.mark.integration  # a tiny driver run (make test-integration, CI)
def test_tiny_summary_is_consistent(tiny_run):
    r = tiny_run
    assert r["config"]["task"] == "synthetic" and set(r["methods"]) == set(
        hypcl.get_config("tiny").methods
    )
    for row in r["methods"].values():
        (order,) = row["orders"]
        acc = np.array(order["acc"], dtype=float)
        assert acc.shape == (2, 2) and np.all(acc[np.tril_indices(2)] >= 0)
        again = metrics.continual_metrics(acc, None)
        # equal task sizes in the tiny split: weights do not matter
        np.testing.assert_allclose(row["average_accuracy"], again["average_accuracy"])
        np.testing.assert_allclose(row["average_forgetting"], again["average_forgetting"])
    gap = r["methods"]["hypcl"]["average_accuracy"] - r["methods"]["euclidean"]["average_accuracy"]
    np.testing.assert_allclose(r["gap_average_accuracy"], gap)
    # Better than chance among the 4 classes of the final step.
    assert r["methods"]["hypcl"]["last_accuracy"] > 0.4


@pytest.mark.integration  # a tiny driver run (make test-integration, CI)
def test_ncm_matches_scikit_learn(tiny_run):
    cfg = hypcl.get_config("tiny")
    x, y = hypcl.synthetic_task(cfg, cfg.synth_depth)
    stream = next(hypcl.train._streams(x, y, cfg, [[0, 1, 2, 3]], 2))
    ref = NearestCentroid().fit(stream.x_tr, stream.y_tr).predict(stream.x_te)
    last = tiny_run["methods"]["ncm"]["last_accuracy"]
    np.testing.assert_allclose(last, np.mean(ref == stream.y_te))


def test_config_errors():
    with pytest.raises(ConfigError, match="curvature"):
        hypcl.get_config("tiny", curvature=0.0)
    with pytest.raises(ConfigError, match="methods"):
        hypcl.get_config("tiny", methods=("ncm",))
    with pytest.raises(ConfigError, match="task"):
        hypcl.get_config("tiny", task="cifar")


def test_one_partitioned_step_is_riemannian_adam_on_the_ball_and_adam_on_the_rest():
    """optax.partition over ``(ball, rest)`` inside make_train_step = the two optimisers apart."""
    model = hypcl.PrototypeAdapter(6, 3, 4, geometry="poincare", rngs=nnx.Rngs(0))
    graphdef, ball, rest = nnx.split(model, hypcl.BallParam, ...)
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(8, 6)).astype(np.float32), rng.integers(0, 4, 8)
    seen = jnp.ones(4, bool)

    def loss(b, r):
        return hypcl.masked_cross_entropy(nnx.merge(graphdef, b, r)(x), y, seen)

    opt_ball, opt_rest = optim.riemannian_adam(0.05), optax.adam(0.01)
    tx = optax.partition({"ball": opt_ball, "rest": opt_rest}, ("ball", "rest"))
    step = train.make_train_step(lambda p, _: loss(*p), tx, donate=False)
    state = train.init_train_state((ball, rest), tx)
    for _ in range(3):
        state, _ = step(state, None)
    b, r, s_b, s_r = ball, rest, opt_ball.init(ball), opt_rest.init(rest)
    for _ in range(3):
        g_b, g_r = jax.grad(loss, argnums=(0, 1))(b, r)
        u_b, s_b = opt_ball.update(g_b, s_b, b)
        u_r, s_r = opt_rest.update(g_r, s_r, r)
        b, r = optax.apply_updates(b, u_b), optax.apply_updates(r, u_r)
    for got, want in zip(jax.tree.leaves(state.params), jax.tree.leaves((b, r)), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert float(jnp.max(jnp.abs(state.params[0]["prototypes"][...] - ball["prototypes"][...]))) > 0


def test_nonfinite_features_stop_training_naming_the_step():
    cfg = hypcl.get_config("tiny", steps_per_task=5)
    x, y = hypcl.synthetic_task(cfg, cfg.synth_depth)
    stream = next(hypcl.train._streams(x, y, cfg, [[0, 1, 2, 3]], 2))
    stream.x_tr[:] = np.nan
    with pytest.raises(TrainingError, match=r"step 1 of 5 is not finite"):
        hypcl.run_method("euclidean", stream, cfg, seed=0)


def test_class_zero_outside_the_first_task_trains_finite_values():
    # the replayed rows of a method without replay (fine-tuning; every method's task 0) have
    # weight 0; their labels used to be class 0 whether seen or not: CE inf, 0 * inf = NaN
    cfg = hypcl.get_config("tiny", steps_per_task=5)
    x, y = hypcl.synthetic_task(cfg, cfg.synth_depth)
    stream = next(hypcl.train._streams(x, y, cfg, [[1, 2, 0, 3]], 2))
    assert 0 not in stream.tasks[0]
    for method in ("finetune", "euclidean"):
        acc = hypcl.run_method(method, stream, cfg, seed=0)
        assert acc.shape == (2, 2) and np.all(np.isfinite(np.tril(acc)))


def test_paired_order_test_matches_scipy():
    from scipy import stats

    a, b = [0.90, 0.92, 0.95, 0.91], [0.88, 0.93, 0.90, 0.90]
    rows = {
        "hypcl": {"orders": [{"average_accuracy": v} for v in a]},
        "euclidean": {"orders": [{"average_accuracy": v} for v in b]},
    }
    t = hypcl.paired_order_test(rows)
    np.testing.assert_allclose(t["diffs"], np.subtract(a, b), atol=1e-12)
    assert t["a_wins"] == 3 and t["mean_diff"] == pytest.approx(np.mean(np.subtract(a, b)))
    assert t["p_ttest"] == pytest.approx(stats.ttest_rel(a, b).pvalue)
    one = {k: {"orders": v["orders"][:1]} for k, v in rows.items()}
    assert np.isnan(hypcl.paired_order_test(one)["p_ttest"])  # one order: no test


@pytest.mark.integration  # two tuned streams: ~20 s of compilation
def test_validation_choice_never_reads_the_test_split():
    # The test rows hold NaN features: any use of them during the choice would turn the
    # validation accuracies into chance or stop training; the chosen values are the argmax
    # of the reported trials.
    cfg = hypcl.get_config(
        "tiny", tune_learning_rates=(0.01, 0.05), tune_distill_weights=(), steps_per_task=10
    )
    x, y = hypcl.synthetic_task(cfg, 2)
    from fidia_jax.projects.hypcl._continual import stratified_split

    _, te = stratified_split(y, cfg.test_fraction, cfg.seed)
    x = x.copy()
    x[te] = np.nan
    chosen, trials = hypcl.tune_on_validation(x, y, cfg, [0, 1, 2, 3], 2, methods=("hypcl",))
    assert len(trials) == 2 and all(np.isfinite(t["val_aa"]) for t in trials)
    best = max(trials, key=lambda t: t["val_aa"])
    assert chosen["hypcl"]["learning_rate"] == best["learning_rate"]
    assert chosen["hypcl"]["val_average_accuracy"] == best["val_aa"] > 0.5
