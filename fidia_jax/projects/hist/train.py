"""Leave-one-section-out training and evaluation of HiST and its baselines.

Data: HER2ST patient C (five sections with H&E images; per-spot features from
:func:`fidia_jax.projects.hist.data.her2st_image_features`, z-scored per section, image only) or
synthetic lattices (:func:`fidia_jax.projects.hist.data.synthetic_sections`). Targets: ``log1p`` counts of the
``num_genes`` most expressed genes (by mean log1p over all sections used: a label-agnostic
choice of outputs, the same for every method). Each held-out section is predicted by models
trained on the others; the metrics are HiST's pooled PCC and R² over spots x genes and HEST's
mean per-gene PCC over the ``eval_genes`` most expressed genes.

Every gradient step is :func:`fidia_jax.train.make_train_step`'s (the models' dropout RNG counters
are the step's model state) and every fit is a :func:`fidia_jax.train.fit` run named
``<method>_<held-out section>``: progress on the console, ``metrics.jsonl``, a checkpoint per
fit (a rerun in the same workdir resumes) and ``curves.png``. The run ends with a table,
``summary.json``, ``hist_comparison.png`` (the table as bars) and ``hist_maps.png`` (measured
and predicted expression of the most expressed gene on the first held-out section).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import pathlib
import time
from typing import Any

import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import PartitionSpec as P

from fidia_jax import _checks, metrics, models, parallel, train
from fidia_jax import config as config_lib
from fidia_jax._checks import note_grid_edge
from fidia_jax._io import atomic_path, json_text, resolve_data_dir
from fidia_jax.errors import DataError
from fidia_jax.projects.hist import data, lattice
from fidia_jax.projects.hist.configs import METHODS, HistConfig
from fidia_jax.projects.hist.losses import masked_mse
from fidia_jax.projects.hist.model import DenseSpotTransformer, HiST, check_finite_features

__all__ = [
    "Prepared",
    "fit_predict",
    "format_table",
    "neighbour_features",
    "paired_gene_test",
    "prepare_sections",
    "section_metrics",
    "train_and_evaluate",
]

SUMMARY_FILE = "hist_results.json"
#: The methods trained by gradient steps, data-parallel over the visible devices (the others,
#: ridge regressions, run on process 0 only in a multi-process run).
_MESH_METHODS = ("hist", "dense", "mlp")
_ROWS = P("data")


@dataclasses.dataclass(frozen=True)
class Prepared:
    """Sections ready for training: ``feats[i]`` ``(n_i, F)`` float32 (z-scored per section),
    ``y[i]`` ``(n_i, G)`` float32 log1p counts, ``coords[i]`` ``(n_i, 2)`` int32.

    With ``gene_selection="training_sections"``, ``y`` holds the union of the folds' genes and
    ``fold_genes[t]`` the columns of fold ``t`` (held-out section ``t``), most expressed in its
    training sections first; :meth:`for_fold` gives that fold's view."""

    names: tuple[str, ...]
    coords: tuple[np.ndarray, ...]
    feats: tuple[np.ndarray, ...]
    y: tuple[np.ndarray, ...]
    genes: tuple[str, ...]
    fold_genes: tuple[np.ndarray, ...] | None = None

    def for_fold(self, t: int) -> Prepared:
        """The sections with the genes of fold ``t`` (``self`` when one gene set serves all)."""
        if self.fold_genes is None:
            return self
        cols = self.fold_genes[t]
        return dataclasses.replace(
            self,
            y=tuple(y[:, cols] for y in self.y),
            genes=tuple(self.genes[c] for c in cols),
            fold_genes=None,
        )


def _zscore(f: np.ndarray) -> np.ndarray:
    sd = f.std(axis=0, keepdims=True)
    return ((f - f.mean(axis=0, keepdims=True)) / np.where(sd > 0, sd, 1.0)).astype(np.float32)


def _top_genes(logs: list[np.ndarray], num_genes: int) -> np.ndarray:
    """The ``num_genes`` genes of largest mean log1p count over the spots of ``logs``."""
    mean = np.mean(np.concatenate(logs, axis=0), axis=0)
    return np.argsort(-mean, kind="stable")[:num_genes]


