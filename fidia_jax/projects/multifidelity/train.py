"""The multi-fidelity comparison: trusted-subset loss vs HF-only, multi-head, pretrain/fine-tune,
(oracle) Δ-learning and two Gaussian-process baselines, every method on the same data (the
networks also share the network and optimiser).

Per run (seed) the task is drawn (:func:`make_task`), features are standardised with the
training inputs (all fidelities; no label is used) and labels with the high-fidelity training
labels' mean and standard deviation. Every method trains the same :class:`fidia_jax.models.MLP`
by full-batch AdamW for ``steps`` steps per phase: one :func:`fidia_jax.train.fit` per method
and phase, whose :func:`fidia_jax.train.make_train_step` step trains all runs at once (``vmap``
over runs). The GP baselines (:mod:`~.baselines`, scikit-learn) are fitted per run on the raw
task. The reported metric is the high-fidelity test RMSE in the task's units.
"""

from __future__ import annotations

import functools
import pathlib
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from fidia_jax import metrics, models, parallel, train
from fidia_jax.config import write_summary
from fidia_jax.projects.multifidelity import baselines, losses
from fidia_jax.projects.multifidelity import data as data_lib
from fidia_jax.projects.multifidelity.configs import GP_METHODS, METHODS, MultiFidelityConfig

__all__ = ["SUMMARY_FILE", "format_table", "make_task", "make_tasks", "run_methods",
           "train_and_evaluate"]  # fmt: skip

SUMMARY_FILE = "multifidelity.json"
_ACT = {"relu": jax.nn.relu, "silu": jax.nn.silu, "tanh": jnp.tanh, "gelu": jax.nn.gelu}


def make_task(
    config: MultiFidelityConfig, run: int, *, freesolv=None
) -> data_lib.MultiFidelityData:
    """The data of run ``run`` (``0 .. num_seeds - 1``) of ``config``.

    Args:
      freesolv: optional ``(table, features)`` already loaded (FreeSolv only), to load once.
    """
    seed = config.seed + run
    if config.task != "freesolv":
        return data_lib.analytic_multifidelity_task(
            config.task, config.n_hf, config.n_mf, config.n_lf, config.n_test, seed=seed
        )
    if freesolv is None:
        table = data_lib.load_freesolv(config.data_dir)
        freesolv = (
            table,
            data_lib.freesolv_features(table.smiles, config.features, n_bits=config.n_bits),
        )
    table, feats = freesolv
    return data_lib.freesolv_multifidelity_task(
        table, feats, config.n_hf, split=seed % config.num_splits, seed=seed,
        test_fraction=config.test_fraction, n_lf=config.n_lf,
    )  # fmt: skip


def make_tasks(config: MultiFidelityConfig) -> list[data_lib.MultiFidelityData]:
    """Every run's data (FreeSolv is read and featurised once)."""
    freesolv = None
    if config.task == "freesolv":
        table = data_lib.load_freesolv(config.data_dir)
        freesolv = (
            table,
            data_lib.freesolv_features(table.smiles, config.features, n_bits=config.n_bits),
        )
    return [make_task(config, r, freesolv=freesolv) for r in range(config.num_seeds)]


def _prepare(task: data_lib.MultiFidelityData) -> dict[str, np.ndarray]:
    """Standardised float32 arrays of one run (features by the training inputs, labels by the
    high-fidelity training labels)."""
    x_mu, x_sd = task.x_train.mean(0), task.x_train.std(0)
    x_sd = np.where(x_sd > 0, x_sd, 1.0)
    hf = task.fidelity_train == 0
    y_mu = float(task.y_train[hf].mean())
    y_sd = float(task.y_train[hf].std()) if hf.sum() > 1 else 1.0
    y_sd = y_sd if y_sd > 0 else 1.0
    member = task.fidelity_train[:, None] == np.arange(task.num_fidelities)[None, :]
    out = {
        "x": (task.x_train - x_mu) / x_sd,
        "y": (task.y_train - y_mu) / y_sd,
        "member": member,
        "x_test": (task.x_test - x_mu) / x_sd,
        "y_test": task.y_test,
        "y_mu": np.float32(y_mu),
        "y_sd": np.float32(y_sd),
    }
    # LF pretraining fits every lower-fidelity label as if it were high fidelity (column 0)
    out["member_low"] = np.zeros_like(member)
    out["member_low"][:, 0] = ~hf
    if task.delta_oracle_train is not None:
        oracle = (task.delta_oracle_train - y_mu) / y_sd
        out["y_delta"] = np.where(hf, out["y"] - oracle, out["y"])  # HF rows: y_H - y_L(x)
        out["oracle_test"] = (task.delta_oracle_test - y_mu) / y_sd
    return {
        k: np.asarray(v, np.bool_ if k.startswith("member") else np.float32) for k, v in out.items()
    }


