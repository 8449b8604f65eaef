"""The treatment-effect experiment: datasets x seeds x methods, sqrt(PEHE) and ATE error on held-out units.

For each data instance (an IHDP replication, or a K-arm generator draw for each ``K`` of the
config) the units are split (stratified by arm), each method is fitted on the training units
and scored on the held-out units against the known potential outcomes with
:func:`fidia_jax.metrics.sqrt_pehe` and :func:`fidia_jax.metrics.ate_error` (all arm pairs).
When ``alpha`` is ``None`` the balancing weight is the plug-in estimate
(:func:`fidia_jax.projects.causal.estimate_alpha_for`, reconstruction), computed once per
instance; ``alpha_grid`` adds CFR-pairwise rows at fixed alphas for the comparison, and
``validation_fraction`` a row whose alpha is chosen from that grid on a validation split (the
selection a user without the bound would make). The meta-learner baselines
(:mod:`~.baselines`) are fitted on the same training units and scored the same way; with
``validation_fraction > 0`` each boosted T-learner of ``methods`` (``t_gbm``, ``t_lgbm``) also
gets a ``t_<base>@val`` row, its learning rate chosen on the same validation split of the
training units with the same budget (:func:`~.baselines.tune_meta_learner`).

Several devices or processes (:mod:`fidia_jax.parallel`): the networks' gradient steps run
data-parallel (``config.num_devices``, ``config.param_sharding``; :mod:`~._fit`); under a
multi-host launcher every process fits them, while the meta-learner and reference baselines
(scikit-learn, LightGBM, closed forms: nothing to split) run on process 0 only, which alone
prints and writes the files.
"""

from __future__ import annotations

import dataclasses
import pathlib
import time
from typing import Any

import numpy as np

from fidia_jax import metrics, parallel
from fidia_jax import train as train_lib
from fidia_jax.config import write_summary
from fidia_jax.projects.causal import baselines, configs
from fidia_jax.projects.causal import data as data_lib
from fidia_jax.projects.causal._fit import (
    VAL_SEED_OFFSET,
    CfrSettings,
    EgmSettings,
    estimate_alpha_for,
    fit_causalegm,
    fit_cfr,
)
from fidia_jax.projects.causal.configs import CausalConfig

__all__ = ["format_table", "instances", "run_experiment", "train_and_evaluate"]

SUMMARY_FILE = "causal_results.json"
#: Baselines that get a ``<name>@val`` row (base-learner setting chosen on the networks'
#: validation split) when ``validation_fraction > 0``: the boosted T-learners.
TUNED_BASELINES = ("t_gbm", "t_lgbm")


def instances(config: CausalConfig):
    """Yields ``(K, replication, CausalData)`` for every data instance of the config."""
    if config.dataset == "ihdp":
        for r in config.replications:
            yield 2, r, data_lib.load_ihdp(r, config.data_dir)
        return
    if config.dataset == "multiarm_ihdp":
        base = data_lib.load_ihdp(1, config.data_dir).x
    elif config.dataset == "multiarm_acic":
        base = data_lib.acic2016_covariates()[: config.n_units]
    else:
        rng = np.random.default_rng(config.seed + 12345)
        base = rng.normal(size=(config.n_units, 10))
    for k in config.num_arms:
        for r in config.replications:
            yield (
                k,
                r,
                data_lib.make_multiarm(
                    base,
                    k,
                    imbalance=config.imbalance,
                    seed=config.seed + 1000 * r + k,
                    name=config.dataset,
                ),
            )


def _cfr_settings(config: CausalConfig, scheme: str, alpha: float) -> CfrSettings:
    return CfrSettings(
        scheme=scheme,
        ipm=config.ipm,
        alpha=alpha,
        rep_hidden=tuple(config.rep_hidden),
        head_hidden=tuple(config.head_hidden),
        learning_rate=config.learning_rate,
        batch_size=config.batch_size,
        iterations=config.iterations,
        num_devices=config.num_devices,
        param_sharding=config.param_sharding,
    )


def _score(test, predict) -> dict[str, float]:
    mu_hat = predict(test.x)
    return {
        "sqrt_pehe": metrics.sqrt_pehe(test.mu, mu_hat),
        "ate_error": metrics.ate_error(test.mu, mu_hat),
    }


