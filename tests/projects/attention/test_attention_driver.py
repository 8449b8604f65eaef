"""Attention driver (Attn-QAT training comparison + SANTA decoding): tiny run, decode, configs."""

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import PartitionSpec as P

from fidia_jax import parallel, train
from fidia_jax.config import config_to_dict
from fidia_jax.errors import ConfigError
from fidia_jax.layers import xla_attention
from fidia_jax.models import Llama
from fidia_jax.projects import attention
from fidia_jax.projects.attention import train as attention_train


@pytest.fixture(scope="module")
def tiny_run(shared_data_dir, tmp_path_factory, record_lm_batches):
    """The tiny run, once per module, with every training batch, its task and the SANTA decode
    windows recorded."""
    decode_tokens, decode_logits = [], attention_train.decode_logits

    def recording_decode_logits(model, impl_fn, tokens, prefix, **kw):
        decode_tokens.append(tokens)
        return decode_logits(model, impl_fn, tokens, prefix, **kw)

    config = attention.get_config("tiny", data={"data_dir": str(shared_data_dir)})
    workdir = tmp_path_factory.mktemp("attention_tiny")
    with record_lm_batches(attention_train) as seen, pytest.MonkeyPatch.context() as mp:
        mp.setattr(attention_train, "decode_logits", recording_decode_logits)
        out = attention.train_and_evaluate(config, workdir)
    return config, out, workdir, {**seen, "decode_tokens": decode_tokens}


@pytest.mark.integration  # a tiny driver run (make test-integration, CI)
def test_tiny_train_and_evaluate(tiny_run):
    config, out, tmp_path, _ = tiny_run
    written = json.loads((tmp_path / attention.SUMMARY_FILE).read_text())
    assert written == out
    assert out["config"] == config_to_dict(config)

    qat = {r["impl"]: r for r in out["qat"]}
    assert list(qat) == ["bf16", "attn_qat"]
    for r in qat.values():
        steps, losses = zip(*r["curve"], strict=True)
        assert steps == (0, 2, 4, 6, 7)  # every log_every=2 steps, and the last one
        assert all(math.isfinite(x) for x in losses)
        # Random init starts above the uniform byte model's log(256); training lowers the loss.
        assert losses[0] > math.log(256) and losses[-1] < losses[0] - 0.3
        assert math.isfinite(r["val_loss"]) and r["val_loss"] < losses[0] - 0.3
        np.testing.assert_allclose(
            r["val_rel_to_bf16"], r["val_loss"] / qat["bf16"]["val_loss"] - 1
        )
    assert qat["bf16"]["val_rel_to_bf16"] == 0.0
    # Same init and batch at step 0: FP4 attention changes the loss by well under 1 %.
    assert abs(qat["attn_qat"]["curve"][0][1] - qat["bf16"]["curve"][0][1]) < 0.05
    assert abs(qat["attn_qat"]["val_rel_to_bf16"]) < 0.02

    santa = out["santa"]
    assert santa["context"] == 32 and math.isfinite(santa["dense_ppl"])
    (row,) = santa["rows"]
    assert (row["method"], row["S"]) == ("systematic", 1024)
    # 512 systematic samples per 16-key tile: nearly the exact attention.
    assert row["top1_agreement"] >= 0.95
    assert abs(row["ppl"] / santa["dense_ppl"] - 1.0) < 1e-3

    # the files: the variants' fits under their names, their final checkpoints, the curves,
    # the summary and the two tables as charts
    records = train.read_metrics(tmp_path / "metrics.jsonl")
    assert [r["run"] for r in records] == ["bf16"] * 8 + ["attn_qat"] * 8
    assert [[r["step"] - 1, r["loss"]] for r in records[:8] if r["step"] in (1, 3, 5, 7, 8)] == (
        qat["bf16"]["curve"]
    )
    for impl in qat:
        assert [p.name for p in (tmp_path / "checkpoints" / impl).iterdir() if p.is_dir()] == ["8"]
    for png in ("curves.png", "attn_qat.png", "santa.png"):
        assert (tmp_path / png).read_bytes()[:4] == b"\x89PNG"
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["qat"]["attn_qat"]["val_loss"] == qat["attn_qat"]["val_loss"]
    assert summary["santa"]["dense_ppl"] == santa["dense_ppl"]


