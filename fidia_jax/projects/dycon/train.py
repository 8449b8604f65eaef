"""The DyCon experiment: train a tiny LLaMA on step-wise solutions, probe it, steer its reflections.

1. Train :class:`fidia_jax.models.Llama` with :func:`fidia_jax.train.fit_llama` on solutions of
   :func:`.task.make_dycon_task` (injected errors with corrective reflections, redundant
   reflections after the answer is known; the model imitates both).
2. Teacher-force fresh solutions, take the residual stream at every step boundary and every layer,
   and fit a ridge probe of the log-normalised remaining length per layer
   (:func:`.probes.layer_probe_r2`: held-out examples, shuffled-label control).
3. Sample (temperature ``config.temperature``, KV cache, :func:`fidia_jax.models.sample_llama`)
   with four decoders: the baseline; NoWait (``wait`` banned, logit bias ``-inf``); the static
   probe (one reading at the first boundary, the ``=`` ending the prompt, applied at every
   boundary); DyCon (the probe read at every boundary, :func:`.control.dycon_logit_bias`).
   ``(lambda, tau)`` of the two probe decoders are chosen on development prompts: the fewest
   tokens among settings whose accuracy is at least the baseline's minus one standard error.
4. Report accuracy and tokens per difficulty bucket with standard errors, reflections by kind,
   and the goals of the issue, met or not.

Several devices or processes (:mod:`fidia_jax.parallel`): step 1's gradient steps run
data-parallel (``fit_llama(mesh=)`` on a :func:`fidia_jax.parallel.data_mesh` of the most
devices ``<= config.num_devices`` that divide ``batch_size``; parameters replicated); under a
multi-host launcher every process trains and steps 2-4 -- probing, sampling, scoring, with
nothing to split -- run on process 0 only (the other processes return the training numbers).
"""

from __future__ import annotations

import pathlib
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from fidia_jax import metrics, models, parallel
from fidia_jax import train as train_lib
from fidia_jax._checks import note_grid_edge
from fidia_jax.config import write_summary
from fidia_jax.projects.dycon import lm_probe
from fidia_jax.projects.dycon.configs import DyconConfig
from fidia_jax.projects.dycon.control import (
    DyconControl,
    ban_tokens_bias,
    dycon_control,
    dycon_logit_bias,
    dycon_static_bias,
    probe_difficulty,
)
from fidia_jax.projects.dycon.plots import plot_tradeoff
from fidia_jax.projects.dycon.probes import LayerProbes, layer_probe_r2
from fidia_jax.projects.dycon.task import (
    DyconBatch,
    DyconGeneration,
    DyconVocab,
    make_dycon_task,
    parse_dycon_generation,
)

__all__ = [
    "METHODS",
    "boundary_states",
    "build_model",
    "evaluate_generations",
    "fit_probe",
    "format_table",
    "checkpoint_and_evaluate",
    "generate",
    "goals",
    "headline",
    "print_tables",
    "summarize",
    "train_and_evaluate",
    "train_model",
    "vocab_of",
]

#: Decoders compared, in table order.
METHODS = ("baseline", "nowait", "static", "dycon")
SUMMARY_FILE = "dycon.json"
_RECORD_FIELDS = DyconGeneration._fields


def vocab_of(config: DyconConfig) -> DyconVocab:
    """The task vocabulary of ``config``."""
    return DyconVocab(config.base, config.max_operands, config.max_redundant)


def _task(config: DyconConfig, n: int, seed: int) -> DyconBatch:
    return make_dycon_task(
        n,
        vocab=vocab_of(config),
        min_operands=config.min_operands,
        error_rate=config.error_rate,
        redundant_rate=config.redundant_rate,
        seed=seed,
    )


def build_model(config: DyconConfig, rngs: nnx.Rngs) -> models.Llama:
    """The (untrained) :class:`fidia_jax.models.Llama` of ``config``."""
    vocab = vocab_of(config)
    cfg = models.LlamaConfig(
        vocab_size=vocab.size,
        dim=config.dim,
        n_layers=config.n_layers,
        n_heads=config.n_heads,
        n_kv_heads=config.n_kv_heads,
        hidden_dim=config.hidden_dim,
        max_seq_len=vocab.max_len(),
    )
    return models.Llama(cfg, rngs=rngs)