def _prepare(
    secs: list[data.SpotSection],
    num_genes: int,
    gene_selection: str = "all_sections",
    folds: int = 0,
) -> Prepared:
    """Features and targets; the genes ranked over every section (``"all_sections"``) or,
    for each of the first ``folds`` held-out sections (all when ``0``), over the others."""
    for sec in secs:
        check_finite_features(sec.features, name=f"section {sec.name}")
    logs = [np.log1p(s.counts) for s in secs]
    fold_genes = None
    if gene_selection == "all_sections":
        top = _top_genes(logs, num_genes)
    else:
        per_fold = [
            _top_genes([lg for i, lg in enumerate(logs) if i != t], num_genes)
            for t in range(folds or len(secs))
        ]
        top = np.unique(np.concatenate(per_fold))
        where = {g: j for j, g in enumerate(top)}
        fold_genes = tuple(np.array([where[g] for g in f], np.int64) for f in per_fold)
    return Prepared(
        tuple(s.name for s in secs),
        tuple(s.coords.astype(np.int32) for s in secs),
        tuple(_zscore(s.features) for s in secs),
        tuple(lg[:, top].astype(np.float32) for lg in logs),
        tuple(secs[0].genes[i] for i in top),
        fold_genes,
    )


def prepare_sections(config: HistConfig, workdir: str | pathlib.Path | None = None) -> Prepared:
    """Loads (or draws) the sections of ``config``, computes features and targets.

    HER2ST image features are cached in ``workdir`` (``her2st_<S>_features.npz``) and the
    prepared arrays in ``workdir/her2st_prepared.npz`` (reading the 15k-gene count tables is
    the slow part); each cache is keyed by everything it depends on: the sections, the gene
    count and selection, the folds, and the path, size and modification time of every file
    read, so another data folder or a changed file is never served from it.
    """
    if config.data == "synthetic":
        secs = data.synthetic_sections(
            config.syn_sections,
            shape=config.syn_shape,
            n_features=config.syn_features,
            n_genes=config.syn_genes,
            noise=config.syn_noise,
            seed=config.seed,
        )
        return _prepare(secs, config.num_genes, config.gene_selection, config.folds)
    cache = None
    k = len(config.sections)
    if workdir is not None:
        cache = pathlib.Path(workdir) / "her2st_prepared.npz"
        root = resolve_data_dir(config.data_dir or None) / "her2st"
        tag = json_text({
            "sections": list(config.sections), "num_genes": config.num_genes,
            "gene_selection": config.gene_selection, "folds": config.folds,
            "files": data.files_key([f for s in config.sections for f in data.her2st_files(root, s)]),
        })  # fmt: skip
        if cache.is_file():
            with np.load(cache, allow_pickle=False) as z:
                if str(z["tag"]) == tag:
                    n_folds = int(z["n_folds"])
                    return Prepared(
                        tuple(config.sections),
                        tuple(z[f"coords{i}"] for i in range(k)),
                        tuple(z[f"feats{i}"] for i in range(k)),
                        tuple(z[f"y{i}"] for i in range(k)),
                        tuple(z["genes"].tolist()),
                        tuple(z[f"fold{t}"] for t in range(n_folds)) if n_folds else None,
                    )
    secs = data.load_her2st(
        config.data_dir or None, tuple(config.sections), drop_spots_without_counts=True
    )
    secs = [data.her2st_image_features(s, config.data_dir or None, cache_dir=workdir) for s in secs]
    prep = _prepare(secs, config.num_genes, config.gene_selection, config.folds)
    if cache is not None:
        n_folds = len(prep.fold_genes or ())
        arrays = {"tag": np.asarray(tag), "genes": np.asarray(prep.genes),
                  "n_folds": np.asarray(n_folds)}  # fmt: skip
        for t in range(n_folds):
            arrays[f"fold{t}"] = prep.fold_genes[t]
        for i in range(len(secs)):
            arrays.update(
                {f"coords{i}": prep.coords[i], f"feats{i}": prep.feats[i], f"y{i}": prep.y[i]}
            )
        with atomic_path(cache) as tmp, open(tmp, "wb") as fh:
            np.savez(fh, **arrays)
    return prep


