"""The TeamWork comparison: fit every method on clean training data, score the test series, and
report F1 / point-adjusted F1 / affiliation F1 / AUC-PR under three thresholds.

Thresholds (all labelled in the table):

* ``ratio``: flag the top ``anomaly_ratio`` fraction of each test series (the field's protocol
  and the rule of the headline numbers: a label-free statistic of the test series' own scores);
* ``ratio_train``: flag test steps scoring at or above the ``1 - anomaly_ratio`` quantile of the
  same detector's scores on its training series (a threshold fitted on training data only);
* ``oracle``: the threshold maximising point-wise F1 on the test labels (uses the labels: an
  upper bound, not a deployable detector);
* ``skab_ucl`` (SKAB only, SKAB's protocol): ``UCL = 4/3 * quantile_0.999(training scores)`` per
  run, the rule of SKAB's Conv-AE notebook, a step flagged when its score is strictly above it;
  predictions of all runs are pooled and ``F1 = TP / (TP + (FN + FP) / 2)``, ``FAR = FP / (FP +
  TN)``, ``MAR = FN / (FN + TP)`` as in ``core/metrics.py`` (``chp_score(...,
  metric="binary")``) of github.com/waico/SKAB (:mod:`~fidia_jax.projects.teamwork.skab`, checked
  against a fixture made from their code).

Neural methods (all variants of :class:`fidia_jax.projects.teamwork.model.TeamWork`): each is
trained with Adam on windows of the standardised training series (every step
:func:`fidia_jax.train.make_train_step`'s, the loop :func:`fidia_jax.train.fit` with a run named
after the method, and the series on SKAB) and scores every test step once per
``K = round(1 / mask_ratio)`` complementary masked passes.

:func:`train_and_evaluate` shows progress (a stage per data step and classical fit, a progress
bar per neural fit), prints the table and writes ``teamwork.json`` (every number),
``summary.json`` (the table), ``teamwork_comparison.png`` (the table as bars),
``teamwork_scores.png`` (each method's score over the test series with the labelled anomalies)
and the fits' ``metrics.jsonl``, ``curves.png`` and checkpoints (a rerun in the same workdir resumes).
"""

from __future__ import annotations

import functools
import logging
import math
import os
import pathlib
import time
import warnings
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import PartitionSpec as P

from fidia_jax import _checks, metrics, parallel, train
from fidia_jax import config as config_lib
from fidia_jax._io import atomic_path
from fidia_jax.errors import DataError
from fidia_jax.projects.teamwork import data, losses, model, skab
from fidia_jax.projects.teamwork._detector import Detector, _adam, _moving_average
from fidia_jax.projects.teamwork._peers import _fit_convae, _fit_iforest, _fit_pca
from fidia_jax.projects.teamwork._peers import covering_minimum as covering_minimum
from fidia_jax.projects.teamwork.configs import METHODS, TeamWorkConfig

__all__ = [
    "Detector",
    "compare_methods",
    "evaluate_scores",
    "fit_detector",
    "format_table",
    "train_and_evaluate",
]

SUMMARY_FILE = "teamwork.json"
#: Methods fitted on the host (scikit-learn, numpy): process 0 only in a multi-process run.
_HOST_METHODS = ("pca", "iforest")
#: Neural variants: (use_roles, use_gate, period-aware masking, predict variance).
_VARIANTS: dict[str, tuple[bool, bool, bool, bool]] = {
    "teamwork": (True, True, True, True),
    "no_roles": (False, True, True, True),
    "no_gate": (True, False, True, True),
    "random_mask": (True, True, False, True),
    "transformer": (False, False, False, False),
}


#: The batch ``(windows, masks, edges, prior)`` on the mesh: windows and masks split over
#: ``"data"``, the role graph and its prior (shared by the batch) replicated.
_BATCH_SPEC = (P("data"), P("data"), P(), P())


@functools.cache
def _train_step(
    graphdef: nnx.GraphDef, learning_rate: float, mesh=None, param_sharding="replicated"
):
    """The jitted step of one model structure and learning rate (cached: one compilation per
    shape however many detectors are fitted, e.g. one per SKAB run); with ``mesh``
    data-parallel (:data:`_BATCH_SPEC`)."""

    def loss_fn(params, batch):
        x_BxLxC, mask_BxLxC, edges, prior = batch
        mean, var = train.merge_model(graphdef, params)(x_BxLxC, mask_BxLxC, edges, prior)
        if var is None:
            return losses.masked_mse(x_BxLxC, mean, mask_BxLxC)
        return losses.gaussian_nll(x_BxLxC, mean, var, mask_BxLxC)

    return train.make_train_step(
        loss_fn, _adam(learning_rate), mesh=mesh, param_sharding=param_sharding,
        batch_spec=_BATCH_SPEC,
    )  # fmt: skip