def _stack(tasks: list[data_lib.MultiFidelityData]) -> dict[str, jax.Array]:
    prepared = [_prepare(t) for t in tasks]
    keys = set.intersection(*(set(p) for p in prepared))
    shapes = {k: {p[k].shape for p in prepared} for k in keys}
    if any(len(s) > 1 for s in shapes.values()):
        raise ValueError(f"runs have different shapes, cannot vmap: {shapes}")
    return {k: jnp.asarray(np.stack([p[k] for p in prepared])) for k in keys}


def _net(in_features, hidden, k, activation, key) -> models.MLP:
    return models.MLP(
        in_features, hidden, k, activation=_ACT[activation], rngs=nnx.Rngs(params=key)
    )


@functools.lru_cache(maxsize=8)
def _graph(in_features, hidden, k, activation):
    return nnx.split(
        jax.eval_shape(lambda: _net(in_features, hidden, k, activation, jax.random.key(0)))
    )[0]


@functools.partial(jax.jit, static_argnums=(1, 2, 3, 4, 5))
def _init_params(key, runs, in_features, hidden, k, activation):
    """Network (one init per run, keys split from ``key``) and identity calibration, stacked."""
    keys = jax.random.split(key, runs)
    net = jax.vmap(lambda kk: nnx.split(_net(in_features, hidden, k, activation, kk))[1])(keys)
    calib = jax.tree.map(
        lambda a: jnp.tile(a, (runs, 1)), losses.init_trusted_subset_calibration(k)
    )
    return {"net": net, "calib": calib}


#: Per-method weights of the shared objective: (absolute, interval, ranking, learnable radius,
#: lower-fidelity heads, logistic ranking form). The trusted-subset rows take their values from
#: the config.
_BASELINE_WEIGHTS = {
    "hf_only": (1.0, 0.0, 0.0, 0.0, 0.0, 0.0),
    "multi_head": (1.0, 0.0, 0.0, 0.0, 1.0, 0.0),
    "pretrain_finetune": (1.0, 0.0, 0.0, 0.0, 0.0, 0.0),
    "delta_oracle": (1.0, 0.0, 0.0, 0.0, 0.0, 0.0),
}
_GP_FUNCTIONS = {"gp_hf_only": baselines.gp_hf_only, "gp_two_stage": baselines.gp_two_stage}


def _method_weights(config: MultiFidelityConfig, method: str) -> np.ndarray:
    if method in _BASELINE_WEIGHTS:
        return np.asarray(_BASELINE_WEIGHTS[method], np.float32)
    learnable = float(config.radius_mode == "learnable")
    logistic = float(config.ranking_form == "logistic")
    w = [config.absolute_weight, config.interval_weight, config.ranking_weight, learnable, 0.0,
         logistic]  # fmt: skip
    if method == "ts_no_absolute":
        w[0] = 0.0
    elif method == "ts_no_interval":
        w[1] = 0.0
    elif method == "ts_no_ranking":
        w[2] = 0.0
    elif method == "ts_other_radius":
        w[3] = 1.0 - learnable
    elif method == "ts_other_ranking":
        w[5] = 1.0 - logistic
    return np.asarray(w, np.float32)