@nnx.jit
def _states(model, tokens):
    _, cap = model.inspect(tokens, capture=("resid_pre", "resid_post"))
    h = jnp.concatenate([cap["resid_pre"][:1], cap["resid_post"]], axis=0)
    return jnp.moveaxis(h, 0, 2)  # (B, T, L + 1, C)


def boundary_states(model: models.Llama, batch: DyconBatch, *, hooks=()):
    """Residual stream at every step boundary of teacher-forced solutions.

    Args:
      model: the trained Llama.
      batch: solutions (:func:`.task.make_dycon_task`).
      hooks: interventions applied while reading (checked by the model: a hook naming a layer
        that does not exist raises ``ValueError``).

    Returns:
      ``(features (M, L + 1, C) float32, targets (M,), example (M,) int, first (M,) bool)``: one
      row per boundary (index 0: embeddings, ``l + 1``: after block ``l``, as the sampler's
      ``logit_bias`` sees them), its remaining-length target, its example index, and whether it
      is the first boundary (the ``=`` ending the prompt).
    """
    tokens = jnp.asarray(batch.tokens)
    if hooks:
        _, cap = model.inspect(tokens, capture=("resid_pre", "resid_post"), hooks=hooks)
        h = np.moveaxis(np.concatenate([cap["resid_pre"][:1], cap["resid_post"]], 0), 0, 2)
    else:
        h = np.asarray(_states(model, tokens))
    ex, pos = np.nonzero(batch.boundary)
    first = pos == batch.prompt_len[ex] - 1
    return h[ex, pos], batch.target[ex, pos], ex, first


def fit_probe(config: DyconConfig, model: models.Llama) -> tuple[LayerProbes, dict[str, Any]]:
    """Probes of the remaining length per layer on ``config.num_probe`` fresh solutions.

    The first half of the examples fits, the second half is held out (split by example).

    Returns:
      ``(probes, report)``: :class:`.probes.LayerProbes` and a JSON-ready dict
      (``r2``, ``r2_shuffled`` per layer, ``best_layer``, ``num_rows``, ``r2_first_boundary``:
      held-out R² of the best layer on the first boundaries alone, the static probe's reading).
    """
    batch = _task(config, config.num_probe, config.seed + 1)
    x, y, ex, first = boundary_states(model, batch)
    train = ex < config.num_probe // 2
    probes = layer_probe_r2(x, y, train, alpha=config.probe_alpha, seed=config.seed)
    best = probes.best_layer
    sel = (~train) & first
    pred = metrics.ridge_predict(probes.fits[best], x[sel, best])
    r2_first = float(metrics.r2_score(y[sel], pred)) if sel.sum() >= 2 else float("nan")
    report = {
        "r2": probes.r2.tolist(),
        "r2_shuffled": probes.r2_shuffled.tolist(),
        "best_layer": best,
        "num_rows": int(len(y)),
        "num_heldout_rows": int((~train).sum()),
        "r2_first_boundary": r2_first,
    }
    return probes, report


def _control(config, model, probes, layer, lam, tau, fixed_dhat=None):
    vocab = vocab_of(config)
    fit = probes.fits[layer]
    return dycon_control(
        model,
        fit.coef,
        float(fit.intercept),
        layer=layer,
        lam=lam,
        tau=tau,
        boundary_tokens=vocab.boundary_tokens,
        reflect_tokens=(vocab.WAIT,),
        end_token=vocab.END_THINK,
        end_scale=config.end_scale if config.control_form == "two_sided" else None,
        fixed_dhat=fixed_dhat,
        form=config.control_form,
    )


def first_boundary_dhat(model, batch: DyconBatch, control: DyconControl, width: int):
    """``(N,)`` probe reading at the ``=`` that ends each prompt (the static probe's input)."""
    prompts, lengths = batch.prompts(width)
    h = np.asarray(_states(model, jnp.asarray(prompts)))
    h_NxKxC = h[np.arange(len(lengths)), lengths - 1]
    return np.asarray(probe_difficulty(jnp.asarray(h_NxKxC), control))