def _validation_alpha(config: CausalConfig, train, test, seed: int, workdir, prefix: str):
    """alpha chosen from ``config.alpha_grid`` on a validation split of ``train``.

    CFR-pairwise is fitted at each grid value on ``1 - validation_fraction`` of the training
    units (stratified by arm); the value whose fit has the lowest plain factual MSE on the
    held-back units is chosen, and that fit is the model reported. Returns
    ``(alpha, predict, info, grid)`` with ``grid[str(a)] = {val_mse, sqrt_pehe, ate_error}``
    (the held-out scores of every grid fit: the best of them is the oracle choice a user
    cannot make).
    """
    fit_part, val = data_lib.split_causal(train, config.validation_fraction, seed + VAL_SEED_OFFSET)
    grid, fits = {}, {}
    for a in config.alpha_grid:
        predict, info = fit_cfr(
            fit_part,
            _cfr_settings(config, "pairwise", a),
            seed,
            workdir=workdir,
            run=f"{prefix}_val@{a:g}",
        )
        factual = predict(val.x)[np.arange(len(val)), val.t]
        grid[f"{a:g}"] = {
            "val_mse": float(np.mean((factual - val.y) ** 2)),
            **_score(test, predict),
        }
        fits[a] = (predict, info)
    chosen = min(config.alpha_grid, key=lambda a: grid[f"{a:g}"]["val_mse"])
    return chosen, *fits[chosen], grid


def _es_settings(config: CausalConfig, scheme: str, alpha: float) -> CfrSettings:
    return dataclasses.replace(
        _cfr_settings(config, scheme, alpha),
        val_fraction=config.validation_fraction,
        eval_every=config.eval_every,
        patience=config.patience,
    )


def _early_stopped_alpha(config: CausalConfig, train, test, seed: int, workdir, prefix: str):
    """CFR's protocol: CFR-pairwise early-stopped (:func:`fit_cfr` with ``val_fraction``) at
    each ``config.alpha_grid`` value on the validation split of :func:`_validation_alpha`; the
    alpha whose best validation factual MSE is lowest is kept. Returns ``(alpha, predict,
    info, grid)``, ``grid[str(a)] = {val_mse, best_step, stopped_step, sqrt_pehe,
    ate_error}``."""
    grid, fits = {}, {}
    for a in config.alpha_grid:
        predict, info = fit_cfr(
            train, _es_settings(config, "pairwise", a), seed, workdir=workdir,
            run=f"{prefix}_val_es@{a:g}",
        )  # fmt: skip
        grid[f"{a:g}"] = {
            "val_mse": info["val_mse"],
            "best_step": info["best_step"],
            "stopped_step": info["stopped_step"],
            **_score(test, predict),
        }
        fits[a] = (predict, info)
    chosen = min(config.alpha_grid, key=lambda a: grid[f"{a:g}"]["val_mse"])
    return chosen, *fits[chosen], grid