class _Statics(NamedTuple):
    """Everything the compiled training loop specialises on (hashable)."""

    graph: Any
    steps: int
    learning_rate: float
    weight_decay: float
    quantile_weights: Any
    learnable_weights: Any
    logistic_weights: Any
    radius_penalty: float


def _objective(params, batch, w_6, st: _Statics):
    """One objective for every method (traced weights ``w_6``, so one compilation serves all):
    the trusted-subset terms of :func:`~fidia_jax.projects.multifidelity.losses.trusted_subset_loss`
    on head 0 (the high-fidelity prediction), with either radius mode and either ranking form,
    plus an MSE per lower-fidelity head."""
    out_NxK = nnx.merge(st.graph, params["net"])(batch["x"])
    pred_N, y_N, member_NxK = out_NxK[:, 0], batch["y_fit"], batch["member_fit"]
    calib = params["calib"]
    _, tq = losses.trusted_subset_loss(pred_N, y_N, member_NxK, calib, st.quantile_weights)
    _, tl = losses.trusted_subset_loss(pred_N, y_N, member_NxK, calib, st.learnable_weights)
    _, tr = losses.trusted_subset_loss(pred_N, y_N, member_NxK, calib, st.logistic_weights)
    learnable, logistic = w_6[3], w_6[5]
    interval = learnable * tl["interval"] + (1.0 - learnable) * tq["interval"]
    ranking = logistic * tr["ranking"] + (1.0 - logistic) * tq["ranking"]
    penalty = learnable * st.radius_penalty * jnp.sum(tl["radius_K"])
    heads = sum(
        losses.absolute_label_loss(out_NxK[:, i], y_N, member_NxK[:, i])
        for i in range(1, out_NxK.shape[1])
    )
    return w_6[0] * tq["absolute"] + w_6[1] * interval + w_6[2] * ranking + penalty + w_6[4] * heads


def _objective_runs(params, batch, st: _Statics):
    """The sum over runs of :func:`_objective` (params and batch leaves have a leading run axis;
    ``batch["w_6"]`` is shared). The runs are independent, so each run's gradient is exactly its
    own objective's; ``mean_loss`` is the runs' mean (what the curve and ``final_loss`` show)."""
    w_6 = batch["w_6"]
    runs = {k: v for k, v in batch.items() if k != "w_6"}
    loss_R = jax.vmap(_objective, in_axes=(0, 0, None, None))(params, runs, w_6, st)
    return jnp.sum(loss_R), {"mean_loss": jnp.mean(loss_R)}


#: The fit batch on the mesh: the runs (leading axis of every per-run leaf) split over
#: ``"data"``, the method's loss weights (shared by the runs) replicated.
_BATCH_SPEC = {"x": P("data"), "y_fit": P("data"), "member_fit": P("data"), "w_6": P()}


@functools.lru_cache(maxsize=8)
def _train_step(st: _Statics, mesh=None, param_sharding: str = "replicated"):
    """The AdamW step of every method and run (cached: one compilation serves all methods);
    with ``mesh`` the runs are split over its devices (:data:`_BATCH_SPEC`)."""
    tx = optax.adamw(st.learning_rate, weight_decay=st.weight_decay,
                     mask=lambda p: {"net": jax.tree.map(lambda _: True, p["net"]),
                                     "calib": jax.tree.map(lambda _: False, p["calib"])})  # fmt: skip
    step = train.make_train_step(
        functools.partial(_objective_runs, st=st), tx, has_aux=True, donate=False, mesh=mesh,
        param_sharding=param_sharding, batch_spec=_BATCH_SPEC,
    )  # fmt: skip
    return tx, step


@functools.partial(jax.jit, static_argnames="graph")
def _predict(net, x_test, *, graph):
    """High-fidelity test predictions ``(R, M)`` of the runs' networks (standardised units)."""
    return jax.vmap(lambda p, x: nnx.merge(graph, p)(x)[:, 0])(net, x_test)