def generate(
    model: models.Llama,
    batch: DyconBatch,
    *,
    method: str,
    key: jax.Array,
    temperature: float | None,
    control: DyconControl | None = None,
    chunk: int = 256,
    hooks=(),
) -> tuple[np.ndarray, np.ndarray]:
    """Samples one continuation per prompt of ``batch`` with one of :data:`METHODS`.

    Prompts are padded to ``max_operands + 2`` tokens and sampled in chunks of ``chunk`` rows
    (the last chunk padded by repetition), so every call with the same ``chunk`` reuses one
    compiled sampler per method. Row ``i`` of chunk ``c`` samples with ``fold_in(key, c)``:
    the same key gives every method the same random stream (paired comparisons).

    Args:
      model: the trained Llama.
      batch: prompts and answers.
      method: ``"baseline"``, ``"nowait"``, ``"static"`` or ``"dycon"``.
      key: sampling key.
      temperature: ``None`` for greedy, else ``> 0``.
      control: required for ``static`` / ``dycon`` (:func:`.control.dycon_control`);
        for ``static`` its ``fixed_dhat`` is replaced by each prompt's first-boundary reading.
      chunk: rows per sampler call.
      hooks: interventions passed to :func:`fidia_jax.models.sample_llama` (a hook naming a
        layer that does not exist raises ``ValueError``).

    Returns:
      ``(tokens (N, max_new) int32, num_tokens (N,) int32)``.

    Raises:
      ValueError: an unknown method, or no ``control`` for a probe method.
    """
    if method not in METHODS:
        raise ValueError(f"generate: method must be one of {METHODS}, got {method!r}")
    if method in ("static", "dycon") and control is None:
        raise ValueError(f"generate: method {method!r} needs a control (dycon_control)")
    width = batch.operands.shape[1] + 2
    prompts, lengths = batch.prompts(width)
    max_new = model.config.max_seq_len - width
    eos, wait = DyconVocab.EOS, DyconVocab.WAIT
    bias, args = None, None
    if method == "nowait":
        mask = np.zeros(model.config.vocab_size, np.float32)
        mask[wait] = 1.0
        bias, args = ban_tokens_bias, jnp.asarray(mask)
    elif method == "dycon":
        bias, args = dycon_logit_bias, control
    n = len(lengths)
    if method == "static":
        dhat_all = first_boundary_dhat(model, batch, control, width)
    toks, nums = [], []
    for c, start in enumerate(range(0, n, chunk)):
        idx = np.arange(start, start + chunk) % n
        if method == "static":
            dhat = jnp.asarray(dhat_all[idx])
            bias, args = dycon_static_bias, control._replace(fixed_dhat=dhat)
        out = models.sample_llama(
            model,
            jnp.asarray(prompts[idx]),
            lengths=jnp.asarray(lengths[idx]),
            max_new_tokens=max_new,
            key=jax.random.fold_in(key, c),
            temperature=temperature,
            hooks=hooks,
            logit_bias=bias,
            logit_bias_args=args,
            stop_token=eos,
        )
        keep = min(chunk, n - start)
        toks.append(np.asarray(out.tokens)[:keep])
        nums.append(np.asarray(out.num_tokens)[:keep])
    return np.concatenate(toks), np.concatenate(nums)


def evaluate_generations(tokens, batch: DyconBatch, vocab: DyconVocab) -> dict[str, np.ndarray]:
    """Per-example records of :func:`.task.parse_dycon_generation` as ``(N,)`` arrays
    (one per field of :class:`.task.DyconGeneration`, plus ``num_operands``)."""
    recs = [
        parse_dycon_generation(t, int(a), vocab) for t, a in zip(tokens, batch.answer, strict=True)
    ]
    out = {f: np.asarray([getattr(r, f) for r in recs]) for f in _RECORD_FIELDS}
    out["num_operands"] = batch.num_operands.copy()
    return out


def _mean_se(x) -> tuple[float, float]:
    x = np.asarray(x, np.float64)
    if x.size == 0:
        return float("nan"), float("nan")
    se = float(np.std(x, ddof=1) / np.sqrt(x.size)) if x.size > 1 else float("nan")
    return float(np.mean(x)), se


