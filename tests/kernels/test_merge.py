"""kernels.merge_attention_partials: the softmax over the union of key sets, brute force."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax import kernels


def _partials(s, v, splits):
    ms, ells, accs = [], [], []
    for idx in splits:
        if len(idx) == 0:
            ms.append(-np.inf), ells.append(0.0), accs.append(np.full(v.shape[1], np.nan))
            continue
        m = s[idx].max()
        e = np.exp(s[idx] - m)
        ms.append(m), ells.append(e.sum()), accs.append(e @ v[idx])
    return np.array(ms), np.array(ells), np.stack(accs)


@pytest.mark.parametrize("normalised", [False, True])
def test_union_of_disjoint_sets_is_the_full_softmax(normalised):
    rng = np.random.default_rng(0)
    s, v = rng.normal(size=9) * 3, rng.normal(size=(9, 4))
    m, ell, acc = _partials(s, v, [np.arange(0, 4), np.arange(4, 4), np.arange(4, 9)])
    if normalised:
        acc = acc / np.where(ell > 0, ell, 1.0)[:, None] * 2.0  # estimate × denom_scale
    out = kernels.merge_attention_partials(
        jnp.asarray(m), jnp.asarray(ell), jnp.asarray(acc), axis=0, normalised=normalised,
        denom_scale=2.0 if normalised else 1.0,
    )  # fmt: skip
    expected = jax.nn.softmax(s) @ v
    np.testing.assert_allclose(out, expected, rtol=1e-5)  # the NaN of the empty set never leaks


def test_no_key_anywhere_gives_zeros_and_shapes_are_checked():
    out = kernels.merge_attention_partials(
        jnp.full((2, 3), -jnp.inf), jnp.zeros((2, 3)), jnp.ones((2, 3, 5)), axis=-1
    )
    assert out.shape == (2, 5) and not np.any(out)
    with pytest.raises(ValueError, match="acc m's shape plus"):
        kernels.merge_attention_partials(jnp.zeros(3), jnp.zeros(3), jnp.zeros(3), axis=0)