def section_metrics(y_true: np.ndarray, y_pred: np.ndarray, eval_genes: int) -> dict[str, Any]:
    """Pooled PCC and R² over spots x genes, the mean per-gene PCC over the first
    ``eval_genes`` genes (genes constant in the section are left out of that mean) and the
    per-gene PCCs themselves (``gene_pcc``, a list; NaN for a constant gene) for paired tests.

    Raises:
      ValueError: shapes that differ (``pearson_r``).
      DataError: a NaN/inf in ``y_true`` or ``y_pred`` (naming which; a NaN gene would
        otherwise drop silently out of ``mean_gene_pcc``)."""
    _checks.assert_finite(y_true, "y_true", where="section_metrics")
    _checks.assert_finite(y_pred, "y_pred", where="section_metrics")
    per_gene = np.asarray(metrics.pearson_r(y_true[:, :eval_genes], y_pred[:, :eval_genes], axis=0))
    return {
        "gene_pcc": [float(v) for v in per_gene],
        "pooled_pcc": float(metrics.pearson_r(y_true, y_pred)),
        "pooled_r2": float(metrics.r2_score(y_true, y_pred)),
        "mean_gene_pcc": float(np.nanmean(per_gene))
        if np.isfinite(per_gene).any()
        else float("nan"),
    }


# ------------------------------------------------------------------- HiST / dense transformer


def _sizes_for(coords_list, n_pad, levels, window, **plan_kw):
    """Fixed plan sizes: the largest section, doubled for windows/parents (augmentation room);
    ``plan_kw``: ``pad`` / ``always_shift`` of :func:`lattice.plan_hierarchy`."""
    per = []
    for c in coords_list:
        mask = np.arange(n_pad) < len(c)
        cp = np.zeros((n_pad, 2), np.int32)
        cp[: len(c)] = c
        per.append(
            lattice.hierarchy_sizes(
                lattice.plan_hierarchy(cp, mask, levels=levels, window=window, **plan_kw)
            )
        )
    sizes, prev = [], n_pad
    for lvl in range(levels):
        spots = n_pad if lvl == 0 else min(prev, 2 * max(p[lvl][0] for p in per))
        wins = [min(spots, 2 * max(p[lvl][j] for p in per)) for j in (1, 2)]
        sizes.append((spots, *wins, window * window))
        prev = spots
    return tuple(sizes)


def _padded(c, f, y, n_pad):
    n = len(c)
    cp = np.zeros((n_pad, 2), np.int32)
    cp[:n] = c
    fp = np.zeros((n_pad, f.shape[1]), np.float32)
    fp[:n] = f
    yp = np.zeros((n_pad, y.shape[1]), np.float32)
    yp[:n] = y
    return cp, fp, yp, np.arange(n_pad) < n


def _apply(model, feats, plan, coords, mask, deterministic):
    if isinstance(model, HiST):
        return model(feats, plan, deterministic=deterministic)
    return model(feats, coords, mask, deterministic=deterministic)


def _spatial_loss(graphdef):
    """``loss_fn(params, model_state, (feats, plan, coords, mask, y))`` for make_train_step."""

    def loss_fn(params, model_state, batch):
        feats, plan, coords, mask, y = batch
        model = train.merge_model(graphdef, params, model_state)
        loss = masked_mse(_apply(model, feats, plan, coords, mask, False), y, mask)
        return loss, train.split_model(model)[2]  # dropout RNG counters advance

    return loss_fn


@nnx.jit
def _predict(model, feats, plan, coords, mask):
    return _apply(model, feats, plan, coords, mask, True)


def _adamw(
    lr: float, weight_decay: float, steps: int, clip_norm: float = 0.0
) -> optax.GradientTransformation:
    """AdamW with cosine decay to 0 over ``steps`` (the authors' ``CosineAnnealingLR``,
    ``eta_min_factor: 0``); global-norm clipping only when ``clip_norm > 0`` (the authors
    clip nothing)."""
    adamw = optax.adamw(optax.cosine_decay_schedule(lr, steps), weight_decay=weight_decay)
    if clip_norm > 0:
        return optax.chain(optax.clip_by_global_norm(clip_norm), adamw)
    return adamw