@partial(jax.jit, static_argnums=0)
def _score_windows(graphdef, state, x_NxLxC, masks_KxLxC, edges, prior):
    """``(N, L)`` scores: each entry from the pass where it was masked."""
    model = nnx.merge(graphdef, state)
    n, length, c = x_NxLxC.shape
    k = masks_KxLxC.shape[0]
    x_rep = jnp.broadcast_to(x_NxLxC[:, None], (n, k, length, c)).reshape(n * k, length, c)
    m_rep = jnp.broadcast_to(masks_KxLxC[None], (n, k, length, c)).reshape(n * k, length, c)
    mean, var = model(x_rep, m_rep, edges, prior)
    err = (x_rep - mean) ** 2 if var is None else (x_rep - mean) ** 2 / var
    err_NxKxLxC = err.reshape(n, k, length, c) * masks_KxLxC[None].astype(err.dtype)
    return jnp.mean(jnp.sum(err_NxKxLxC, axis=1), axis=-1)


def _channel_periods(z: np.ndarray, window: int) -> np.ndarray:
    """Each channel's dominant period, searched up to the window; a channel whose strongest
    period lies beyond the window gets the window (never an in-range alias), and one log line
    names those channels."""
    periods, beyond = channel_periods_beyond(z, window)
    if beyond:
        logging.getLogger(__name__).warning(
            "period-aware spans: channels %s have their strongest period beyond the window "
            "(%d steps); their period is taken as the window",
            beyond,
            window,
        )
    return periods


def channel_periods_beyond(z: np.ndarray, window: int) -> tuple[np.ndarray, list[int]]:
    """``(periods, beyond)``: :func:`_channel_periods`' periods and the channels whose strongest
    period lies beyond the window (their period is the window), without the log line."""
    periods, beyond = [], []
    for ch in range(z.shape[1]):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            periods.append(data.dominant_period(z[:, ch], max_period=window, beyond="clip"))
        if caught:
            beyond.append(ch)
    return np.array(periods), beyond


def _window_starts(t_len: int, window: int) -> np.ndarray:
    starts = list(range(0, t_len - window + 1, window))
    if starts[-1] != t_len - window:
        starts.append(t_len - window)
    return np.asarray(starts)


