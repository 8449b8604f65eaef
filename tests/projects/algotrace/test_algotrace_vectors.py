"""Function-vector primitives on a grouped-query model (4 query heads over 2 kv heads).

The indirect effect of a head is checked against a brute-force patch that never uses
``PatchHeads``: the head's change of output, pushed through its own slice of ``W_O``, is added to
the residual stream after attention (``AddToResidual(site="mid")``). Wrong head indexing (by kv
head, or a wrong slice of ``W_O``) fails it.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from fidia_jax import models
from fidia_jax.errors import DataError
from fidia_jax.projects.algotrace import vectors
from fidia_jax.projects.algotrace.vectors import _head_out

# Same shapes as the algotrace driver's tiny preset (compiled programs are shared in one run).
CFG = models.LlamaConfig(vocab_size=31, dim=32, n_layers=2, n_heads=4, n_kv_heads=2,
                         hidden_dim=64, max_seq_len=80)  # fmt: skip
TARGET = 6


@pytest.fixture(scope="module")
def setup():
    model = models.Llama(CFG, rngs=nnx.Rngs(3))
    tokens = jax.random.randint(jax.random.key(0), (4, 80), 0, CFG.vocab_size)
    rng = np.random.default_rng(0)
    mask = rng.random((4, 80)) < 0.2
    other = rng.random((4, 80)) < 0.3
    # model.inspect's capture, through the module's compiled program (one compilation less)
    head_out = np.asarray(_head_out(model, tokens), np.float64)  # (L, B, T, H, D)
    return model, tokens, mask, other, head_out


@nnx.jit
def _logprob(model, tokens, hooks):
    return jax.nn.log_softmax(model(tokens, hooks=hooks).astype(jnp.float32), axis=-1)[..., TARGET]


def _wo(model, layer):
    return np.asarray(model.layers[layer].attention.wo.kernel[...], np.float64)  # (Hq*D, C)


def test_mean_head_outputs_brute_force(setup):
    model, tokens, mask, _, ho = setup
    got = np.asarray(vectors.mean_head_outputs(model, tokens, mask))
    d = CFG.head_dim
    for layer in range(CFG.n_layers):
        for h in range(CFG.n_heads):
            vals = [ho[layer, b, t, h] for b in range(4) for t in range(80) if mask[b, t]]
            np.testing.assert_allclose(got[layer, h], np.mean(vals, axis=0), atol=1e-5)
    assert got.shape == (CFG.n_layers, CFG.n_heads, d)


def test_indirect_effect_equals_brute_force_patch_gqa(setup):
    model, tokens, mask, other, ho = setup
    mean = vectors.mean_head_outputs(model, tokens, mask)
    ie = np.asarray(vectors.head_indirect_effects(model, tokens, other, mean, TARGET))
    d = CFG.head_dim
    zero = jnp.zeros((4, 80, CFG.dim), jnp.float32)  # per-token vectors, as the brute force
    clean = np.asarray(
        _logprob(
            model,
            tokens,
            tuple(models.AddToResidual(li, zero, site="mid") for li in range(CFG.n_layers)),
        )
    )
    w = other.astype(np.float64)
    for layer in range(CFG.n_layers):
        wo = _wo(model, layer)
        for h in range(CFG.n_heads):
            change = (np.asarray(mean)[layer, h][None, None] - ho[layer, :, :, h]) * w[..., None]
            delta = change @ wo[h * d : (h + 1) * d]  # (B, T, C): the head's slice of W_O
            hooks = tuple(
                models.AddToResidual(
                    li, jnp.asarray(delta if li == layer else zero, jnp.float32), site="mid"
                )
                for li in range(CFG.n_layers)
            )
            brute = (np.asarray(_logprob(model, tokens, hooks)) - clean)[other].mean()
            np.testing.assert_allclose(ie[layer, h], brute, atol=2e-5, rtol=1e-3)
    # query heads 0 and 1 read the same kv head, yet are distinct heads with distinct effects.
    assert np.all(np.abs(ie[:, 0] - ie[:, 1]) > 1e-6)
    assert np.abs(ie).max() > 1e-3


def test_swapping_two_query_heads_of_one_kv_group_swaps_their_columns(setup):
    model, tokens, mask, other, _ = setup
    d = CFG.head_dim
    swapped = nnx.clone(model)
    perm = np.r_[d : 2 * d, 0:d, 2 * d : CFG.n_heads * d]  # q-heads 0 <-> 1 (both on kv head 0)
    for layer in range(CFG.n_layers):
        att = swapped.layers[layer].attention
        att.wq.kernel[...] = att.wq.kernel[...][:, perm]
        att.wo.kernel[...] = att.wo.kernel[...][perm, :]
    zero = tuple(
        models.AddToResidual(li, jnp.zeros((4, 80, CFG.dim)), site="mid")
        for li in range(CFG.n_layers)
    )
    np.testing.assert_allclose(  # the same function
        _logprob(swapped, tokens, zero), _logprob(model, tokens, zero), atol=1e-5
    )
    m0 = np.asarray(vectors.mean_head_outputs(model, tokens, mask))
    m1 = np.asarray(vectors.mean_head_outputs(swapped, tokens, mask))
    np.testing.assert_allclose(m1[:, [1, 0, 2, 3]], m0, atol=1e-5)
    ie0 = np.asarray(vectors.head_indirect_effects(model, tokens, other, m0, TARGET))
    ie1 = np.asarray(vectors.head_indirect_effects(swapped, tokens, other, m1, TARGET))
    np.testing.assert_allclose(ie1[:, [1, 0, 2, 3]], ie0, atol=1e-5)
    heads = np.zeros((2, 4), bool)
    heads[1, 0] = True
    np.testing.assert_allclose(
        vectors.function_vector(swapped, m1, heads[:, [1, 0, 2, 3]]),
        vectors.function_vector(model, m0, heads),
        atol=1e-5,
    )


def test_function_vector_and_top_heads(setup):
    model, tokens, mask, _, _ = setup
    mean = np.asarray(vectors.mean_head_outputs(model, tokens, mask), np.float64)
    heads = vectors.top_heads(np.array([[1.0, 5.0, 0.0, -1.0], [3.0, 5.0, 2.0, 0.0]]), 3)
    np.testing.assert_array_equal(heads, [[False, True, False, False], [True, True, False, False]])
    d = CFG.head_dim
    expect = sum(
        mean[li, h] @ _wo(model, li)[h * d : (h + 1) * d]
        for li in range(CFG.n_layers)
        for h in range(CFG.n_heads)
        if heads[li, h]
    )
    got = np.asarray(vectors.function_vector(model, mean, heads))
    np.testing.assert_allclose(got, expect, atol=1e-5)
    # one head alone: the model's own output projection of that head's mean output
    one = np.zeros((2, 4), bool)
    one[1, 2] = True
    o = np.zeros((1, 1, CFG.n_heads, d), np.float32)
    o[0, 0, 2] = mean[1, 2]
    np.testing.assert_allclose(
        vectors.function_vector(model, mean, one),
        np.asarray(model.layers[1].attention.out(jnp.asarray(o)))[0, 0],
        atol=1e-5,
    )


def test_bad_inputs_name_the_problem(setup):
    model, tokens, mask, other, _ = setup
    mean = vectors.mean_head_outputs(model, tokens, mask)
    with pytest.raises(ValueError, match="selects no token"):
        vectors.mean_head_outputs(model, tokens, np.zeros((4, 80), bool))
    with pytest.raises(ValueError, match="mask"):
        vectors.mean_head_outputs(model, tokens, mask[:, :10])
    with pytest.raises(ValueError, match=r"mean_heads must be \(L, Hq, D\)"):
        vectors.head_indirect_effects(model, tokens, other, mean[:, :2], TARGET)
    with pytest.raises(ValueError, match="vocabulary"):
        vectors.head_indirect_effects(model, tokens, other, mean, 99)
    with pytest.raises(ValueError, match="k must be"):
        vectors.top_heads(np.zeros((2, 4)), 9)
    # a NaN score would sort as the largest and pick its head silently
    with pytest.raises(
        DataError, match=r"top_heads: scores holds 1 NaN/inf value\(s\), first at index \(1, 2\)"
    ):
        vectors.top_heads(np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, np.nan, 0.0]]), 1)
    with pytest.raises(ValueError, match="heads"):
        vectors.function_vector(model, mean, np.ones((3, 4), bool))
    with pytest.raises(ValueError, match="names layer 2, but the model has 2 layers"):
        model(tokens, hooks=(models.AddToResidual(2, jnp.zeros(CFG.dim)),))