@functools.cache
def _train_step(loss_fn, graphdef, lr: float, weight_decay: float, steps: int, clip: float,
                mesh=None, param_sharding="replicated", batch_spec=_ROWS):  # fmt: skip
    """The jitted step of one model structure and optimiser (cached: the folds of a run share
    one compilation, as the module-level ``nnx.jit`` step did); with ``mesh`` data-parallel."""
    tx = _adamw(lr, weight_decay, steps, clip)
    step = train.make_train_step(loss_fn(graphdef), tx, has_state=True, mesh=mesh,
                                 param_sharding=param_sharding, batch_spec=batch_spec)  # fmt: skip
    return tx, step


def _fit(model, loss_fn, config, steps, batches, *, workdir, run, mesh, batch_spec):
    """Trains ``model`` for ``steps`` steps of ``make_train_step(has_state=True)`` (AdamW of
    ``config``) with :func:`fidia_jax.train.fit`, data-parallel on ``mesh`` (the batch laid out
    by ``batch_spec``, the parameters by ``config.param_sharding``); returns ``(model, losses of
    every step, seconds)``."""
    graphdef, params, model_state = train.split_model(model)
    ps = config.param_sharding
    tx, step = _train_step(
        loss_fn, graphdef, config.lr, config.weight_decay, steps, config.clip_norm, mesh, ps,
        batch_spec,
    )  # fmt: skip
    state = train.init_train_state(params, tx, model_state=model_state, mesh=mesh,
                                   param_sharding=ps)  # fmt: skip
    t0 = time.perf_counter()
    res = train.fit(state, step, batches, num_steps=steps, workdir=workdir, run=run,
                    fingerprint=train.config_fingerprint(config), mesh=mesh, param_sharding=ps,
                    batch_spec=batch_spec)  # fmt: skip
    train_s = time.perf_counter() - t0
    losses = [r["loss"] for r in res.history if "loss" in r]
    return train.merge_model(graphdef, res.state.params, res.state.model_state), losses, train_s


def _fit_spatial(kind, prep, train_idx, test_idx, config, rng, workdir=None):
    levels = len(config.enc_depths)
    n_pad = 8 * math.ceil(max(len(c) for c in prep.coords) / 8)
    plan_kw = dict(pad=config.pad, always_shift=config.always_shift)
    sizes = _sizes_for(prep.coords, n_pad, levels, config.window, **plan_kw)
    F, G = prep.feats[0].shape[1], prep.y[0].shape[1]
    rngs = nnx.Rngs(params=config.seed, dropout=config.seed + 1)
    kw = dict(dim=config.dim, heads=config.heads, dropout=config.dropout, rngs=rngs)
    if kind == "hist":
        model = HiST(
            F,
            G,
            enc_depths=config.enc_depths,
            dec_depths=config.dec_depths,
            window=config.window,
            input_proj=config.input_proj,
            input_mlp_ratio=config.input_mlp_ratio,
            ffn_activation=config.ffn_activation,
            token_path=config.token_path,
            skip_order=config.skip_order,
            **kw,
        )
    else:
        model = DenseSpotTransformer(
            F, G, depth=sum(config.enc_depths) + sum(config.dec_depths), **kw
        )
    if config.init_bias_with_mean:
        model.init_head_bias(np.concatenate([prep.y[i] for i in train_idx]).mean(axis=0))
    steps = config.epochs * len(train_idx)
    padded = {
        i: _padded(prep.coords[i], prep.feats[i], prep.y[i], n_pad) for i in (*train_idx, test_idx)
    }

    def plan_of(c, m):
        return lattice.plan_hierarchy(
            c, m, levels=levels, window=config.window, sizes=sizes, **plan_kw
        )

    base_plan = {i: plan_of(padded[i][0], padded[i][3]) for i in padded}
    fallbacks = 0

    def batches():
        """One section a step, in a fresh random order each epoch, augmented (HiST's loop)."""
        nonlocal fallbacks
        for epoch in range(config.epochs):
            strength = (
                0.5 * (1 + math.cos(math.pi * epoch / config.epochs)) if config.augment else 0.0
            )
            for i in rng.permutation(train_idx):
                cp, fp, yp, mask = padded[i]
                plan = base_plan[i]
                if strength > 0:
                    n = len(prep.coords[i])
                    ca, keep = data.augment_lattice(
                        prep.coords[i],
                        rng,
                        strength=strength,
                        drop_p=config.drop_p,
                        shear_deg=config.shear_deg,
                    )
                    m2 = mask.copy()
                    m2[:n] = keep
                    c2 = cp.copy()
                    c2[:n] = ca
                    try:
                        plan, cp, mask = plan_of(c2, m2), c2, m2
                    except ValueError:  # does not fit the fixed sizes: the original lattice
                        fallbacks += 1
                yield fp, plan, cp, mask, yp

    run = f"{kind}_{prep.names[test_idx]}"
    # one section a step: its spots are split over the mesh, the lattice plan replicated
    mesh = parallel.data_mesh(n_pad, num_devices=config.num_devices)
    spec = (P("data"), P(), P("data"), P("data"), P("data"))
    model, losses, train_s = _fit(
        model, _spatial_loss, config, steps, batches(), workdir=workdir, run=run, mesh=mesh,
        batch_spec=spec,
    )  # fmt: skip
    cp, fp, _, mask = padded[test_idx]
    pred = parallel.to_host(_predict(model, fp, base_plan[test_idx], cp, mask))[
        : len(prep.coords[test_idx])
    ]
    return pred, {
        "final_train_loss": float(np.mean(losses[-len(train_idx) :])),
        "train_s": train_s,
        "steps": len(losses),
        "aug_fallbacks": fallbacks,
    }


