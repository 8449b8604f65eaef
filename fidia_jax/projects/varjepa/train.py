"""Pretrain T-JEPA and Var-T-JEPA on one table, then probe their frozen embeddings.

For each method of the config: AdamW pretraining on random training batches (T-JEPA: latent MSE
to an EMA target encoder, :func:`optax.incremental_update`; Var-T-JEPA: the negative ELBO), the
effective rank of the embeddings of fixed training rows every ``rank_every`` steps (collapse
check), then the embeddings (mean over feature tokens of the encoder's posterior means, full row)
of the train and test splits go to a logistic-regression probe and an MLP probe. In the same run,
the raw-feature MLP and LightGBM baselines. For Var-T-JEPA the mean posterior variance of a test
row is its uncertainty score: the area under the risk-coverage curve (AURC) of the linear probe's
errors ranked by it, against the probe's own ``1 - max prob`` and against random order.
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
from fidia_jax.projects.varjepa.configs import METHODS, VarJepaConfig

__all__ = [
    "embed",
    "format_table",
    "pretrain",
    "probe",
    "raw_baselines",
    "run",
    "train_and_evaluate",
]

SUMMARY_FILE = "varjepa.json"


def _view_sizes(config: VarJepaConfig, n_features: int) -> tuple[int, int]:
    n_ctx = max(1, round(config.context_fraction * n_features))
    n_tgt = max(1, min(n_features - n_ctx, round(config.target_fraction * n_features)))
    if n_ctx + n_tgt > n_features:
        raise ValueError(f"a table with {n_features} feature(s) cannot hold a context and a target")
    return n_ctx, n_tgt


@functools.lru_cache(maxsize=16)
def _train_step(
    graphdef,
    method: str,
    n_ctx: int,
    n_tgt: int,
    lr: float,
    wd: float,
    ema_decay: float,
    beta: float,
    warmup: int,
):
    """One jitted step, cached on (model graph, hyperparameters) so seeds share the compile."""
    tx = optax.adamw(lr, weight_decay=wd)

    def loss_fn(params, target_params, x_num, x_cat, key, step):
        model = nnx.merge(graphdef, params)
        if method == "tjepa":
            return losses.tjepa_objective(
                model,
                nnx.merge(graphdef, target_params),
                x_num,
                x_cat,
                key,
                n_context=n_ctx,
                n_target=n_tgt,
            )
        b = beta * jnp.minimum(1.0, (step + 1.0) / warmup) if warmup else beta
        return losses.var_tjepa_objective(
            model, x_num, x_cat, key, n_context=n_ctx, n_target=n_tgt, beta=b
        )

    @jax.jit
    def step_fn(params, target_params, opt_state, x_num, x_cat, key, step):
        (loss, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            params, target_params, x_num, x_cat, key, step
        )
        updates, opt_state = tx.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        if method == "tjepa":
            target_params = optax.incremental_update(params, target_params, 1.0 - ema_decay)
        return params, target_params, opt_state, loss, aux

    return tx, step_fn


@functools.lru_cache(maxsize=16)
def _embed_fn(graphdef):
    @jax.jit
    def fn(params, x_num, x_cat):
        q = nnx.merge(graphdef, params).encode(x_num, x_cat)
        var = jnp.exp(q.log_var) if q.log_var is not None else jnp.zeros_like(q.mean)
        return jnp.mean(q.mean, axis=1), jnp.mean(var, axis=(1, 2))

    return fn


def embed(model: models.TabularJepa, split: data.TabularSplit, *, batch: int = 2048):
    """Frozen embeddings of a split: ``(Z (N, D), posterior_var (N,))`` numpy float32.

    ``Z`` is the mean over feature tokens of the encoder's (posterior-mean) tokens on the full
    row; ``posterior_var`` the mean posterior variance over tokens and channels (zeros for
    T-JEPA).
    """
    model.tokenizer(split.x_num, split.x_cat)  # host-side checks: shapes, NaN, category ids
    graphdef, params = nnx.split(model)
    fn = _embed_fn(graphdef)
    zs, vs = [], []
    for i in range(0, len(split.y), batch):
        z, v = fn(
            params, jnp.asarray(split.x_num[i : i + batch]), jnp.asarray(split.x_cat[i : i + batch])
        )
        zs.append(np.asarray(z))
        vs.append(np.asarray(v))
    return np.concatenate(zs), np.concatenate(vs)


def pretrain(config: VarJepaConfig, splits: data.TabularSplits, method: str):
    """Pretrains one method; returns ``(model, history)``.

    ``history`` holds ``step``, ``loss`` (every ``rank_every`` steps and the last), the loss
    terms, ``effective_rank`` of the centred embeddings of ``rank_rows`` fixed training rows,
    and ``wall_s``.

    Raises:
      ValueError: an unknown method or a loss that became non-finite (named with its step).
    """
    if method not in METHODS:
        raise ValueError(f"pretrain: unknown method {method!r}; choose from {tuple(METHODS)}")
    train = splits.train
    n_num, cards = train.x_num.shape[1], splits.schema.cardinalities
    model = models.TabularJepa(
        n_num,
        cards,
        dim=config.dim,
        depth=config.depth,
        heads=config.heads,
        n_reg=config.n_reg,
        predictor_depth=config.predictor_depth,
        variational=method == "var_tjepa",
        rngs=nnx.Rngs(config.seed),
    )
    n_ctx, n_tgt = _view_sizes(config, model.n_features)
    graphdef, params = nnx.split(model)
    tx, step_fn = _train_step(
        graphdef,
        method,
        n_ctx,
        n_tgt,
        config.learning_rate,
        config.weight_decay,
        config.ema_decay,
        config.beta,
        config.kl_warmup_steps,
    )
    opt_state, target_params = tx.init(params), params
    rng = np.random.default_rng(config.seed)
    rank_idx = rng.choice(len(train.y), min(config.rank_rows, len(train.y)), replace=False)
    rank_split = data.TabularSplit(train.x_num[rank_idx], train.x_cat[rank_idx], train.y[rank_idx])
    key = jax.random.key(config.seed)
    history: dict[str, list] = {"step": [], "loss": [], "effective_rank": [], "terms": []}
    t0 = time.time()
    batch = min(config.batch_size, len(train.y))
    for step in range(config.steps):
        idx = rng.integers(0, len(train.y), batch)
        key, sub = jax.random.split(key)
        params, target_params, opt_state, loss, aux = step_fn(
            params,
            target_params,
            opt_state,
            jnp.asarray(train.x_num[idx]),
            jnp.asarray(train.x_cat[idx]),
            sub,
            jnp.asarray(step, jnp.float32),
        )
        if step % config.rank_every == 0 or step == config.steps - 1:
            loss = float(loss)
            if not np.isfinite(loss):
                raise ValueError(f"pretrain({method}): the loss became {loss} at step {step}")
            z, _ = embed(nnx.merge(graphdef, params), rank_split)
            history["step"].append(step)
            history["loss"].append(loss)
            history["terms"].append({k: float(v) for k, v in aux.items()})
            history["effective_rank"].append(
                float(metrics.effective_rank(jnp.asarray(z), center=True))
            )
    history["wall_s"] = time.time() - t0
    return nnx.merge(graphdef, params), history


def _mlp(config: VarJepaConfig):
    from sklearn.neural_network import MLPClassifier

    return MLPClassifier(
        hidden_layer_sizes=tuple(config.mlp_hidden),
        early_stopping=True,
        max_iter=300,
        random_state=config.seed,
    )


def probe(config: VarJepaConfig, z_train, y_train, z_test, y_test) -> dict[str, Any]:
    """Linear (logistic regression) and, if ``config.probe_mlp``, MLP probes on frozen features.

    Features are standardised with the training rows' statistics.

    Returns:
      ``{"linear_acc", "mlp_acc"?, "linear_errors" (N_test,) 0/1, "linear_conf" (N_test,)}``.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler().fit(z_train)
    a, b = scaler.transform(z_train), scaler.transform(z_test)
    lr = LogisticRegression(max_iter=2000).fit(a, y_train)
    proba = lr.predict_proba(b)
    pred = lr.classes_[np.argmax(proba, axis=1)]
    out: dict[str, Any] = {
        "linear_acc": float(np.mean(pred == y_test)),
        "linear_errors": (pred != y_test).astype(np.float64),
        "linear_conf": proba.max(axis=1),
    }
    if config.probe_mlp:
        out["mlp_acc"] = float(_mlp(config).fit(a, y_train).score(b, y_test))
    return out


