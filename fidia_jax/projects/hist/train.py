"""Leave-one-section-out training and evaluation of HiST and its baselines.

Data: HER2ST patient C (five sections with H&E images; per-spot features from
:func:`fidia_jax.data.her2st_image_features`, z-scored per section, image only) or synthetic
lattices (:func:`fidia_jax.data.synthetic_sections`). Targets: ``log1p`` counts of the
``num_genes`` most expressed genes (by mean log1p over all sections used: a label-agnostic
choice of outputs, the same for every method). Each held-out section is predicted by models
trained on the others; the metrics are HiST's pooled PCC and R² over spots x genes and HEST's
mean per-gene PCC over the ``eval_genes`` most expressed genes.
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
import time
from typing import Any

import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from fidia_jax import data, layers, metrics, models
from fidia_jax._io import atomic_path
from fidia_jax.config import write_summary
from fidia_jax.projects.hist.configs import METHODS, HistConfig

__all__ = [
    "Prepared",
    "fit_predict",
    "format_table",
    "prepare_sections",
    "section_metrics",
    "train_and_evaluate",
]

SUMMARY_FILE = "hist_results.json"


@dataclasses.dataclass(frozen=True)
class Prepared:
    """Sections ready for training: ``feats[i]`` ``(n_i, F)`` float32 (z-scored per section),
    ``y[i]`` ``(n_i, G)`` float32 log1p counts, ``coords[i]`` ``(n_i, 2)`` int32."""

    names: tuple[str, ...]
    coords: tuple[np.ndarray, ...]
    feats: tuple[np.ndarray, ...]
    y: tuple[np.ndarray, ...]
    genes: tuple[str, ...]


def _zscore(f: np.ndarray) -> np.ndarray:
    sd = f.std(axis=0, keepdims=True)
    return ((f - f.mean(axis=0, keepdims=True)) / np.where(sd > 0, sd, 1.0)).astype(np.float32)


def _prepare(secs: list[data.SpotSection], num_genes: int) -> Prepared:
    logs = [np.log1p(s.counts) for s in secs]
    mean = np.mean(np.concatenate(logs, axis=0), axis=0)
    top = np.argsort(-mean, kind="stable")[:num_genes]
    return Prepared(
        tuple(s.name for s in secs),
        tuple(s.coords.astype(np.int32) for s in secs),
        tuple(_zscore(s.features) for s in secs),
        tuple(lg[:, top].astype(np.float32) for lg in logs),
        tuple(secs[0].genes[i] for i in top),
    )


def prepare_sections(config: HistConfig, workdir: str | pathlib.Path | None = None) -> Prepared:
    """Loads (or draws) the sections of ``config``, computes features and targets.

    HER2ST image features are cached in ``workdir`` (``her2st_<S>_features.npz``) and the
    prepared arrays in ``workdir/her2st_prepared.npz`` (reading the 15k-gene count tables is
    the slow part).
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
        return _prepare(secs, config.num_genes)
    cache = None
    if workdir is not None:
        cache = pathlib.Path(workdir) / "her2st_prepared.npz"
        tag = f"{','.join(config.sections)}|{config.num_genes}"
        if cache.is_file():
            with np.load(cache, allow_pickle=False) as z:
                if str(z["tag"]) == tag:
                    k = len(config.sections)
                    return Prepared(
                        tuple(config.sections),
                        tuple(z[f"coords{i}"] for i in range(k)),
                        tuple(z[f"feats{i}"] for i in range(k)),
                        tuple(z[f"y{i}"] for i in range(k)),
                        tuple(z["genes"].tolist()),
                    )
    secs = data.load_her2st(
        config.data_dir or None, tuple(config.sections), drop_spots_without_counts=True
    )
    secs = [data.her2st_image_features(s, config.data_dir or None, cache_dir=workdir) for s in secs]
    prep = _prepare(secs, config.num_genes)
    if cache is not None:
        arrays = {"tag": np.asarray(tag), "genes": np.asarray(prep.genes)}
        for i in range(len(secs)):
            arrays.update(
                {f"coords{i}": prep.coords[i], f"feats{i}": prep.feats[i], f"y{i}": prep.y[i]}
            )
        with atomic_path(cache) as tmp, open(tmp, "wb") as fh:
            np.savez(fh, **arrays)
    return prep