def _fit(
    params, batch, w_6, st: _Statics, *, run: str, workdir, checkpoint_every: int, mesh=None,
    param_sharding: str = "replicated",
):  # fmt: skip
    """Trains every run for ``st.steps`` full-batch AdamW steps (:func:`fidia_jax.train.fit`;
    with ``mesh`` the runs split over its devices); returns ``(params, test predictions (R, M)
    (numpy), final mean loss)``."""
    tx, step = _train_step(st, mesh, param_sharding)
    fit_batch = {k: v for k, v in batch.items() if k != "x_test"}
    fit_batch["w_6"] = w_6
    state = train.init_train_state(params, tx, mesh=mesh, param_sharding=param_sharding)
    if mesh is not None:  # placed once: fit passes an already placed batch on without a copy
        fit_batch = parallel.put(
            fit_batch, {k: NamedSharding(mesh, _BATCH_SPEC[k]) for k in fit_batch}
        )
    res = train.fit(
        state, step, lambda _t: fit_batch, num_steps=st.steps,
        workdir=workdir, run=run, checkpoint_every=checkpoint_every, show=("mean_loss",),
        mesh=mesh, param_sharding=param_sharding, batch_spec=_BATCH_SPEC,
    )  # fmt: skip
    final = [r["mean_loss"] for r in res.history if "mean_loss" in r][-1]
    return (
        res.state.params,
        parallel.to_host(_predict(res.state.params["net"], batch["x_test"], graph=st.graph)),
        final,
    )


def _row(method, y_test, pred, final_loss, t0, keep_predictions) -> dict[str, Any]:
    rmse = np.asarray(metrics.rmse(jnp.asarray(y_test), jnp.asarray(pred, jnp.float32), axis=1),
                      np.float64)  # fmt: skip
    row = {
        "name": METHODS[method],
        "rmse": rmse.tolist(),
        "mean": float(rmse.mean()),
        "std": float(rmse.std(ddof=1)) if rmse.size > 1 else 0.0,
        "final_loss": final_loss,
        "wall_s": time.perf_counter() - t0,
    }
    if keep_predictions:
        row["pred_test"] = np.asarray(pred)
    return row


