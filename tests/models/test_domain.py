"""Values out of their domain never pass silently (issue 17, item 12): token ids, temperatures,
prompt lengths, decoding positions, at every public entry point of ``fidia_jax.models``.

Concrete values raise ``ValueError``; traced ones (inside ``jit``) give the documented result:
NaN where an out-of-range id or an invalid row is read, greedy sampling for ``T <= 0``.
Small random-weight models keep the compilations cheap; the ProteinMPNN numbers for valid inputs
are pinned by the torch-parity tests of ``test_proteinmpnn.py``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from fidia_jax import losses, models
from fidia_jax.models import MPNNInputs, ProteinMPNN, log_probs, sample, score

L = 8


# ---------------------------------------------------------------------------------------------
# ProteinMPNN
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mpnn():
    return ProteinMPNN(16, 16, 16, 1, 1, k_neighbors=4, rngs=nnx.Rngs(0))


@pytest.fixture(scope="module")
def inp():
    rng = np.random.default_rng(0)
    ca = np.cumsum(rng.normal(size=(L, 3)) + [3.8, 0, 0], 0)
    X = (ca[:, None, :] + rng.normal(scale=1.0, size=(L, 4, 3))).astype(np.float32)
    return MPNNInputs(
        X=X,
        S=rng.integers(0, 20, L).astype(np.int32),
        mask=np.ones(L, np.float32),
        chain_mask=np.ones(L, np.float32),
        residue_idx=np.arange(L, dtype=np.int32),
        chain_encoding=np.ones(L, np.int32),
    )


def _batch(inp, n):
    return jax.tree.map(lambda a: np.broadcast_to(np.asarray(a), (n,) + np.shape(a)), inp)


ORDER = np.stack([np.arange(L), np.arange(L)[::-1]]).astype(np.int32)


@pytest.mark.parametrize("bad", [21, -1])
def test_mpnn_concrete_token_ids_out_of_range_raise_everywhere(mpnn, inp, bad):
    seqs = np.tile(np.asarray(inp.S), (2, 1))
    seqs[1, 3] = bad
    b = _batch(inp, 2)._replace(S=seqs)
    msg = rf"token ids in \[0, 21\), got {bad} at index \(1, 3\)"
    with pytest.raises(ValueError, match=msg):
        log_probs(mpnn, b, ORDER)
    with pytest.raises(ValueError, match=msg):
        score(mpnn, inp, seqs, ORDER)
    with pytest.raises(ValueError, match=msg):
        mpnn(b, ORDER)
    with pytest.raises(ValueError, match=rf"got {bad} at index \(0, 1, 3\)"):
        mpnn.log_probs_many(_batch(inp, 1), seqs[None], ORDER[None])
    h_V, h_E, E_idx = mpnn.encode(b.X, b.mask, b.residue_idx, b.chain_encoding)
    with pytest.raises(ValueError, match=msg):
        mpnn.decode(h_V, h_E, E_idx, seqs, b.mask, ORDER)
    S = np.array(inp.S)
    S[5] = bad
    with pytest.raises(ValueError, match=r"sample: inputs.S must be token ids .* at index 5"):
        sample(mpnn, jax.random.key(0), inp._replace(S=S), num_samples=1)


def test_mpnn_traced_token_ids_out_of_range_are_nan_not_wrapped(mpnn, inp):
    """Under jit, -1 is not scored as X (it used to wrap around) and 21 is NaN, as documented."""
    seqs = jnp.asarray(np.tile(np.asarray(inp.S), (2, 1)))
    tok_lp = jax.jit(lambda s: score(mpnn, inp, s, ORDER).token_log_probs)
    good = np.asarray(tok_lp(seqs))
    assert np.isfinite(good).all()
    for bad in (-1, 21):
        got = np.asarray(tok_lp(seqs.at[1, 3].set(bad)))
        assert np.isnan(got[1, 3])  # the position itself
        np.testing.assert_array_equal(got[0], good[0])  # the other sequence is untouched
    lp_many = nnx.jit(lambda m, s: m.log_probs_many(_batch(inp, 1), s, jnp.asarray(ORDER[None])))
    assert np.isnan(np.asarray(lp_many(mpnn, seqs.at[0, 2].set(-1)[None]))[0, 0]).any()


def test_mpnn_orders_that_are_not_permutations(mpnn, inp):
    b = _batch(inp, 2)
    bad = ORDER.copy()
    bad[1, 0] = bad[1, 1]  # a position repeated (and one missing)
    out = ORDER.copy()
    out[0, 4] = L  # a position outside [0, L)
    with pytest.raises(
        ValueError,
        match=r"log_probs: every row of decoding_order must be a permutation of 0\.\.7; position 6 repeated in row 1",
    ):
        log_probs(mpnn, b, bad)
    with pytest.raises(ValueError, match=r"position 8 outside \[0, 8\) in row 0"):
        score(mpnn, inp, np.tile(np.asarray(inp.S), (2, 1)), out)
    with pytest.raises(ValueError, match="permutation"):
        mpnn.log_probs_many(_batch(inp, 1), np.tile(np.asarray(inp.S), (1, 2, 1)), bad[None])
    # traced: the bad row is NaN, the good row equals the checked result
    good = np.asarray(log_probs(mpnn, b, ORDER))
    got = np.asarray(jax.jit(lambda o: log_probs(mpnn, b, o))(jnp.asarray(bad)))
    assert np.isnan(got[1]).all()
    np.testing.assert_allclose(got[0], good[0], rtol=1e-5, atol=1e-5)  # another compilation


@pytest.mark.parametrize("t", [0.0, -1, np.float32(0), jnp.array(-0.1), jnp.float32(jnp.nan)])
def test_sample_concrete_temperature_not_positive_raises(mpnn, inp, t):
    with pytest.raises(ValueError, match=r"sample: temperature must be > 0"):
        sample(mpnn, jax.random.key(0), inp, num_samples=1, temperature=t)


def test_sample_temperature_must_be_scalar(mpnn, inp):
    with pytest.raises(ValueError, match="temperature must be a scalar"):
        sample(mpnn, jax.random.key(0), inp, num_samples=1, temperature=jnp.ones(2))


def test_sample_traced_temperature_zero_or_below_is_greedy(mpnn, inp):
    gd, st = nnx.split(mpnn)
    bias = np.zeros((L, 21), np.float32)
    bias[:, 0] = 0.05  # shifts some argmaxes; the greedy rule must include the bias
    run = jax.jit(
        lambda T: sample(
            nnx.merge(gd, st),
            jax.random.key(3),
            inp,
            num_samples=4,
            temperature=T,
            omit_aas="CX",
            bias=bias,
        )
    )
    omit = [models.MPNN_ALPHABET.index(a) for a in "CX"]
    for t in (0.0, -0.1):
        r = jax.tree.map(np.asarray, run(jnp.float32(t)))
        z = r.log_probs + bias
        z[..., omit] = -np.inf
        np.testing.assert_array_equal(r.sequences, np.argmax(z, -1))
    # T > 0 traced draws exactly what the eager call draws
    hot = run(jnp.float32(2.0))
    eager = sample(
        mpnn, jax.random.key(3), inp, num_samples=4, temperature=2.0, omit_aas="CX", bias=bias
    )
    np.testing.assert_array_equal(hot.sequences, eager.sequences)


def test_sample_traced_native_token_out_of_range_is_visible(mpnn, inp):
    fixed = np.zeros(L, bool)
    fixed[2] = True  # position 2 keeps its native token, which is out of range
    run = jax.jit(
        lambda S: sample(
            mpnn, jax.random.key(0), inp._replace(S=S), num_samples=2, fixed_mask=fixed
        )
    )
    r = run(jnp.asarray(inp.S).at[2].set(-1))
    assert (np.asarray(r.sequences)[:, 2] == 21).all()  # not wrapped to X (20)
    assert np.isnan(np.asarray(r.log_probs)).all()
    ok = run(jnp.asarray(inp.S))
    assert np.isfinite(np.asarray(ok.log_probs)).all()


# ---------------------------------------------------------------------------------------------
# LLaMA
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lm():
    return models.Llama(models.LlamaConfig.tiny(), rngs=nnx.Rngs(0))


@pytest.fixture(scope="module")
def toks():
    return jnp.asarray(np.random.default_rng(1).integers(0, 256, (2, 6)), jnp.int32)


fwd = nnx.jit(lambda m, t: m(t))
pre = nnx.jit(lambda m, t, c, n: m.prefill(t, c, lengths=n))
dec = nnx.jit(lambda m, t, c: m.decode(t, c))


@pytest.mark.parametrize("bad", [256, -1])
def test_llama_concrete_token_ids_out_of_range_raise(lm, toks, bad):
    t = toks.at[1, 2].set(bad)
    msg = rf"token ids in \[0, 256\), got {bad} at index \(1, 2\)"
    with pytest.raises(ValueError, match="Llama: tokens must be " + msg):
        lm(t)
    with pytest.raises(ValueError, match="Llama.prefill: tokens must be " + msg):
        lm.prefill(t, lm.init_cache(2, 8))
    with pytest.raises(ValueError, match="Llama.decode: tokens must be"):
        lm.decode(t[:, 2:3], lm.init_cache(2, 8))
    with pytest.raises(ValueError, match="next_token_loss: tokens must be " + msg):
        losses.next_token_loss(jnp.zeros((2, 6, 256)), t)


def test_llama_traced_token_ids_out_of_range_are_nan(lm, toks):
    good = np.asarray(fwd(lm, toks))
    got = np.asarray(fwd(lm, toks.at[1, 2].set(-1)))  # used to read token 255
    assert np.isnan(got[1, 2:]).all() and np.isfinite(got[1, :2]).all()
    np.testing.assert_array_equal(got[0], good[0])
    loss = jax.jit(losses.next_token_loss)(jnp.asarray(good), toks.at[0, 3].set(256))
    assert np.isnan(float(loss))


@pytest.mark.parametrize("n", [0, -1, 7, 9])
def test_prefill_concrete_lengths_out_of_range_raise(lm, toks, n):
    # T = 6 prompt tokens, cache of 8: lengths must be in [1, 6]
    with pytest.raises(
        ValueError, match=rf"Llama.prefill: lengths must be in \[1, 6\] .*got {n} in row 1"
    ):
        lm.prefill(toks, lm.init_cache(2, 8), lengths=jnp.array([6, n]))


def test_prefill_lengths_shape_and_cache_size(lm, toks):
    with pytest.raises(ValueError, match=r"lengths must be \(2,\) integers"):
        lm.prefill(toks, lm.init_cache(2, 8), lengths=jnp.array([6]))
    with pytest.raises(ValueError, match="exceeds cache length 4"):
        lm.prefill(toks, lm.init_cache(2, 4))
    with pytest.raises(ValueError, match="init_cache: batch and max_len must be >= 1"):
        lm.init_cache(2, 0)


def test_prefill_traced_invalid_lengths_poison_only_that_row(lm, toks):
    ref_lg, ref_cache = lm.prefill(toks, lm.init_cache(2, 8), lengths=jnp.array([6, 4]))
    lg, cache = pre(lm, toks, lm.init_cache(2, 8), jnp.array([0, 4]))
    assert np.isnan(np.asarray(lg[0])).all()
    np.testing.assert_allclose(lg[1], ref_lg[1], rtol=1e-5, atol=1e-5)
    assert cache.lengths.tolist() == [-1, 4]
    with pytest.raises(ValueError, match=r"row 0 has invalid length -1"):
        lm.decode(toks[:, :1], cache)
    lg2, cache2 = dec(lm, toks[:, :1], cache)
    ref2, _ = dec(lm, toks[:, :1], ref_cache)
    assert np.isnan(np.asarray(lg2[0])).all()
    np.testing.assert_allclose(lg2[1], ref2[1], rtol=1e-5, atol=1e-5)
    assert cache2.lengths.tolist() == [-1, 5]


def test_decode_past_the_kv_cache(lm, toks):
    # cache of 4 slots: row 0 prefilled to 4 (full), row 1 to 2 (room left)
    _, cache = lm.prefill(toks[:, :4], lm.init_cache(2, 4), lengths=jnp.array([4, 2]))
    nxt = jnp.array([[7], [9]], jnp.int32)
    with pytest.raises(
        ValueError,
        match=r"Llama.decode: .*row 0 is full \(length 4 == cache length 4\): decoding past the KV cache",
    ):
        lm.decode(nxt, cache)
    lg, new = dec(lm, nxt, cache)
    assert np.isnan(np.asarray(lg[0])).all()  # no silent drift of the full row
    np.testing.assert_array_equal(new.k[:, 0], cache.k[:, 0])  # its last slot is not overwritten
    np.testing.assert_array_equal(new.v[:, 0], cache.v[:, 0])
    assert new.lengths.tolist() == [4, 3] and int(new.step) == 1
    # the row with room decodes as the full forward pass predicts
    ref = fwd(lm, jnp.concatenate([toks[1:, :2], nxt[1:]], 1))
    np.testing.assert_allclose(lg[1, 0], ref[0, 2], rtol=1e-4, atol=1e-4)
    # the eager path, one step before the end, still works; the next one raises
    _, c1 = lm.prefill(toks[:, :3], lm.init_cache(2, 4))
    _, c2 = lm.decode(nxt, c1)
    with pytest.raises(ValueError, match="row 0 is full"):
        lm.decode(nxt, c2)