def _cell(rec: dict[str, np.ndarray], sel: np.ndarray) -> dict[str, Any]:
    acc, acc_se = _mean_se(rec["correct"][sel])
    tok, tok_se = _mean_se(rec["num_tokens"][sel])
    errors = int(rec["errors"][sel].sum())
    return {
        "n": int(sel.sum()),
        "accuracy": acc,
        "accuracy_se": acc_se,
        "tokens": tok,
        "tokens_se": tok_se,
        "corrective": float(rec["corrective"][sel].mean()) if sel.any() else float("nan"),
        "redundant": float(rec["redundant"][sel].mean()) if sel.any() else float("nan"),
        "errors": float(rec["errors"][sel].mean()) if sel.any() else float("nan"),
        "uncorrected": float(rec["uncorrected"][sel].mean()) if sel.any() else float("nan"),
        "malformed": float(rec["malformed"][sel].mean()) if sel.any() else float("nan"),
        "finished": float(rec["finished"][sel].mean()) if sel.any() else float("nan"),
        "correction_rate": (
            float((errors - rec["uncorrected"][sel].sum()) / errors) if errors else float("nan")
        ),
    }


def summarize(records: dict[str, dict[str, np.ndarray]], buckets) -> dict[str, Any]:
    """Per method: ``all`` and one cell per bucket (``"k_lo-k_hi"``): ``n``, ``accuracy``,
    ``accuracy_se`` (binomial: sample SD / sqrt n), ``tokens`` (generated through EOS),
    ``tokens_se``, reflections per example (``corrective``, ``redundant``), ``errors``,
    ``uncorrected``, ``malformed``, ``finished`` and ``correction_rate`` (erroneous steps followed
    by a reflection / erroneous steps)."""
    out: dict[str, Any] = {}
    for method, rec in records.items():
        k = rec["num_operands"]
        cells = {"all": _cell(rec, np.ones_like(k, bool))}
        for lo, hi in buckets:
            cells[f"{lo}-{hi}"] = _cell(rec, (k >= lo) & (k <= hi))
        out[method] = cells
    return out


def _paired_diff(a, b) -> tuple[float, float]:
    return _mean_se(np.asarray(a, np.float64) - np.asarray(b, np.float64))


def goals(records: dict[str, dict[str, np.ndarray]], buckets) -> dict[str, Any]:
    """The issue's goals on the test prompts, each with its numbers and ``met`` (bool).

    - ``accuracy_within_1se``: DyCon's accuracy >= the baseline's minus one standard error of
      the baseline's accuracy (all test prompts).
    - ``fewer_tokens``: DyCon's mean generated tokens < the baseline's (paired difference and its
      standard error reported).
    - ``beats_nowait_hardest``: DyCon's accuracy > NoWait's on the hardest bucket.
    """
    base, dyc, nowait = records["baseline"], records["dycon"], records["nowait"]
    acc_b, se_b = _mean_se(base["correct"])
    acc_d, _ = _mean_se(dyc["correct"])
    d_tok, d_tok_se = _paired_diff(dyc["num_tokens"], base["num_tokens"])
    d_acc, d_acc_se = _paired_diff(dyc["correct"], base["correct"])
    lo, hi = buckets[-1]
    k = base["num_operands"]
    hard = (k >= lo) & (k <= hi)
    acc_dh, _ = _mean_se(dyc["correct"][hard])
    acc_nh, _ = _mean_se(nowait["correct"][hard])
    return {
        "accuracy_within_1se": {
            "dycon": acc_d,
            "baseline": acc_b,
            "baseline_se": se_b,
            "paired_difference": d_acc,
            "paired_difference_se": d_acc_se,
            "met": bool(acc_d >= acc_b - se_b),
        },
        "fewer_tokens": {
            "paired_difference": d_tok,
            "paired_difference_se": d_tok_se,
            "met": bool(d_tok < 0),
        },
        "beats_nowait_hardest": {
            "bucket": f"{lo}-{hi}",
            "dycon": acc_dh,
            "nowait": acc_nh,
            "met": bool(acc_dh > acc_nh),
        },
    }


