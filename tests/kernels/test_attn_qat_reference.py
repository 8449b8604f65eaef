"""Attn-QAT jnp reference: forward semantics and the matched custom_vjp backward."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax.kernels import fake_quant_nvfp4
from fidia_jax.kernels.attn_qat import reference as R

B, T, S, H, D, BK = 1, 32, 48, 2, 16, 16


@pytest.fixture(scope="module")
def inputs():
    kq, kk, kv, ko = jax.random.split(jax.random.key(0), 4)
    q = jax.random.normal(kq, (B, T, H, D)) * 1.5
    k = jax.random.normal(kk, (B, S, H, D))
    v = jax.random.normal(kv, (B, S, H, D))
    do = jax.random.normal(ko, (B, T, H, D))
    return q, k, v, do


def _np_scores(q, k, causal):
    qh, kh = (np.asarray(fake_quant_nvfp4(x), np.float64) for x in (q, k))
    s = np.einsum("bthd,bshd->bhts", qh, kh) / np.sqrt(D)
    if causal:
        mask = np.arange(S)[None, :] <= np.arange(T)[:, None] + (S - T)
        s = np.where(mask, s, -np.inf)
    return s


def test_forward_single_tile_brute_force(inputs):
    """One tile (block_k = S), no mask: O = FQ(exp(S - rowmax)) V̂ / Σ exp(S - rowmax)."""
    causal = False  # the causal mask is covered by the tiled and gradient tests
    q, k, v, _ = inputs
    o, o_hp, lse = R.attn_qat_forward_reference(q, k, v, causal=causal, block_k=S)
    s = _np_scores(q, k, causal)
    p = np.exp(s - s.max(-1, keepdims=True))
    ell = p.sum(-1, keepdims=True)
    pq = np.asarray(fake_quant_nvfp4(jnp.asarray(p, jnp.float32)), np.float64)
    vh = np.asarray(fake_quant_nvfp4(v), np.float64)
    np.testing.assert_allclose(o, np.einsum("bhts,bshd->bthd", pq / ell, vh), atol=2e-5)
    np.testing.assert_allclose(o_hp, np.einsum("bhts,bshd->bthd", p / ell, vh), atol=2e-5)
    np.testing.assert_allclose(lse, (np.log(ell[..., 0]) + s.max(-1)), atol=2e-5)
    # FP4 P really changes the output, by a few percent
    rel = float(jnp.linalg.norm(o - o_hp) / jnp.linalg.norm(o_hp))
    assert 1e-3 < rel < 0.2


def test_forward_tiles_and_hp_accumulator(inputs):
    q, k, v, _ = inputs
    o, o_hp, _ = R.attn_qat_forward_reference(q, k, v, causal=True, block_k=BK)
    o_np, o_hp_np, _ = R.attn_qat_forward_reference(
        q, k, v, causal=True, block_k=BK, quantize_p=False
    )
    hp = R.hp_path_reference(q, k, v, causal=True)
    np.testing.assert_allclose(o_hp, hp, atol=2e-5)
    np.testing.assert_allclose(o_np, hp, atol=2e-5)
    # FQ(P) makes the output differ from the high-precision one, but only a little
    assert 0 < float(jnp.max(jnp.abs(o - o_hp))) < 0.2


@pytest.fixture(scope="module")
def grads(inputs):
    q, k, v, do = inputs
    out = {}
    for variant in R.VARIANTS:
        f = lambda q, k, v, variant=variant: jnp.sum(  # noqa: E731
            R.attn_qat_reference(q, k, v, causal=True, block_k=BK, variant=variant) * do
        )
        out[variant] = jax.jit(jax.grad(f, argnums=(0, 1, 2)))(q, k, v)
    f = lambda q, k, v: jnp.sum(  # noqa: E731
        R.attn_qat_reference(q, k, v, causal=True, block_k=BK, dv_weights="requantized") * do
    )
    out["requantized"] = jax.jit(jax.grad(f, argnums=(0, 1, 2)))(q, k, v)
    hp = lambda q, k, v: jnp.sum(R.hp_path_reference(q, k, v, causal=True) * do)  # noqa: E731
    out["hp"] = jax.jit(jax.grad(hp, argnums=(0, 1, 2)))(q, k, v)
    return out


def test_dq_dk_equal_autodiff_of_hp_path(grads):
    dq, dk, dv = grads["attn_qat"]
    dq_hp, dk_hp, dv_hp = grads["hp"]
    np.testing.assert_allclose(dq, dq_hp, atol=2e-5, rtol=1e-5)
    np.testing.assert_allclose(dk, dk_hp, atol=2e-5, rtol=1e-5)
    # dV uses the quantised P, so it differs from the hp path (but only by FP4 rounding)
    diff = float(jnp.max(jnp.abs(dv - dv_hp)))
    assert 1e-4 < diff < 0.2 * float(jnp.max(jnp.abs(dv_hp)))


def test_requantized_dv_is_quantised_normalised_p_transpose_do(inputs, grads):
    """dv_weights="requantized" (our earlier rule, the authors' legacy Triton backward)."""
    q, k, v, do = inputs
    _, _, lse = R.attn_qat_forward_reference(q, k, v, causal=True, block_k=BK)
    s = _np_scores(q, k, True)
    p = np.exp(s - np.asarray(lse, np.float64)[..., None])
    pq = np.asarray(fake_quant_nvfp4(jnp.asarray(p, jnp.float32)), np.float64)
    want = np.einsum("bhts,bthd->bshd", pq, np.asarray(do))
    np.testing.assert_allclose(grads["requantized"][2], want, atol=2e-5)
    np.testing.assert_array_equal(grads["requantized"][0], grads["attn_qat"][0])  # dQ unchanged
    assert float(np.max(np.abs(grads["attn_qat"][2] - want))) > 1e-3  # the default differs


def _np_forward_weights(q, k, causal, block_k):
    """W[t, s] = FQ(exp(S - m_j(t))) exp(m_j(t) - lse(t)), the running max m_j after tile j
    recomputed in numpy from the scores (float64), so that O = W V̂ and dV = Wᵀ dO."""
    s = _np_scores(q, k, causal)
    nb = S // block_k
    tile_max = s.reshape(*s.shape[:-1], nb, block_k).max(-1)
    m = np.maximum.accumulate(tile_max, axis=-1)  # (B, H, T, nb)
    m_full = np.repeat(m, block_k, axis=-1)
    ok = np.isfinite(m_full)
    p = np.where(ok & np.isfinite(s), np.exp(s - np.where(ok, m_full, 0.0)), 0.0)
    pq = np.asarray(fake_quant_nvfp4(jnp.asarray(p, jnp.float32)), np.float64)
    ps = np.exp(s - s.max(-1, keepdims=True))
    lse = s.max(-1) + np.log(ps.sum(-1))
    return np.where(ok, pq * np.exp(np.where(ok, m_full, 0.0) - lse[..., None]), 0.0)


def test_default_dv_uses_the_forwards_own_fp4_weights(inputs, grads):
    """dv_weights="forward": the matrix W with O = W V̂ (the forward's output) is the one whose
    transpose makes dV; brute force in numpy from the tiles' running maxima."""
    q, k, v, do = inputs
    w = _np_forward_weights(q, k, True, BK)
    vh = np.asarray(fake_quant_nvfp4(v), np.float64)
    o = R.attn_qat_forward_reference(q, k, v, causal=True, block_k=BK)[0]
    np.testing.assert_allclose(o, np.einsum("bhts,bshd->bthd", w, vh), atol=2e-5)
    dv = np.einsum("bhts,bthd->bshd", w, np.asarray(do, np.float64))
    np.testing.assert_allclose(grads["attn_qat"][2], dv, atol=2e-5)


def test_uniform_attention_over_256_keys_keeps_dv():
    """All scores equal, S = 256: normalised P = 1/256 puts every 16-key group's E4M3 scale at 0,
    so the requantized rule gives dV = 0; the forward's weights FQ(1)/256 do not."""
    s_len = 256
    v = jax.random.normal(jax.random.key(5), (1, s_len, 1, 16))
    q, k = jnp.zeros((1, 32, 1, 16)), jnp.ones((1, s_len, 1, 16))
    do = jax.random.normal(jax.random.key(6), (1, 32, 1, 16))

    def dv(rule):
        f = lambda v: jnp.sum(R.attn_qat_reference(q, k, v, causal=False, dv_weights=rule) * do)  # noqa: E731
        return np.asarray(jax.grad(f)(v))

    np.testing.assert_array_equal(dv("requantized"), 0.0)
    # FQ(1) = 6 * e4m3(1/6) = 6 * 0.171875 = 1.03125, identical for every query and key
    want = np.broadcast_to(1.03125 / s_len * np.asarray(do).sum(1, keepdims=True), v.shape)
    np.testing.assert_allclose(dv("forward"), want, rtol=1e-6, atol=1e-7)


def test_rowsum_ds_zero_with_hp_delta_only(inputs):
    q, k, v, do = inputs
    o, o_hp, lse = R.attn_qat_forward_reference(q, k, v, causal=True, block_k=BK)
    kw = dict(causal=True, return_ds=True, dv_weights="requantized")  # dS does not use dV's rule
    ds_fix = R.attn_qat_backward_reference(q, k, v, o, o_hp, lse, do, variant="attn_qat", **kw)[3]
    ds_fp4 = R.attn_qat_backward_reference(
        q, k, v, o, o_hp, lse, do, variant="attn_qat_fp4_delta", **kw
    )[3]
    r_fix = float(jnp.max(jnp.abs(jnp.sum(ds_fix, -1))))
    r_fp4 = float(jnp.max(jnp.abs(jnp.sum(ds_fp4, -1))))
    assert r_fix < 1e-5, r_fix
    assert r_fp4 > 100 * max(r_fix, 1e-7), (r_fix, r_fp4)


def test_dropin_backward_is_plain_flash_backward(inputs, grads):
    q, k, v, do = inputs
    o, _, lse = R.attn_qat_forward_reference(q, k, v, causal=True, block_k=BK)
    qn, kn, vn, don, on = (np.asarray(x, np.float64) for x in (q, k, v, do, o))
    s = np.einsum("bthd,bshd->bhts", qn, kn) / np.sqrt(D)
    mask = np.arange(S)[None, :] <= np.arange(T)[:, None] + (S - T)
    p = np.where(mask, np.exp(s - np.asarray(lse, np.float64)[..., None]), 0.0)
    dv = np.einsum("bhts,bthd->bshd", p, don)
    dp = np.einsum("bthd,bshd->bhts", don, vn)
    ds = p * (dp - np.sum(don * on, -1).transpose(0, 2, 1)[..., None])
    dq = np.einsum("bhts,bshd->bthd", ds, kn) / np.sqrt(D)
    dq_d, _, dv_d = grads["dropin"]
    np.testing.assert_allclose(dv_d, dv, atol=2e-5)
    np.testing.assert_allclose(dq_d, dq, atol=2e-5)
    assert float(jnp.max(jnp.abs(dq_d - grads["attn_qat"][0]))) > 1e-3


def test_validation(inputs):
    q, k, v, _ = inputs
    with pytest.raises(ValueError, match="block_k"):
        R.attn_qat_reference(q, k, v, causal=True, block_k=32)  # 32 does not divide 48
    with pytest.raises(ValueError, match="variant"):
        R.attn_qat_reference(q, k, v, causal=True, block_k=BK, variant="nope")
    with pytest.raises(ValueError, match="multiple of 16"):
        R.attn_qat_reference(q[..., :8], k[..., :8], v[..., :8], causal=True, block_k=BK)
    with pytest.raises(ValueError, match="rounding"):
        R.attn_qat_reference(q, k, v, causal=True, block_k=BK, rounding="nearest")
    with pytest.raises(ValueError, match="dv_weights"):
        R.attn_qat_reference(q, k, v, causal=True, block_k=BK, dv_weights="normalised")
