"""Cross-validated LDL-DVS: one model per (fold, alpha), KL-only (alpha = 0) as the reference.

For each repeat the rows are shuffled (``numpy`` generator seeded ``seed + repeat``) and cut into
``n_folds`` folds. Features are z-scored with the training rows' mean and standard deviation of
each fold (constant features: std 1). For every fold, one model per ``alpha`` in
``config.alphas`` starts from the same initial weights (paired comparison) and is trained by
full-batch Adam on ``ldl_kl_loss + alpha * divisiveness_loss`` (``fidia_jax.losses``) over the
training rows (a 0/1 row weight, so all folds and alphas run in one ``vmap``); the test rows
are scored with the six LDL metrics and the divisiveness error (``fidia_jax.metrics``).
"""

from __future__ import annotations

import functools
import pathlib
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from fidia_jax import data, losses, metrics, models
from fidia_jax.config import write_summary
from fidia_jax.errors import DataError
from fidia_jax.projects.ldl.configs import LdlConfig

__all__ = [
    "METRICS",
    "cross_validate",
    "fit_predict",
    "format_table",
    "kfold_splits",
    "load_config_data",
    "train_and_evaluate",
]

SUMMARY_FILE = "ldl_results.json"
#: Metrics reported (all lower-is-better except cosine and intersection).
METRICS = ("divisiveness_error", *metrics.LDL_METRICS)
_ACT = {"sigmoid": jax.nn.sigmoid, "relu": jax.nn.relu, "tanh": jnp.tanh}