def section_metrics(y_true: np.ndarray, y_pred: np.ndarray, eval_genes: int) -> dict[str, float]:
    """Pooled PCC and R² over spots x genes, and the mean per-gene PCC over the first
    ``eval_genes`` genes (genes constant in the section are left out of that mean)."""
    per_gene = np.asarray(metrics.pearson_r(y_true[:, :eval_genes], y_pred[:, :eval_genes], axis=0))
    return {
        "pooled_pcc": float(metrics.pearson_r(y_true, y_pred)),
        "pooled_r2": float(metrics.r2_score(y_true, y_pred)),
        "mean_gene_pcc": float(np.nanmean(per_gene))
        if np.isfinite(per_gene).any()
        else float("nan"),
    }


# ------------------------------------------------------------------- HiST / dense transformer


def _sizes_for(coords_list, n_pad, levels, window):
    """Fixed plan sizes: the largest section, doubled for windows/parents (augmentation room)."""
    per = []
    for c in coords_list:
        mask = np.arange(n_pad) < len(c)
        cp = np.zeros((n_pad, 2), np.int32)
        cp[: len(c)] = c
        per.append(
            layers.hierarchy_sizes(layers.plan_hierarchy(cp, mask, levels=levels, window=window))
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
    if isinstance(model, models.HiST):
        return model(feats, plan, deterministic=deterministic)
    return model(feats, coords, mask, deterministic=deterministic)


@nnx.jit
def _train_step(model, opt, feats, plan, coords, mask, y):
    def loss_fn(m):
        return models.masked_mse(_apply(m, feats, plan, coords, mask, False), y, mask)

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    opt.update(model, grads)
    return loss


@nnx.jit
def _predict(model, feats, plan, coords, mask):
    return _apply(model, feats, plan, coords, mask, True)


def _fit_spatial(kind, prep, train_idx, test_idx, config, rng):
    levels = len(config.enc_depths)
    n_pad = 8 * math.ceil(max(len(c) for c in prep.coords) / 8)
    sizes = _sizes_for(prep.coords, n_pad, levels, config.window)
    F, G = prep.feats[0].shape[1], prep.y[0].shape[1]
    rngs = nnx.Rngs(params=config.seed, dropout=config.seed + 1)
    kw = dict(dim=config.dim, heads=config.heads, dropout=config.dropout, rngs=rngs)
    if kind == "hist":
        model = models.HiST(
            F,
            G,
            enc_depths=config.enc_depths,
            dec_depths=config.dec_depths,
            window=config.window,
            **kw,
        )
    else:
        model = models.DenseSpotTransformer(
            F, G, depth=sum(config.enc_depths) + sum(config.dec_depths), **kw
        )
    steps = config.epochs * len(train_idx)
    sched = optax.cosine_decay_schedule(config.lr, steps)
    tx = optax.chain(
        optax.clip_by_global_norm(1.0), optax.adamw(sched, weight_decay=config.weight_decay)
    )
    opt = nnx.Optimizer(model, tx, wrt=nnx.Param)
    padded = {
        i: _padded(prep.coords[i], prep.feats[i], prep.y[i], n_pad) for i in (*train_idx, test_idx)
    }

    def plan_of(c, m):
        return layers.plan_hierarchy(c, m, levels=levels, window=config.window, sizes=sizes)

    base_plan = {i: plan_of(padded[i][0], padded[i][3]) for i in padded}
    losses, fallbacks, t0 = [], 0, time.perf_counter()
    for epoch in range(config.epochs):
        strength = 0.5 * (1 + math.cos(math.pi * epoch / config.epochs)) if config.augment else 0.0
        for i in rng.permutation(train_idx):
            cp, fp, yp, mask = padded[i]
            plan = base_plan[i]
            if strength > 0:
                n = len(prep.coords[i])
                ca, keep = data.augment_lattice(
                    prep.coords[i], rng, strength=strength, drop_p=config.drop_p
                )
                m2 = mask.copy()
                m2[:n] = keep
                c2 = cp.copy()
                c2[:n] = ca
                try:
                    plan, cp, mask = plan_of(c2, m2), c2, m2
                except ValueError:  # does not fit the fixed sizes: train on the original lattice
                    fallbacks += 1
            losses.append(float(_train_step(model, opt, fp, plan, cp, mask, yp)))
    train_s = time.perf_counter() - t0
    cp, fp, _, mask = padded[test_idx]
    pred = np.asarray(_predict(model, fp, base_plan[test_idx], cp, mask))[
        : len(prep.coords[test_idx])
    ]
    return pred, {
        "final_train_loss": float(np.mean(losses[-len(train_idx) :])),
        "train_s": train_s,
        "steps": len(losses),
        "aug_fallbacks": fallbacks,
    }


# ----------------------------------------------------------------------------- per-spot models


def _fit_mlp(prep, train_idx, test_idx, config):
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
    tx = optax.chain(
        optax.clip_by_global_norm(1.0),
        optax.adamw(
            optax.cosine_decay_schedule(config.lr, steps), weight_decay=config.weight_decay
        ),
    )
    opt = nnx.Optimizer(model, tx, wrt=nnx.Param)

    @nnx.jit
    def step(m, o, x, y):
        loss, g = nnx.value_and_grad(lambda m: jnp.mean(jnp.square(m(x, deterministic=False) - y)))(
            m
        )
        o.update(m, g)
        return loss

    t0 = time.perf_counter()
    X, Y = jnp.asarray(X), jnp.asarray(Y)
    for _ in range(steps):
        loss = step(model, opt, X, Y)
    pred = np.asarray(nnx.jit(lambda m, x: m(x))(model, jnp.asarray(prep.feats[test_idx])))
    return pred, {
        "final_train_loss": float(loss),
        "train_s": time.perf_counter() - t0,
        "steps": steps,
    }


def _fit_ridge(prep, train_idx, test_idx):
    from sklearn.linear_model import RidgeCV

    X = np.concatenate([prep.feats[i] for i in train_idx])
    Y = np.concatenate([prep.y[i] for i in train_idx])
    t0 = time.perf_counter()
    r = RidgeCV(alphas=np.logspace(-2, 4, 13)).fit(X, Y)
    return r.predict(prep.feats[test_idx]).astype(np.float32), {
        "alpha": float(r.alpha_),
        "train_s": time.perf_counter() - t0,
    }


def fit_predict(method: str, prep: Prepared, train_idx, test_idx: int, config: HistConfig):
    """Fits ``method`` (a key of :data:`METHODS`) on sections ``train_idx`` and predicts
    section ``test_idx``. Returns ``(pred (n, G) float32, info dict)``."""
    rng = np.random.default_rng(config.seed + 17)
    if method in ("hist", "dense"):
        return _fit_spatial(method, prep, list(train_idx), test_idx, config, rng)
    if method == "mlp":
        return _fit_mlp(prep, list(train_idx), test_idx, config)
    return _fit_ridge(prep, list(train_idx), test_idx)


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


def train_and_evaluate(config: HistConfig, workdir: str | pathlib.Path) -> dict[str, Any]:
    """Leave-one-section-out over the first ``folds`` sections (all when ``0``); every method of
    ``config.methods`` in the same run. Prints the table, writes ``workdir/hist_results.json``
    atomically, and returns the results (per fold, mean over folds, the config)."""
    workdir = pathlib.Path(workdir)
    prep = prepare_sections(config, workdir)
    k = len(prep.names)
    folds = range(config.folds or k)
    out: dict[str, Any] = {
        "sections": list(prep.names),
        "n_spots": [len(c) for c in prep.coords],
        "genes": len(prep.genes),
        "folds": [],
    }
    preds: dict[str, dict[str, np.ndarray]] = {m: {} for m in config.methods}
    for t in folds:
        train_idx = [i for i in range(k) if i != t]
        fold = {"test": prep.names[t]}
        for m in config.methods:
            pred, info = fit_predict(m, prep, train_idx, t, config)
            preds[m][prep.names[t]] = pred
            fold[m] = {**section_metrics(prep.y[t], pred, config.eval_genes), **info}
        out["folds"].append(fold)
    out["mean"] = {
        m: {
            key: float(np.mean([f[m][key] for f in out["folds"]]))
            for key in ("pooled_pcc", "pooled_r2", "mean_gene_pcc")
        }
        for m in config.methods
    }
    print(format_table(out))
    write_summary(workdir / SUMMARY_FILE, out, config)
    out["predictions"] = preds
    out["prepared"] = prep
    return out