def format_table(summary: dict[str, Any], buckets) -> str:
    """Markdown: accuracy ± SE and tokens ± SE per method and bucket, then reflections (all)."""
    names = [f"{lo}-{hi}" for lo, hi in buckets] + ["all"]
    lines = [
        "| method | "
        + " | ".join(f"k={b} acc" for b in names)
        + " | "
        + " | ".join(f"k={b} tokens" for b in names)
        + " |",
        "|" + "---|" * (2 * len(names) + 1),
    ]
    for method, cells in summary.items():
        acc = [f"{cells[b]['accuracy']:.3f} ± {cells[b]['accuracy_se']:.3f}" for b in names]
        tok = [f"{cells[b]['tokens']:.1f} ± {cells[b]['tokens_se']:.1f}" for b in names]
        lines.append(f"| {method} | " + " | ".join(acc + tok) + " |")
    lines += [
        "",
        "| method | corrective / ex | redundant / ex | step errors / ex | correction rate | "
        "malformed / ex |",
        "|---|---|---|---|---|---|",
    ]
    for method, cells in summary.items():
        c = cells["all"]
        lines.append(
            f"| {method} | {c['corrective']:.3f} | {c['redundant']:.3f} | {c['errors']:.3f} | "
            f"{c['correction_rate']:.3f} | {c['malformed']:.3f} |"
        )
    return "\n".join(lines)


def select_control(config, model, probes, layer, dev, base_records, method, key):
    """Chooses ``(lambda, tau)`` of ``method`` (``static`` / ``dycon``) on the development
    prompts: the fewest mean tokens among settings with accuracy >= the baseline's minus its
    standard error (else the most accurate). Returns ``(lam, tau, grid)``."""
    acc_b, se_b = _mean_se(base_records["correct"])
    vocab = vocab_of(config)
    grid = []
    for lam in config.lam_grid:
        for tau in config.tau_grid:
            ctl = _control(config, model, probes, layer, lam, tau)
            toks, _ = generate(
                model,
                dev,
                method=method,
                key=key,
                temperature=config.temperature,
                control=ctl,
                chunk=_chunk(config),
            )
            rec = evaluate_generations(toks, dev, vocab)
            grid.append(
                {
                    "lam": lam,
                    "tau": tau,
                    "accuracy": float(rec["correct"].mean()),
                    "tokens": float(rec["num_tokens"].mean()),
                }
            )
    ok = [g for g in grid if g["accuracy"] >= acc_b - (se_b if np.isfinite(se_b) else 0.0)]
    best = min(ok, key=lambda g: g["tokens"]) if ok else max(grid, key=lambda g: g["accuracy"])
    note_grid_edge(f"DyCon {method} control", "lambda", config.lam_grid, best["lam"])
    return best["lam"], best["tau"], grid


def train_model(
    config: DyconConfig, workdir: str | pathlib.Path | None = None
) -> tuple[models.Llama, np.ndarray]:
    """Step 1: the model trained on ``num_train`` solutions; returns ``(model, losses)``.

    AdamW with linear warm-up and cosine decay (:func:`fidia_jax.train.fit_llama`), keys from
    ``jax.random.split(jax.random.key(config.seed), 4)`` (initialisation, minibatches); data
    parallel over the devices of :func:`_train_mesh`. With ``workdir``, the run ``dycon_lm``
    leaves ``metrics.jsonl``, ``curves.png`` and checkpoints there (a rerun resumes).
    """
    k_init, k_batch, _, _ = jax.random.split(jax.random.key(config.seed), 4)
    with train_lib.stage(f"DyCon: building the model and {config.num_train} training solutions"):
        model = build_model(config, nnx.Rngs(k_init))
        train = _task(config, config.num_train, config.seed)
    schedule = optax.warmup_cosine_decay_schedule(
        0.0,
        config.learning_rate,
        min(config.warmup_steps, config.steps - 1),
        config.steps,
        config.learning_rate * 0.03,
    )
    tx = optax.adamw(schedule, weight_decay=config.weight_decay)
    return train_lib.fit_llama(
        model,
        train.tokens,
        weights=train.loss_weights,
        steps=config.steps,
        batch_size=config.batch_size,
        tx=tx,
        key=k_batch,
        workdir=workdir,
        run="dycon_lm",
        mesh=_train_mesh(config),
    )


def _train_mesh(config) -> jax.sharding.Mesh | None:
    """The ``data`` mesh of the training steps: the most devices ``<= config.num_devices``
    (``0``: all) that divide ``config.batch_size``; ``None`` on one device in one process."""
    return parallel.parallel_mesh(config.batch_size, num_devices=config.num_devices)