def run_experiment(
    config: CausalConfig, *, workdir: str | pathlib.Path | None = None
) -> dict[str, Any]:
    """Runs every method on every instance.

    With ``alpha=None`` the pilot TARNet of ``alpha_hat`` is also the TARNet row's model (same
    settings and seed). Each CFR / TARNet fit (and the pilot) is a
    :func:`fidia_jax.train.fit` named ``K<K>_rep<r>_<method>``; with ``workdir`` they write
    ``metrics.jsonl``, ``curves.png`` and checkpoints there, and a rerun resumes them.
    CausalEGM's own loop shows its progress but keeps no checkpoint.

    Returns:
      A JSON-ready dict: ``runs`` (a list of ``{K, replication, method, alpha, sqrt_pehe,
      ate_error, wall_s, s_per_epoch?}``; the ``cfr_pairwise@val`` row also holds ``grid``,
      per grid alpha the validation factual MSE and the held-out scores of its fit; with
      ``validation_fraction > 0`` a ``t_<base>@val`` row per boosted T-learner of ``methods``
      (:data:`TUNED_BASELINES`), fitted on the fitting part of the same validation split of the
      training units as ``cfr_pairwise@val`` (seed ``seed + VAL_SEED_OFFSET``), its learning
      rate chosen from :data:`~.baselines.TUNING_GRIDS` (three values, CFR's budget) by factual
      MSE on the validation units, holds ``chosen`` and ``grid`` (value -> validation MSE); the
      test units are never seen by any choice),
      ``summary`` (``str(K)`` -> method -> mean/std of sqrt_pehe and ate_error over
      replications) and ``wall_s``.
    """
    runs = []
    t_start = time.time()
    for k, r, d in instances(config):
        seed = config.seed + r
        train, test = data_lib.split_causal(d, config.test_fraction, seed)
        alpha = config.alpha
        alpha_hat = pilot = None
        if alpha is None:
            # the pilot is a TARNet fit with the TARNet row's settings: it is that row's model
            name = "tarnet" if "tarnet" in config.methods else "alpha_pilot"
            alpha_hat, *pilot = estimate_alpha_for(
                train, _cfr_settings(config, "none", 0.0), seed, workdir=workdir,
                run=f"K{k}_rep{r}_{name}", with_fit=True,
            )  # fmt: skip
            alpha = alpha_hat
        jobs = []
        for method in config.methods:
            if method == "causalegm" or method in configs.BASELINES:
                jobs.append((method, None))
            elif method == "tarnet":
                jobs.append(("tarnet", 0.0))
            else:
                jobs.append((method, alpha))
        if config.validation_fraction == 0:
            jobs += [(f"cfr_pairwise@{a:g}", a) for a in config.alpha_grid]
        else:
            jobs.append(("cfr_pairwise@val", None))
            jobs += [(f"{m}@val", None) for m in config.methods if m in TUNED_BASELINES]
            if config.early_stopping:
                jobs += [("tarnet@es", 0.0), ("cfr_pairwise@val_es", None)]
        if config.dataset == "ihdp":  # issue 41: what no model of x achieves, on IHDP
            jobs += [(m, None) for m in baselines.REFERENCE_PREDICTORS]
        for name, a in jobs:
            host = name.split("@")[0] in configs.BASELINES
            if (host or name in baselines.REFERENCE_PREDICTORS) and not parallel.is_primary():
                continue  # nothing to split: process 0 only, never twice
            grid = None
            if name in baselines.REFERENCE_PREDICTORS:
                predict, info = baselines.fit_reference(train, name)
            elif name.endswith("@val") and host:  # the networks' validation split and budget
                meta, base = name[: -len("@val")].split("_")
                predict, info = baselines.tune_meta_learner(
                    train, meta, base, seed, validation_fraction=config.validation_fraction
                )
            elif name == "tarnet" and pilot is not None:
                predict, info = pilot
            elif name == "cfr_pairwise@val":
                a, predict, info, grid = _validation_alpha(
                    config, train, test, seed, workdir, f"K{k}_rep{r}"
                )
            elif name == "tarnet@es":
                predict, info = fit_cfr(
                    train, _es_settings(config, "none", 0.0), seed, workdir=workdir,
                    run=f"K{k}_rep{r}_{name}",
                )  # fmt: skip
            elif name == "cfr_pairwise@val_es":
                a, predict, info, grid = _early_stopped_alpha(
                    config, train, test, seed, workdir, f"K{k}_rep{r}"
                )
            elif name in configs.BASELINES:
                meta, base = name.split("_")
                predict, info = baselines.fit_meta_learner(train, meta, base, seed)
            elif name == "causalegm":
                egm = EgmSettings(
                    n_iter=config.egm_iterations,
                    embed_dim=config.egm_embed_dim,
                    batches_per_eval=min(500, config.egm_iterations),
                    num_devices=config.num_devices,
                    param_sharding=config.param_sharding,
                )
                if config.egm_small:
                    egm = dataclasses.replace(
                        egm,
                        g_units=(16, 16),
                        e_units=(16, 16),
                        f_units=(16, 8),
                        h_units=(16, 8),
                        dz_units=(16, 8),
                        dv_units=(16, 8),
                    )
                predict, info = fit_causalegm(train, egm, seed, run=f"K{k}_rep{r}_{name}")
            else:
                scheme = "none" if name == "tarnet" else name[4:].split("@")[0]
                predict, info = fit_cfr(
                    train,
                    _cfr_settings(config, scheme, a),
                    seed,
                    time_epochs=config.time_epochs if scheme != "none" else 0,
                    workdir=workdir,
                    run=f"K{k}_rep{r}_{name}",
                )
            row = {
                "K": k,
                "replication": r,
                "method": name,
                "alpha": a,
                "alpha_hat": alpha_hat,
                **_score(test, predict),
                "wall_s": info["wall_s"],
            }
            if "best_step" in info:
                row["best_step"], row["stopped_step"] = info["best_step"], info["stopped_step"]
            if "s_per_epoch" in info:
                row["s_per_epoch"] = info["s_per_epoch"]
            if grid is not None:
                row["grid"] = grid
            if "chosen" in info:  # t_<base>@val: the chosen setting, every value's val. MSE
                row["chosen"], row["grid"] = info["chosen"], info["grid"]
            runs.append(row)
            if parallel.is_primary():
                print(
                    f"K={k} rep={r} {name:<22} sqrt_pehe={row['sqrt_pehe']:.3f} "
                    f"ate_err={row['ate_error']:.3f} ({info['wall_s']:.0f} s)",
                    flush=True,
                )
    summary: dict[str, dict[str, Any]] = {}
    for row in runs:
        summary.setdefault(str(row["K"]), {}).setdefault(row["method"], []).append(row)
    for by_method in summary.values():
        for name, rows in by_method.items():
            pehe = np.array([x["sqrt_pehe"] for x in rows])
            ate = np.array([x["ate_error"] for x in rows])
            cell = {
                "sqrt_pehe_mean": float(pehe.mean()),
                "sqrt_pehe_std": float(pehe.std()),
                "ate_error_mean": float(ate.mean()),
                "ate_error_std": float(ate.std()),
                "n": len(rows),
            }
            per_epoch = [x["s_per_epoch"] for x in rows if "s_per_epoch" in x]
            if per_epoch:
                cell["s_per_epoch"] = float(np.mean(per_epoch))
            by_method[name] = cell
    return {"runs": runs, "summary": summary, "wall_s": time.time() - t_start}


