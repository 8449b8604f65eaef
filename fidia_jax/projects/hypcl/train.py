"""HypCL vs baselines on a class-incremental stream, plus the tree-depth sweep.

:func:`train_and_evaluate` builds the stream (frozen AlexNet features of the digits, or the
synthetic hierarchical mixture), runs every configured method on ``num_orders`` class orders,
reports average accuracy / last accuracy / average forgetting (:func:`fidia_jax.metrics.
continual_metrics`), then (``sweep_depths``) runs HypCL and the Euclidean adapter on synthetic
trees of growing depth. Writes ``workdir/hypcl.json`` (atomically) and prints the tables.
"""

from __future__ import annotations

import pathlib
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from fidia_jax import data as data_lib
from fidia_jax import metrics, models, train
from fidia_jax.config import write_summary
from fidia_jax.projects.hypcl._continual import (
    ContinualData,
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
    "train_and_evaluate",
]

SUMMARY_FILE = "hypcl.json"
FEATURE_CACHE = "digit_alexnet_conv5.npz"


def digit_features(workdir: str | pathlib.Path | None = None, batch: int = 128):
    """Frozen AlexNet conv5 features ``(1797, 256)`` of the digits at 64x64, and labels.

    Gray images are repeated to 3 channels (:func:`fidia_jax.data.load_digit_images`,
    :func:`fidia_jax.models.alexnet_embedding`); computed in fixed-size batches (one compile)
    and cached in ``workdir/digit_alexnet_conv5.npz`` when ``workdir`` is given.
    """
    cache = None if workdir is None else pathlib.Path(workdir) / FEATURE_CACHE
    if cache is not None and cache.is_file():
        with np.load(cache) as f:
            return f["features"], f["labels"]
    images, labels = data_lib.load_digit_images(size=64)
    embed = jax.jit(lambda x: models.alexnet_embedding(jnp.repeat(x[..., None], 3, axis=-1)))
    out = []
    for i in range(0, len(images), batch):
        b = images[i : i + batch]
        pad = batch - len(b)
        if pad:
            b = np.concatenate([b, np.zeros((pad, *b.shape[1:]), b.dtype)])
        out.append(np.asarray(embed(b))[: batch - pad])
    feats = np.concatenate(out).astype(np.float32)
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(".tmp.npz")
        np.savez(tmp, features=feats, labels=labels)
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
    tr, te = stratified_split(y, config.test_fraction, config.seed)
    for order in orders:
        tasks = class_incremental_split(order, classes_per_task)
        yield standardize_like_first_task(ContinualData(x[tr], y[tr], x[te], y[te], tasks))


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
) -> dict[str, Any]:
    """Runs ``methods`` on every order; per method the accuracy matrices and the metrics
    (mean and std over orders). Each (order, method) is shown as a stage (``label`` first);
    with ``metrics_path`` every training step's loss is appended to that ``metrics.jsonl``
    (run ``"<method>/order<o>"``, steps counted over the tasks)."""
    per = {m: [] for m in methods}
    trainers: dict[str, Any] = {}
    for o, stream in enumerate(_streams(x, y, config, orders, classes_per_task)):
        sizes = [int(np.isin(stream.y_te, t).sum()) for t in stream.tasks]
        for m in methods:
            curve: list[float] = []
            with train.stage(f"{label}class order {o + 1}/{len(orders)}: {METHODS[m]}"):
                acc = run_method(
                    m, stream, config, config.seed + 1000 * o, trainers, dim, losses_out=curve
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
        row = {"orders": runs}
        for key in ("average_accuracy", "last_accuracy", "average_forgetting"):
            vals = [r[key] for r in runs]
            row[key] = float(np.mean(vals))
            row[key + "_std"] = float(np.std(vals))
        out[m] = row
    return out


def format_table(rows: dict[str, Any], title: str) -> str:
    """Markdown table: a row per method, mean ± std over orders."""
    lines = [title, "| method | average acc. | last acc. | avg. forgetting |", "|---|---|---|---|"]
    for m, r in rows.items():
        cells = [
            f"{r[k]:.3f} ± {r[k + '_std']:.3f}"
            for k in ("average_accuracy", "last_accuracy", "average_forgetting")
        ]
        lines.append(f"| {METHODS[m]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _fmt(row: dict[str, Any], key: str) -> str:
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
    """The console tables, ``summary.json`` and the charts."""
    rows = results["methods"]
    train.print_table(
        f"HypCL, {config.task}: {len(results['orders'])} class orders, mean ± std over orders",
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
    t0 = time.time()
    workdir = pathlib.Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    metrics_path = workdir / "metrics.jsonl"
    metrics_path.unlink(missing_ok=True)  # a rerun writes its own curves (no resume here)
    if config.task == "digits":
        with train.stage("frozen AlexNet conv5 features of the digits (cached in the workdir)"):
            x, y = digit_features(workdir)
    else:
        x, y = synthetic_task(config, config.synth_depth)
    num_classes = int(y.max()) + 1
    orders = class_orders(num_classes, config.num_orders, config.seed)
    rows = run_stream(
        x, y, config, config.methods, orders, config.classes_per_task, metrics_path=metrics_path
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
    results: dict[str, Any] = {
        "task": config.task,
        "orders": orders,
        "methods": rows,
        "gap_average_accuracy": gap,
        "hypcl_above_euclidean": bool(gap > 0),
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
    write_summary(workdir / SUMMARY_FILE, results, config)
    _report(results, config, workdir)
    return results
