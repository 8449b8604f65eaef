"""Cross-validated LDL-DVS: one model per (fold, alpha), KL-only (alpha = 0) as the reference.

For each repeat the rows are shuffled (``numpy`` generator seeded ``seed + repeat``) and cut into
``n_folds`` folds. Every fitted preprocessing step is fitted on each fold's training rows only
and applied to its test rows: the optional PCA to ``max_features`` components, then z-scoring
with the training rows' mean and standard deviation (constant features: std 1). For every fold, one model per ``alpha`` in
``config.alphas`` starts from the same initial weights (paired comparison) and is trained by
full-batch Adam on ``ldl_kl_loss + alpha * divisiveness_loss`` (``losses.py``) over the
training rows (a 0/1 row weight, so all folds and alphas of a repeat run in one ``vmap``, one
:func:`fidia_jax.train.fit` per repeat); the test rows are scored with the six LDL metrics and
the divisiveness error (``fidia_jax.metrics``).
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
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from fidia_jax import _checks, metrics, models, parallel, train
from fidia_jax.config import write_summary
from fidia_jax.errors import DataError
from fidia_jax.projects.ldl import data, losses
from fidia_jax.projects.ldl.configs import LdlConfig

__all__ = [
    "METRICS",
    "baseline_predict",
    "choose_knn_k",
    "cross_validate",
    "fit_predict",
    "format_table",
    "kfold_splits",
    "load_config_data",
    "paired_tests",
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
    """The data set a config names, features as loaded (no fitted step here).

    ``config.max_features`` is applied inside :func:`cross_validate`, by a PCA fitted on each
    fold's training rows only (:func:`fold_features`), never on the held-out rows.
    """
    if config.dataset == "synthetic":
        return data.synthetic_ldl_dataset(
            config.n_samples, config.n_features, config.n_labels, seed=config.seed
        )
    return data.load_ldl_dataset(config.dataset, config.data_dir or None)


def fold_features(x: np.ndarray, train_idx: np.ndarray, max_features: int = 0) -> np.ndarray:
    """Every row's features as the fold's model sees them; every step fitted on ``train_idx``.

    When ``0 < max_features < F``: project on the top ``max_features`` principal components of
    the training rows (centred with their mean; the sign of each component fixed so that its
    largest-magnitude loading is positive, so the result does not depend on the SVD's sign
    choice). Then z-score with the training rows' mean and standard deviation (std below
    ``1e-8``: 1). The held-out rows are only transformed, never used in a fit.

    Returns:
      ``(N, F')`` float32, ``F' = max_features`` or ``F``.
    """
    x = np.asarray(x, np.float64)
    xt = x[train_idx]
    if 0 < max_features < x.shape[1]:
        mu = xt.mean(axis=0)
        _, _, vt = np.linalg.svd(xt - mu, full_matrices=False)
        vt = vt[:max_features]
        big = np.argmax(np.abs(vt), axis=1)
        vt = vt * np.sign(vt[np.arange(len(vt)), big])[:, None]
        x = (x - mu) @ vt.T
        xt = x[train_idx]
    mu = xt.mean(axis=0)
    sd = xt.std(axis=0)
    sd = np.where(sd > 1e-8, sd, 1.0)
    return ((x - mu) / sd).astype(np.float32)


def baseline_predict(name: str, x_train, d_train, x_test, *, k: int = 10) -> np.ndarray:
    """A simple LDL baseline fitted on ``(x_train, d_train)``, predicting ``x_test``.

    * ``"aa_knn"``: the mean label distribution of the ``k`` nearest training rows (Euclidean,
      scikit-learn ``NearestNeighbors``): AA-kNN (Geng, TKDE 2016; PyLDL's ``AA_KNN``).
    * ``"ridge"``: multi-output ridge regression (scikit-learn ``RidgeCV``, one penalty from
      ``10^-2 .. 10^4`` chosen by leave-one-out), the prediction clipped at 0 and divided by its
      row sum (a row clipped to all zeros becomes uniform).

    Args:
      name: ``"aa_knn"`` or ``"ridge"``.
      x_train: ``(N, F)`` features (used as given: standardise them first).
      d_train: ``(N, c)`` label distributions.
      x_test: ``(M, F)``.
      k: neighbours of ``aa_knn`` (at most ``N``).

    Returns:
      ``(M, c)`` float64 label distributions (rows >= 0, summing to 1).

    Raises:
      ValueError: an unknown ``name``, shapes that disagree or ``k`` not in ``[1, N]``.
      DataError: ``d_train`` is not a set of label distributions, or a NaN/inf in ``x_train`` /
        ``x_test`` (naming it).
    """
    from sklearn.linear_model import RidgeCV
    from sklearn.neighbors import NearestNeighbors

    x_train, x_test = np.asarray(x_train, np.float64), np.asarray(x_test, np.float64)
    d_train = np.asarray(d_train, np.float64)
    if x_train.ndim != 2 or x_test.ndim != 2 or x_train.shape[1] != x_test.shape[1]:
        raise ValueError(
            f"baseline_predict: x_train {x_train.shape} and x_test {x_test.shape} must be 2-D "
            "with the same number of features"
        )
    if d_train.ndim != 2 or d_train.shape[0] != x_train.shape[0]:
        raise ValueError(
            f"baseline_predict: d_train {d_train.shape} must be (N, c), N = {x_train.shape[0]}"
        )
    data.check_label_distributions(d_train, "baseline_predict: d_train")
    _checks.assert_finite(x_train, "x_train", where="baseline_predict")
    _checks.assert_finite(x_test, "x_test", where="baseline_predict")
    if name == "aa_knn":
        if not 1 <= k <= len(x_train):
            raise ValueError(f"baseline_predict: need 1 <= k <= {len(x_train)}, got k={k}")
        _, idx = NearestNeighbors(n_neighbors=k).fit(x_train).kneighbors(x_test)
        return d_train[idx].mean(axis=1)
    if name == "ridge":
        model = RidgeCV(alphas=np.logspace(-2, 4, 13)).fit(x_train, d_train)
        p = np.clip(model.predict(x_test), 0.0, None)
        s = p.sum(axis=1, keepdims=True)
        c = d_train.shape[1]
        return np.where(s > 0, p / np.where(s > 0, s, 1.0), 1.0 / c)
    raise ValueError(f"baseline_predict: unknown baseline {name!r}; known: aa_knn, ridge")


#: Fraction of a training fold held out by :func:`choose_knn_k`.
KNN_VALIDATION_FRACTION = 0.2


def choose_knn_k(
    x_train,
    d_train,
    pos,
    neg,
    *,
    grid=(3, 5, 10, 20),
    metric: str = "divisiveness_error",
    seed: int | list[int] = 0,
    val_fraction: float = KNN_VALIDATION_FRACTION,
) -> tuple[int, dict[int, float]]:
    """``aa_knn``'s ``k``, chosen on an inner split of one fold's training rows only.

    The rows are permuted by ``np.random.default_rng(seed).permutation(N)``; the first
    ``ceil(val_fraction * N)`` are the inner validation part, the rest the inner fitting part.
    For every ``k`` of ``grid`` with ``k <=`` the fitting part's size, :func:`baseline_predict`
    fitted on the fitting part predicts the validation part, scored by ``metric`` (one of
    :data:`METRICS`, from :func:`fidia_jax.metrics.ldl_metrics`; lowest wins, highest for
    cosine and intersection; ties: the first in grid order). Nothing outside the given rows is
    read, so the fold's test rows cannot move the choice.

    Args:
      x_train: ``(N, F)`` the fold's (standardised) training features.
      d_train: ``(N, c)`` their label distributions.
      pos, neg: the data set's polarity label indices (for ``divisiveness_error``).
      grid: candidate ``k`` values (integers >= 1).
      metric: the selection metric.
      seed: the inner split's seed (an int or a list of ints, as ``np.random.default_rng``
        takes).
      val_fraction: in ``(0, 1)``.

    Returns:
      ``(k, scores)``: the chosen ``k`` and the validation score of every ``k`` tried.

    Raises:
      ValueError: an unknown ``metric``, ``val_fraction`` outside ``(0, 1)``, fewer than 2
        rows, or no ``k`` of ``grid`` fits the inner fitting part.
    """
    if metric not in METRICS:
        raise ValueError(f"choose_knn_k: metric must be one of {METRICS}, got {metric!r}")
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"choose_knn_k: val_fraction must be in (0, 1), got {val_fraction}")
    x_train = np.asarray(x_train, np.float64)
    d_train = np.asarray(d_train, np.float64)
    n = len(x_train)
    if n < 2:
        raise ValueError(f"choose_knn_k: need at least 2 training rows, got {n}")
    perm = np.random.default_rng(seed).permutation(n)
    n_val = min(n - 1, max(1, int(np.ceil(val_fraction * n))))
    val, fit = perm[:n_val], perm[n_val:]
    ks = [int(k) for k in grid if 1 <= int(k) <= len(fit)]
    if not ks:
        raise ValueError(
            f"choose_knn_k: no k of grid {tuple(grid)} is in [1, {len(fit)}] (inner fitting rows)"
        )
    sign = -1.0 if _higher_is_better(metric) else 1.0
    scores: dict[int, float] = {}
    for k in ks:
        p = baseline_predict("aa_knn", x_train[fit], d_train[fit], x_train[val], k=k)
        scores[k] = float(metrics.ldl_metrics(d_train[val], p, pos, neg)[metric])
    best = min(ks, key=lambda k: (sign * scores[k], ks.index(k)))
    return best, scores


def paired_tests(a_folds, b_folds) -> dict[str, float]:
    """Paired comparison of two models' per-fold scores of one metric (same folds).

    Returns:
      ``{"mean_diff", "t_p", "wilcoxon_p", "n"}``: mean of ``a - b``, the two-sided p-values
      of the paired t-test (``scipy.stats.ttest_rel``) and of the Wilcoxon signed-rank test
      (``scipy.stats.wilcoxon``; ``nan`` when every difference is 0), and the number of pairs.

    Raises:
      ValueError: the two lists differ in length or have fewer than 2 entries.
    """
    from scipy import stats

    a, b = np.asarray(a_folds, np.float64), np.asarray(b_folds, np.float64)
    if a.shape != b.shape or a.ndim != 1 or len(a) < 2:
        raise ValueError(
            f"paired_tests: need two 1-D lists of equal length >= 2, got {a.shape}, {b.shape}"
        )
    diff = a - b
    t_p = float(stats.ttest_rel(a, b).pvalue) if np.any(diff != diff[0]) else float("nan")
    w_p = float(stats.wilcoxon(a, b).pvalue) if np.any(diff != 0) else float("nan")
    return {"mean_diff": float(diff.mean()), "t_p": t_p, "wilcoxon_p": w_p, "n": int(len(a))}


def _graphdef(d_in: int, c: int, config: LdlConfig):
    model = models.MLP(
        d_in, config.hidden, c, activation=_ACT[config.activation], rngs=nnx.Rngs(params=0)
    )
    return nnx.split(model)[0]


#: The batch's layout on the mesh: the rows (axis 1 of the per-fold features and weights, axis 0
#: of the targets) split over ``"data"``; the label poles and the alphas replicated.
_BATCH_SPEC = {"x": P(None, "data"), "w": P(None, "data"), "d": P("data"),
               "pos": P(), "neg": P(), "alphas": P()}  # fmt: skip


@functools.lru_cache(maxsize=8)
def _train_step(graphdef, config: LdlConfig, mesh=None):
    """Full-batch Adam on every (fold, alpha) model at once (cached per model graph, config and
    mesh; with ``mesh`` the rows are split over its ``"data"`` axis, :data:`_BATCH_SPEC`).

    The state's parameters have leading axes ``(F, A)``; the loss is the sum of the models'
    ``ldl_dvs_loss`` (independent models: each gets its own gradient). The state's
    ``model_state`` ``{"t", "loss_FxAxE"}`` records every model's training loss per epoch.
    """
    tx = optax.adam(config.learning_rate)

    def model_loss(params, x_nxd, w_n, alpha, batch):
        return losses.ldl_dvs_loss(
            batch["d"], _predict(graphdef, params, x_nxd), batch["pos"], batch["neg"],
            alpha=alpha, k=config.k, mode=config.mode, sample_weight=w_n,
        )  # fmt: skip

    def loss_fn(params_fxa, record, batch):
        def per_fold(p_a, x_nxd, w_n):
            return jax.vmap(lambda p, a: model_loss(p, x_nxd, w_n, a, batch))(p_a, batch["alphas"])

        loss_fxa = jax.vmap(per_fold)(params_fxa, batch["x"], batch["w"])
        t = record["t"]
        record = {"t": t + 1, "loss_FxAxE": record["loss_FxAxE"].at[:, :, t].set(loss_fxa)}
        return jnp.sum(loss_fxa), record

    return tx, train.make_train_step(
        loss_fn, tx, has_state=True, mesh=mesh, param_sharding=config.param_sharding,
        batch_spec=_BATCH_SPEC,
    )  # fmt: skip


def _predict(graphdef, params, x):
    return jax.nn.softmax(nnx.merge(graphdef, params)(x), axis=-1)


@functools.partial(jax.jit, static_argnames=("graphdef", "config", "c", "d_in"))
def _init_folds(keys_f, alphas_a, *, graphdef, config, c, d_in):
    """One initial model per fold (key), the same for every alpha: leaves ``(F, A, ...)``."""
    act = _ACT[config.activation]

    def init(key):
        model = models.MLP(d_in, config.hidden, c, activation=act, rngs=nnx.Rngs(params=key))
        params = nnx.split(model)[1]
        return jax.tree.map(lambda v: jnp.broadcast_to(v, (alphas_a.shape[0], *v.shape)), params)

    return jax.vmap(init)(keys_f)


@functools.partial(jax.jit, static_argnames="graphdef")
def _predict_folds(params_fxa, xs_fxnxd, *, graphdef):
    """Every (fold, alpha) model's predictions ``(F, A, N, c)`` on its fold's rows."""
    per_fold = jax.vmap(lambda p, x: _predict(graphdef, p, x), in_axes=(0, None))
    return jax.vmap(per_fold)(params_fxa, xs_fxnxd)


def _fit_predict_folds(
    xs_fxnxd, d_nxc, w_fxn, pos, neg, alphas_a, keys_f, *, graphdef, config, c, d_in,
    workdir=None, run="train", mesh=None,
):  # fmt: skip
    """Trains one model per (fold, alpha) (:func:`fidia_jax.train.fit`, ``config.epochs``
    full-batch steps; with ``mesh`` the rows split over its devices); returns predictions
    ``(F, A, N, c)`` on every row and the training-loss curves ``(F, A, epochs)`` (numpy)."""
    tx, step = _train_step(graphdef, config, mesh)
    params = _init_folds(keys_f, alphas_a, graphdef=graphdef, config=config, c=c, d_in=d_in)
    num_f, num_a = xs_fxnxd.shape[0], alphas_a.shape[0]
    record = {"t": jnp.zeros((), jnp.int32),
              "loss_FxAxE": jnp.zeros((num_f, num_a, config.epochs), jnp.float32)}  # fmt: skip
    batch = {"x": jnp.asarray(xs_fxnxd), "w": jnp.asarray(w_fxn), "d": jnp.asarray(d_nxc),
             "pos": jnp.asarray(pos), "neg": jnp.asarray(neg), "alphas": jnp.asarray(alphas_a)}  # fmt: skip
    state = train.init_train_state(
        params, tx, model_state=record, mesh=mesh, param_sharding=config.param_sharding
    )
    if mesh is not None:  # placed once: fit passes an already placed batch on without a copy
        batch = parallel.put(batch, {k: NamedSharding(mesh, v) for k, v in _BATCH_SPEC.items()})
    res = train.fit(
        state, step, lambda _t: batch, num_steps=config.epochs, workdir=workdir, run=run,
        mesh=mesh, param_sharding=config.param_sharding, batch_spec=_BATCH_SPEC,
    )  # fmt: skip
    preds = _predict_folds(res.state.params, batch["x"], graphdef=graphdef)
    return parallel.to_host((preds, res.state.model_state["loss_FxAxE"]))


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
      DataError: a row of ``d_train`` that is not a label distribution (negative, all zero, or
        not summing to 1 within ``data.ROW_SUM_ATOL``: nothing is renormalised silently), or a
        NaN/inf in ``x_train`` / ``x_test`` (naming it).
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
    data.check_label_distributions(d_train, "fit_predict: d_train")
    _checks.assert_finite(x_train, "x_train", where="fit_predict")
    _checks.assert_finite(x_test, "x_test", where="fit_predict")
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


def cross_validate(
    config: LdlConfig,
    dataset: data.LdlDataset | None = None,
    *,
    workdir: str | pathlib.Path | None = None,
) -> dict[str, Any]:
    """Runs the repeated K-fold comparison of ``config.alphas`` on one data set.

    Each repeat is one :func:`fidia_jax.train.fit` of all its (fold, alpha) models at once
    (``run="repeat<r>"``; its loss is the sum over those models), data-parallel: the rows are
    split over a :func:`fidia_jax.parallel.data_mesh` of ``config.num_devices`` devices (``0``:
    all; the rows padded to a multiple of the device count with rows of weight 0, which change
    no loss), the models placed by ``config.param_sharding``. The
    closed-form baselines run on process 0 only (on another process of a multi-process run the
    result has no baseline entries; only process 0 writes files).

    Args:
      config: the run.
      dataset: use this set instead of loading ``config.dataset``.
      workdir: where the fits write ``metrics.jsonl``, ``curves.png`` and checkpoints, and
        resume from; ``None``: no files.

    Returns:
      A JSON-ready dict: ``dataset``, ``n_samples``, ``n_features``, ``n_labels``, ``alphas``,
      ``folds`` (per (repeat, fold, alpha): the metrics), ``summary`` (``str(alpha)`` -> metric
      -> ``{"mean", "std"}`` over folds), ``ratio_vs_kl`` (``str(alpha)`` -> metric -> mean /
      KL-only mean), ``baseline_folds`` / ``baseline_summary`` (the same for each of
      ``config.baselines``, fitted on each fold's standardised training rows; each ``aa_knn``
      fold row also holds ``knn_k``, chosen by :func:`choose_knn_k` on an inner split of that
      fold's training rows (seed ``[seed, repeat, fold index from 0]``) unless ``config.knn_k_grid`` is
      empty),
      ``paired_vs_baselines`` (``str(alpha)`` -> baseline -> metric -> :func:`paired_tests` of
      the model's per-fold scores minus the baseline's; empty with a single fold), ``loss_curves`` (``str(alpha)`` -> mean training-loss curve, at most 100
      points), ``wall_s``.

    Raises:
      DataError: the data set cannot be loaded or has no polarity preset.
      TrainingError: a non-finite loss or gradient (:func:`fidia_jax.train.fit`).
    """
    ds = dataset if dataset is not None else load_config_data(config)
    if ds.pos is None or ds.neg is None:
        raise DataError(
            f"data set {ds.name!r} has no polarity preset (pos/neg; see "
            "fidia_jax.data.LDL_POLARITY)"
        )
    x, d = ds.features, ds.labels
    n, c = d.shape
    # the rows are split over the devices: pad them to a multiple of the device count with
    # rows of weight 0 (uniform targets, zero features), which add nothing to any loss
    n_dev = jax.device_count() if config.num_devices <= 0 else config.num_devices
    pad = -n % min(n_dev, jax.device_count())
    mesh = parallel.data_mesh(n + pad, num_devices=config.num_devices)
    d_pad = np.concatenate([d, np.full((pad, c), 1.0 / c, d.dtype)])
    # closed-form baselines have nothing to split: process 0 alone (it writes the results)
    baselines = config.baselines if parallel.is_primary() else ()
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    base_rows: list[dict[str, Any]] = []
    curves_sum = None
    d_in = min(config.max_features, x.shape[1]) if config.max_features else x.shape[1]
    graphdef = _graphdef(d_in, c, config)
    key = jax.random.key(config.seed)
    alphas = jnp.asarray(config.alphas, jnp.float32)
    for repeat in range(1, config.n_repeats + 1):
        splits = kfold_splits(n, config.n_folds, config.seed + repeat)
        if config.folds_per_repeat:
            splits = splits[: config.folds_per_repeat]
        xs = np.stack([fold_features(x, tr, config.max_features) for tr, _ in splits])
        w = np.zeros((len(splits), n), np.float32)
        for f, (tr, _) in enumerate(splits):
            w[f, tr] = 1.0
        keys = jax.random.split(jax.random.fold_in(key, repeat), len(splits))
        preds, curves = _fit_predict_folds(
            np.pad(xs, ((0, 0), (0, pad), (0, 0))),
            d_pad,
            np.pad(w, ((0, 0), (0, pad))),
            ds.pos,
            ds.neg,
            alphas,
            keys,
            graphdef=graphdef,
            config=config,
            c=c,
            d_in=d_in,
            workdir=workdir,
            run=f"repeat{repeat}",
            mesh=mesh,
        )
        preds = preds[:, :, :n]
        curves_sum = curves.sum(0) if curves_sum is None else curves_sum + curves.sum(0)
        for f, (_, te) in enumerate(splits):
            for a, alpha in enumerate(config.alphas):
                vals = metrics.ldl_metrics(d[te], preds[f, a, te], ds.pos, ds.neg)
                rows.append({"repeat": repeat, "fold": f + 1, "alpha": float(alpha), **vals})
        if not baselines:
            continue
        with train.cpu_stage(
            f"repeat {repeat}: baselines {', '.join(baselines)} on {len(splits)} folds"
        ):
            for f, (tr, te) in enumerate(splits):
                for name in baselines:
                    extra: dict[str, Any] = {}
                    k = config.knn_k
                    if name == "aa_knn" and config.knn_k_grid:  # training rows only
                        k, _ = choose_knn_k(
                            xs[f, tr],
                            d[tr],
                            ds.pos,
                            ds.neg,
                            grid=config.knn_k_grid,
                            metric=config.knn_k_metric,
                            seed=[config.seed, repeat, f],
                        )
                    if name == "aa_knn":
                        extra["knn_k"] = int(k)
                    p = baseline_predict(name, xs[f, tr], d[tr], xs[f, te], k=k)
                    vals = metrics.ldl_metrics(d[te], p, ds.pos, ds.neg)
                    base_rows.append(
                        {"repeat": repeat, "fold": f + 1, "baseline": name, **vals, **extra}
                    )
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
    baseline_summary = {
        name: {
            m: {
                "mean": float(np.mean([r[m] for r in base_rows if r["baseline"] == name])),
                "std": float(np.std([r[m] for r in base_rows if r["baseline"] == name])),
            }
            for m in METRICS
        }
        for name in baselines
    }
    paired: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    if n_runs >= 2:
        for alpha in config.alphas:
            model = [r for r in rows if r["alpha"] == float(alpha)]
            paired[str(float(alpha))] = {
                name: {
                    m: paired_tests(
                        [r[m] for r in model],
                        [r[m] for r in base_rows if r["baseline"] == name],
                    )
                    for m in METRICS
                }
                for name in baselines
            }
    stride = max(1, config.epochs // 100)
    mean_curves = curves_sum / n_runs
    return {
        "dataset": ds.name,
        "n_samples": int(n),
        "n_features": int(x.shape[1]),
        "n_model_features": int(d_in),
        "n_labels": int(c),
        "alphas": [float(a) for a in config.alphas],
        "runs_per_alpha": n_runs,
        "folds": rows,
        "summary": summary,
        "ratio_vs_kl": ratio,
        "baseline_folds": base_rows,
        "baseline_summary": baseline_summary,
        "paired_vs_baselines": paired,
        "loss_curves": {
            str(float(a)): mean_curves[i, ::stride].tolist() for i, a in enumerate(config.alphas)
        },
        "wall_s": time.perf_counter() - t0,
    }


def format_table(results: dict[str, Any]) -> str:
    """One table: per alpha, each metric's mean +- std and its ratio to KL-only; then each
    baseline's mean +- std and its ratio to KL-only."""
    head = (
        f"{results['dataset']} (N={results['n_samples']}, c={results['n_labels']}, "
        f"{results['runs_per_alpha']} folds per alpha)"
    )
    width = max(22, *(len(m) for m in METRICS))
    lines = [head, "alpha   " + "  ".join(f"{m:>{width}}" for m in METRICS)]
    for a, s in results["summary"].items():
        r = results["ratio_vs_kl"][a]
        cells = [f"{s[m]['mean']:.4f}±{s[m]['std']:.4f} ({r[m]:.3f})" for m in METRICS]
        lines.append(f"{a:<7} " + "  ".join(f"{c:>{width}}" for c in cells))
    base = results["summary"]["0.0"]
    for name, s in results.get("baseline_summary", {}).items():
        cells = [f"{s[m]['mean']:.4f}±{s[m]['std']:.4f} ({s[m]['mean'] / base[m]['mean']:.3f})"
                 for m in METRICS]  # fmt: skip
        lines.append(f"{name:<7} " + "  ".join(f"{c:>{width}}" for c in cells))
    return "\n".join(lines)


def _higher_is_better(metric: str) -> bool:
    return metric in metrics.LDL_METRICS_HIGHER_BETTER


def plot_comparison(results: dict[str, Any], out_png: str | pathlib.Path) -> pathlib.Path:
    """The comparison as a figure: each metric's mean over folds relative to KL-only (one bar
    per ``alpha > 0``; below 1 is better for a distance, above 1 for cosine / intersection), and
    the mean training-loss curve of each ``alpha``.

    Returns:
      The PNG written.
    """
    plt = train.pyplot()
    alphas = [a for a in results["ratio_vs_kl"] if a != "0.0"]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.2), gridspec_kw={"width_ratios": [2, 1]})
    width = 0.8 / max(1, len(alphas))
    xs = np.arange(len(METRICS))
    for i, a in enumerate(alphas):
        ratio = [results["ratio_vs_kl"][a][m] for m in METRICS]
        ax.bar(xs + (i - (len(alphas) - 1) / 2) * width, np.asarray(ratio) - 1.0, width,
               bottom=1.0, label=f"alpha {a}")  # fmt: skip
    ax.axhline(1.0, color="k", lw=1, label="KL-only (alpha 0)")
    ax.set_xticks(xs, [f"{m} ({'↑' if _higher_is_better(m) else '↓'})" for m in METRICS],
                  rotation=30, ha="right", fontsize=8)  # fmt: skip
    lo = min([1.0] + [results["ratio_vs_kl"][a][m] for a in alphas for m in METRICS])
    hi = max([1.0] + [results["ratio_vs_kl"][a][m] for a in alphas for m in METRICS])
    pad = max(0.01, 0.15 * (hi - lo))
    ax.set_ylim(lo - pad, hi + pad)
    ax.set_ylabel("mean over folds / KL-only mean")
    ax.set_title(f"{results['dataset']}: {results['runs_per_alpha']} test folds per alpha")
    ax.legend(fontsize=7)
    ax.grid(axis="y", alpha=0.3)
    for a, curve in results["loss_curves"].items():
        ax2.plot(np.linspace(0, 1, len(curve)), curve, label=f"alpha {a}")
    ax2.set_xlabel("fraction of training")
    ax2.set_ylabel("training loss (KL + alpha L_dvs)")
    ax2.set_yscale("log")
    ax2.legend(fontsize=7)
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out_png, dpi=110)
    plt.close(fig)
    return pathlib.Path(out_png)


