"""Every Pallas kernel lowers through Triton for CUDA, checked on a CPU-only machine.

``jax.jit(f).trace(...).lower(lowering_platforms=("cuda",))`` runs Pallas' Triton lowering (JAX
primitives -> Triton IR) without a GPU. It catches what the interpret-mode tests cannot: a
primitive the Triton lowering lacks (``round``, ``slice``, ``cumsum`` ...), a missing
``compiler_params`` (jax >= 0.10 would otherwise pick Mosaic GPU, which rejects these kernels),
non-power-of-two blocks. It does not run Triton's own compiler (PTX), so it is evidence, not
proof, that the kernels run on a GPU.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax.kernels import _fp4
from fidia_jax.kernels.attn_qat import pallas as qat_pallas
from fidia_jax.kernels.santa import pallas as santa_pallas
from fidia_jax.kernels.santa import reference as santa_ref

B, HQ, HKV, D, N = 1, 32, 8, 128, 512  # Llama-3-8B-like heads, short context


def _lower_for_cuda(fn, *args) -> str:
    traced = jax.jit(fn).trace(*args)
    try:
        lowered = traced.lower(lowering_platforms=("cuda",))
    except TypeError as exc:  # pragma: no cover - a jax without cross-platform lowering
        pytest.skip(f"this jax cannot lower for another platform: {exc}")
    except RuntimeError as exc:  # pragma: no cover - jax 0.11.2 (seen on a GPU machine, CPU
        # platform) asks for a real or abstract GPU device before lowering Triton kernels
        if "No supported GPU devices" in str(exc):
            pytest.skip(f"this jax needs a GPU device to lower Triton kernels: {exc}")
        raise
    return lowered.as_text()


def _assert_triton(text: str) -> None:
    assert "triton" in text, "pallas_call did not take the Triton lowering"
    assert "mosaic_gpu" not in text


def _decode_args():
    q = jax.ShapeDtypeStruct((B, HQ, D), jnp.bfloat16)
    kv = jax.ShapeDtypeStruct((B, N, HKV, D), jnp.bfloat16)
    return q, kv, jax.ShapeDtypeStruct((B,), jnp.int32)


def test_flash_decode_lowers_to_triton():
    q, kv, lens = _decode_args()
    _assert_triton(_lower_for_cuda(santa_pallas.flash_decode_pallas, q, kv, kv, lens))


def test_decode_with_three_query_heads_per_kv_head_lowers():
    """G = 3 query heads per kv head (padded to 16 rows for tl.dot) and a ragged last key tile."""
    q = jax.ShapeDtypeStruct((2, 12, 64), jnp.float32)
    kv = jax.ShapeDtypeStruct((2, 200, 4, 64), jnp.float32)
    _assert_triton(_lower_for_cuda(santa_pallas.flash_decode_pallas, q, kv, kv))


@pytest.mark.parametrize("method", santa_ref.METHODS)
@pytest.mark.parametrize("value_stage", ["counts", "gather"])
@pytest.mark.parametrize("spt", [4, 3])  # 3: the sample axis is padded to a power of two
def test_santa_decode_lowers_to_triton(method, value_stage, spt):
    q, kv, lens = _decode_args()
    u = jax.ShapeDtypeStruct(
        santa_ref.uniform_shape(B, HQ, N, block_k=64, samples_per_tile=spt, method=method),
        jnp.float32,
    )
    fn = functools.partial(
        santa_pallas.santa_decode_pallas,
        samples_per_tile=spt,
        method=method,
        value_stage=value_stage,
    )
    _assert_triton(_lower_for_cuda(fn, q, kv, kv, u, lens))


@pytest.mark.parametrize("variant", qat_pallas.VARIANTS)
def test_attn_qat_forward_and_backward_lower_to_triton(variant):
    x = jax.ShapeDtypeStruct((1, 128, 2, 64), jnp.bfloat16)

    def fwd_bwd(q, k, v):
        def loss(q, k, v):
            o = qat_pallas.attn_qat_pallas(q, k, v, causal=True, variant=variant)
            return jnp.sum(o.astype(jnp.float32))

        return jax.grad(loss, argnums=(0, 1, 2))(q, k, v)

    text = _lower_for_cuda(fwd_bwd, x, x, x)
    _assert_triton(text)
    assert text.count("triton") >= 4  # forward, D pre-pass, dK/dV, dQ


def test_round_half_even_equals_jnp_round():
    """The Triton-lowerable rounding used by the FP4 quantiser equals jnp.round, ties included."""
    rng = np.random.default_rng(0)
    ties = np.arange(-40, 41, dtype=np.float32) * 0.5  # every k + 1/2 and every integer
    near = np.float32(0.5) + np.array(
        [-(2**-25), -(2**-24), 2**-24], np.float32
    )  # floor(x+.5) traps
    x = np.concatenate(
        [
            ties,
            near,
            -near,
            rng.normal(scale=30, size=4000).astype(np.float32),
            np.array([0.0, -0.0, 2.0**23 - 0.5, 2.0**23 + 1], np.float32),
        ]
    )
    np.testing.assert_array_equal(
        np.asarray(_fp4._round_half_even(jnp.asarray(x))), np.asarray(jnp.round(jnp.asarray(x)))
    )


def test_block_sizes_must_be_powers_of_two():
    """Triton arrays have power-of-two sizes: a 48-key tile would fail to lower, so it is refused."""
    with pytest.raises(ValueError, match="block_k"):
        santa_pallas.BlockSizes(48)
    with pytest.raises(ValueError, match="min_query_rows"):
        santa_pallas.BlockSizes(64, min_query_rows=24)
