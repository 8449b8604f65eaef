"""models.MLP: the layer arithmetic by hand, dropout only when asked, widths validated."""

import jax
import numpy as np
import pytest
from flax import nnx

from fidia_jax.models import MLP


def test_mlp_equals_hand_computed_layers():
    mlp = MLP(3, (5,), 2, activation=jax.nn.tanh, rngs=nnx.Rngs(0))
    x = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
    l0, l1 = mlp.layers
    h = np.tanh(x @ np.asarray(l0.kernel[...]) + np.asarray(l0.bias[...]))
    expected = h @ np.asarray(l1.kernel[...]) + np.asarray(l1.bias[...])
    np.testing.assert_allclose(mlp(x), expected, rtol=1e-5, atol=1e-6)


def test_dropout_only_when_not_deterministic():
    mlp = MLP(4, (64,), 1, dropout=0.5, rngs=nnx.Rngs(params=0, dropout=1))
    x = np.ones((8, 4), np.float32)
    np.testing.assert_array_equal(mlp(x), mlp(x))
    assert not np.allclose(mlp(x, deterministic=False), mlp(x))


@pytest.mark.parametrize("kwargs", [dict(dropout=1.0), dict(dropout=-0.1)])
def test_bad_dropout(kwargs):
    with pytest.raises(ValueError, match="dropout"):
        MLP(2, (2,), 1, rngs=nnx.Rngs(0), **kwargs)


def test_bad_width():
    with pytest.raises(ValueError, match="width"):
        MLP(2, (0,), 1, rngs=nnx.Rngs(0))