def format_table(results: dict[str, Any]) -> str:
    """Markdown table: one row per (K, method), sqrt(PEHE) and ATE error as mean +- std."""
    lines = ["| K | method | sqrt(PEHE) | ATE error | runs |", "|---|---|---|---|---|"]
    for k, by_method in results["summary"].items():
        for name, c in by_method.items():
            lines.append(
                f"| {k} | {name} | {c['sqrt_pehe_mean']:.3f} ± {c['sqrt_pehe_std']:.3f} | "
                f"{c['ate_error_mean']:.3f} ± {c['ate_error_std']:.3f} | {c['n']} |"
            )
    return "\n".join(lines)


def train_and_evaluate(config: CausalConfig, workdir: str | pathlib.Path) -> dict[str, Any]:
    """Runs :func:`run_experiment` with ``workdir`` (its CFR fits resume from it), prints a
    table and writes, in ``workdir``: ``causal_results.json`` (results + config),
    ``summary.json`` (per ``K`` and method: sqrt(PEHE) and ATE error, mean and std),
    ``effects.png`` (the same as bars) and the fits' ``metrics.jsonl`` / ``curves.png`` /
    ``checkpoints/``.

    Returns:
      The results of :func:`run_experiment` (as written, without ``config``).
    """
    parallel.initialize_distributed()  # before any array exists; no-op without a launcher
    workdir = pathlib.Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    results = run_experiment(config, workdir=workdir)
    cells = [(k, name, c) for k, by_method in results["summary"].items()
             for name, c in by_method.items()]  # fmt: skip
    train_lib.print_table(
        f"{config.dataset}: held-out sqrt(PEHE) and ATE error over all arm pairs "
        "(mean ± std over replications; lower is better)",
        ["K", "method", "sqrt(PEHE)", "ATE error", "runs"],
        [[k, name, f"{c['sqrt_pehe_mean']:.3f} ± {c['sqrt_pehe_std']:.3f}",
          f"{c['ate_error_mean']:.3f} ± {c['ate_error_std']:.3f}", c["n"]]
         for k, name, c in cells],
    )  # fmt: skip
    if parallel.is_primary():
        write_summary(workdir / SUMMARY_FILE, results, config)
    train_lib.write_summary(workdir, {"dataset": config.dataset, "summary": results["summary"]})
    if not parallel.is_primary():
        return results
    rows = [{"method": f"K={k} {name}" if len(results["summary"]) > 1 else name,
             "sqrt(PEHE)": c["sqrt_pehe_mean"], "PEHE std": c["sqrt_pehe_std"],
             "ATE error": c["ate_error_mean"], "ATE std": c["ate_error_std"]}
            for k, name, c in cells]  # fmt: skip
    train_lib.plot_bars(
        rows, workdir / "effects.png", label="method", values=["sqrt(PEHE)", "ATE error"],
        errors={"sqrt(PEHE)": "PEHE std", "ATE error": "ATE std"},
        title=f"{config.dataset}: held-out errors, mean ± std over replications",
    )  # fmt: skip
    return results