def _chunk(config: DyconConfig) -> int:
    return min(256, max(config.num_dev, config.num_test))


def train_and_evaluate(config: DyconConfig, workdir: str | pathlib.Path) -> dict[str, Any]:
    """Runs the whole experiment at ``config``'s scale; shows progress, prints the tables and
    writes into ``workdir``: ``dycon.json`` (results plus ``config``, atomically),
    ``summary.json`` (the headline numbers), ``dycon_tradeoff.png`` (accuracy vs generated tokens
    per decoder, per bucket, and the probe per layer), and the training run's
    ``metrics.jsonl`` / ``curves.png`` / checkpoints (run ``dycon_lm``; a rerun in the same
    workdir resumes from its last checkpoint instead of training again).

    Returns:
      JSON-ready dict: ``train`` (final loss, seconds), ``probe`` (:func:`fit_probe`'s report),
      ``control`` (chosen ``lambda`` / ``tau`` per probe decoder and the development grids),
      ``summary`` (:func:`summarize` on the test prompts), ``goals`` (:func:`goals`),
      ``records`` (per decoder, per test prompt: the integer fields of
      :func:`evaluate_generations`), ``wall_s``.
    """
    if config.checkpoint:
        return checkpoint_and_evaluate(config, workdir)
    parallel.initialize_distributed()  # before any array exists; no-op without a launcher
    t0 = time.time()
    workdir = pathlib.Path(workdir)
    vocab = vocab_of(config)
    key = jax.random.key(config.seed)
    _, _, k_dev, k_test = jax.random.split(key, 4)
    model, losses = train_model(config, workdir)
    t_train = time.time() - t0
    if not parallel.is_primary():  # probing and sampling have nothing to split: process 0 only
        return {"train": {"final_loss": float(np.mean(losses[-20:])), "seconds": t_train}}
    with train_lib.stage(f"probing the residual stream ({config.num_probe} solutions)"):
        probes, probe_report = fit_probe(config, model)
    layer = probes.best_layer
    dev = _task(config, config.num_dev, config.seed + 2)
    test = _task(config, config.num_test, config.seed + 3)
    chunk = _chunk(config)

    def run(method, batch, k, ctl=None):
        toks, _ = generate(
            model,
            batch,
            method=method,
            key=k,
            temperature=config.temperature,
            control=ctl,
            chunk=chunk,
        )
        return evaluate_generations(toks, batch, vocab)

    n_grid = len(config.lam_grid) * len(config.tau_grid)
    with train_lib.stage(
        f"choosing (λ, τ) on {config.num_dev} development prompts ({n_grid} settings × 2 decoders)"
    ):
        dev_base = run("baseline", dev, k_dev)
        chosen = {}
        for method in ("static", "dycon"):
            lam, tau, grid = select_control(
                config, model, probes, layer, dev, dev_base, method, k_dev
            )
            chosen[method] = {"lam": lam, "tau": tau, "dev_grid": grid}
    records = {}
    with train_lib.stage(f"sampling {config.num_test} test prompts with {len(METHODS)} decoders"):
        for method in METHODS:
            ctl = None
            if method in chosen:
                ctl = _control(
                    config, model, probes, layer, chosen[method]["lam"], chosen[method]["tau"]
                )
            records[method] = run(method, test, k_test, ctl)
    summary = summarize(records, config.buckets)
    base_all, dyc_all = summary["baseline"]["all"], summary["dycon"]["all"]
    reflections = {
        "redundant_removed_fraction": (
            1.0 - dyc_all["redundant"] / base_all["redundant"]
            if base_all["redundant"]
            else float("nan")
        ),
        "corrective_kept_ratio": (
            dyc_all["corrective"] / base_all["corrective"]
            if base_all["corrective"]
            else float("nan")
        ),
        "correction_rate": {m: summary[m]["all"]["correction_rate"] for m in METHODS},
    }
    results = {
        "train": {
            "final_loss": float(np.mean(losses[-20:])),
            "loss_first": float(losses[0]),
            "seconds": t_train,
        },
        "probe": probe_report,
        "control": chosen,
        "summary": summary,
        "reflections": reflections,
        "goals": goals(records, config.buckets),
        # per test prompt and decoder (same prompts and keys for every decoder and for every
        # run of the same seed): what paired tests across decoders or runs need
        "records": {
            m: {f: np.asarray(v).astype(int).tolist() for f, v in rec.items()}
            for m, rec in records.items()
        },
        "wall_s": time.time() - t0,
    }
    write_summary(workdir / SUMMARY_FILE, results, config)
    plot_tradeoff(
        summary, probe_report, config.buckets, workdir / "dycon_tradeoff.png", control=chosen
    )
    train_lib.write_summary(workdir, headline(results), config=config)
    print_tables(results, config.buckets)
    return results


