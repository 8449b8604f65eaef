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
writes them to ``workdir/attention_experiments.json``. ``benchmarks/attention_experiments.py``
calls :func:`run_experiments`.

Data parallel (:mod:`fidia_jax.parallel`): training, validation and decoding split their batches
over a mesh of every visible device (the most that divide ``qat.batch_size``) with the
parameters replicated (:func:`fidia_jax.models.make_lm_train_step`); under a multi-host launcher
every process runs the same experiments and process 0 writes the file. On one device the numbers
are those of an unsharded run, bit for bit.
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from fidia_jax import parallel
from fidia_jax._io import atomic_write_text, json_text
from fidia_jax.config import config_to_dict
from fidia_jax.data import load_shakespeare, sample_windows
from fidia_jax.kernels.santa import make_santa_attention
from fidia_jax.layers import register_attention_impl, xla_attention
from fidia_jax.models import (
    Llama,
    LmTask,
    init_lm_state,
    lm_data_mesh,
    make_lm_batch_fn,
    make_lm_task,
    make_lm_train_step,
    place_lm_batch,
)
from fidia_jax.projects.attention.configs import AttentionConfig, llama_config

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
) -> tuple[Llama, dict[str, Any]]:
    """Trains the model with attention ``impl`` for ``config.qat.steps`` steps.

    Args:
      config: the run configuration.
      impl: an ``attention_impl`` name (``"bf16"`` is registered by :func:`run_experiments`).
      train_tokens: ``(N,)`` int training byte stream.
      val_tokens: ``(M,)`` int validation byte stream.
      mesh: the ``data`` mesh every batch is split over, parameters replicated (``None``:
        :func:`fidia_jax.models.lm_data_mesh`, the most visible devices dividing the batch).

    Returns:
      ``(model, result)``: the trained ``Llama`` (parameters on ``mesh``) and ``{"impl",
      "curve": [[t, loss], ...] (nats/byte), "val_loss" (nats/byte), "seconds" (wall,
      compilation included)}``. A non-finite logged loss stops training early.
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
    step, batch = make_lm_train_step(task, tx, mesh), make_lm_batch_fn(task, mesh)
    eval_loss = jax.jit(task.loss_fn)
    params, opt_state = init_lm_state(task, tx, mesh)  # donated by `step`
    b = q.batch_size
    val_batches = [
        place_lm_batch(task.val_tokens[i * b : (i + 1) * b], mesh) for i in range(q.val_batches)
    ]
    curve = []
    t0 = time.time()
    for t in range(q.steps):
        params, opt_state, loss = step(params, opt_state, batch(jnp.int32(t)))
        if t % q.log_every == 0 or t == q.steps - 1:
            loss = float(parallel.to_host(loss))
            curve.append([t, loss])
            if not math.isfinite(loss):
                break
    val = float(np.mean([float(parallel.to_host(eval_loss(params, vb))) for vb in val_batches]))
    model = nnx.merge(task.graphdef, params)
    return model, {"impl": impl, "curve": curve, "val_loss": val, "seconds": time.time() - t0}


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
    (:func:`fidia_jax.models.place_lm_batch`).

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
        lp = jax.nn.log_softmax(logits.astype(jnp.float32), -1)
        return float(parallel.to_host(-jnp.mean(jnp.take_along_axis(lp, target[..., None], -1))))

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


def run_experiments(
    config: AttentionConfig,
    *,
    mesh: jax.sharding.Mesh | None = None,
    log: Callable[[str], None] = _print,
) -> dict[str, Any]:
    """Runs both experiments at ``config``'s scale (registers the ``"bf16"`` attention impl).

    Args:
      config: the run configuration.
      mesh: the ``data`` mesh of every batch (``None``: the most visible devices that divide
        ``qat.batch_size``, :func:`fidia_jax.parallel.data_mesh`).
      log: called with one progress line per trained variant and per SANTA row.

    Returns:
      A JSON-ready dict: ``jax`` (version), ``devices``, ``qat`` (one :func:`train_qat` result
      per variant, plus ``val_rel_to_bf16`` = ``val_loss / val_loss(bf16) - 1``) and ``santa``
      (:func:`santa_evaluate`).

    Raises:
      DataError: the Shakespeare directory is missing.
    """
    parallel.initialize_distributed()  # no-op without a launcher, or when already initialised
    mesh = parallel.data_mesh(config.qat.batch_size) if mesh is None else mesh
    register_attention_impl("bf16", bf16_attention)
    d = config.data
    splits = load_shakespeare(d.data_dir, max_files=d.max_files or None)
    results: dict[str, Any] = {"jax": jax.__version__, "devices": str(jax.devices()), "qat": []}
    models = {}
    for impl in config.qat.impls:
        model, res = train_qat(config, impl, splits.train, splits.val, mesh=mesh)
        models[impl] = model
        results["qat"].append(res)
        log(
            f"[qat] {impl:16s} final train {res['curve'][-1][1]:.4f}  val {res['val_loss']:.4f}"
            f"  ({res['seconds']:.0f}s)"
        )
    base = {r["impl"]: r["val_loss"] for r in results["qat"]}["bf16"]
    for r in results["qat"]:
        r["val_rel_to_bf16"] = r["val_loss"] / base - 1.0
    results["santa"] = santa_evaluate(config, models["bf16"], splits.val, mesh=mesh, log=log)
    return results


def train_and_evaluate(config: AttentionConfig, workdir: str | pathlib.Path) -> dict[str, Any]:
    """Runs :func:`run_experiments` and writes ``workdir/attention_experiments.json`` atomically.

    Data parallel over every visible device (the most that divide ``qat.batch_size``); under a
    multi-host launcher every process calls this and process 0 writes the file.

    Returns:
      The dict written: :func:`run_experiments`'s results plus ``config``.

    Raises:
      DataError: the Shakespeare directory is missing.
    """
    parallel.initialize_distributed()  # before any array exists; no-op without a launcher
    mesh = parallel.data_mesh(config.qat.batch_size)
    results = {"config": config_to_dict(config), **run_experiments(config, mesh=mesh)}
    if parallel.is_primary():
        atomic_write_text(pathlib.Path(workdir) / SUMMARY_FILE, json_text(results, indent=1))
    return results