# ----------------------------------------------------------------------------- per-spot models


def _mlp_loss(graphdef):
    """Full-batch mean squared error of the MLP (dropout on: its RNG counter advances)."""

    def loss_fn(params, model_state, batch):
        x, y = batch
        model = train.merge_model(graphdef, params, model_state)
        loss = jnp.mean(jnp.square(model(x, deterministic=False) - y))
        return loss, train.split_model(model)[2]

    return loss_fn


def _fit_mlp(prep, train_idx, test_idx, config, workdir=None):
    X = np.concatenate([prep.feats[i] for i in train_idx])
    Y = np.concatenate([prep.y[i] for i in train_idx])
    model = models.MLP(
        X.shape[1],
        (4 * config.dim, 4 * config.dim),
        Y.shape[1],
        dropout=0.1,
        rngs=nnx.Rngs(params=config.seed, dropout=config.seed + 1),
    )
    steps = config.epochs * len(train_idx)
    X, Y = jnp.asarray(X), jnp.asarray(Y)
    run = f"mlp_{prep.names[test_idx]}"
    mesh = parallel.data_mesh(len(X), num_devices=config.num_devices)  # the rows split
    model, losses, train_s = _fit(
        model, _mlp_loss, config, steps, lambda _: (X, Y), workdir=workdir, run=run, mesh=mesh,
        batch_spec=_ROWS,
    )  # fmt: skip
    pred = parallel.to_host(nnx.jit(lambda m, x: m(x))(model, jnp.asarray(prep.feats[test_idx])))
    return pred, {"final_train_loss": float(losses[-1]), "train_s": train_s, "steps": steps}


