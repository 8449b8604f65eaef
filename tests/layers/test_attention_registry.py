"""Attention registry and the ``jnp`` reference attention (GQA, causal, kv lengths) vs brute force."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax import layers
from fidia_jax.errors import ConfigError
from fidia_jax.layers import _attention

attn = jax.jit(layers.xla_attention, static_argnames="causal")


def np_attention(q, k, v, *, causal, kv_lengths=None):
    """Brute-force per-head attention with kv heads repeated (float64)."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    b, t, hq, d = q.shape
    s, hkv = k.shape[1], k.shape[2]
    g = hq // hkv
    out = np.zeros_like(q)
    for bi in range(b):
        for h in range(hq):
            kh, vh = k[bi, :, h // g], v[bi, :, h // g]
            for i in range(t):
                valid = np.ones(s, bool)
                if causal:
                    valid &= np.arange(s) <= i + (s - t)
                if kv_lengths is not None:
                    valid &= np.arange(s) < kv_lengths[bi]
                sc = kh[valid] @ q[bi, i, h] / np.sqrt(d)
                p = np.exp(sc - sc.max())
                out[bi, i, h] = (p / p.sum()) @ vh[valid]
    return out


@pytest.mark.parametrize(
    "causal,lengths,t,s", [(True, None, 5, 5), (True, None, 3, 7), (False, [7, 2], 1, 7)]
)
def test_xla_attention_gqa_matches_brute_force(causal, lengths, t, s):
    r = np.random.default_rng(0)
    q = r.standard_normal((2, t, 6, 4), np.float32)
    k = r.standard_normal((2, s, 2, 4), np.float32)
    v = r.standard_normal((2, s, 2, 4), np.float32)
    kvl = None if lengths is None else jnp.array(lengths, jnp.int32)
    out = attn(q, k, v, causal=causal, kv_lengths=kvl, rng=None)
    np.testing.assert_allclose(
        out, np_attention(q, k, v, causal=causal, kv_lengths=lengths), rtol=1e-5, atol=1e-5
    )


def test_registry_lookup_and_errors():
    with pytest.raises(ConfigError, match="available: .*xla"):
        layers.get_attention_impl("no-such-impl")
    assert layers.get_attention_impl("xla") is layers.xla_attention
    assert not layers.is_decode_only("xla")
    assert {"xla", "santa", "flash_decode", "attn_qat", "attn_qat_dropin"} <= set(
        layers.list_attention_impls()
    )
    with pytest.raises(ConfigError, match="non-empty"):
        layers.register_attention_impl("", layers.xla_attention)
    with pytest.raises(ConfigError, match="callable"):
        layers.register_attention_impl("_test_not_callable", 3)
    assert "_test_not_callable" not in _attention._REGISTRY


# ---------------------------------------------------------------- masked slots (issue 17.8, 12)


def _nan_past(v, lengths):
    past = np.arange(v.shape[1])[None, :] >= np.asarray(lengths)[:, None]
    return jnp.where(jnp.asarray(past)[:, :, None, None], jnp.nan, v)


def test_xla_attention_masked_slots_never_contribute():
    """NaN past kv_lengths (decode) or in a future token (causal) never reaches the output."""
    kq, kk, kv = jax.random.split(jax.random.key(7), 3)
    q = jax.random.normal(kq, (2, 1, 4, 8))
    k = jax.random.normal(kk, (2, 12, 2, 8))
    v = jax.random.normal(kv, (2, 12, 2, 8))
    lengths = jnp.array([0, 5])
    out = np.asarray(
        attn(q, _nan_past(k, lengths), _nan_past(v, lengths), causal=False, kv_lengths=lengths)
    )
    np.testing.assert_array_equal(out[0], 0.0)  # length-0 row: zeros
    np.testing.assert_array_equal(out, np.asarray(attn(q, k, v, causal=False, kv_lengths=lengths)))
    # causal: the last token's NaN value row reaches only the last query
    qs = jax.random.normal(kq, (1, 12, 4, 8))
    o = np.asarray(attn(qs, k[:1], v[:1].at[:, -1].set(jnp.nan), causal=True))
    assert np.isfinite(o[:, :-1]).all() and np.isnan(o[:, -1]).all()
    np.testing.assert_array_equal(
        o[:, :-1], np.asarray(attn(qs, k[:1], v[:1], causal=True))[:, :-1]
    )


@pytest.mark.parametrize(
    "lengths,match",
    [
        ([13, 2], r"\[0, 12\].*got 13 in row 0"),
        ([2, -1], "got -1 in row 1"),
        ([2], r"must have shape \(2,\)"),
    ],
)
def test_xla_attention_kv_lengths_out_of_range(lengths, match):
    q, k = jnp.zeros((2, 1, 4, 8)), jnp.zeros((2, 12, 2, 8))
    with pytest.raises(ValueError, match="xla_attention: kv_lengths .*" + match):
        layers.xla_attention(q, k, k, causal=False, kv_lengths=np.array(lengths, np.int32))


def test_xla_attention_shape_messages_name_the_mismatch():
    q = jnp.zeros((2, 1, 4, 8))
    with pytest.raises(ValueError, match="batch sizes differ"):
        layers.xla_attention(q, *(2 * [jnp.zeros((3, 12, 2, 8))]), causal=False)
    with pytest.raises(ValueError, match="head dims differ"):
        layers.xla_attention(q, *(2 * [jnp.zeros((2, 12, 2, 16))]), causal=False)
    with pytest.raises(ValueError, match="query heads 4 must be a multiple of kv heads 3"):
        layers.xla_attention(q, *(2 * [jnp.zeros((2, 12, 3, 8))]), causal=False)
