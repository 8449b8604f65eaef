"""Small-scale CPU experiments for the attention kernels (docs/kernels.md).

1. Attn-QAT: train the small LLaMA on Shakespeare bytes with bf16-input attention ("bf16"),
   the drop-in FP4 variant and Attn-QAT (same init, same batches, same steps); report loss
   curves and final validation loss.
2. SANTA: take the model trained with bf16 attention, prefill half of a validation window
   densely, then decode the second half teacher-forced with dense attention and with SANTA
   (S in {32, 128, 512, 2048}, iid / stratified / systematic); report validation perplexity of the
   decoded positions and top-1 agreement of the SANTA logits with dense decoding.

Usage:
  python benchmarks/attention_experiments.py --data-dir ../shared/data [--steps 300]

Writes benchmarks/results/attention_experiments.json. CPU only; a few minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import pathlib
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from fidia_jax._io import atomic_write_text
from fidia_jax.data import load_shakespeare, sample_windows
from fidia_jax.kernels.santa import make_santa_attention
from fidia_jax.models import (
    Llama,
    LlamaConfig,
    next_token_loss,
    register_attention_impl,
    xla_attention,
)


def bf16_attention(q, k, v, *, causal, kv_lengths=None, rng=None):
    """Softmax attention on bf16-rounded q, k, v (the bf16 baseline of the Attn-QAT paper)."""
    bf = jnp.bfloat16
    out = xla_attention(
        q.astype(bf), k.astype(bf), v.astype(bf), causal=causal, kv_lengths=kv_lengths
    )
    return out.astype(q.dtype)


register_attention_impl("bf16", bf16_attention)


def make_config(impl: str, seq_len: int) -> LlamaConfig:
    return LlamaConfig(
        dim=128,
        n_layers=2,
        n_heads=4,
        n_kv_heads=2,
        hidden_dim=344,
        max_seq_len=seq_len,
        attention_impl=impl,
    )


def train(impl, splits, *, steps, batch, seq_len, lr, seed=0, eval_batches=8, log_every=25):
    model = Llama(make_config(impl, seq_len), rngs=nnx.Rngs(seed))
    sched = optax.warmup_cosine_decay_schedule(0.0, lr, max(steps // 10, 1), steps, lr * 0.1)
    opt = nnx.Optimizer(
        model,
        optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(sched, weight_decay=0.01)),
        wrt=nnx.Param,
    )
    train_tokens = jnp.asarray(splits.train)
    val_tokens = jnp.asarray(splits.val)
    key = jax.random.key(1234)

    @nnx.jit
    def step(model, opt, tokens):
        loss, grads = nnx.value_and_grad(lambda m: next_token_loss(m(tokens), tokens))(model)
        opt.update(model, grads)
        return loss

    @nnx.jit
    def eval_loss(model, tokens):
        return next_token_loss(model(tokens), tokens)

    val_batches = [
        sample_windows(jax.random.fold_in(jax.random.key(99), i), val_tokens, batch, seq_len)
        for i in range(eval_batches)
    ]
    curve = []
    t0 = time.time()
    for t in range(steps):
        loss = step(
            model, opt, sample_windows(jax.random.fold_in(key, t), train_tokens, batch, seq_len)
        )
        if t % log_every == 0 or t == steps - 1:
            curve.append((t, float(loss)))
            if not math.isfinite(float(loss)):
                break
    val = float(np.mean([float(eval_loss(model, vb)) for vb in val_batches]))
    return model, {"impl": impl, "curve": curve, "val_loss": val, "seconds": time.time() - t0}


def santa_eval(model, impl_fn, tokens, prefix):
    """Teacher-forced decode of tokens[:, prefix:] after a dense prefill; returns logits."""
    b, t = tokens.shape
    cfg = model.config
    register_attention_impl("_exp_decode", impl_fn, decode_only=True)
    model.config = dataclasses.replace(cfg, attention_impl="_exp_decode")

    @jax.jit
    def run(tokens):
        cache = model.init_cache(b, t)
        _, cache = model.prefill(tokens[:, :prefix], cache)

        def body(cache, tok):
            lg, cache = model.decode(tok[:, None], cache, rng=jax.random.key(7))
            return cache, lg[:, 0]

        _, logits = jax.lax.scan(body, cache, tokens[:, prefix - 1 : t - 1].T)
        return logits.transpose(1, 0, 2)  # predictions of tokens[:, prefix:]

    out = run(tokens)
    model.config = cfg
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=os.environ.get("FIDIA_DATA_DIR", "../shared/data"))
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--santa-batch", type=int, default=16)
    ap.add_argument("--skip-qat", action="store_true")
    ap.add_argument("--out", default="benchmarks/results/attention_experiments.json")
    args = ap.parse_args(argv)
    splits = load_shakespeare(args.data_dir)
    results = {"args": vars(args), "jax": jax.__version__, "devices": str(jax.devices())}

    impls = ["bf16"] if args.skip_qat else ["bf16", "attn_qat_dropin", "attn_qat"]
    models = {}
    results["qat"] = []
    for impl in impls:
        model, res = train(
            impl, splits, steps=args.steps, batch=args.batch, seq_len=args.seq_len, lr=args.lr
        )
        models[impl] = model
        results["qat"].append(res)
        print(
            f"[qat] {impl:16s} final train {res['curve'][-1][1]:.4f}  val {res['val_loss']:.4f}  ({res['seconds']:.0f}s)",
            flush=True,
        )
    base = {r["impl"]: r["val_loss"] for r in results["qat"]}["bf16"]
    for r in results["qat"]:
        r["val_rel_to_bf16"] = r["val_loss"] / base - 1.0

    model = models["bf16"]
    model.config = dataclasses.replace(model.config, attention_impl="xla")
    tokens = sample_windows(
        jax.random.key(2024), jnp.asarray(splits.val), args.santa_batch, args.seq_len
    )
    prefix = args.seq_len // 2
    target = tokens[:, prefix:]

    def nll(logits):
        lp = jax.nn.log_softmax(logits.astype(jnp.float32), -1)
        return float(-jnp.mean(jnp.take_along_axis(lp, target[..., None], -1)))

    dense = santa_eval(
        model,
        lambda q, k, v, **kw: xla_attention(q, k, v, causal=False, kv_lengths=kw.get("kv_lengths")),
        tokens,
        prefix,
    )
    results["santa"] = {"dense_ppl": math.exp(nll(dense)), "context": args.seq_len, "rows": []}
    print(
        f"[santa] dense decode ppl {results['santa']['dense_ppl']:.3f} (context {args.seq_len})",
        flush=True,
    )
    for method in ("iid", "stratified", "systematic"):
        for s in (32, 128, 512, 2048):
            lg = santa_eval(
                model,
                make_santa_attention(num_samples=s, method=method, block_k=64, backend="reference"),
                tokens,
                prefix,
            )
            agree = float(jnp.mean(jnp.argmax(lg, -1) == jnp.argmax(dense, -1)))
            row = {"method": method, "S": s, "ppl": math.exp(nll(lg)), "top1_agreement": agree}
            results["santa"]["rows"].append(row)
            print(
                f"[santa] {method:10s} S={s:5d} ppl {row['ppl']:.3f}  top-1 agreement {agree:.3f}",
                flush=True,
            )
    out = pathlib.Path(args.out)
    atomic_write_text(out, json.dumps(results, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