def kfold_splits(n: int, n_folds: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Shuffled K-fold split of ``range(n)``: ``[(train_idx, test_idx), ...]``, fold sizes
    differing by at most one (``numpy.random.default_rng(seed).permutation``).

    Raises:
      ValueError: ``n_folds < 2`` or ``n < n_folds``.
    """
    if n_folds < 2 or n < n_folds:
        raise ValueError(f"kfold_splits: need 2 <= n_folds <= n, got n_folds={n_folds}, n={n}")
    perm = np.random.default_rng(seed).permutation(n)
    folds = np.array_split(perm, n_folds)
    return [
        (np.sort(np.concatenate(folds[:i] + folds[i + 1 :])), np.sort(folds[i]))
        for i in range(n_folds)
    ]


def load_config_data(config: LdlConfig) -> data.LdlDataset:
    """The data set a config names, PCA-reduced to ``max_features`` when set."""
    if config.dataset == "synthetic":
        ds = data.synthetic_ldl_dataset(
            config.n_samples, config.n_features, config.n_labels, seed=config.seed
        )
    else:
        ds = data.load_ldl_dataset(config.dataset, config.data_dir or None)
    if 0 < config.max_features < ds.features.shape[1]:
        x = ds.features.astype(np.float64)
        x = x - x.mean(axis=0)
        _, _, vt = np.linalg.svd(x, full_matrices=False)
        ds = data.LdlDataset(
            ds.name, (x @ vt[: config.max_features].T).astype(np.float32), ds.labels, ds.pos, ds.neg
        )
    return ds


def _standardize(x: np.ndarray, train_idx: np.ndarray) -> np.ndarray:
    mu = x[train_idx].mean(axis=0)
    sd = x[train_idx].std(axis=0)
    sd = np.where(sd > 1e-8, sd, 1.0)
    return ((x - mu) / sd).astype(np.float32)


def _graphdef(d_in: int, c: int, config: LdlConfig):
    model = models.MLP(
        d_in, config.hidden, c, activation=_ACT[config.activation], rngs=nnx.Rngs(params=0)
    )
    return nnx.split(model)[0]


@functools.partial(jax.jit, static_argnames=("graphdef", "config", "c", "d_in"))
def _fit_predict_folds(
    xs_fxnxd, d_nxc, w_fxn, pos, neg, alphas_a, keys_f, *, graphdef, config, c, d_in
):
    """Trains one model per (fold, alpha); returns predictions ``(F, A, N, c)`` on every row and
    the training-loss curves ``(F, A, epochs)``."""
    opt = optax.adam(config.learning_rate)
    act = _ACT[config.activation]

    def init(key):
        model = models.MLP(d_in, config.hidden, c, activation=act, rngs=nnx.Rngs(params=key))
        return nnx.split(model)[1]

    def predict(params, x):
        return jax.nn.softmax(nnx.merge(graphdef, params)(x), axis=-1)

    def train_one(x_nxd, w_n, alpha, params):
        def loss_fn(p):
            return losses.ldl_dvs_loss(
                d_nxc,
                predict(p, x_nxd),
                pos,
                neg,
                alpha=alpha,
                k=config.k,
                mode=config.mode,
                sample_weight=w_n,
            )

        def step(carry, _):
            p, s = carry
            value, grads = jax.value_and_grad(loss_fn)(p)
            updates, s = opt.update(grads, s, p)
            return (optax.apply_updates(p, updates), s), value

        (params, _), curve = jax.lax.scan(
            step, (params, opt.init(params)), None, length=config.epochs
        )
        return predict(params, x_nxd), curve

    def per_fold(x_nxd, w_n, key):
        params = init(key)  # the same start for every alpha (paired comparison)
        return jax.vmap(train_one, in_axes=(None, None, 0, None))(x_nxd, w_n, alphas_a, params)

    return jax.vmap(per_fold)(xs_fxnxd, w_fxn, keys_f)


def fit_predict(
    x_train,
    d_train,
    x_test,
    pos,
    neg,
    config: LdlConfig,
    *,
    seed: int = 0,
    key: jax.Array | None = None,
):
    """Trains one model per ``config.alphas`` on ``(x_train, d_train)`` (features used as given)
    and predicts ``x_test``; every alpha starts from the weights drawn with ``key`` (default
    ``jax.random.key(seed)``).

    Returns:
      ``(predictions (A, N_test, c), loss_curves (A, epochs))`` as numpy arrays.

    Raises:
      ValueError: shapes disagree.
    """
    x_train, x_test = np.asarray(x_train, np.float32), np.asarray(x_test, np.float32)
    d_train = np.asarray(d_train, np.float32)
    if x_train.ndim != 2 or x_test.ndim != 2 or x_train.shape[1] != x_test.shape[1]:
        raise ValueError(
            f"fit_predict: x_train {x_train.shape} and x_test {x_test.shape} must "
            "be 2-D with the same number of features"
        )
    if d_train.ndim != 2 or d_train.shape[0] != x_train.shape[0]:
        raise ValueError(
            f"fit_predict: d_train {d_train.shape} must be (N_train, c) with "
            f"N_train = {x_train.shape[0]}"
        )
    x = np.concatenate([x_train, x_test])[None]
    d = np.concatenate(
        [d_train, np.full((len(x_test), d_train.shape[1]), 1.0 / d_train.shape[1], np.float32)]
    )
    w = np.concatenate([np.ones(len(x_train)), np.zeros(len(x_test))]).astype(np.float32)[None]
    c, d_in = d.shape[1], x.shape[2]
    preds, curves = _fit_predict_folds(
        x,
        d,
        w,
        jnp.asarray(pos, jnp.float32),
        jnp.asarray(neg, jnp.float32),
        jnp.asarray(config.alphas, jnp.float32),
        (jax.random.key(seed) if key is None else key)[None],
        graphdef=_graphdef(d_in, c, config),
        config=config,
        c=c,
        d_in=d_in,
    )
    return np.asarray(preds[0, :, len(x_train) :]), np.asarray(curves[0])


def cross_validate(config: LdlConfig, dataset: data.LdlDataset | None = None) -> dict[str, Any]:
    """Runs the repeated K-fold comparison of ``config.alphas`` on one data set.

    Args:
      config: the run.
      dataset: use this set instead of loading ``config.dataset``.

    Returns:
      A JSON-ready dict: ``dataset``, ``n_samples``, ``n_features``, ``n_labels``, ``alphas``,
      ``folds`` (per (repeat, fold, alpha): the metrics), ``summary`` (``str(alpha)`` -> metric
      -> ``{"mean", "std"}`` over folds), ``ratio_vs_kl`` (``str(alpha)`` -> metric -> mean /
      KL-only mean), ``loss_curves`` (``str(alpha)`` -> mean training-loss curve, at most 100
      points), ``wall_s``.

    Raises:
      DataError: the data set cannot be loaded or has no polarity preset.
    """
    ds = dataset if dataset is not None else load_config_data(config)
    if ds.pos is None or ds.neg is None:
        raise DataError(
            f"data set {ds.name!r} has no polarity preset (pos/neg; see "
            "fidia_jax.data.LDL_POLARITY)"
        )
    x, d = ds.features, ds.labels
    n, c = d.shape
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    curves_sum = None
    graphdef = _graphdef(x.shape[1], c, config)
    key = jax.random.key(config.seed)
    alphas = jnp.asarray(config.alphas, jnp.float32)
    for repeat in range(1, config.n_repeats + 1):
        splits = kfold_splits(n, config.n_folds, config.seed + repeat)
        if config.folds_per_repeat:
            splits = splits[: config.folds_per_repeat]
        xs = np.stack([_standardize(x, tr) for tr, _ in splits])
        w = np.zeros((len(splits), n), np.float32)
        for f, (tr, _) in enumerate(splits):
            w[f, tr] = 1.0
        keys = jax.random.split(jax.random.fold_in(key, repeat), len(splits))
        preds, curves = _fit_predict_folds(
            xs,
            d,
            w,
            ds.pos,
            ds.neg,
            alphas,
            keys,
            graphdef=graphdef,
            config=config,
            c=c,
            d_in=x.shape[1],
        )
        preds, curves = np.asarray(preds), np.asarray(curves)
        curves_sum = curves.sum(0) if curves_sum is None else curves_sum + curves.sum(0)
        for f, (_, te) in enumerate(splits):
            for a, alpha in enumerate(config.alphas):
                vals = metrics.ldl_metrics(d[te], preds[f, a, te], ds.pos, ds.neg)
                rows.append({"repeat": repeat, "fold": f + 1, "alpha": float(alpha), **vals})
    n_runs = len(rows) // len(config.alphas)
    summary: dict[str, dict[str, dict[str, float]]] = {}
    for alpha in config.alphas:
        sel = [r for r in rows if r["alpha"] == float(alpha)]
        summary[str(float(alpha))] = {
            m: {
                "mean": float(np.mean([r[m] for r in sel])),
                "std": float(np.std([r[m] for r in sel])),
            }
            for m in METRICS
        }
    base = summary["0.0"]
    ratio = {
        a: {m: s[m]["mean"] / base[m]["mean"] if base[m]["mean"] else float("nan") for m in METRICS}
        for a, s in summary.items()
    }
    stride = max(1, config.epochs // 100)
    mean_curves = curves_sum / n_runs
    return {
        "dataset": ds.name,
        "n_samples": int(n),
        "n_features": int(x.shape[1]),
        "n_labels": int(c),
        "alphas": [float(a) for a in config.alphas],
        "runs_per_alpha": n_runs,
        "folds": rows,
        "summary": summary,
        "ratio_vs_kl": ratio,
        "loss_curves": {
            str(float(a)): mean_curves[i, ::stride].tolist() for i, a in enumerate(config.alphas)
        },
        "wall_s": time.perf_counter() - t0,
    }


def format_table(results: dict[str, Any]) -> str:
    """One table: per alpha, each metric's mean +- std and its ratio to KL-only."""
    head = (
        f"{results['dataset']} (N={results['n_samples']}, c={results['n_labels']}, "
        f"{results['runs_per_alpha']} folds per alpha)"
    )
    lines = [head, "alpha   " + "  ".join(f"{m[:12]:>22}" for m in METRICS)]
    for a, s in results["summary"].items():
        r = results["ratio_vs_kl"][a]
        cells = [f"{s[m]['mean']:.4f}±{s[m]['std']:.4f} ({r[m]:.3f})" for m in METRICS]
        lines.append(f"{a:<7} " + "  ".join(f"{c:>22}" for c in cells))
    return "\n".join(lines)


def train_and_evaluate(config: LdlConfig, workdir: str | pathlib.Path) -> dict[str, Any]:
    """Runs :func:`cross_validate`, prints its table and writes ``workdir/ldl_results.json``
    (atomically; the results plus the ``config``).

    Returns:
      The results dict (as written, without ``config``).

    Raises:
      DataError: as :func:`cross_validate`.
    """
    results = cross_validate(config)
    print(format_table(results))
    out = pathlib.Path(workdir) / SUMMARY_FILE
    write_summary(out, results, config)
    return results