def train_and_evaluate(config: LdlConfig, workdir: str | pathlib.Path) -> dict[str, Any]:
    """Runs :func:`cross_validate` with ``workdir`` (its fits resume from it), prints a table
    and writes, in ``workdir``: ``ldl_results.json`` (the results plus the ``config``),
    ``summary.json`` (per alpha: each metric's mean, std and ratio to KL-only),
    ``comparison.png`` (:func:`plot_comparison`) and the fits' ``metrics.jsonl`` /
    ``curves.png`` / ``checkpoints/``.

    Returns:
      The results dict (as written, without ``config``).

    Raises:
      DataError: as :func:`cross_validate`.
    """
    parallel.initialize_distributed()  # before any array exists; no-op without a launcher
    workdir = pathlib.Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    with train.stage(f"data: {config.dataset}"):
        dataset = load_config_data(config)
    results = cross_validate(config, dataset, workdir=workdir)
    rows = []
    for m in METRICS:
        row = [m, "higher" if _higher_is_better(m) else "lower"]
        for a, s in results["summary"].items():
            cell = f"{s[m]['mean']:.4f} ± {s[m]['std']:.4f}"
            row.append(cell if a == "0.0" else f"{cell} (×{results['ratio_vs_kl'][a][m]:.3f})")
        for s in results["baseline_summary"].values():
            row.append(f"{s[m]['mean']:.4f} ± {s[m]['std']:.4f}")
        rows.append(row)
    train.print_table(
        f"{results['dataset']} (N={results['n_samples']}, c={results['n_labels']}): test-fold "
        f"mean ± std over {results['runs_per_alpha']} folds, (× ratio to KL-only)",
        ["metric", "better", *(f"alpha {a}" + (" (KL-only)" if a == "0.0" else "")
                               for a in results["summary"]),
         *results["baseline_summary"]],
        rows,
    )  # fmt: skip
    if parallel.is_primary():
        write_summary(workdir / SUMMARY_FILE, results, config)
    train.write_summary(
        workdir,
        {
            "dataset": results["dataset"],
            "runs_per_alpha": results["runs_per_alpha"],
            "summary": results["summary"],
            "ratio_vs_kl": results["ratio_vs_kl"],
            "baseline_summary": results["baseline_summary"],
            "paired_vs_baselines": results["paired_vs_baselines"],
        },
    )
    if parallel.is_primary():
        plot_comparison(results, workdir / "comparison.png")
    return results
