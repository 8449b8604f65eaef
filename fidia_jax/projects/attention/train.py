"""The attention-kernel experiments: Attn-QAT training comparison, then SANTA decode evaluation.

1. **Attn-QAT.** Train the byte-level LLaMA on Shakespeare with every attention variant of
   ``config.qat.impls`` -- softmax attention on bf16-rounded inputs (``"bf16"``), the drop-in
   FP4 variant and Attn-QAT -- from the same initialisation, on the same batches, for the same
   steps; report the loss curve, the final validation loss and its ratio to bf16's.
2. **SANTA.** Take the model trained with bf16 attention, prefill the first ``prefix`` bytes of
   validation windows densely, then decode the rest teacher-forced from the KV cache with dense
   attention and with SANTA (every method and sample budget ``S`` of ``config.santa``); report
   the perplexity of the decoded bytes and the top-1 agreement of SANTA's logits with dense
   decoding's (fraction of positions with the same argmax).

:func:`run_experiments` returns the results; :func:`train_and_evaluate` adds the config and
writes them to ``workdir/attention_experiments.json``, with ``summary.json``, the loss curves of
the variants (``curves.png``), the two tables as bar charts (``attn_qat.png``, ``santa.png``)
and the tables on the console. ``benchmarks/attention_experiments.py`` calls
:func:`run_experiments`.

Each variant trains with the package's step and loop (:func:`fidia_jax.train.make_train_step`,
:func:`fidia_jax.train.fit`, run name = the attention variant): progress, and with a workdir
``metrics.jsonl``, an orbax checkpoint of each variant at its end (a rerun does not train a
finished variant again) and ``curves.png``. A variant whose loss or update turns non-finite
stops there (the package's policy skips that step); the experiment reports it and goes on.

Data parallel (:mod:`fidia_jax.parallel`): training, validation and decoding split their batches
over a mesh of every visible device (the most that divide ``qat.batch_size``) with the
parameters replicated; under a multi-host launcher every process runs the same experiments and
process 0 writes the files. On one device the numbers are those of an unsharded run, bit for bit.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import pathlib
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from fidia_jax import parallel, train
from fidia_jax._io import atomic_write_text, json_text
from fidia_jax.config import config_to_dict
from fidia_jax.data import load_shakespeare, sample_windows
from fidia_jax.errors import ConfigError, TrainingError
from fidia_jax.kernels.santa import make_santa_attention
from fidia_jax.layers import register_attention_impl, xla_attention
from fidia_jax.losses import token_log_probs
from fidia_jax.models import Llama
from fidia_jax.projects.attention.configs import AttentionConfig, llama_config
from fidia_jax.train import LmTask, lm_data_mesh, make_lm_batch_fn, make_lm_task, place_lm_batch

__all__ = [
    "SUMMARY_FILE",
    "bf16_attention",
    "decode_logits",
    "run_experiments",
    "santa_evaluate",
    "train_and_evaluate",
    "train_qat",
]

#: File :func:`train_and_evaluate` writes in ``workdir``.
SUMMARY_FILE = "attention_experiments.json"


def _print(line: str) -> None:
    print(line, flush=True)


def bf16_attention(q, k, v, *, causal, kv_lengths=None, rng=None):
    """Softmax attention on bf16-rounded q, k, v (the bf16 baseline of the Attn-QAT paper).

    Same contract as :func:`fidia_jax.layers.xla_attention`; the output has ``q``'s dtype.
    """
    bf = jnp.bfloat16
    out = xla_attention(
        q.astype(bf), k.astype(bf), v.astype(bf), causal=causal, kv_lengths=kv_lengths
    )
    return out.astype(q.dtype)


def _make_task(config: AttentionConfig, impl: str, train_tokens, val_tokens) -> LmTask:
    q, seq_len = config.qat, config.data.seq_len
    val_key = jax.random.key(q.val_seed)
    val_windows = jnp.concatenate(
        [
            sample_windows(jax.random.fold_in(val_key, i), val_tokens, q.batch_size, seq_len)
            for i in range(q.val_batches)
        ]
    )
    return make_lm_task(
        llama_config(config, impl),
        train_tokens,
        val_windows,
        seed=q.seed,
        batch_size=q.batch_size,
        data_key=jax.random.key(q.data_seed),
    )


def train_qat(
    config: AttentionConfig,
    impl: str,
    train_tokens: Any,
    val_tokens: Any,
    *,
    mesh: jax.sharding.Mesh | None = None,
    workdir: str | os.PathLike | None = None,
) -> tuple[Llama, dict[str, Any]]:
    """Trains the model with attention ``impl`` for ``config.qat.steps`` steps.

    One :func:`fidia_jax.train.fit` run named ``impl`` of the package's step
    (:func:`fidia_jax.train.make_train_step`) on the batches of
    :func:`fidia_jax.train.make_lm_batch_fn`.

    Args:
      config: the run configuration.
      impl: an ``attention_impl`` name (``"bf16"`` is registered by :func:`run_experiments`).
      train_tokens: ``(N,)`` int training byte stream.
      val_tokens: ``(M,)`` int validation byte stream.
      mesh: the ``data`` mesh every batch is split over, parameters replicated (``None``:
        :func:`fidia_jax.train.lm_data_mesh`, the most visible devices dividing the batch).
      workdir: where the fit's files go (``metrics.jsonl``, ``checkpoints/<impl>/``,
        ``curves.png``; a rerun resumes); ``None``: no files.

    Returns:
      ``(model, result)``: the trained ``Llama`` (parameters on ``mesh``) and ``{"impl",
      "curve": [[t, loss], ...] (nats/byte; steps ``t % log_every == 0`` and the last),
      "val_loss" (nats/byte), "seconds" (wall, compilation included)}``. A non-finite loss or
      update stops training at that step (the package's policy; the model keeps the last finite
      parameters): the curve ends with that step's loss and ``result["nonfinite_step"]`` names it.
    """
    q = config.qat
    task = _make_task(config, impl, jnp.asarray(train_tokens), jnp.asarray(val_tokens))
    lr = q.learning_rate
    sched = optax.warmup_cosine_decay_schedule(0.0, lr, max(q.steps // 10, 1), q.steps, lr * 0.1)
    tx = optax.chain(
        optax.clip_by_global_norm(q.clip_norm),
        optax.adamw(sched, weight_decay=q.weight_decay),
    )
    mesh = lm_data_mesh(task) if mesh is None else mesh
    step, batch = train.make_train_step(task.loss_fn, tx, mesh=mesh), make_lm_batch_fn(task, mesh)
    eval_loss = jax.jit(task.loss_fn)
    # a copy of the initial parameters: the step donates its state, the task stays valid
    state = train.init_train_state(jax.tree.map(jnp.copy, task.params), tx, mesh=mesh)
    b = q.batch_size
    val_batches = [
        place_lm_batch(task.val_tokens[i * b : (i + 1) * b], mesh) for i in range(q.val_batches)
    ]
    losses = []  # this process's losses, for a run stopped without a workdir

    def step_fn(state, tokens):
        state, metrics = step(state, tokens)
        losses.append(metrics["loss"])
        return state, metrics

    t0 = time.time()
    nonfinite_step = None
    try:
        fitted = train.fit(
            state,
            step_fn,
            lambda t: batch(jnp.int32(t)),
            num_steps=q.steps,
            workdir=workdir,
            run=impl,
            log_every=1,
            fingerprint={**train.config_fingerprint(config), "impl": impl},
        )
        state, history = fitted.state, fitted.history
    except TrainingError as err:
        state = err.state  # the last finite parameters
        if workdir is None:
            history = [{"step": i + 1, "loss": float(x)} for i, x in enumerate(losses)]
        else:
            history = train.read_metrics(pathlib.Path(workdir) / "metrics.jsonl", impl)
        nonfinite_step = history[-1]["step"] - 1
    last = q.steps if nonfinite_step is None else nonfinite_step + 1  # 1-based, as fit counts
    curve = [
        [r["step"] - 1, r["loss"]]
        for r in history
        if "loss" in r and ((r["step"] - 1) % q.log_every == 0 or r["step"] == last)
    ]
    val = float(
        np.mean([float(parallel.to_host(eval_loss(state.params, vb))) for vb in val_batches])
    )
    model = nnx.merge(task.graphdef, state.params)
    result = {"impl": impl, "curve": curve, "val_loss": val, "seconds": time.time() - t0}
    if nonfinite_step is not None:
        result["nonfinite_step"] = nonfinite_step
    return model, result


def decode_logits(
    model: Llama, impl_fn: Callable, tokens: jax.Array, prefix: int, *, decode_seed: int = 7
) -> jax.Array:
    """Teacher-forced decode of ``tokens[:, prefix:]`` after a dense prefill.

    Prefills ``tokens[:, :prefix-1]`` (positions ``0..prefix-2``), then decodes
    ``tokens[:, prefix-1 : T-1]`` one step at a time at positions ``prefix-1..T-2``, so the logits
    are those of a causal forward pass over ``tokens[:, :T-1]`` at those positions (tested), each
    scored against ``tokens[:, prefix:]``; the decode context grows from ``prefix`` to ``T - 1``
    keys. (Until 2026-11-30 the experiment prefilled ``prefix`` bytes and fed the last one a
    second time; see docs/kernels.md.)

    ``impl_fn`` (an attention function, decode only) is registered as ``"_exp_decode"`` for the
    duration of the call; the prefill uses ``"xla"``.

    Args:
      model: the trained model (its ``config`` is restored on return).
      impl_fn: decode attention (see :mod:`fidia_jax.layers`).
      tokens: ``(B, T)`` int32 windows, ``T <= model.config.max_seq_len``.
      prefix: index of the first predicted byte, ``2 <= prefix < T`` (``prefix - 1`` bytes are
        prefilled).
      decode_seed: the decode ``rng`` key (folded by the model with layer and step).

    Returns:
      ``(B, T - prefix, 256)`` float logits predicting ``tokens[:, prefix:]``.
    """
    b, t = tokens.shape
    cfg = model.config
    register_attention_impl("_exp_decode", impl_fn, decode_only=True)
    model.config = dataclasses.replace(cfg, attention_impl="_exp_decode")

    @jax.jit
    def run(tokens):
        cache = model.init_cache(b, t)
        _, cache = model.prefill(tokens[:, : prefix - 1], cache)

        def body(cache, tok):
            lg, cache = model.decode(tok[:, None], cache, rng=jax.random.key(decode_seed))
            return cache, lg[:, 0]

        _, logits = jax.lax.scan(body, cache, tokens[:, prefix - 1 : t - 1].T)
        return logits.transpose(1, 0, 2)  # predictions of tokens[:, prefix:]

    out = run(tokens)
    model.config = cfg
    return out


def santa_evaluate(
    config: AttentionConfig,
    model: Llama,
    val_tokens: Any,
    *,
    mesh: jax.sharding.Mesh | None = None,
    log: Callable[[str], None] = _print,
) -> dict[str, Any]:
    """Dense vs SANTA teacher-forced decoding of ``config.santa.batch_size`` validation windows.

    With ``mesh`` (the model's parameters placed on it), the windows are split over its ``data``
    axis when their number is a multiple of its size, else replicated
    (:func:`fidia_jax.train.place_lm_batch`).

    Returns:
      ``{"dense_ppl", "context" (= seq_len), "rows": [{"method", "S", "ppl",
      "top1_agreement"}, ...]}``; perplexities are ``exp`` of the mean NLL (nats/byte) of the
      decoded bytes.
    """
    s, seq_len = config.santa, config.data.seq_len
    model.config = dataclasses.replace(model.config, attention_impl="xla")
    tokens = sample_windows(
        jax.random.key(s.window_seed), jnp.asarray(val_tokens), s.batch_size, seq_len
    )
    tokens = place_lm_batch(tokens, mesh)
    prefix = s.prefix or seq_len // 2
    target = tokens[:, prefix:]

    def nll(logits):
        return float(parallel.to_host(-jnp.mean(token_log_probs(logits, target))))

    def decode(fn):
        return decode_logits(model, fn, tokens, prefix, decode_seed=s.decode_seed)

    dense = decode(
        lambda q, k, v, **kw: xla_attention(q, k, v, causal=False, kv_lengths=kw.get("kv_lengths"))
    )
    out = {"dense_ppl": math.exp(nll(dense)), "context": seq_len, "rows": []}
    log(f"[santa] dense decode ppl {out['dense_ppl']:.3f} (context {seq_len})")
    for method in s.methods:
        for n in s.num_samples:
            lg = decode(
                make_santa_attention(
                    num_samples=n, method=method, block_k=s.block_k, backend=s.backend
                )
            )
            agree = float(parallel.to_host(jnp.mean(jnp.argmax(lg, -1) == jnp.argmax(dense, -1))))
            row = {"method": method, "S": n, "ppl": math.exp(nll(lg)), "top1_agreement": agree}
            out["rows"].append(row)
            log(f"[santa] {method:10s} S={n:5d} ppl {row['ppl']:.3f}  top-1 agreement {agree:.3f}")
    return out


def _claim_workdir(workdir: pathlib.Path, config: AttentionConfig) -> None:
    """Records ``config`` in ``workdir/config.json``, refusing a workdir of another config (its
    checkpoints must never be continued with other settings).

    Raises:
      ConfigError: ``workdir/config.json`` holds another config.
    """
    path, mine = workdir / "config.json", config_to_dict(config)
    if path.is_file() and json.loads(path.read_text(encoding="utf-8")) != mine:
        raise ConfigError(
            f"{workdir} holds a run with a different config ({path}); use a new workdir"
        )
    train.write_json(path, mine)


def run_experiments(
    config: AttentionConfig,
    *,
    mesh: jax.sharding.Mesh | None = None,
    log: Callable[[str], None] = _print,
    workdir: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """Runs both experiments at ``config``'s scale (registers the ``"bf16"`` attention impl).

    Args:
      config: the run configuration.
      mesh: the ``data`` mesh of every batch (``None``: the most visible devices that divide
        ``qat.batch_size``, :func:`fidia_jax.parallel.data_mesh`).
      log: called with one progress line per trained variant and per SANTA row.
      workdir: where each variant's fit writes its files (see :func:`train_qat`), and
        ``config.json``; ``None``: no files.

    Returns:
      A JSON-ready dict: ``jax`` (version), ``devices``, ``qat`` (one :func:`train_qat` result
      per variant, plus ``val_rel_to_bf16`` = ``val_loss / val_loss(bf16) - 1``) and ``santa``
      (:func:`santa_evaluate`).

    Raises:
      DataError: the Shakespeare directory is missing.
      ConfigError: ``workdir`` holds a run of another config (use a new workdir).
    """
    parallel.initialize_distributed()  # no-op without a launcher, or when already initialised
    if workdir is not None:
        _claim_workdir(pathlib.Path(workdir), config)
    mesh = parallel.data_mesh(config.qat.batch_size) if mesh is None else mesh
    register_attention_impl("bf16", bf16_attention)
    d = config.data
    with train.stage("loading Shakespeare"):
        splits = load_shakespeare(d.data_dir, max_files=d.max_files or None)
    results: dict[str, Any] = {"jax": jax.__version__, "devices": str(jax.devices()), "qat": []}
    models = {}
    for impl in config.qat.impls:
        model, res = train_qat(config, impl, splits.train, splits.val, mesh=mesh, workdir=workdir)
        models[impl] = model
        results["qat"].append(res)
        log(
            f"[qat] {impl:16s} final train {res['curve'][-1][1]:.4f}  val {res['val_loss']:.4f}"
            f"  ({res['seconds']:.0f}s)"
        )
    base = {r["impl"]: r["val_loss"] for r in results["qat"]}["bf16"]
    for r in results["qat"]:
        r["val_rel_to_bf16"] = r["val_loss"] / base - 1.0
    with train.stage("SANTA decoding of the bf16 model"):
        results["santa"] = santa_evaluate(config, models["bf16"], splits.val, mesh=mesh, log=log)
    return results


def _report(workdir: pathlib.Path, config: AttentionConfig, results: dict[str, Any]) -> None:
    """``summary.json``, ``attn_qat.png`` / ``santa.png`` (the tables as bars), console tables."""
    qat = [
        {
            "attention": r["impl"],
            "final_train_loss": r["curve"][-1][1],
            "val_loss": r["val_loss"],
            "val_rel_to_bf16_pct": 100 * r["val_rel_to_bf16"],
        }
        for r in results["qat"]
    ]
    s = results["santa"]
    santa = [{"decoder": "dense", "S": "-", "ppl": s["dense_ppl"], "top1_agreement": 1.0}] + [
        {
            "decoder": r["method"],
            "S": r["S"],
            "ppl": r["ppl"],
            "top1_agreement": r["top1_agreement"],
        }
        for r in s["rows"]
    ]
    summary = {
        "qat": {r["attention"]: {k: v for k, v in r.items() if k != "attention"} for r in qat},
        "santa": {"dense_ppl": s["dense_ppl"], "context": s["context"], "rows": s["rows"]},
    }
    train.write_summary(workdir, summary, config=config)
    if parallel.is_primary():
        steps = config.qat.steps
        train.plot_bars(qat, workdir / "attn_qat.png", label="attention",
                        values=["val_loss", "val_rel_to_bf16_pct"],
                        title=f"Attn-QAT: validation loss after {steps} steps")  # fmt: skip
        train.plot_bars(
            [{**r, "name": r["decoder"] if r["S"] == "-" else f"{r['decoder']} S={r['S']}"}
             for r in santa],
            workdir / "santa.png", label="name", values=["ppl", "top1_agreement"],
            higher_is_better={"top1_agreement": True},
            title=f"SANTA decode vs dense (context {s['context']})",
        )  # fmt: skip
    train.print_table(
        f"Attn-QAT: {config.qat.steps} training steps per attention variant",
        ["attention", "final train loss (nats/byte)", "val loss (nats/byte)", "val vs bf16 (%)"],
        [
            [
                r["attention"],
                r["final_train_loss"],
                r["val_loss"],
                f"{r['val_rel_to_bf16_pct']:+.2f}",
            ]
            for r in qat
        ],
    )
    train.print_table(
        f"SANTA: teacher-forced decoding of the bf16 model (context {s['context']})",
        ["decoder", "samples S", "perplexity", "ppl vs dense (%)", "top-1 agreement with dense"],
        [
            [r["decoder"], r["S"], r["ppl"], f"{100 * (r['ppl'] / s['dense_ppl'] - 1):+.3f}",
             r["top1_agreement"]]
            for r in santa
        ],
    )  # fmt: skip


def train_and_evaluate(config: AttentionConfig, workdir: str | os.PathLike) -> dict[str, Any]:
    """Runs :func:`run_experiments` and writes ``workdir/attention_experiments.json`` atomically.

    Also writes ``config.json``, ``summary.json`` (the headline numbers), the variants'
    training files (``metrics.jsonl``, ``checkpoints/<impl>/``, ``curves.png``: their loss
    curves on one chart), ``attn_qat.png`` and ``santa.png`` (the two tables as bar charts),
    and prints the tables. A rerun in the same workdir does not train a finished variant again.

    Data parallel over every visible device (the most that divide ``qat.batch_size``); under a
    multi-host launcher every process calls this and process 0 writes the files.

    Returns:
      The dict written: :func:`run_experiments`'s results plus ``config``.

    Raises:
      DataError: the Shakespeare directory is missing.
      ConfigError: ``workdir`` holds a run of another config (use a new workdir).
    """
    parallel.initialize_distributed()  # before any array exists; no-op without a launcher
    workdir = pathlib.Path(workdir)
    mesh = parallel.data_mesh(config.qat.batch_size)
    results = {
        "config": config_to_dict(config),
        **run_experiments(config, mesh=mesh, workdir=workdir),
    }
    if parallel.is_primary():
        atomic_write_text(workdir / SUMMARY_FILE, json_text(results, indent=1))
    _report(workdir, config, results)
    return results