def neighbour_features(coords: np.ndarray, feats: np.ndarray) -> np.ndarray:
    """``(n, 2F)``: each spot's features and the mean features of its present 8 lattice
    neighbours (offsets in ``{-1, 0, 1}^2`` but ``(0, 0)``; a spot without neighbours gets its
    own features there).

    The "neighbour ridge" baseline: the simplest model that sees spatial context.

    Args:
      coords: ``(n, 2)`` integer lattice coordinates (whole-valued floats accepted).
      feats: ``(n, F)`` finite features.

    Raises:
      ValueError: a wrong rank or width, or row counts that differ (naming the argument).
      DataError: a NaN/inf in ``feats`` or a fractional coordinate.
    """
    where = "neighbour_features"
    _checks.assert_rank(coords, 2, "coords", where=where, detail="(n, 2) lattice positions")
    _checks.assert_rank(feats, 2, "feats", where=where, detail="(n, F) features")
    if np.shape(coords)[1] != 2:
        raise ValueError(f"{where}: coords must be (n, 2), got shape {np.shape(coords)}")
    if np.shape(feats)[0] != np.shape(coords)[0]:
        raise ValueError(
            f"{where}: feats has {np.shape(feats)[0]} rows but coords {np.shape(coords)[0]} spots"
        )
    _checks.assert_finite(feats, "feats", where=where)
    _checks.assert_finite(coords, "coords", where=where)
    if np.any(np.asarray(coords) != np.round(np.asarray(coords))):
        raise DataError(f"{where}: coords must be integer lattice positions")
    c = np.asarray(coords, np.int64)
    f = np.asarray(feats, np.float32)
    c0 = c - c.min(axis=0) + 1  # a border of 1 so every offset indexes the grid
    grid = -np.ones(tuple(c0.max(axis=0) + 2), np.int64)
    grid[c0[:, 0], c0[:, 1]] = np.arange(len(c))
    total = np.zeros_like(f)
    count = np.zeros((len(c), 1), np.float32)
    for dx in (-1, 0, 1):
        for dy in (-1, 0, 1):
            if dx == dy == 0:
                continue
            j = grid[c0[:, 0] + dx, c0[:, 1] + dy]
            ok = j >= 0
            total[ok] += f[j[ok]]
            count[ok] += 1
    mean = np.where(count > 0, total / np.maximum(count, 1), f)
    return np.concatenate([f, mean], axis=1)


def _fit_ridge(prep, train_idx, test_idx, neighbours: bool = False):
    from sklearn.linear_model import RidgeCV

    def feats(i):
        return neighbour_features(prep.coords[i], prep.feats[i]) if neighbours else prep.feats[i]

    X = np.concatenate([feats(i) for i in train_idx])
    Y = np.concatenate([prep.y[i] for i in train_idx])
    t0 = time.perf_counter()
    alphas = np.logspace(-2, 4, 13)
    with train.limit_threads():  # the run's cores, not every core of a shared machine
        r = RidgeCV(alphas=alphas).fit(X, Y)
    note_grid_edge("HiST ridge baseline", "alpha", alphas, r.alpha_)
    return r.predict(feats(test_idx)).astype(np.float32), {
        "alpha": float(r.alpha_),
        "train_s": time.perf_counter() - t0,
    }


def fit_predict(
    method: str,
    prep: Prepared,
    train_idx,
    test_idx: int,
    config: HistConfig,
    *,
    workdir: str | pathlib.Path | None = None,
):
    """Fits ``method`` (a key of :data:`METHODS`) on sections ``train_idx`` and predicts
    section ``test_idx``.

    Args:
      method: ``"hist"``, ``"dense"``, ``"mlp"``, ``"ridge"`` or ``"ridge_nbr"``.
      prep: from :func:`prepare_sections`.
      train_idx: indices of the training sections; test_idx: the held-out section.
      config: sizes, epochs, optimiser, seed.
      workdir: where the neural fits write ``metrics.jsonl``, their checkpoints
        (``checkpoints/<method>_<section>``) and ``curves.png``, and resume from; ``None``: no
        files.

    Returns:
      ``(pred (n, G) float32, info dict)``.

    Raises:
      DataError: a NaN or infinite feature in a training or the held-out section.
      TrainingError: a non-finite loss or gradient (the library's policy,
        :func:`fidia_jax.train.fit`).
    """
    for i in (*train_idx, test_idx):
        check_finite_features(prep.feats[i], name=f"section {prep.names[i]}")
    rng = np.random.default_rng(config.seed + 17)
    if method in ("hist", "dense"):
        return _fit_spatial(method, prep, list(train_idx), test_idx, config, rng, workdir)
    if method == "mlp":
        return _fit_mlp(prep, list(train_idx), test_idx, config, workdir)
    with train.stage(f"{method}_{prep.names[test_idx]}: RidgeCV"):
        return _fit_ridge(prep, list(train_idx), test_idx, neighbours=method == "ridge_nbr")