def checkpoint_and_evaluate(config: DyconConfig, workdir: str | pathlib.Path) -> dict[str, Any]:
    """``fidia-jax dycon train --set checkpoint=PATH``: the probe analysis on a released model,
    with progress and its figure (:func:`.lm_probe.checkpoint_and_evaluate`)."""
    return lm_probe.checkpoint_and_evaluate(config, workdir)


def headline(results: dict[str, Any]) -> dict[str, Any]:
    """The headline numbers of :func:`train_and_evaluate`'s results (``summary.json``): final
    training loss, the probe's best layer and its held-out R² (and the shuffled control's),
    per decoder accuracy and mean generated tokens on all test prompts with their standard
    errors, the chosen ``(lambda, tau)``, and whether each goal is met."""
    probe = results["probe"]
    best = probe["best_layer"]
    return {
        "final_loss": results["train"]["final_loss"],
        "probe_best_layer": best,
        "probe_r2": probe["r2"][best],
        "probe_r2_shuffled": probe["r2_shuffled"][best],
        "decoders": {
            m: {k: c["all"][k] for k in ("accuracy", "accuracy_se", "tokens", "tokens_se")}
            for m, c in results["summary"].items()
        },
        "control": {m: {k: c[k] for k in ("lam", "tau")} for m, c in results["control"].items()},
        "goals_met": {name: g["met"] for name, g in results["goals"].items()},
    }


def print_tables(results: dict[str, Any], buckets) -> None:
    """The console report: probe R² per layer, accuracy and tokens per decoder and bucket,
    reflections per decoder, and the goals (labelled columns, nothing cut)."""
    probe = results["probe"]
    train_lib.print_table(
        "DyCon probe: held-out R² of the log-normalised remaining length",
        ["hidden state", "R² (true targets)", "R² (shuffled labels)"],
        [
            ["embeddings" if i == 0 else f"after block {i - 1}", a, b]
            for i, (a, b) in enumerate(zip(probe["r2"], probe["r2_shuffled"], strict=True))
        ],
    )
    names = [f"{lo}-{hi}" for lo, hi in buckets] + ["all"]
    heads = [f"k={lo}" if lo == hi else f"k={lo}-{hi}" for lo, hi in buckets] + ["all k"]
    summary, control = results["summary"], results["control"]

    def label(m):
        return m + (f" (λ={control[m]['lam']:g}, τ={control[m]['tau']:g})" if m in control else "")

    for what, key, fmt in (
        ("accuracy", "accuracy", "{:.3f} ± {:.3f}"),
        ("generated tokens", "tokens", "{:.1f} ± {:.1f}"),
    ):
        train_lib.print_table(
            f"DyCon decoding, test prompts: {what} (± 1 SE) per difficulty k",
            ["decoder", *heads],
            [[label(m)] + [fmt.format(c[b][key], c[b][f"{key}_se"]) for b in names]
             for m, c in summary.items()],
        )  # fmt: skip
    keys = ("corrective", "redundant", "errors", "correction_rate", "malformed")
    train_lib.print_table(
        "DyCon reflections per example (all test prompts)",
        ["decoder", "corrective", "redundant", "step errors", "correction rate", "malformed"],
        [[m] + [c["all"][k] for k in keys] for m, c in summary.items()],
    )
    train_lib.print_table(
        "DyCon goals (test prompts)",
        ["goal", "met", "numbers"],
        [
            [name, "met" if g["met"] else "NOT met",
             ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
                       for k, v in g.items() if k != "met")]
            for name, g in results["goals"].items()
        ],
    )  # fmt: skip
