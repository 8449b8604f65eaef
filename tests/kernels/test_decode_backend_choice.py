"""Which backend ``flash_decode(backend="auto")`` runs, and the ``"xla"`` backend's semantics."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax.kernels import _dispatch
from fidia_jax.kernels.santa import api
from fidia_jax.kernels.santa import reference as ref


def _inputs(b=3, n=40, hq=4, hkv=2, d=8, seed=0):
    kq, kk, kv = jax.random.split(jax.random.key(seed), 3)
    q = jax.random.normal(kq, (b, hq, d))
    k = jax.random.normal(kk, (b, n, hkv, d))
    v = jax.random.normal(kv, (b, n, hkv, d))
    return q, k, v


@pytest.mark.parametrize(
    ("platform", "expected"),
    [("gpu", "xla"), ("cuda", "xla"), ("cpu", "reference"), ("tpu", "reference")],
)
def test_auto_picks_xla_fused_attention_on_gpu_only(monkeypatch, platform, expected):
    monkeypatch.setattr(jax, "default_backend", lambda: platform)
    called = []
    monkeypatch.setattr(api, "_xla_decode", lambda *a, **kw: called.append("xla"))
    monkeypatch.setattr(
        api._ref, "flash_decode_reference", lambda *a, **kw: called.append("reference")
    )
    monkeypatch.setattr(
        api._pallas, "flash_decode_pallas", lambda *a, **kw: called.append("pallas")
    )
    api.flash_decode(*_inputs(), backend="auto")
    assert called == [expected]
    # SANTA keeps its Pallas kernel on GPU; "xla" is not a SANTA backend
    assert _dispatch.resolve_backend("auto") == ("pallas" if expected == "xla" else "reference")
    with pytest.raises(ValueError, match="unknown backend 'xla'"):
        _dispatch.resolve_backend("xla")


def test_xla_backend_equals_dense_reference_and_never_reads_masked_slots():
    q, k, v = _inputs()
    lengths = jnp.array([40, 17, 0], jnp.int32)
    # poison every slot past the row's length: the output must not see it
    pos = jnp.arange(k.shape[1])[None, :, None, None]
    masked = pos >= lengths[:, None, None, None]
    k_bad = jnp.where(masked, jnp.nan, k)
    v_bad = jnp.where(masked, jnp.inf, v)
    # full float32 dots: on a GPU the default precision is TF32 (errors of about 5e-4 here)
    with jax.default_matmul_precision("highest"):
        got = api.flash_decode(q, k_bad, v_bad, lengths, backend="xla")
    want = ref.dense_decode_reference(q, k, v, lengths)
    assert got.shape == (3, 4, 8) and got.dtype == q.dtype
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=2e-6, rtol=2e-6)
    np.testing.assert_array_equal(np.asarray(got[2]), 0.0)  # an empty row is zeros
    # a NaN in a slot the row does read stays visible
    v_seen = v.at[1, 3, 0, 0].set(jnp.nan)
    out = api.flash_decode(q, k, v_seen, lengths, backend="xla")
    assert np.isnan(np.asarray(out[1, :2, 0])).all() and np.isfinite(np.asarray(out[0])).all()


def test_xla_backend_checks_lengths_like_the_others():
    q, k, v = _inputs()
    with pytest.raises(ValueError, match="kv_lengths"):
        api.flash_decode(q, k, v, jnp.array([41, 1, 1], jnp.int32), backend="xla")
