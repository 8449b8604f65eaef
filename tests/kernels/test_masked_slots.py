"""Masked slots never contribute; bad lengths and shapes are clear errors (issue 17, items 8, 10, 12).

A NaN stored where a row may not look (cache slots at or past ``kv_lengths``, future tokens under
a causal mask) must not reach any output: every reference and kernel removes masked slots with
``jnp.where`` instead of multiplying them by a zero weight. A row of length 0 returns zeros in
every backend. Pallas kernels run in interpret mode on CPU (small shapes).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax.kernels import attn_qat as aq
from fidia_jax.kernels import santa
from fidia_jax.kernels.attn_qat import reference as QR
from fidia_jax.kernels.santa import reference as R

B, N, HQ, HKV, D, BK = 2, 40, 4, 2, 16, 16
LENGTHS = np.array([0, 25], np.int32)  # row 0 empty; row 1 ends inside the second tile


def _decode_inputs(poison=np.nan):
    k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
    q = jax.random.normal(k1, (B, HQ, D))
    k = jax.random.normal(k2, (B, N, HKV, D))
    v = jax.random.normal(k3, (B, N, HKV, D))
    return q, k, v


def _poisoned(k, v, value=np.nan):
    """Every slot at or past LENGTHS[b] (and nothing else) holds ``value`` in K and V."""
    past = np.arange(N)[None, :] >= LENGTHS[:, None]  # (B, N)
    m = jnp.asarray(past)[:, :, None, None]
    return jnp.where(m, value, k), jnp.where(m, value, v)


def _unif(spt, method):
    return R.make_uniforms(
        jax.random.key(3), B, HQ, N, block_k=BK, samples_per_tile=spt, method=method
    )


EXACT = {
    "dense_decode_reference": lambda q, k, v, L: R.dense_decode_reference(q, k, v, L),
    "flash_decode_reference": lambda q, k, v, L: R.flash_decode_reference(q, k, v, L, block_k=BK),
    "flash_decode_pallas": lambda q, k, v, L: santa.flash_decode_pallas(
        q, k, v, L, block_sizes=santa.BlockSizes(BK), interpret=True
    ),
}
SAMPLED = {
    f"santa_{backend}_{stage}_{method}": (backend, stage, method)
    for backend, stage, method in [
        ("reference", "counts", "systematic"),
        ("reference", "gather", "iid"),
        ("pallas", "counts", "stratified"),
        ("pallas", "gather", "systematic"),
    ]
}


def _santa(backend, stage, method, q, k, v, L):
    spt = 4
    kw = dict(samples_per_tile=spt, method=method, value_stage=stage)
    if backend == "reference":
        return R.santa_decode_reference(q, k, v, _unif(spt, method), L, block_k=BK, **kw)
    return santa.santa_decode_pallas(
        q, k, v, _unif(spt, method), L, block_sizes=santa.BlockSizes(BK), interpret=True, **kw
    )


def _call(name, q, k, v, L):
    if name in EXACT:
        return EXACT[name](q, k, v, L)
    return _santa(*SAMPLED[name], q, k, v, L)


@pytest.mark.parametrize("value", [np.nan, np.inf])
@pytest.mark.parametrize("name", [*EXACT, *SAMPLED])
def test_slots_past_kv_lengths_never_reach_the_output(name, value):
    """NaN/Inf past kv_lengths: same output as clean padding; the length-0 row gives zeros."""
    q, k, v = _decode_inputs()
    kp, vp = _poisoned(k, v, value)
    clean = np.asarray(_call(name, q, k, v, jnp.asarray(LENGTHS)))
    got = np.asarray(_call(name, q, kp, vp, jnp.asarray(LENGTHS)))
    assert np.isfinite(got).all(), f"{name}: masked slots leaked into the output"
    np.testing.assert_array_equal(got, clean)
    np.testing.assert_array_equal(got[0], 0.0)  # length-0 row: zeros, in every backend


def test_length_zero_rows_are_zeros_and_full_rows_match_dense():
    q, k, v = _decode_inputs()
    want = np.asarray(R.dense_decode_reference(q, k, v, jnp.asarray(LENGTHS)))
    np.testing.assert_array_equal(want[0], 0.0)
    for name in EXACT:
        np.testing.assert_allclose(_call(name, q, k, v, jnp.asarray(LENGTHS)), want, atol=1e-5)


def test_visible_nan_stays_visible():
    """A NaN inside the valid part is not hidden (row 1 reads slot 3)."""
    q, k, v = _decode_inputs()
    v = v.at[1, 3].set(jnp.nan)
    for name in [*EXACT, "santa_reference_counts_systematic"]:
        out = np.asarray(_call(name, q, k, v, jnp.asarray(LENGTHS)))
        assert np.isnan(out[1]).any(), name
        np.testing.assert_array_equal(out[0], 0.0)


# ---------------------------------------------------------------- kv_lengths out of range (12)

BAD_LENGTHS = [
    (np.array([N + 1, 3], np.int32), rf"\[0, {N}\].*got {N + 1} in row 0"),
    (np.array([3, -1], np.int32), r"got -1 in row 1"),
    (np.array([3], np.int32), r"kv_lengths must have shape \(2,\)"),
    (np.array([3.0, 4.0], np.float32), "integer"),
]

PUBLIC = {
    "dense_decode_reference": lambda L: R.dense_decode_reference(*_decode_inputs(), L),
    "flash_decode_reference": lambda L: R.flash_decode_reference(*_decode_inputs(), L, block_k=BK),
    "santa_decode_reference": lambda L: R.santa_decode_reference(
        *_decode_inputs(), _unif(2, "iid"), L, samples_per_tile=2, method="iid", block_k=BK
    ),
    "flash_decode_pallas": lambda L: santa.flash_decode_pallas(
        *_decode_inputs(), L, block_sizes=santa.BlockSizes(BK), interpret=True
    ),
    "santa_decode_pallas": lambda L: santa.santa_decode_pallas(
        *_decode_inputs(),
        _unif(2, "iid"),
        L,
        samples_per_tile=2,
        method="iid",
        block_sizes=santa.BlockSizes(BK),
        interpret=True,
    ),
    "flash_decode": lambda L: santa.flash_decode(
        *_decode_inputs(), L, block_k=BK, backend="reference"
    ),
    "santa_decode": lambda L: santa.santa_decode(
        *_decode_inputs(),
        _unif(2, "iid"),
        L,
        samples_per_tile=2,
        method="iid",
        block_k=BK,
        backend="pallas_interpret",
    ),
}


@pytest.mark.parametrize("lengths,match", BAD_LENGTHS)
@pytest.mark.parametrize("name", list(PUBLIC))
def test_kv_lengths_out_of_range_is_a_clear_error(name, lengths, match):
    # api functions (flash_decode, santa_decode) report the backend function that checked
    with pytest.raises(ValueError, match=rf"{name}\w*: .*{match}"):
        PUBLIC[name](lengths)


def test_traced_kv_lengths_are_not_checked_and_clip():
    """Under jit the values are unknown: a length above N acts as N, a negative one as 0."""
    q, k, v = _decode_inputs()
    f = jax.jit(lambda L: R.dense_decode_reference(q, k, v, L))
    np.testing.assert_allclose(
        f(jnp.array([N + 5, -3])), R.dense_decode_reference(q, k, v, jnp.array([N, 0])), atol=1e-6
    )


# ---------------------------------------------------------------- causal masks (Attn-QAT)

T = S = 32
QAT_BS = aq.BlockSizes(16, 16)


def _qat_inputs():
    kq, kk, kv = jax.random.split(jax.random.key(1), 3)
    q = jax.random.normal(kq, (1, T, 1, D))
    k = jax.random.normal(kk, (1, S, 1, D))
    v = jax.random.normal(kv, (1, S, 1, D))
    # the last token's K and V are NaN: only the last query may see them
    return q, k.at[:, -1].set(jnp.nan), v.at[:, -1].set(jnp.nan)


QAT = {
    "attn_qat_reference": lambda q, k, v: QR.attn_qat_reference(q, k, v, causal=True, block_k=16),
    "attn_qat_pallas": lambda q, k, v: aq.attn_qat_pallas(
        q, k, v, causal=True, block_sizes=QAT_BS, interpret=True
    ),
    "hp_path_reference": lambda q, k, v: QR.hp_path_reference(q, k, v, causal=True),
}


@pytest.mark.parametrize("name", list(QAT))
def test_causally_masked_nan_does_not_reach_earlier_queries(name):
    q, k, v = _qat_inputs()
    o = np.asarray(QAT[name](q, k, v))
    assert np.isfinite(o[:, :-1]).all(), f"{name}: a future token's NaN reached earlier queries"
    assert np.isnan(o[:, -1]).all(), f"{name}: the NaN the last query sees must stay visible"
    clean = np.asarray(QAT[name](q, *(x.at[:, -1].set(0.0) for x in (k, v))))
    np.testing.assert_array_equal(o[:, :-1], clean[:, :-1])


@pytest.mark.parametrize("variant", ["attn_qat", "dropin"])
@pytest.mark.parametrize("name", ["attn_qat_reference", "attn_qat_pallas"])
def test_causally_masked_nan_does_not_reach_earlier_gradients(name, variant):
    """dQ of the earlier queries and dV stay finite (the drop-in backward reads the unquantised
    K and V, so this also covers operands that FP4 quantisation did not touch)."""
    q, k, v = _qat_inputs()
    fn = {
        "attn_qat_reference": lambda q, k, v: QR.attn_qat_reference(
            q, k, v, causal=True, block_k=16, variant=variant
        ),
        "attn_qat_pallas": lambda q, k, v: aq.attn_qat_pallas(
            q, k, v, causal=True, variant=variant, block_sizes=QAT_BS, interpret=True
        ),
    }[name]

    def loss(q, k, v):
        return jnp.sum(fn(q, k, v)[:, :-1])

    dq, _, dv = jax.grad(loss, argnums=(0, 1, 2))(q, k, v)
    assert np.isfinite(np.asarray(dq)[:, :-1]).all(), name
    assert np.isfinite(np.asarray(dv)).all(), name


# ---------------------------------------------------------------- shape messages (item 10)


def test_attn_qat_pallas_names_unequal_head_counts():
    q = jnp.zeros((1, 32, 4, 16))
    k = jnp.zeros((1, 32, 2, 16))
    with pytest.raises(ValueError, match=r"attn_qat_pallas: query heads 4 != kv heads 2") as e:
        aq.attn_qat_pallas(q, k, k, causal=True, block_sizes=QAT_BS, interpret=True)
    assert "head dim" not in str(e.value)
    with pytest.raises(ValueError, match=r"attn_qat_reference: query heads 4 != kv heads 2"):
        QR.attn_qat_reference(q, k, k, causal=True, block_k=16)


@pytest.mark.parametrize(
    "fn",
    [
        lambda q, k: aq.attn_qat_pallas(q, k, k, causal=True, block_sizes=QAT_BS, interpret=True),
        lambda q, k: QR.attn_qat_reference(q, k, k, causal=True, block_k=16),
        lambda q, k: aq.attn_qat(q, k, k, causal=True, backend="reference"),
    ],
)
def test_attn_qat_shape_messages_name_the_mismatch(fn):
    q = jnp.zeros((1, 32, 2, 16))
    with pytest.raises(ValueError, match=r"batch sizes differ: .* has 1, .* has 2"):
        fn(q, jnp.zeros((2, 32, 2, 16)))
    with pytest.raises(ValueError, match=r"head dims differ: .* has 16, .* has 32"):
        fn(q, jnp.zeros((1, 32, 2, 32)))
    with pytest.raises(ValueError, match=r"head dim 8 must be a multiple of 16"):
        fn(jnp.zeros((1, 32, 2, 8)), jnp.zeros((1, 32, 2, 8)))


def test_attn_qat_gqa_message_names_head_counts():
    with pytest.raises(
        ValueError,
        match=r"attn_qat: query heads 3 must be a multiple of kv "
        r"heads 2",
    ):
        aq.attn_qat(jnp.zeros((1, 32, 3, 16)), *(2 * [jnp.zeros((1, 32, 2, 16))]), causal=True)


def test_decode_shape_messages_name_the_mismatch():
    q, k, v = _decode_inputs()
    with pytest.raises(ValueError, match=r"flash_decode_pallas: batch sizes differ"):
        santa.flash_decode_pallas(q[:1], k, v)
    with pytest.raises(ValueError, match=r"dense_decode_reference: head dims differ"):
        R.dense_decode_reference(q[..., :8], k, v)
