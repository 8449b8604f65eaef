"""Pallas SANTA / flash-decoding kernels == jnp references (interpret mode on CPU)."""

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax.kernels import santa
from fidia_jax.kernels.santa import reference as R

ON_ACCEL = jax.default_backend() == "gpu"  # the kernels target Triton (GPU)
TOL = {jnp.float32: 1e-5, jnp.bfloat16: 2e-2}


def _inputs(dtype, b=2, n=100, hq=4, hkv=2, d=16):
    k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
    q = (2 * jax.random.normal(k1, (b, hq, d))).astype(dtype)
    k = jax.random.normal(k2, (b, n, hkv, d)).astype(dtype)
    v = jax.random.normal(k3, (b, n, hkv, d)).astype(dtype)
    return q, k, v, jnp.array([n, 37], jnp.int32)


class TestSantaPallas:
    """Runs on the accelerator; ``TestSantaPallasInterpret`` runs the same cases on CPU."""

    INTERPRET = False

    def setup_method(self):
        if not self.INTERPRET and not ON_ACCEL:
            pytest.skip("no GPU; see the Interpret subclass")

    @pytest.mark.parametrize(
        "dtype", [jnp.float32, pytest.param(jnp.bfloat16, marks=pytest.mark.slow)]
    )
    def test_flash_decode(self, dtype):
        q, k, v, lengths = _inputs(dtype)
        out = santa.flash_decode_pallas(
            q, k, v, lengths, block_sizes=santa.BlockSizes(32), interpret=self.INTERPRET
        )
        want = R.dense_decode_reference(
            q.astype(jnp.float32), k.astype(jnp.float32), v.astype(jnp.float32), lengths
        )
        assert out.dtype == dtype
        np.testing.assert_allclose(
            np.asarray(out, np.float32), want, atol=TOL[dtype], rtol=TOL[dtype]
        )

    @pytest.mark.parametrize(
        "method,dtype,value_stage",
        [
            ("iid", jnp.float32, "counts"),
            pytest.param("stratified", jnp.float32, "gather", marks=pytest.mark.slow),
            ("systematic", jnp.bfloat16, "gather"),
        ],
    )
    def test_santa(self, method, dtype, value_stage):
        q, k, v, lengths = _inputs(dtype)
        u = R.make_uniforms(
            jax.random.key(4), 2, 4, 100, block_k=32, samples_per_tile=8, method=method
        )
        out = santa.santa_decode_pallas(
            q,
            k,
            v,
            u,
            lengths,
            samples_per_tile=8,
            method=method,
            block_sizes=santa.BlockSizes(32),
            interpret=self.INTERPRET,
            value_stage=value_stage,
        )
        want = R.santa_decode_reference(
            q, k, v, u, lengths, samples_per_tile=8, method=method, block_k=32
        )
        assert out.dtype == dtype
        np.testing.assert_allclose(
            np.asarray(out, np.float32),
            np.asarray(want, np.float32),
            atol=TOL[dtype],
            rtol=TOL[dtype],
        )


class TestSantaPallasInterpret(TestSantaPallas):
    INTERPRET = True


@pytest.mark.parametrize(
    "method,value_stage", [("iid", "gather"), ("stratified", "counts"), ("systematic", "gather")]
)
def test_santa_with_non_power_of_two_samples_per_tile(method, value_stage):
    """spt = 3 is padded to 4 sample slots inside the kernel; the padding slot never counts."""
    q, k, v, lengths = _inputs(jnp.float32)
    u = R.make_uniforms(jax.random.key(5), 2, 4, 100, block_k=32, samples_per_tile=3, method=method)
    out = santa.santa_decode_pallas(
        q,
        k,
        v,
        u,
        lengths,
        samples_per_tile=3,
        method=method,
        block_sizes=santa.BlockSizes(32),
        interpret=True,
        value_stage=value_stage,
    )
    want = R.santa_decode_reference(
        q, k, v, u, lengths, samples_per_tile=3, method=method, block_k=32
    )
    np.testing.assert_allclose(np.asarray(out), np.asarray(want), atol=1e-5, rtol=1e-5)


def test_block_sizes_validated():
    with pytest.raises(ValueError, match="block_k"):
        santa.BlockSizes(12)


def test_value_stage_default_and_validation_shared_with_reference():
    """Same default value stage in both backends, so `santa_decode` gives the same estimator."""
    default = {
        fn.__name__: inspect.signature(fn).parameters["value_stage"].default
        for fn in (R.santa_decode_reference, santa.santa_decode_pallas)
    }
    assert set(default.values()) == {"gather"}, default
    q, k, v, lengths = _inputs(jnp.float32, n=64)
    u = R.make_uniforms(jax.random.key(1), 2, 4, 64, block_k=32, samples_per_tile=4, method="iid")
    kw = dict(samples_per_tile=4, method="iid")
    with pytest.raises(ValueError, match="santa_decode_pallas: value_stage must be one of"):
        santa.santa_decode_pallas(
            q, k, v, u, lengths, value_stage="bogus", block_sizes=santa.BlockSizes(32), **kw
        )
    with pytest.raises(ValueError, match="santa_decode_pallas: uniforms must have shape"):
        santa.santa_decode_pallas(
            q, k, v, u[..., :1], lengths, block_sizes=santa.BlockSizes(32), **kw
        )
    with pytest.raises(ValueError, match="multiple of kv heads"):
        santa.flash_decode_pallas(q[:, :3], k, v, lengths)


def test_attention_impl_adapter_matches_reference():
    q, k, v, lengths = _inputs(jnp.float32)
    fn = santa.make_santa_attention(
        num_samples=16, method="stratified", block_k=32, backend="reference"
    )
    rng = jax.random.key(9)
    out = fn(q[:, None], k, v, causal=False, kv_lengths=lengths, rng=rng)
    spt = santa.samples_per_tile_for(16, 100, 32)
    assert spt == 4
    u = R.make_uniforms(rng, 2, 4, 100, block_k=32, samples_per_tile=spt, method="stratified")
    want = R.santa_decode_reference(
        q, k, v, u, lengths, samples_per_tile=spt, method="stratified", block_k=32
    )
    np.testing.assert_allclose(out[:, 0], want, atol=1e-6)
    # full float32 dots: on a GPU the default precision is TF32 (about 1e-3 here)
    with jax.default_matmul_precision("highest"):
        exact = santa.flash_decode_attention(q[:, None], k, v, causal=False, kv_lengths=lengths)
    np.testing.assert_allclose(exact[:, 0], R.dense_decode_reference(q, k, v, lengths), atol=1e-5)
    with pytest.raises(ValueError, match="decode"):
        fn(jnp.zeros((2, 3, 4, 16)), k, v, causal=True, kv_lengths=None, rng=rng)