def _one_hot(split: data.TabularSplit, cards) -> np.ndarray:
    blocks = [split.x_num] + [
        np.eye(c, dtype=np.float32)[split.x_cat[:, j]] for j, c in enumerate(cards)
    ]
    return np.concatenate(blocks, axis=1)


def raw_baselines(config: VarJepaConfig, splits: data.TabularSplits) -> dict[str, float]:
    """Raw-feature MLP (standardised numerics + one-hot categories) and LightGBM accuracies."""
    import lightgbm

    cards = splits.schema.cardinalities
    tr, te = _one_hot(splits.train, cards), _one_hot(splits.test, cards)
    mlp_acc = float(_mlp(config).fit(tr, splits.train.y).score(te, splits.test.y))
    n_num = splits.train.x_num.shape[1]
    gbm = lightgbm.LGBMClassifier(random_state=config.seed, verbose=-1)
    gbm.fit(
        np.concatenate([splits.train.x_num, splits.train.x_cat], axis=1),
        splits.train.y,
        categorical_feature=list(range(n_num, n_num + len(cards))) or "auto",
    )
    gbm_pred = gbm.predict(np.concatenate([splits.test.x_num, splits.test.x_cat], axis=1))
    return {"raw_mlp_acc": mlp_acc, "lightgbm_acc": float(np.mean(gbm_pred == splits.test.y))}


