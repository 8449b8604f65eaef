"""ReplaceQKV ("Noise QKV"): locality per part, matched RMS, cached decode agreement, errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from fidia_jax import models


@pytest.fixture(scope="module")
def model():
    # one block (the cheapest to build and compile), 4 query heads over 2 kv heads
    return models.Llama(models.LlamaConfig.tiny(n_layers=1), rngs=nnx.Rngs(0))


TOKENS = jnp.asarray(np.random.default_rng(0).integers(0, 256, (2, 8)), jnp.int32)
KEY = jax.random.key(7)
# one jitted program per hook *structure* (layer, parts); positions are traced, so the tests
# below share three compilations: no hooks, parts="q", parts="kv"
_inspect = nnx.jit(lambda m, t, hooks: m.inspect(t, capture=("head_out",), hooks=hooks))


def _run(model, hooks):
    return _inspect(model, TOKENS, hooks)


def test_parts_act_where_attention_reads_them(model):
    base, _ = _run(model, ())
    diff = lambda lg: np.abs(np.asarray(lg - base)).max(axis=(0, 2))  # noqa: E731 per position
    pos = jnp.array([3], jnp.int32)
    # a query only changes its own row
    dq = diff(_run(model, (models.ReplaceQKV(0, KEY, pos, "q"),))[0])
    assert dq[3] > 1e-3 and np.all(dq[np.arange(8) != 3] == 0)
    # keys / values change the rows that may read them (>= 3), never the earlier ones
    dkv = diff(_run(model, (models.ReplaceQKV(0, KEY, pos, "kv"),))[0])
    assert np.all(dkv[:3] == 0) and dkv[3] > 1e-3 and dkv[4:].max() > 1e-4
    # empty positions (padding -1): no effect
    same = _run(model, (models.ReplaceQKV(0, KEY, jnp.array([-1], jnp.int32), "q"),))[0]
    np.testing.assert_array_equal(np.asarray(same), np.asarray(base))


def test_value_noise_has_the_values_rms(model):
    # position 0 attends only to itself (weight 1 whatever its key), so its head outputs are its
    # (replaced) value vectors
    _, cap0 = _run(model, ())
    _, cap1 = _run(model, (models.ReplaceQKV(0, KEY, jnp.array([0], jnp.int32), "kv"),))
    v0 = np.asarray(cap0["head_out"][0, :, 0, ::2])  # query heads 0, 2 read kv heads 0, 1
    v1 = np.asarray(cap1["head_out"][0, :, 0, ::2])
    rms = lambda a: np.sqrt(np.mean(a.reshape(a.shape[0], -1) ** 2, axis=1))  # noqa: E731
    np.testing.assert_allclose(rms(v1), rms(v0), rtol=1e-5)
    assert np.abs(v1 - v0).max() > 1e-2


@pytest.mark.slow  # eager prefill + 3 decode steps: tens of seconds of op dispatch
def test_full_pass_equals_cached_decode(model):
    hooks = (models.ReplaceQKV(0, KEY, jnp.array([2, 6], jnp.int32), "qkv"),)
    full = model(TOKENS, hooks=hooks)
    cache = model.init_cache(2, 8)
    lg, cache = model.prefill(TOKENS[:, :5], cache, hooks=hooks)
    steps = [lg]
    for t in range(5, 8):
        lg, cache = model.decode(TOKENS[:, t : t + 1], cache, hooks=hooks)
        steps.append(lg)
    np.testing.assert_allclose(np.asarray(jnp.concatenate(steps, 1)), np.asarray(full), atol=2e-5)


def test_bad_hooks(model):
    with pytest.raises(ValueError, match="names layer 1, but the model has 1 layers"):
        model(TOKENS, hooks=(models.ReplaceQKV(1, KEY),))
    with pytest.raises(ValueError, match="parts must be"):
        model(TOKENS, hooks=(models.ReplaceQKV(0, KEY, parts="qx"),))
    with pytest.raises(ValueError, match="parts must be"):
        model(TOKENS, hooks=(models.ReplaceQKV(0, KEY, parts=""),))