def fit_detector(
    method: str,
    train_series: Any,
    config: TeamWorkConfig,
    *,
    workdir: str | os.PathLike | None = None,
    run: str | None = None,
) -> Detector:
    """Fits one method on an anomaly-free ``(T, C)`` training series.

    Args:
      method: a key of :data:`~fidia_jax.projects.teamwork.METHODS`.
      train_series: ``(T, C)`` raw values; standardised with its own mean / std.
      config: sizes, steps, seed.
      workdir: where a neural method's fit writes ``metrics.jsonl``, its checkpoint
        (``checkpoints/<run>``) and ``curves.png``, and resumes from; ``None``: no files.
      run: the fit's name in the display and the files (default ``method``).

    Returns:
      A :class:`Detector`.

    Raises:
      DataError: NaN/inf, a constant channel, or a window longer than the series (checked
        before anything is fitted).
      TrainingError: a non-finite loss or gradient (the library's policy,
        :func:`fidia_jax.train.fit`: the step is skipped and training stops, naming it).
    """
    x = data.validate_series(train_series, window=config.window, name="training series")
    mu, sd = x.mean(axis=0), x.std(axis=0)

    def standardise(v: Any, name: str) -> np.ndarray:
        arr = np.asarray(v, np.float32)
        if arr.ndim != 2 or arr.shape[1] != x.shape[1] or not np.isfinite(arr).all():
            raise DataError(f"{name}: expected a finite (T, {x.shape[1]}) array, got {arr.shape}")
        return ((arr - mu) / sd).astype(np.float32)

    z = standardise(x, "training series")
    t0 = time.time()
    run = run or method
    if method == "pca":
        with train.stage(f"{run}: PCA T2+Q"):
            return _fit_pca(z, standardise, config, t0)
    if method == "iforest":
        with train.stage(f"{run}: Isolation Forest"):
            return _fit_iforest(z, standardise, config, t0)
    # the gradient-trained methods: data-parallel, each batch's windows split over the mesh
    mesh = parallel.data_mesh(config.batch_size, num_devices=config.num_devices)
    if method == "convae":
        return _fit_convae(z, standardise, config, t0, workdir=workdir, run=run, mesh=mesh)
    use_roles, use_gate, period_aware, predict_var = _VARIANTS[method]
    c = z.shape[1]
    infl = model.channel_influence(z, lags=config.lags)
    dominant = model.channel_roles(infl)
    edges, prior = model.role_edges(dominant, infl, use_roles=use_roles)
    periods = _channel_periods(z, config.window)
    spans = np.maximum(periods // 2, 1) if period_aware else np.ones(c, np.int64)
    net = model.init_teamwork(
        c,
        config.window,
        seed=config.seed,
        dim=config.dim,
        heads=config.heads,
        use_gate=use_gate,
        predict_variance=predict_var,
    )
    graphdef, params, _ = train.split_model(net)
    state = train.init_train_state(
        params, _adam(config.learning_rate), mesh=mesh, param_sharding=config.param_sharding
    )
    n_win = z.shape[0] - config.window + 1
    edges_j, prior_j = jnp.asarray(edges), jnp.asarray(prior)
    offsets = np.arange(config.window)

    def batches():
        """Random windows and their span masks, one seeded stream (resume replays it)."""
        rng = np.random.default_rng(config.seed)
        while True:
            idx = rng.integers(0, n_win, config.batch_size)
            batch = jnp.asarray(z[idx[:, None] + offsets[None, :]])
            mask = jnp.asarray(
                model.span_mask(rng, spans, config.window, config.mask_ratio, config.batch_size)
            )
            yield batch, mask, edges_j, prior_j

    res = train.fit(
        state,
        _train_step(graphdef, config.learning_rate, mesh, config.param_sharding),
        batches(),
        num_steps=config.steps,
        workdir=workdir,
        run=run,
        fingerprint=train.config_fingerprint(config),
        mesh=mesh,
        param_sharding=config.param_sharding,
        batch_spec=_BATCH_SPEC,
    )
    params = parallel.to_host(res.state.params)  # scoring: every process, from a host copy
    step_losses = [r["loss"] for r in res.history if "loss" in r]
    final_loss = float(np.mean(np.asarray(step_losses[-10:], np.float32)))
    n_passes = max(2, round(1.0 / config.mask_ratio))
    masks = jnp.asarray(model.eval_masks(spans, config.window, n_passes))
    chunk = 32

    def score(v: Any) -> np.ndarray:
        s_z = standardise(v, "series to score")
        t_len = s_z.shape[0]
        if t_len < config.window:
            raise DataError(f"window {config.window} is longer than the series ({t_len} steps)")
        starts = _window_starts(t_len, config.window)
        wins = s_z[starts[:, None] + offsets[None, :]]
        pad = (-len(wins)) % chunk
        wins = np.concatenate([wins, np.zeros((pad, *wins.shape[1:]), np.float32)])
        out = np.concatenate(
            [
                np.asarray(
                    _score_windows(
                        graphdef, params, jnp.asarray(wins[i : i + chunk]), masks, edges_j, prior_j
                    )
                )
                for i in range(0, len(wins), chunk)
            ]
        )
        result = np.zeros(t_len)
        for w, st in enumerate(starts):
            result[st : st + config.window] = out[w]
        return _moving_average(result, config.smooth)

    info = {
        "dominant": dominant.tolist(),
        "periods": periods.tolist(),
        "influence": np.round(infl, 4).tolist(),
        "final_loss": final_loss,
        "fit_s": time.time() - t0,
    }
    return Detector(method, score, info)


def evaluate_scores(
    runs: list[tuple[np.ndarray, np.ndarray, np.ndarray | None]],
    anomaly_ratio: float,
    *,
    ucl_quantile: float = 0.999,
    ucl_factor: float = 4.0 / 3.0,
    ucl_strict: bool = True,
    ratio_train: bool = False,
    skab_rule: bool = True,
) -> dict[str, dict[str, float]]:
    """Metrics of one method over one or more test series.

    Args:
      runs: ``(test_scores (T,), test_labels (T,), train_scores (T',) or None)`` per series.
      anomaly_ratio: for the ``ratio`` and ``ratio_train`` thresholds.
      ucl_quantile, ucl_factor: the ``skab_ucl`` rule (:func:`~.skab.skab_ucl`; default SKAB's
        Conv-AE notebook: 0.999, 4/3; :data:`~.skab.SKAB_UCL_RULES` lists the others).
      ucl_strict: ``skab_ucl`` flags scores ``> UCL`` (SKAB); ``False`` flags ``>= UCL`` (our
        earlier rule, as the other two rules do).
      ratio_train: add the ``ratio_train`` rule when every run has training scores: threshold
        ``np.quantile(train_scores, 1 - anomaly_ratio)`` (linear interpolation) of that run's
        training scores, a step flagged when its score is ``>=`` it; fitted on training rows
        only, so nothing in the test series moves it (unlike ``ratio``, a quantile of the test
        series' own scores).
      skab_rule: add the ``skab_ucl`` rule when every run has training scores (default ``True``;
        :func:`compare_methods` passes ``False`` off SKAB).

    Returns:
      ``{"ratio": m, "ratio_train"?: m, "oracle": m, "skab_ucl"?: m}`` with ``m`` holding ``f1`` and ``pa_f1``
      (point counts pooled over series), ``affiliation_f1`` (from the mean affiliation precision
      and recall over the series that hold an anomaly; a series where nothing is flagged counts
      with affiliation precision 0), ``auc_pr`` (mean over the series that hold both classes,
      threshold-free; ``None`` when no series does: undefined, not a number), ``far`` and
      ``mar`` (%, pooled); ``skab_ucl`` is present when every run has training scores, its
      ``f1``, ``far``, ``mar`` are SKAB's (:func:`~.skab.skab_binary_metrics`, unrounded: SKAB
      prints them to 2 decimals; NaN where SKAB divides 0 by 0). The
      oracle threshold of a series with one class only (where the best-F1 search is undefined)
      flags nothing on an all-normal series and everything on an all-anomalous one (the
      choices that add no error to the pooled counts).

    Raises:
      DataError: ``anomaly_ratio`` outside ``(0, 1]``, or a NaN/inf in a run's test or training
        scores (naming ``runs[i]``); labels other than 0/1 or of another length raise
        ``ValueError`` in :mod:`fidia_jax.metrics`.
    """
    if not 0.0 < float(anomaly_ratio) <= 1.0:
        raise DataError(f"evaluate_scores: anomaly_ratio must be in (0, 1], got {anomaly_ratio}")
    for i, (s, _y, tr) in enumerate(runs):
        _checks.assert_finite(np.asarray(s), f"runs[{i}] test_scores", where="evaluate_scores")
        if tr is not None:
            _checks.assert_finite(
                np.asarray(tr), f"runs[{i}] train_scores", where="evaluate_scores"
            )
    rules: dict[str, Any] = {
        "ratio": lambda s, y, tr: metrics.threshold_at_ratio(s, anomaly_ratio),
    }
    has_train = all(r[2] is not None for r in runs)
    if ratio_train and has_train:
        rules["ratio_train"] = lambda s, y, tr: _train_quantile(tr, anomaly_ratio)
    rules["oracle"] = lambda s, y, tr: _oracle_threshold(s, y)
    if skab_rule and has_train:
        rules["skab_ucl"] = lambda s, y, tr: skab.skab_ucl(
            tr, quantile=ucl_quantile, factor=ucl_factor
        )
    out: dict[str, dict[str, float]] = {}
    for name, rule in rules.items():
        counts = np.zeros(4)  # tp, fp, fn, tn
        pa = np.zeros(3)
        aff_p, aff_r, aps = [], [], []
        preds = []
        for s, y, tr in runs:
            thr = rule(s, y, tr)
            pred = s > thr if name == "skab_ucl" and ucl_strict else s >= thr
            preds.append(pred.astype(np.int8))
            f = metrics.point_f1(pred, y)
            counts += [f["tp"], f["fp"], f["fn"], f["tn"]]
            fa = metrics.point_f1(pred, y, adjust=True)
            pa += [fa["tp"], fa["fp"], fa["fn"]]
            aff = metrics.affiliation_metrics(pred, y)
            if y.any():
                aff_p.append(0.0 if math.isnan(aff["precision"]) else aff["precision"])
                aff_r.append(aff["recall"])
            if 0 < int(np.sum(y)) < len(y):
                aps.append(metrics.auc_pr(s, y))
        tp, fp, fn, tn = counts
        ap, ar = (float(np.mean(aff_p)), float(np.mean(aff_r))) if aff_p else (0.0, 0.0)
        out[name] = {
            "f1": 1.0 if 2 * tp + fp + fn == 0 else 2 * tp / (2 * tp + fp + fn),
            "pa_f1": 1.0 if pa.sum() == 0 else 2 * pa[0] / (2 * pa[0] + pa[1] + pa[2]),
            "affiliation_f1": 0.0 if ap + ar == 0 else 2 * ap * ar / (ap + ar),
            "auc_pr": float(np.mean(aps)) if aps else None,
            "far": 100.0 * fp / max(fp + tn, 1.0),
            "mar": 100.0 * fn / max(fn + tp, 1.0),
        }
        if name == "skab_ucl":
            sk = skab.skab_binary_metrics(
                [np.asarray(r[1]) for r in runs], preds, decimals=None
            )  # fmt: skip
            out[name].update(f1=sk["f1"], far=sk["far"], mar=sk["mar"])
    return out


def _train_quantile(train_scores: np.ndarray, anomaly_ratio: float) -> float:
    """``ratio_train``'s threshold: the ``1 - anomaly_ratio`` quantile of the training scores.

    Raises:
      ValueError: ``anomaly_ratio`` outside ``(0, 1]``, empty or non-finite training scores.
    """
    tr = np.asarray(train_scores, dtype=np.float64)
    if not 0.0 < anomaly_ratio <= 1.0:
        raise ValueError(f"anomaly_ratio must be in (0, 1], got {anomaly_ratio}")
    if tr.ndim != 1 or tr.size == 0 or not np.isfinite(tr).all():
        raise ValueError(
            f"train_scores must be a non-empty finite (T',) array, got shape {tr.shape}"
        )
    return float(np.quantile(tr, 1.0 - anomaly_ratio))


def _oracle_threshold(s: np.ndarray, y: np.ndarray) -> float:
    """Best-F1 threshold on the labels; for a one-class series, flag nothing (all normal) or
    everything (all anomalous)."""
    n_pos = int(np.sum(y))
    if n_pos == 0:
        return math.inf
    if n_pos == len(y):
        return -math.inf
    return metrics.best_f1_threshold(s, y)[0]


def compare_methods(
    config: TeamWorkConfig,
    *,
    workdir: str | os.PathLike | None = None,
    scores: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Runs every method of ``config.methods`` on ``config.dataset``.

    Args:
      config: the comparison.
      workdir: where the neural fits write their files and resume from (runs named
        ``<method>``, or ``<method>_<run>`` on SKAB); ``None``: no files.
      scores: if given, filled with ``method -> (test scores (T,), labels (T,))`` of the first
        series (for a figure).

    Returns:
      JSON-ready dict: ``dataset``, ``rows`` (row name -> threshold rule -> metrics; rules
      ``ratio``, ``ratio_train`` (threshold from the method's scores on the training series of
      each run, on every dataset), ``oracle`` and, on SKAB, ``skab_ucl``: see
      :func:`evaluate_scores`), ``info``
      (method -> facts of the first series), ``wall_s``, and ``teamwork_beats_transformer``
      (TeamWork strictly above the role-free transformer on every metric of the oracle and
      ratio rules), when both ran.

    Raises:
      DataError: missing or malformed SKAB files, or a series the methods cannot take.
      TrainingError: a neural fit met a non-finite loss or gradient.
    """
    t_start = time.time()
    if config.dataset == "synthetic":
        with train.stage(
            f"drawing a synthetic series ({config.train_length} training + "
            f"{config.test_length} test steps, {config.n_anomalies} anomalies)"
        ):
            syn = data.make_synthetic(
                config.seed,
                train_length=config.train_length,
                test_length=config.test_length,
                n_anomalies=config.n_anomalies,
            )
        series = [("synthetic", syn.train, syn.test, syn.labels)]
        truth = {"dominant": syn.dominant.tolist(), "periods": syn.periods.tolist()}
    else:
        with train.stage("loading SKAB"):
            runs, _ = data.load_skab(config.data_dir)
        if config.skab_runs:
            runs = runs[: config.skab_runs]
        runs = runs[:: config.skab_every]
        k = data.SKAB_TRAIN_SIZE
        series = [(r.name, r.values[:k], r.values[k:], r.anomaly[k:]) for r in runs]
        truth = {}
    results: dict[str, Any] = {
        "dataset": config.dataset,
        "n_series": len(series),
        "rows": {},
        "info": {},
        "truth": truth,
    }
    for method in config.methods:
        if method in _HOST_METHODS and not parallel.is_primary():
            continue  # host-side peers: nothing to split, process 0 alone (it writes the results)
        t_method = time.time()
        per_run = []
        for i, (name, train_x, test, labels) in enumerate(series):
            run = method if len(series) == 1 else f"{method}_{name.replace('/', '_')}"
            det = fit_detector(method, train_x, config, workdir=workdir, run=run)
            with train.stage(f"{run}: scoring {len(test)} test steps"):
                per_run.append(
                    (
                        det.score(test),
                        labels,
                        det.score(train_x),  # for the ratio_train (and SKAB's UCL) rule
                    )
                )
            if i == 0:
                results["info"][method] = det.info
                if scores is not None:
                    scores[method] = (per_run[0][0], np.asarray(labels))
        results["rows"][METHODS[method]] = evaluate_scores(
            per_run,
            config.anomaly_ratio,
            ratio_train=True,
            skab_rule=config.dataset == "skab",
        )
        results["info"][method]["wall_s"] = time.time() - t_method
    results["wall_s"] = time.time() - t_start
    if "transformer" in config.methods and "teamwork" in config.methods:
        ours, base = results["rows"][METHODS["teamwork"]], results["rows"][METHODS["transformer"]]
        keys = ("f1", "pa_f1", "affiliation_f1", "auc_pr")
        results["teamwork_beats_transformer"] = all(
            ours[rule][k] > base[rule][k]
            for rule in ("ratio", "oracle")
            for k in keys
            if ours[rule][k] is not None and base[rule][k] is not None
        )
    return results


def format_table(results: dict[str, Any]) -> str:
    """Markdown table: every metric under every threshold rule, with ratios to the first row's F1."""
    rows = results["rows"]
    ref_name = next(iter(rows))
    ref = rows[ref_name]
    rules = [r for r in ("ratio", "ratio_train", "oracle", "skab_ucl") if r in ref]
    keys = ("f1", "pa_f1", "affiliation_f1")
    head = ["method", "AUC-PR"] + [f"{k} [{r}]" for r in rules for k in keys]
    if "skab_ucl" in rules:
        head += ["FAR % [skab_ucl]", "MAR % [skab_ucl]"]
    head.append(f"F1[oracle] / {ref_name.split(' (')[0]}'s")
    lines = [
        f"TeamWork comparison on {results['dataset']} ({results['n_series']} series); "
        "pa_f1 = point-adjusted F1 (inflated); oracle = best-F1 threshold on test labels",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for name, row in rows.items():
        ap = row["oracle"]["auc_pr"]
        cells = [name, "n/a" if ap is None else f"{ap:.3f}"]
        cells += [f"{row[r][k]:.3f}" for r in rules for k in keys]
        if "skab_ucl" in rules:
            cells += [f"{row['skab_ucl']['far']:.1f}", f"{row['skab_ucl']['mar']:.1f}"]
        cells.append(f"{row['oracle']['f1'] / max(ref['oracle']['f1'], 1e-12):.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


_METRICS = {"f1": "F1", "pa_f1": "PA-F1", "affiliation_f1": "affiliation F1"}
_RULES = {
    "ratio": "threshold: the top {ratio:.0%} of each test series flagged",
    "ratio_train": "threshold: the {ratio:.0%}-exceedance quantile of the training scores",
    "oracle": "threshold: best F1 on the test labels (an upper bound, not deployable)",
    "skab_ucl": "threshold: SKAB's UCL = 4/3 q0.999(training scores); FAR / MAR in %",
}


def _summary_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One flat row per method: AUC-PR and every F1 (and FAR / MAR) under every rule."""
    out = []
    for name, row in results["rows"].items():
        cells: dict[str, Any] = {"method": name, "AUC-PR": row["oracle"]["auc_pr"]}
        for rule in (r for r in _RULES if r in row):
            cells.update({f"{lab} [{rule}]": row[rule][k] for k, lab in _METRICS.items()})
            if rule == "skab_ucl":
                cells["FAR % [skab_ucl]"] = row[rule]["far"]
                cells["MAR % [skab_ucl]"] = row[rule]["mar"]
        out.append(cells)
    return out


def _print_tables(results: dict[str, Any], anomaly_ratio: float) -> None:
    """One console table per threshold rule (narrow enough for any log: nothing is cut)."""
    rows = results["rows"]
    for rule, what in _RULES.items():
        if rule not in next(iter(rows.values())):
            continue
        columns = ["method", "AUC-PR", *_METRICS.values()]
        if rule == "skab_ucl":
            columns += ["FAR %", "MAR %"]
        table = []
        for name, row in rows.items():
            ap = row["oracle"]["auc_pr"]
            cells = [name, "n/a" if ap is None else ap, *(row[rule][k] for k in _METRICS)]
            if rule == "skab_ucl":
                cells += [f"{row[rule]['far']:.1f}", f"{row[rule]['mar']:.1f}"]
            table.append(cells)
        train.print_table(
            f"TeamWork comparison on {results['dataset']} ({results['n_series']} series), "
            f"{what.format(ratio=anomaly_ratio)}; "
            "PA-F1 = point-adjusted F1 (inflated)",
            columns,
            table,
        )


def _plot_scores(scores: dict[str, Any], out_png: pathlib.Path, title: str) -> None:
    """Each method's anomaly score over the first test series, the labelled anomalies shaded."""
    plt = train.pyplot()
    fig, axes = plt.subplots(
        len(scores), 1, figsize=(11, 1.5 * len(scores) + 0.6), sharex=True, squeeze=False
    )
    for ax, (method, (s, y)) in zip(axes[:, 0], scores.items(), strict=True):
        for start, end in metrics.anomaly_events(y):
            ax.axvspan(start, end, color="C3", alpha=0.25, lw=0)
        ax.plot(s, lw=0.7, color="C0")
        ax.set_ylabel(method, rotation=0, ha="right", fontsize=8)
        ax.set_yticks([])
    axes[-1, 0].set_xlabel("test step (red: labelled anomalies)")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    with atomic_path(out_png) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)


def train_and_evaluate(config: TeamWorkConfig, workdir: str | pathlib.Path) -> dict[str, Any]:
    """Runs :func:`compare_methods` with progress, prints its table and writes, in ``workdir``:
    ``teamwork.json`` (every number and the config, atomically), ``summary.json`` (the table),
    ``teamwork_comparison.png`` (the table as bars), ``teamwork_scores.png`` (the scores over the
    first test series) and the neural fits' ``metrics.jsonl``, ``curves.png`` and checkpoints.
    Nothing is written when the data are rejected.

    Returns:
      The results dict (as written, without ``config``).

    Raises:
      DataError: bad or missing data (nothing written). TrainingError: a non-finite loss.
    """
    parallel.initialize_distributed()  # before any array exists; no-op without a launcher
    workdir = pathlib.Path(workdir)
    scores: dict[str, Any] = {}
    results = compare_methods(config, workdir=workdir, scores=scores)
    if not parallel.is_primary():
        return results  # process 0 prints and writes (and alone ran the host-side peers)
    _print_tables(results, config.anomaly_ratio)
    summary = _summary_rows(results)
    config_lib.write_summary(workdir / SUMMARY_FILE, results, config)
    train.write_summary(
        workdir,
        {
            "dataset": results["dataset"],
            "n_series": results["n_series"],
            "table": summary,
            **{k: v for k, v in results.items() if k == "teamwork_beats_transformer"},
        },
    )
    rule = "skab_ucl" if "F1 [skab_ucl]" in summary[0] else "oracle"
    values = ["AUC-PR"] + [f"{lab} [{rule}]" for lab in _METRICS.values()]
    train.plot_bars(
        [{**r, "method": r["method"].split(" (")[0]} for r in summary],
        workdir / "teamwork_comparison.png",
        label="method",
        values=values,
        higher_is_better=dict.fromkeys(values, True),
        title=f"TeamWork comparison on {results['dataset']} ({results['n_series']} series)",
    )
    _plot_scores(
        {METHODS[m].split(" (")[0]: v for m, v in scores.items()},
        workdir / "teamwork_scores.png",
        f"anomaly scores on the first test series of {results['dataset']}",
    )
    return results