def run(config: VarJepaConfig, splits: data.TabularSplits | None = None) -> dict[str, Any]:
    """Pretrains, embeds and probes every method of ``config``; JSON-ready results."""
    if splits is None:
        splits = data.load_tabular(config.dataset, seed=config.seed, max_train=config.max_train)
    results: dict[str, Any] = {
        "dataset": splits.name,
        "seed": config.seed,
        "n_train": len(splits.train.y),
        "n_test": len(splits.test.y),
        "unknown_in_test": splits.unknown_in_test,
        "methods": {},
    }
    for method in config.methods:
        model, history = pretrain(config, splits, method)
        z_tr, _ = embed(model, splits.train)
        z_te, var_te = embed(model, splits.test)
        p = probe(config, z_tr, splits.train.y, z_te, splits.test.y)
        row = {
            "linear_acc": p["linear_acc"],
            "history": history,
            "final_effective_rank": history["effective_rank"][-1],
        }
        if "mlp_acc" in p:
            row["mlp_acc"] = p["mlp_acc"]
        errors = p["linear_errors"]
        row["aurc_random"] = float(errors.mean())
        row["aurc_probe_confidence"] = metrics.area_under_risk_coverage(-p["linear_conf"], errors)
        if method == "var_tjepa":
            row["aurc_posterior_variance"] = metrics.area_under_risk_coverage(var_te, errors)
        results["methods"][METHODS[method]] = row
    if config.baselines:
        results["baselines"] = raw_baselines(config, splits)
    return results


def format_table(results: dict[str, Any]) -> str:
    """Markdown table of one run: accuracy per method and probe, ratio to the T-JEPA linear probe."""
    rows = results["methods"]
    ref = rows.get(METHODS["tjepa"], next(iter(rows.values())))["linear_acc"]
    lines = [
        f"{results['dataset']} (seed {results['seed']}, {results['n_train']} train / "
        f"{results['n_test']} test rows); ratio = accuracy / T-JEPA linear probe",
        "| model | linear probe acc (ratio) | MLP probe acc | eff. rank | AURC (post. var / conf / random) |",
        "|---|---|---|---|---|",
    ]
    for name, r in rows.items():
        aurc = (
            f"{r.get('aurc_posterior_variance', float('nan')):.3f} / "
            f"{r['aurc_probe_confidence']:.3f} / {r['aurc_random']:.3f}"
        )
        lines.append(
            f"| {name} | {r['linear_acc']:.4f} ({r['linear_acc'] / ref:.3f}) | "
            f"{r.get('mlp_acc', float('nan')):.4f} | {r['final_effective_rank']:.1f} | {aurc} |"
        )
    for name, acc in results.get("baselines", {}).items():
        lines.append(
            f"| {name.replace('_acc', '')} (raw features) | {acc:.4f} ({acc / ref:.3f}) | | | |"
        )
    return "\n".join(lines)


def train_and_evaluate(config: VarJepaConfig, workdir: str | pathlib.Path) -> dict[str, Any]:
    """Runs :func:`run`, prints its table and writes ``workdir/varjepa.json`` atomically.

    Returns:
      The results dict (as written, without ``config``).
    """
    results = run(config)
    print(format_table(results))
    out = pathlib.Path(workdir) / SUMMARY_FILE
    write_summary(out, results, config)
    return results