@pytest.mark.integration  # a tiny driver run (make test-integration, CI)
def test_tiny_run_is_data_parallel_over_the_four_devices(tiny_run):
    """tests/conftest.py forces 4 host devices: every training batch (B = 8) and the SANTA decode
    windows (B = 4) are split over them, the parameters are replicated, and the sharded step-0
    loss is the unsharded one up to the summation order of the cross-device mean."""
    config, out, _, seen = tiny_run
    assert len(seen["tasks"]) == 2 and len(seen["batches"]) == 2 * config.qat.steps
    for i, tokens in enumerate(seen["batches"]):
        assert tokens.sharding.spec == P("data") and len(tokens.sharding.device_set) == 4
        assert [s.data.shape for s in tokens.addressable_shards] == [(2, 32)] * 4
        t = i % config.qat.steps
        np.testing.assert_array_equal(tokens, seen["tasks"][0].batch_fn(jnp.int32(t)))
    for tokens in seen["decode_tokens"]:  # dense, then SANTA
        assert tokens.sharding.spec == P("data")
        assert [s.data.shape for s in tokens.addressable_shards] == [(1, 32)] * 4
    bf16 = seen["tasks"][0]  # config.qat.impls[0]
    unsharded = jax.jit(bf16.loss_fn)(bf16.params, bf16.batch_fn(jnp.int32(0)))
    assert len(unsharded.sharding.device_set) == 1
    np.testing.assert_allclose(out["qat"][0]["curve"][0][1], float(unsharded), rtol=1e-6)


def test_a_variant_whose_loss_turns_nonfinite_stops_there(monkeypatch):
    """The package's policy: the step with a NaN loss (a traced out-of-range token id) is skipped
    and the variant stops there; it is reported with the last finite parameters."""
    config = attention.get_config("tiny", qat={"steps": 5, "val_batches": 1})
    mesh = parallel.data_mesh(8, num_devices=1)
    make_batch_fn = attention_train.make_lm_batch_fn

    def poisoned(task, mesh):
        batch = make_batch_fn(task, mesh)

        def at(t):
            tokens = batch(t)
            return jax.device_put(jnp.where(t == 2, 256, tokens), tokens.sharding)

        return at

    monkeypatch.setattr(attention_train, "make_lm_batch_fn", poisoned)
    stream = jnp.arange(4000) % 251
    _, res = attention.train_qat(config, "xla", stream, stream, mesh=mesh)
    assert res["nonfinite_step"] == 2
    assert [t for t, _ in res["curve"]] == [0, 2] and math.isnan(res["curve"][-1][1])
    assert math.isfinite(res["curve"][0][1]) and math.isfinite(res["val_loss"])


def test_dense_decode_equals_full_forward():
    """Prefill + teacher-forced decode from the KV cache gives a causal forward's logits.

    ``tokens[:, :P-1]`` is prefilled and ``tokens[:, P-1:T-1]`` decoded, so the logits are a
    causal forward pass over ``tokens[:, :T-1]`` at positions ``P-1..T-2`` (each byte once).
    """
    config = attention.get_config("tiny")
    model = Llama(attention.llama_config(config, "xla"), rngs=nnx.Rngs(0))
    tokens = jax.random.randint(jax.random.key(1), (2, 32), 0, 256)
    dense = attention.decode_logits(
        model,
        lambda q, k, v, **kw: xla_attention(q, k, v, causal=False, kv_lengths=kw.get("kv_lengths")),
        tokens,
        prefix=20,
    )
    assert dense.shape == (2, 12, 256)
    assert model.config.attention_impl == "xla"  # restored
    full = model(tokens[:, :31])[:, 19:31]
    np.testing.assert_allclose(dense, full, rtol=1e-4, atol=1e-4)
    assert float(jnp.max(jnp.abs(full))) > 0.1  # not trivially zero


def test_bf16_attention_rounds_inputs():
    q, k, v = (jax.random.normal(jax.random.key(i), (1, 4, 2, 16)) for i in range(3))
    got = attention.bf16_attention(q, k, v, causal=True)
    bf = jnp.bfloat16
    want = xla_attention(q.astype(bf), k.astype(bf), v.astype(bf), causal=True).astype(q.dtype)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == jnp.float32
    assert float(jnp.max(jnp.abs(got - xla_attention(q, k, v, causal=True)))) > 0


def test_configs():
    assert attention.get_config().qat.steps == 300  # the benchmark's default
    assert attention.get_config("tiny").qat.impls == ("bf16", "attn_qat")
    with pytest.raises(ConfigError, match="bf16"):
        attention.get_config("tiny", qat={"impls": ("attn_qat",)})
    with pytest.raises(ConfigError, match="multiples of 16"):
        attention.get_config("tiny", model={"n_heads": 4, "n_kv_heads": 2})  # head dim 8
    # Without FP4 variants any context length works.
    assert attention.get_config("tiny", data={"seq_len": 24}, qat={"impls": ("bf16",)})
    with pytest.raises(ConfigError, match="santa.methods"):
        attention.get_config("tiny", santa={"methods": ("gumbel",)})
