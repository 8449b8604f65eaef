"""Pallas Attn-QAT forward/backward == jnp reference (interpret mode on CPU)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax.kernels import attn_qat as aq
from fidia_jax.kernels.attn_qat import reference as R

ON_ACCEL = jax.default_backend() == "gpu"  # the kernels target Triton (GPU)
B, T, S, H, D = 1, 32, 48, 2, 16
BS = aq.BlockSizes(16, 16)


@pytest.fixture(scope="module")
def inputs():
    kq, kk, kv, ko = jax.random.split(jax.random.key(0), 4)
    q = jax.random.normal(kq, (B, T, H, D)) * 1.5
    k = jax.random.normal(kk, (B, S, H, D))
    v = jax.random.normal(kv, (B, S, H, D))
    do = jax.random.normal(ko, (B, T, H, D))
    return q, k, v, do


class TestAttnQatPallas:
    """Accelerator run; ``TestAttnQatPallasInterpret`` runs the same cases on CPU."""

    INTERPRET = False

    def setup_method(self):
        if not self.INTERPRET and not ON_ACCEL:
            pytest.skip("no GPU; see the Interpret subclass")

    def test_forward_matches_reference(self, inputs):
        q, k, v, _ = inputs
        qh, kh, vh = R.quantize_qkv(q, k, v)
        got = aq.pallas.attn_qat_forward_pallas(
            qh, kh, vh, causal=True, block_sizes=BS, scale=D**-0.5, interpret=self.INTERPRET
        )
        want = R.attn_qat_forward_reference(q, k, v, causal=True, block_k=16)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, atol=1e-6, rtol=1e-6)

    @pytest.mark.parametrize(
        "variant", ["attn_qat", pytest.param("dropin", marks=pytest.mark.slow)]
    )
    def test_gradients_match_reference(self, inputs, variant):
        q, k, v, do = inputs

        def loss(fn):
            return lambda q, k, v: jnp.sum(fn(q, k, v) * do)

        pallas_fn = lambda q, k, v: aq.attn_qat_pallas(  # noqa: E731
            q, k, v, causal=True, variant=variant, block_sizes=BS, interpret=self.INTERPRET
        )

        def ref_fn(q, k, v):
            return R.attn_qat_reference(q, k, v, causal=True, block_k=16, variant=variant)

        got = jax.grad(loss(pallas_fn), argnums=(0, 1, 2))(q, k, v)
        want = jax.grad(loss(ref_fn), argnums=(0, 1, 2))(q, k, v)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, atol=1e-5, rtol=1e-5)


class TestAttnQatPallasInterpret(TestAttnQatPallas):
    INTERPRET = True


def test_api_gqa_and_adapter(inputs):
    q, k, v, _ = inputs
    q4 = jnp.concatenate([q, q[:, :, ::-1]], axis=2)  # 4 query heads on 2 kv heads
    out = aq.attn_qat(q4, k, v, causal=True, backend="reference")
    want = R.attn_qat_reference(
        q4, jnp.repeat(k, 2, axis=2), jnp.repeat(v, 2, axis=2), causal=True, block_k=16
    )
    np.testing.assert_allclose(out, want, atol=1e-6)
    np.testing.assert_allclose(aq.attn_qat_attention(q4, k, v, causal=True), out, atol=1e-6)
    with pytest.raises(ValueError, match="kv_lengths"):
        aq.attn_qat_attention(q4, k, v, causal=False, kv_lengths=jnp.array([3]))
    with pytest.raises(ValueError, match="multiple of 16"):
        aq.attn_qat(q4[:, :20], k, v, causal=True)
    with pytest.raises(ValueError, match="block_q"):
        aq.BlockSizes(24, 16)