def run_methods(
    config: MultiFidelityConfig,
    tasks: list[data_lib.MultiFidelityData] | None = None,
    *,
    keep_predictions: bool = False,
    workdir: str | pathlib.Path | None = None,
) -> dict[str, Any]:
    """Trains every method of ``config`` on every run and measures the HF test RMSE.

    Each method is one :func:`fidia_jax.train.fit` of all runs at once (``run=`` the method's
    key; LF pretraining is the run ``pretrain_finetune_lf_phase``).

    Args:
      config: the comparison.
      tasks: the runs' data (default :func:`make_tasks`); all runs must share shapes.
      keep_predictions: also return each method's HF test predictions (``"pred_test"``,
        ``(runs, M)`` numpy, task units) -- for plots; not JSON-ready.
      workdir: where the fits write ``metrics.jsonl``, ``curves.png`` and their checkpoints
        (every ``config.checkpoint_every`` steps and at the end) and resume from; ``None``: no
        files.

    Returns:
      A JSON-ready dict: ``task``, ``fidelities`` (rows per fidelity), ``methods`` (key ->
      ``{"name", "rmse" (per run), "mean", "std", "ratio_vs_hf_only", "final_loss" (``None``
      for the GP baselines), "wall_s"}``) and ``wall_s``.

    Raises:
      ValueError: ``delta_oracle`` requested on data without the oracle.
      TrainingError: a non-finite loss or gradient (:func:`fidia_jax.train.fit`).
    """
    t0 = time.perf_counter()
    tasks = make_tasks(config) if tasks is None else tasks
    batch = _stack(tasks)
    if "delta_oracle" in config.methods and "y_delta" not in batch:
        raise ValueError("delta_oracle needs delta_oracle_train/test in every task")
    k = tasks[0].num_fidelities
    shape = (tasks[0].x_train.shape[1], tuple(config.hidden), k, config.activation)
    loss_kw = dict(absolute=1.0, interval=1.0, radius_penalty=0.0,
                   radius_quantile=config.radius_quantile, temperature=config.temperature,
                   margin_scale=config.margin_scale)  # fmt: skip
    st = _Statics(
        _graph(*shape), config.steps, config.learning_rate, config.weight_decay,
        losses.TrustedSubsetWeights(radius_mode="quantile", ranking=1.0, ranking_form="hinge",
                                    **loss_kw),
        losses.TrustedSubsetWeights(radius_mode="learnable", ranking=0.0, **loss_kw),
        losses.TrustedSubsetWeights(radius_mode="quantile", ranking=1.0,
                                    ranking_form="logistic", **loss_kw),
        config.radius_penalty,
    )  # fmt: skip
    params0 = _init_params(jax.random.key(config.seed), len(tasks), *shape)
    fit_keys = ("x", "x_test")
    plain = {**{n: batch[n] for n in fit_keys}, "y_fit": batch["y"], "member_fit": batch["member"]}
    rows: dict[str, dict[str, Any]] = {}
    mesh = (  # the runs split over the devices (only the trained methods need it)
        parallel.data_mesh(len(tasks), num_devices=config.num_devices)
        if any(m not in GP_METHODS for m in config.methods)
        else None
    )
    fit = functools.partial(_fit, st=st, workdir=workdir, checkpoint_every=config.checkpoint_every,
                            mesh=mesh, param_sharding=config.param_sharding)  # fmt: skip
    for method in config.methods:
        t = time.perf_counter()
        if method in GP_METHODS and not parallel.is_primary():
            continue  # scikit-learn peers: nothing to split, process 0 alone (it writes)
        if method in GP_METHODS:
            preds = []
            for r, tk in enumerate(tasks):
                with train.cpu_stage(
                    f"{method}: run {r + 1}/{len(tasks)} (scikit-learn)",
                    threads=config.baseline_threads,
                ):
                    preds.append(_GP_FUNCTIONS[method](
                        tk.x_train, tk.y_train, tk.fidelity_train, tk.x_test,
                        restarts=config.gp_restarts, seed=config.seed + r,
                    ))  # fmt: skip
            pred = np.stack(preds)
            rows[method] = _row(method, batch["y_test"], pred, None, t, keep_predictions)
            continue
        w = jnp.asarray(_method_weights(config, method))
        if method == "pretrain_finetune":
            low = {**plain, "member_fit": batch["member_low"]}
            params, _, _ = fit(params0, low, w, run=f"{method}_lf_phase")
            _, pred_std, final_loss = fit(params, plain, w, run=method)
        elif method == "delta_oracle":
            _, pred_std, final_loss = fit(
                params0, {**plain, "y_fit": batch["y_delta"]}, w, run=method
            )
            pred_std = pred_std + batch["oracle_test"]
        else:
            _, pred_std, final_loss = fit(params0, plain, w, run=method)
        pred = pred_std * batch["y_sd"][:, None] + batch["y_mu"][:, None]
        rows[method] = _row(method, batch["y_test"], pred, final_loss, t, keep_predictions)
    ref = rows["hf_only"]["mean"]
    for row in rows.values():
        row["ratio_vs_hf_only"] = row["mean"] / ref
    return {
        "task": config.task,
        "n_hf": config.n_hf,
        "fidelities": tasks[0].counts(),
        "num_runs": len(tasks),
        "methods": rows,
        "wall_s": time.perf_counter() - t0,
    }


def format_table(results: dict[str, Any]) -> str:
    """A markdown table of one :func:`run_methods` result."""
    lines = [
        f"{results['task']}: HF test RMSE over {results['num_runs']} runs, training rows "
        f"{results['fidelities']} (ratio = mean / HF-only mean; < 1 is better)",
        "| method | RMSE mean ± std | ratio vs HF-only |",
        "|---|---|---|",
    ]
    for row in results["methods"].values():
        lines.append(
            f"| {row['name']} | {row['mean']:.4g} ± {row['std']:.2g} | {row['ratio_vs_hf_only']:.3f} |"
        )
    return "\n".join(lines)