def paired_gene_test(folds: list[dict[str, Any]], a: str, b: str) -> dict[str, float]:
    """Paired comparison of methods ``a`` and ``b`` over (held-out section, gene) items: the
    per-gene PCCs of every fold (``gene_pcc``), items with a NaN left out.

    Returns ``{"n", "mean_diff" (a - b), "a_wins" (fraction of items where a > b),
    "p_wilcoxon"}`` (two-sided Wilcoxon signed-rank, ``scipy.stats.wilcoxon``; genes of one
    section are not independent items, so read the p-value as indicative).
    """
    from scipy import stats

    da = np.concatenate([np.asarray(f[a]["gene_pcc"], float) for f in folds])
    db = np.concatenate([np.asarray(f[b]["gene_pcc"], float) for f in folds])
    ok = np.isfinite(da) & np.isfinite(db)
    d = da[ok] - db[ok]
    p = float(stats.wilcoxon(d).pvalue) if len(d) >= 2 and np.any(d != 0) else float("nan")
    return {
        "n": int(len(d)),
        "mean_diff": float(d.mean()) if len(d) else float("nan"),
        "a_wins": float(np.mean(d > 0)) if len(d) else float("nan"),
        "p_wilcoxon": p,
    }


_COLUMNS = ("pooled PCC", "pooled R²", "mean per-gene PCC")
_KEYS = ("pooled_pcc", "pooled_r2", "mean_gene_pcc")


def format_table(results: dict[str, Any]) -> str:
    """Markdown table: mean over folds of each metric, per method."""
    lines = [
        "| method | pooled PCC | pooled R² | mean per-gene PCC (top genes) |",
        "|---|---|---|---|",
    ]
    for m, row in results["mean"].items():
        lines.append(
            f"| {METHODS[m]} | {row['pooled_pcc']:.3f} | {row['pooled_r2']:.3f} | "
            f"{row['mean_gene_pcc']:.3f} |"
        )
    return "\n".join(lines)


def _table_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per method: the fold means and, with two or more folds, their std."""
    rows = []
    for m, mean in results["mean"].items():
        row: dict[str, Any] = {"method": METHODS[m]}
        for col, key in zip(_COLUMNS, _KEYS, strict=True):
            row[col] = mean[key]
            if len(results["folds"]) > 1:
                row[f"{col} sd"] = float(np.std([f[m][key] for f in results["folds"]]))
        rows.append(row)
    return rows


def _plot_maps(results, preds, prep, out_png) -> None:
    """Measured and predicted expression of the most expressed gene on the first held-out
    section's lattice (one panel each, one colour scale)."""
    plt = train.pyplot()
    test = results["folds"][0]["test"]
    i = prep.names.index(test)
    y, c = prep.y[i][:, 0], prep.coords[i]
    panels = [("measured", y)] + [(METHODS[m], preds[m][test][:, 0]) for m in preds]
    vmin, vmax = np.percentile(y, [2, 98])
    fig, axes = plt.subplots(1, len(panels), figsize=(3.1 * len(panels), 3.3), squeeze=False)
    for ax, (name, v) in zip(axes[0], panels, strict=True):
        sc = ax.scatter(c[:, 0], c[:, 1], c=v, s=16, marker="s", cmap="magma", vmin=vmin,
                        vmax=vmax)  # fmt: skip
        title = name.split(" (")[0]
        if name != "measured":
            pcc = np.corrcoef(y, v)[0, 1] if np.std(v) > 0 and np.std(y) > 0 else float("nan")
            title += f"\nPCC {pcc:.2f}"
        ax.set_title(title, fontsize=9)
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
    fig.colorbar(sc, ax=axes[0].tolist(), shrink=0.8, label="log1p expression")
    fig.suptitle(f"held-out section {test}: gene {prep.genes[0]} (most expressed)", fontsize=10)
    with atomic_path(out_png) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)


