"""The kernels plugged into the small LLaMA through the attention registry."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from fidia_jax.layers import get_attention_impl, is_decode_only, list_attention_impls
from fidia_jax.models import Llama, LlamaConfig

CFG = LlamaConfig.tiny(dim=64, n_heads=4, n_kv_heads=2, max_seq_len=32)  # head dim 16


def test_registered_names():
    names = list_attention_impls()
    for n in ("santa", "flash_decode", "attn_qat", "attn_qat_dropin"):
        assert n in names
    assert is_decode_only("santa") and is_decode_only("flash_decode")
    assert not is_decode_only("attn_qat")


@pytest.fixture(scope="module")
def decode_logits():
    """Prefill 16 tokens (ragged: row 1 has 11), then 2 decode steps with each impl."""
    tokens = jax.random.randint(jax.random.key(0), (2, 16), 0, 256)
    nxt = jax.random.randint(jax.random.key(1), (2, 3), 0, 256)
    out = {}
    for impl in ("xla", "flash_decode", "santa"):
        model = Llama(dataclasses.replace(CFG, attention_impl=impl), rngs=nnx.Rngs(0))

        @jax.jit
        def run(tokens, nxt, model=model):
            cache = model.init_cache(2)
            _, cache = model.prefill(tokens, cache, lengths=jnp.array([16, 11], jnp.int32))
            logits = []
            for s in range(2):
                lg, cache = model.decode(nxt[:, s : s + 1], cache, rng=jax.random.key(5))
                logits.append(lg[:, 0])
            return jnp.stack(logits, 1)

        out[impl] = np.asarray(run(tokens, nxt))
    return out


def test_flash_decode_in_llama_equals_xla(decode_logits):
    np.testing.assert_allclose(
        decode_logits["flash_decode"], decode_logits["xla"], atol=1e-4, rtol=1e-4
    )


def test_santa_in_llama_is_close_to_xla(decode_logits):
    # default budget 256 samples over <= 20 keys (one tile): an estimate, close but not exact
    diff = np.abs(decode_logits["santa"] - decode_logits["xla"])
    assert 0 < diff.max() < 0.5 * np.abs(decode_logits["xla"]).max()


def test_attn_qat_in_llama_forward():
    tokens = jax.random.randint(jax.random.key(2), (2, 32), 0, 256)
    model = Llama(dataclasses.replace(CFG, attention_impl="attn_qat"), rngs=nnx.Rngs(0))
    ref = Llama(CFG, rngs=nnx.Rngs(0))
    fwd = nnx.jit(lambda m, t: m(t))
    lq, lr = fwd(model, tokens), fwd(ref, tokens)
    rel = float(jnp.linalg.norm(lq - lr) / jnp.linalg.norm(lr))
    assert 1e-4 < rel < 0.2  # FP4 attention changes the logits a little
    assert get_attention_impl("attn_qat").__name__ == "attn_qat_attention"