def _plot_predictions(config, tasks, results, predictions, out_png) -> pathlib.Path:
    """Run 0 of a 1-D task: the HF truth on the test inputs, the training labels of each
    fidelity and every method's HF prediction."""
    plt = train.pyplot()
    task = tasks[0]
    order = np.argsort(task.x_test[:, 0])
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    ax.plot(task.x_test[order, 0], task.y_test[order], "k-", lw=2, label="HF truth (test)")
    for f, name in enumerate(task.fidelity_names):
        sel = task.fidelity_train == f
        ax.scatter(task.x_train[sel, 0], task.y_train[sel], s=14, marker="o^sv"[f % 4],
                   label=f"{name} labels ({int(sel.sum())})", zorder=3)  # fmt: skip
    for i, (key, row) in enumerate(results["methods"].items()):
        ax.plot(task.x_test[order, 0], predictions[key][0][order], lw=1.1, color=f"C{i}",
                alpha=0.85, label=f"{key} (RMSE {row['rmse'][0]:.3g})")  # fmt: skip
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.set_title(f"{config.task}: HF predictions of run 0 (seed {config.seed})")
    ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out_png, dpi=110)
    plt.close(fig)
    return pathlib.Path(out_png)


def train_and_evaluate(config: MultiFidelityConfig, workdir: str | pathlib.Path) -> dict[str, Any]:
    """Runs :func:`run_methods` with ``workdir`` (fits resume from it), prints a table and
    writes, in ``workdir``: ``multifidelity.json`` (results plus ``config``), ``summary.json``
    (per method: RMSE mean / std and ratio to HF-only), ``rmse.png`` (the methods' RMSE as
    bars), ``predictions.png`` (1-D tasks: the methods' predictions of run 0) and the fits'
    ``metrics.jsonl`` / ``curves.png`` / ``checkpoints/``.

    Returns:
      The results of :func:`run_methods` (as written, without ``config``).
    """
    parallel.initialize_distributed()  # before any array exists; no-op without a launcher
    workdir = pathlib.Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    with train.stage(f"data: {config.task}, {config.num_seeds} run(s)"):
        tasks = make_tasks(config)
    results = run_methods(config, tasks, keep_predictions=True, workdir=workdir)
    predictions = {k: row.pop("pred_test") for k, row in results["methods"].items()}
    rows = results["methods"]
    if not parallel.is_primary():
        return results  # process 0 prints and writes (and alone ran the GP peers)
    train.print_table(
        f"{config.task}: HF test RMSE over {results['num_runs']} runs, training rows "
        f"{results['fidelities']}",
        ["method", "RMSE mean", "RMSE std", "ratio vs HF-only (< 1 better)", "final loss"],
        [[r["name"], r["mean"], r["std"], r["ratio_vs_hf_only"],
          "—" if r["final_loss"] is None else f"{r['final_loss']:.4g}"] for r in rows.values()],
    )  # fmt: skip
    write_summary(workdir / SUMMARY_FILE, results, config)
    train.write_summary(
        workdir,
        {
            "task": config.task,
            "num_runs": results["num_runs"],
            "metric": "HF test RMSE (task units)",
            "methods": {
                k: {key: r[key] for key in ("name", "mean", "std", "ratio_vs_hf_only")}
                for k, r in rows.items()
            },
        },
    )
    table = [{"method": k, "rmse": r["mean"], "rmse_std": r["std"],
              "ratio vs HF-only": r["ratio_vs_hf_only"]} for k, r in rows.items()]  # fmt: skip
    train.plot_bars(
        table, workdir / "rmse.png", label="method", values=["rmse"],
        errors={"rmse": "rmse_std"},
        title=f"{config.task}: HF test RMSE, mean ± std over {results['num_runs']} runs",
    )  # fmt: skip
    if tasks[0].x_test.shape[1] == 1:
        _plot_predictions(config, tasks, results, predictions, workdir / "predictions.png")
    return results