def train_and_evaluate(config: HistConfig, workdir: str | pathlib.Path) -> dict[str, Any]:
    """Leave-one-section-out over the first ``folds`` sections (all when ``0``); every method of
    ``config.methods`` in the same run.

    Shows progress (a stage per data step and ridge fit, a progress bar per neural fit), prints
    the table and writes, in ``workdir``: ``hist_results.json`` (per fold, mean over folds, the
    config), ``summary.json`` (the table), ``hist_comparison.png`` (the table as bars),
    ``hist_maps.png`` (measured vs predicted expression on the first held-out section) and
    the fits' ``metrics.jsonl``, ``curves.png`` and checkpoints (a rerun resumes).

    Returns:
      The results of ``hist_results.json`` without the config, plus ``predictions`` (method ->
      section -> ``(n, G)``) and ``prepared`` (the :class:`Prepared` sections).

    Raises:
      DataError: missing or malformed HER2ST files. TrainingError: a non-finite loss.
    """
    parallel.initialize_distributed()  # before any array exists; no-op without a launcher
    workdir = pathlib.Path(workdir)
    what = (
        "HER2ST sections " + ",".join(config.sections)
        if config.data == "her2st"
        else (f"{config.syn_sections} synthetic sections")
    )
    with train.stage(f"preparing {what} (features, top {config.num_genes} genes)"):
        prep = prepare_sections(config, workdir)
    k = len(prep.names)
    folds = range(config.folds or k)
    out: dict[str, Any] = {
        "sections": list(prep.names),
        "n_spots": [len(c) for c in prep.coords],
        "genes": config.num_genes,
        "gene_selection": config.gene_selection,
        "folds": [],
    }
    # the ridge peers (scikit-learn) have nothing to split: process 0 alone runs them, prints
    # and writes; another process of a multi-process run trains the neural methods with it
    methods = [m for m in config.methods if parallel.is_primary() or m in _MESH_METHODS]
    preds: dict[str, dict[str, np.ndarray]] = {m: {} for m in methods}
    for t in folds:
        train_idx = [i for i in range(k) if i != t]
        view = prep.for_fold(t)  # the genes of this fold (the same for all with all_sections)
        fold = {"test": prep.names[t], "genes": list(view.genes)}
        for m in methods:
            pred, info = fit_predict(m, view, train_idx, t, config, workdir=workdir)
            preds[m][prep.names[t]] = pred
            fold[m] = {**section_metrics(view.y[t], pred, config.eval_genes), **info}
        out["folds"].append(fold)
    if not parallel.is_primary():
        return out
    out["mean"] = {
        m: {key: float(np.mean([f[m][key] for f in out["folds"]])) for key in _KEYS}
        for m in config.methods
    }
    if "hist" in config.methods:
        out["paired_vs_hist"] = {
            m: paired_gene_test(out["folds"], "hist", m) for m in config.methods if m != "hist"
        }
    rows = _table_rows(out)
    tests = ", ".join(f["test"] for f in out["folds"])
    train.print_table(
        f"HiST vs baselines: held-out sections {tests} (mean over folds; per-gene PCC over the "
        f"top {config.eval_genes} genes)",
        ["method", *_COLUMNS],
        [[r["method"], *(r[c] for c in _COLUMNS)] for r in rows],
    )
    if out.get("paired_vs_hist"):
        train.print_table(
            "HiST minus each method, per-gene PCC over (held-out section, gene) items",
            ["method", "items", "mean diff", "HiST wins", "Wilcoxon p"],
            [
                [METHODS[m], t["n"], f"{t['mean_diff']:+.4f}", t["a_wins"], t["p_wilcoxon"]]
                for m, t in out["paired_vs_hist"].items()
            ],
        )
    config_lib.write_summary(workdir / SUMMARY_FILE, out, config)
    train.write_summary(
        workdir,
        {"data": config.data, "test_sections": [f["test"] for f in out["folds"]], "table": rows},
    )
    train.plot_bars(
        [{**r, "method": r["method"].split(" (")[0]} for r in rows],
        workdir / "hist_comparison.png",
        label="method",
        values=list(_COLUMNS),
        errors={c: f"{c} sd" for c in _COLUMNS} if len(out["folds"]) > 1 else None,
        higher_is_better=dict.fromkeys(_COLUMNS, True),
        title=f"HiST: held-out sections {tests}",
    )
    _plot_maps(out, preds, prep.for_fold(folds[0]), workdir / "hist_maps.png")
    out["predictions"] = preds
    out["prepared"] = prep
    return out
